// Submission + poll throughput of the null and malloc bdevs: 4 KiB reads and writes kept at a
// fixed queue depth on one channel, each iteration = submit every free I/O, then one poll().
// items_per_second = completed I/Os per second. Never pass/fail on time.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"

namespace nvmf::bdev {
namespace {

constexpr uint32_t kIoBytes = 4096;
constexpr uint32_t kBlockBytes = 4096;
constexpr uint64_t kMallocBlocks = 16384;  // 64 MiB: larger than the last-level cache

enum class Backend { null, malloc };

// I/Os whose callbacks have run, ready to be submitted again (LIFO: warm cache lines).
struct FreeIos {
  std::vector<BdevIo*> stack;
  uint64_t completed = 0;
};

void on_done(BdevIo& io, void* ctx) {
  auto* free_ios = static_cast<FreeIos*>(ctx);
  free_ios->stack.push_back(&io);  // capacity reserved up front: never allocates
  ++free_ios->completed;
}

void run(benchmark::State& state, Backend backend, IoType type) {
  const auto queue_depth = static_cast<uint32_t>(state.range(0));
  Result<std::unique_ptr<Bdev>> created =
      backend == Backend::null ? create_null_bdev({.name = "null0",
                                                   .block_size_bytes = kBlockBytes,
                                                   .block_count = kMallocBlocks,
                                                   .queue_depth_max = queue_depth})
                               : create_malloc_bdev({.name = "malloc0",
                                                     .block_size_bytes = kBlockBytes,
                                                     .block_count = kMallocBlocks,
                                                     .queue_depth_max = queue_depth});
  if (!created) {
    state.SkipWithError("bdev creation failed");
    return;
  }
  auto channel = (*created)->create_channel();
  if (!channel) {
    state.SkipWithError("channel creation failed");
    return;
  }
  IoChannel& ch = **channel;

  std::vector<uint8_t> buffers(static_cast<size_t>(queue_depth) * kIoBytes, 0x5a);
  std::vector<iovec> iovs(queue_depth);
  std::vector<BdevIo> ios(queue_depth);
  FreeIos free_ios;
  free_ios.stack.reserve(queue_depth);
  for (uint32_t i = 0; i < queue_depth; ++i) {
    iovs[i] = iovec{buffers.data() + static_cast<size_t>(i) * kIoBytes, kIoBytes};
    ios[i].type = type;
    ios[i].num_blocks = kIoBytes / kBlockBytes;
    ios[i].iov = &iovs[i];
    ios[i].iovcnt = 1;
    ios[i].done = on_done;
    ios[i].done_ctx = &free_ios;
    free_ios.stack.push_back(&ios[i]);
  }

  uint64_t next_block = 0;
  for (auto _ : state) {
    while (!free_ios.stack.empty()) {
      BdevIo* io = free_ios.stack.back();
      free_ios.stack.pop_back();
      io->offset_blocks = next_block;
      next_block = (next_block + io->num_blocks) % kMallocBlocks;  // sequential, wrapping
      if (!ch.submit(*io)) {
        state.SkipWithError("submit failed");
        return;
      }
    }
    ch.poll(queue_depth);
  }
  while (ch.outstanding() > 0) ch.poll(queue_depth);
  state.SetItemsProcessed(static_cast<int64_t>(free_ios.completed));
  state.SetBytesProcessed(static_cast<int64_t>(free_ios.completed) * kIoBytes);
}

void BM_NullRead4k(benchmark::State& state) { run(state, Backend::null, IoType::read); }
void BM_NullWrite4k(benchmark::State& state) { run(state, Backend::null, IoType::write); }
void BM_MallocRead4k(benchmark::State& state) { run(state, Backend::malloc, IoType::read); }
void BM_MallocWrite4k(benchmark::State& state) { run(state, Backend::malloc, IoType::write); }

BENCHMARK(BM_NullRead4k)->ArgName("qd")->Arg(1)->Arg(32);
BENCHMARK(BM_NullWrite4k)->ArgName("qd")->Arg(1)->Arg(32);
BENCHMARK(BM_MallocRead4k)->ArgName("qd")->Arg(1)->Arg(32);
BENCHMARK(BM_MallocWrite4k)->ArgName("qd")->Arg(1)->Arg(32);

}  // namespace
}  // namespace nvmf::bdev

BENCHMARK_MAIN();
