// libnvmf_host's threading model with the target on real reactor threads (interrupt mode, as
// nvmf_tgt runs it): one controller whose admin queue the test thread owns, and I/O qpairs
// allocated and used by other threads at the same time, each with its data checked. No
// harness: the host blocks on its own (idle hook: yield), the clock is the monotonic one.
// Run under -DNVMF_SANITIZE=thread to check the qpair registry and the sim hand-offs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "host_fixture.h"
#include "nvmf/host.h"
#include "sim_target_fixture.h"
#include "target/target.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kThreadsNqn = "nqn.2026-11.io.nvmf-rdma:host-threads";
constexpr int kIoThreads = 3;
constexpr int kRoundsPerThread = 100;
constexpr uint32_t kBlocksPerIo = 16;  // 8 KiB: keyed both ways
constexpr auto kIoTimeout = std::chrono::seconds(20);

// Runs one command on `qpair` from the calling thread until its callback ran; false on a
// refused submit, a timeout or an error status (with the reason in *why).
template <typename Submit>
bool run_on_this_thread(host::IoQpair& qpair, Submit submit, std::string* why) {
  Completion completion;
  auto submitted = submit(&on_complete, &completion);
  if (!submitted) {
    *why = "submit: " + describe(submitted.error());
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + kIoTimeout;
  while (completion.calls == 0) {
    qpair.process_completions();
    if (std::chrono::steady_clock::now() > deadline) {
      *why = "no completion within 20 s";
      return false;
    }
    std::this_thread::yield();
  }
  if (completion.calls != 1 || !completion.status.is_success()) {
    *why = "calls " + std::to_string(completion.calls) + ", " + describe(completion.status);
    return false;
  }
  return true;
}

TEST(HostThreads, QpairsOnSeveralThreadsOfOneController) {
  ReactorThreadsTarget threaded;
  ReactorThreadsTarget::Opts target_opts;
  target_opts.nqn = kThreadsNqn;
  target_opts.bdev_name = "MallocThreads";
  ASSERT_NO_FATAL_FAILURE(threaded.start(target_opts));
  target::Target& target = threaded.target();

  // The host part runs in a lambda so that a failed ASSERT still reaches the shutdown below.
  auto exercise = [&] {
    host::ControllerOpts opts;
    opts.io_queue_count = kIoThreads;
    ThreadedHost connected;
    ASSERT_NO_FATAL_FAILURE(
        connect_threaded(threaded.host_provider(), kThreadsNqn, opts, &connected));
    host::Host* host = connected.host.get();
    host::Controller* controller = connected.controller.get();
    host::Namespace* ns = connected.ns;

    std::atomic<int> running{kIoThreads};
    std::vector<std::string> failures(kIoThreads);
    std::vector<int> rounds_done(kIoThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kIoThreads; ++t) {
      threads.emplace_back([&, t] {
        // Everything below on this thread: alloc, submit, poll, free.
        std::string& failure = failures[t];
        auto qpair = controller->alloc_io_qpair({}, &failure);
        if (!qpair) {
          failure = "alloc_io_qpair: " + describe(qpair.error()) + ": " + failure;
          --running;
          return;
        }
        const size_t bytes = size_t{kBlocksPerIo} * 512;
        void* out = host->dma_alloc(bytes);
        void* in = host->dma_alloc(bytes);
        for (int round = 0; round < kRoundsPerThread && failure.empty(); ++round) {
          const uint64_t lba = (uint64_t{static_cast<uint32_t>(t)} * kRoundsPerThread + round) *
                               kBlocksPerIo % (8192 - kBlocksPerIo);
          const auto seed = static_cast<uint32_t>(t * 1000 + round);
          fill_pattern(out, bytes, seed);
          std::memset(in, 0, bytes);
          if (!run_on_this_thread(
                  **qpair,
                  [&](host::IoCallback cb, void* ctx) {
                    return ns->write(**qpair, out, lba, kBlocksPerIo, cb, ctx);
                  },
                  &failure) ||
              !run_on_this_thread(
                  **qpair,
                  [&](host::IoCallback cb, void* ctx) {
                    return ns->read(**qpair, in, lba, kBlocksPerIo, cb, ctx);
                  },
                  &failure)) {
            failure = "round " + std::to_string(round) + ": " + failure;
          } else if (!has_pattern(in, bytes, seed)) {
            failure = "round " + std::to_string(round) + ": data differs";
          } else {
            ++rounds_done[t];
          }
        }
        host->dma_free(out);
        host->dma_free(in);
        qpair->reset();  // freed on its own thread, concurrently with the others
        --running;
      });
    }
    // Meanwhile the admin thread keeps polling its queue.
    while (running.load() != 0) {
      controller->process_admin_completions();
      std::this_thread::yield();
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < kIoThreads; ++t) {
      EXPECT_EQ(failures[t], "") << "thread " << t;
      EXPECT_EQ(rounds_done[t], kRoundsPerThread) << "thread " << t;
    }
    EXPECT_EQ(controller->stats().io_qpairs_allocated, uint64_t{kIoThreads});
    EXPECT_EQ(target.controller_count(kThreadsNqn), 1u);
    ASSERT_TRUE(controller->disconnect());
  };
  exercise();

  threaded.shut_down();
  EXPECT_EQ(target.controller_count(kThreadsNqn), 0u);
}

}  // namespace
}  // namespace nvmf::e2e
