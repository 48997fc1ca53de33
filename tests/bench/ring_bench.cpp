// Message-ring and reactor message throughput (Google Benchmark; label bench).
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

#include "env/ring.h"
#include "reactor/group.h"
#include "reactor/harness.h"

namespace {

struct Message {
  void (*fn)(void*);
  void* ctx;
};

// Push + pop on one thread: the ring's own cost with no cache-line transfer.
void BM_MpscRingPushPopSameThread(benchmark::State& state) {
  nvmf::env::MpscRing<Message> ring(4096);
  Message out{};
  for (auto _ : state) {
    ring.try_push(Message{nullptr, &out});
    ring.try_pop(&out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MpscRingPushPopSameThread);

// One producer thread, one consumer thread: messages per second across cores.
void BM_MpscRingCrossThread(benchmark::State& state) {
  nvmf::env::MpscRing<Message> ring(4096);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> consumed{0};
  std::thread consumer([&] {
    Message out{};
    uint64_t count = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      while (ring.try_pop(&out)) ++count;
    }
    while (ring.try_pop(&out)) ++count;
    consumed.store(count);
  });
  uint64_t pushed = 0;
  for (auto _ : state) {
    while (!ring.try_push(Message{nullptr, nullptr})) {
    }
    ++pushed;
  }
  stop.store(true);
  consumer.join();
  state.SetItemsProcessed(static_cast<int64_t>(pushed));
  state.counters["consumed"] = static_cast<double>(consumed.load());
}
BENCHMARK(BM_MpscRingCrossThread)->UseRealTime();

// A message sent to a reactor and run by it, polled on the same thread (harness).
void BM_ReactorSendAndRunSameThread(benchmark::State& state) {
  nvmf::reactor::ReactorHarness harness(1);
  uint64_t runs = 0;
  auto count = [](void* ctx) { ++*static_cast<uint64_t*>(ctx); };
  for (auto _ : state) {
    (void)harness.reactor(0).send(count, &runs);
    harness.reactor(0).poll_once();
  }
  state.SetItemsProcessed(static_cast<int64_t>(runs));
}
BENCHMARK(BM_ReactorSendAndRunSameThread);

// Messages from this thread to a reactor thread in poll mode, batches of 64.
void BM_ReactorSendCrossThread(benchmark::State& state) {
  nvmf::reactor::ReactorGroupOpts opts;
  opts.reactor_count = 1;
  opts.reactor.mode = nvmf::reactor::Mode::poll;
  auto group = nvmf::reactor::ReactorGroup::start(opts);
  if (!group) {
    state.SkipWithError("cannot start a reactor");
    return;
  }
  std::atomic<uint64_t> runs{0};
  auto count = [](void* ctx) {
    static_cast<std::atomic<uint64_t>*>(ctx)->fetch_add(1, std::memory_order_relaxed);
  };
  uint64_t sent = 0;
  for (auto _ : state) {
    while (!(*group)->reactor(0).send(count, &runs)) {
    }
    ++sent;
  }
  while (runs.load() < sent) {
  }
  (*group)->stop();
  state.SetItemsProcessed(static_cast<int64_t>(sent));
}
BENCHMARK(BM_ReactorSendCrossThread)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
