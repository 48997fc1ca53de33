// What a read of each time source costs on this machine: the stack reads a clock on every
// reactor iteration and for every bdev I/O (common/clock.h), which is about 20 ns through the
// vDSO but a system call and an emulated device read in a guest whose clocksource user space
// cannot read (QEMU's TCG guests run on the HPET). A plain system call is the yardstick.
// tests/vm/scenarios/probe_clock.sh runs it inside the VM guest.
#include <benchmark/benchmark.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

namespace {

void BM_ClockGettimeMonotonic(benchmark::State& state) {
  timespec now{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    benchmark::DoNotOptimize(now);
  }
}
BENCHMARK(BM_ClockGettimeMonotonic);

void BM_ClockGettimeMonotonicCoarse(benchmark::State& state) {
  timespec now{};
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    benchmark::DoNotOptimize(now);
  }
}
BENCHMARK(BM_ClockGettimeMonotonicCoarse);

// The reactors' and bdevs' default clock: the TSC where the CPU reports an invariant one,
// else CLOCK_MONOTONIC (the label says which).
void BM_TscClockNow(benchmark::State& state) {
  const nvmf::TscClock& clock = nvmf::TscClock::instance();
  for (auto _ : state) benchmark::DoNotOptimize(clock.now_ns());
  state.SetLabel(clock.using_tsc() ? "tsc" : "CLOCK_MONOTONIC fallback");
}
BENCHMARK(BM_TscClockNow);

void BM_SystemCall(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getppid));
}
BENCHMARK(BM_SystemCall);

}  // namespace

BENCHMARK_MAIN();
