// The round trip of one cache line between two threads pinned to CPUs 0 and 1: one thread
// writes a value, the other sees it and answers, and the first sees the answer. Every hand-off
// between nvmf_perf --sim's host worker and the target's reactor (a doorbell, a CQ entry, the
// sim's lock) pays it, so the two-core stack runs can go no faster than it allows, and when
// the hypervisor moves the two vCPUs onto cores that share no cache it grows several times
// over (docs/performance.md). tools/bench/perf-report.sh runs this before and after every
// two-core stack run to tell those runs apart. Time per iteration = one round trip.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

void relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Odd values are the pinger's, even ones the echo's; kStop ends the echo thread.
constexpr uint64_t kStop = UINT64_MAX;

void BM_CacheLineRoundTrip(benchmark::State& state) {
  const int ping_cpu = static_cast<int>(state.range(0));
  const int echo_cpu = static_cast<int>(state.range(1));
  if (static_cast<int>(std::thread::hardware_concurrency()) <= echo_cpu) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  alignas(64) static std::atomic<uint64_t> line{0};
  line.store(0, std::memory_order_relaxed);
  std::atomic<bool> echo_pinned{false};
  std::thread echo([&] {
    echo_pinned = pin_to(echo_cpu);
    uint64_t seen = 0;
    for (;;) {
      const uint64_t value = line.load(std::memory_order_acquire);
      if (value == kStop) return;
      if (value != seen && (value & 1) != 0) {
        seen = value + 1;
        line.store(seen, std::memory_order_release);
      } else {
        relax();
      }
    }
  });
  if (!pin_to(ping_cpu)) state.SkipWithError("cannot pin to the CPU");
  uint64_t value = 1;
  for (auto _ : state) {
    line.store(value, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != value + 1) {
    }
    value += 2;
  }
  line.store(kStop, std::memory_order_release);
  echo.join();
  if (!echo_pinned) state.SkipWithError("cannot pin the echo thread");
}
BENCHMARK(BM_CacheLineRoundTrip)->Args({0, 1})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
