// Event mode of an I/O qpair (IoQpairOpts::completion_events): event_fd() and
// wait_for_completions(). On the fixture's fake clock and one thread: the fd becomes readable
// when a completion arrives and not before; a completion that lands between the last poll and
// the arm is not lost to the sleep; a wait with nothing to do sleeps until its timeout; the
// I/O timeout's Abort still fires while the owner only waits; the fd survives a reconnect.
// With the target on reactor threads (interrupt mode) and the monotonic clock: I/O completes
// through blocking waits alone. Poll mode has no fd. No timed assertions: counts and returns.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "bdev/delay_bdev.h"
#include "host_fixture.h"
#include "sim_target_fixture.h"
#include "stalled_bdev.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kBlock = 512;
constexpr uint32_t kIoBlocks = 8;  // 4 KiB
// A wait the tests expect to end sooner (a completion, a timer); long enough that ending by
// its timeout would show in the counts, short enough that a failing test still ends.
constexpr int kLongWaitMs = 2000;

host::IoQpairOpts event_opts() {
  host::IoQpairOpts opts;
  opts.completion_events = true;
  return opts;
}

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}

std::vector<uint32_t> added(const std::vector<uint32_t>& before,
                            const std::vector<uint32_t>& after) {
  std::vector<uint32_t> out;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(out));
  return out;
}

class HostEventsTest : public HostFixture {
 protected:
  // wait_for_completions(0) on `qpair` whenever its fd is readable, between rounds of the
  // target, until done(); false after max_rounds. The only host calls are waits: a completion
  // reaches the test only through the fd.
  template <typename Done>
  bool wait_when_readable(host::IoQpair& qpair, Done done, int max_rounds = kMaxRounds) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      harness_.poll_round();
      if (!readable(qpair.event_fd())) continue;
      auto waited = qpair.wait_for_completions(0);
      if (!waited) {
        ADD_FAILURE() << "wait_for_completions: " << describe(waited.error());
        return false;
      }
    }
    return done();
  }
};

TEST_F(HostEventsTest, PollModeHasNoEventFdAndRefusesToWait) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  EXPECT_EQ(qpair->event_fd(), -1);
  auto waited = qpair->wait_for_completions(0);
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().code, Errc::bad_state);
  EXPECT_EQ(qpair->stats().waits, 0u);
  EXPECT_EQ(qpair->stats().arms, 0u);
}

TEST_F(HostEventsTest, TheFdBecomesReadableWhenACompletionArrivesAndNotBefore) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller, event_opts());
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  const int fd = qpair->event_fd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(readable(fd)) << "readable before anything was armed or sent";

  DmaBuffer buffer(*host_, size_t{kIoBlocks} * kBlock);
  ASSERT_TRUE(buffer);
  Completion read;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, kIoBlocks, &on_complete, &read));
  // Sends the read (commands go out only inside the qpair's calls), finds nothing, arms.
  auto waited = qpair->wait_for_completions(0);
  ASSERT_TRUE(waited) << describe(waited.error());
  EXPECT_EQ(*waited, 0);
  EXPECT_FALSE(readable(fd)) << "readable before the target ran";
  EXPECT_EQ(qpair->stats().arms, 1u);

  ASSERT_TRUE(wait_when_readable(*qpair, [&] { return read.calls != 0; }))
      << "the read never completed through the fd (outstanding " << qpair->outstanding() << ")";
  EXPECT_TRUE(read.ok()) << describe(read.status);

  // Nothing outstanding: once armed again, the target's rounds leave the fd quiet.
  waited = qpair->wait_for_completions(0);
  ASSERT_TRUE(waited);
  for (int i = 0; i < 64; ++i) harness_.poll_round();
  EXPECT_FALSE(readable(fd)) << "readable with nothing outstanding";
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.completed, 1u);
  EXPECT_GE(stats.arms, 2u);
  EXPECT_GE(stats.waits, 2u);
}

// The race the arm-then-poll-again step closes: a completion already in the CQ but not
// visible to the wait's first poll, visible after its arm, raises no event (it was written
// before the arm). The sim holds the read's response back for two polls of the host's CQ, so
// the first poll misses it and the poll after the arm finds it: the wait returns it at once.
TEST_F(HostEventsTest, ACompletionThatRacesTheArmIsNotLost) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  const auto qps_before = host_provider_->qp_nums();
  auto qpair = alloc_qpair(*controller, event_opts());
  ASSERT_NE(qpair, nullptr);
  const auto host_qps = added(qps_before, host_provider_->qp_nums());
  ASSERT_EQ(host_qps.size(), 1u);
  // send_cq_of() hands out a handle to name the CQ; delaying its completions needs the CQ.
  auto* cq = const_cast<verbs::CompletionQueue*>(host_provider_->send_cq_of(host_qps[0]));
  ASSERT_NE(cq, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, size_t{kIoBlocks} * kBlock);
  ASSERT_TRUE(buffer);

  Completion read;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, kIoBlocks, &on_complete, &read));
  // Send it and reap the SEND's own completion; the target has not run, so nothing else can
  // be in the CQ yet.
  const uint64_t reaped_before = qpair->stats().cqes_reaped;
  for (int i = 0; i < 64 && qpair->stats().cqes_reaped == reaped_before; ++i) {
    qpair->process_completions();
  }
  ASSERT_EQ(qpair->stats().cqes_reaped, reaped_before + 1) << "the SEND did not complete";
  ASSERT_TRUE(host_provider_->delay_completions(*cq, verbs::sim::CompletionDelay{2, 0, 1}));
  for (int i = 0; i < 64; ++i) harness_.poll_round();  // the target answers
  ASSERT_EQ(read.calls, 0);

  auto waited = qpair->wait_for_completions(kLongWaitMs);
  ASSERT_TRUE(waited) << describe(waited.error());
  EXPECT_EQ(*waited, 1) << "the completion was lost to the sleep";
  EXPECT_TRUE(read.ok()) << describe(read.status);
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.arms, 1u);
  EXPECT_EQ(stats.sleeps, 0u) << "slept with the completion in the CQ";
}

TEST_F(HostEventsTest, AWaitWithNothingToDoSleepsUntilItsTimeout) {
  auto controller = connect(kNqn512);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller, event_opts());
  ASSERT_NE(qpair, nullptr);
  // Nothing outstanding: no timer of the qpair's, so only the timeout ends the sleep.
  auto waited = qpair->wait_for_completions(20);
  ASSERT_TRUE(waited) << describe(waited.error());
  EXPECT_EQ(*waited, 0);
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.waits, 1u);
  EXPECT_EQ(stats.arms, 1u);
  EXPECT_EQ(stats.sleeps, 1u);
  EXPECT_EQ(stats.wakeups, 0u);
  EXPECT_EQ(stats.timer_wakeups, 0u);
}

// A QP error: the queue reconnects (new QP, CQ and CM channel) and event_fd() stays the same
// fd, which then reports the new CQ's completions.
TEST_F(HostEventsTest, TheFdStaysTheSameAcrossAReconnect) {
  auto controller = connect(kNqn512, recovery_opts());
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller, event_opts());
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);
  const int fd = qpair->event_fd();
  ASSERT_GE(fd, 0);
  DmaBuffer buffer(*host_, 2 * size_t{kIoBlocks} * kBlock);
  ASSERT_TRUE(buffer);

  Completion lost;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, kIoBlocks, &on_complete, &lost));
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);
  // Waits (no sleep) while the fake clock runs through reconnect_delay_ms.
  for (int i = 0; i < 2000 && !(lost.calls != 0 && qpair->connected()); ++i) {
    auto waited = qpair->wait_for_completions(0);
    ASSERT_TRUE(waited) << describe(waited.error());
    harness_.poll_round();
    harness_.clock().advance_ms(20);
  }
  ASSERT_TRUE(lost.ok()) << "resent after the reconnect: " << describe(lost.status);
  ASSERT_TRUE(qpair->connected());
  EXPECT_EQ(qpair->stats().reconnects, 1u);
  EXPECT_EQ(qpair->event_fd(), fd);

  auto waited = qpair->wait_for_completions(0);  // arms the new CQ
  ASSERT_TRUE(waited);
  for (int i = 0; i < 64; ++i) harness_.poll_round();
  EXPECT_FALSE(readable(fd)) << "readable with nothing outstanding after the reconnect";
  Completion after;
  ASSERT_TRUE(ns->read(*qpair, buffer.data() + size_t{kIoBlocks} * kBlock, kIoBlocks, kIoBlocks,
                       &on_complete, &after));
  waited = qpair->wait_for_completions(0);  // sends it
  ASSERT_TRUE(waited);
  ASSERT_TRUE(wait_when_readable(*qpair, [&] { return after.calls != 0; }))
      << "the new CQ's completion never made the fd readable";
  EXPECT_TRUE(after.ok()) << describe(after.status);
}

// ---------------------------------------------------------------------------------------
// Timers while the owner sleeps: the I/O timeout scan ends the sleep, so the Abort is asked
// for although the owner never polls.

constexpr uint32_t kStalledNsid = 2;
constexpr uint32_t kIoTimeoutMs = 160;
constexpr uint32_t kCheckMs = kIoTimeoutMs / 8;  // host.h: the scan interval

class HostEventsTimeoutTest : public HostEventsTest {
 protected:
  void SetUp() override {
    HostEventsTest::SetUp();
    if (HasFatalFailure()) return;
    stalled_.create("EventsDelay", 2048, 1, harness_.clock());
    if (HasFatalFailure()) return;
    target::NamespaceOpts ns;
    ns.nsid = kStalledNsid;
    ns.bdev = stalled_.bdev.get();
    ASSERT_TRUE(target_->add_namespace(kNqn512, ns));
  }
  void TearDown() override {
    stalled_.release();
    HostEventsTest::TearDown();
    stalled_.destroy();
  }

  // One round: the owner waits (and sleeps until its timer or kLongWaitMs), the admin thread
  // polls (it sends the Aborts), the target runs, the fake clock moves one scan interval.
  template <typename Done>
  bool wait_rounds(host::Controller& controller, host::IoQpair& qpair, Done done,
                   int max_rounds) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      auto waited = qpair.wait_for_completions(kLongWaitMs);
      if (!waited) {
        ADD_FAILURE() << "wait_for_completions: " << describe(waited.error());
        return false;
      }
      controller.process_admin_completions();
      harness_.poll_round();
      harness_.clock().advance_ms(kCheckMs);
    }
    return done();
  }

  StalledBdev stalled_;
};

TEST_F(HostEventsTimeoutTest, TheIoTimeoutAbortsWhileTheOwnerOnlyWaits) {
  host::ControllerOpts opts = controller_opts();
  opts.io_timeout_ms = kIoTimeoutMs;
  auto controller = connect(kNqn512, opts);
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller, event_opts());
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(kStalledNsid);
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, size_t{kIoBlocks} * kBlock);
  ASSERT_TRUE(buffer);
  stalled_.delay->stall();
  Completion read;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, kIoBlocks, &on_complete, &read));

  // io_timeout plus two scans, and a few rounds for the Abort to go out.
  constexpr int kRounds = kIoTimeoutMs / kCheckMs + 2 + 8;
  ASSERT_TRUE(wait_rounds(*controller, *qpair, [&] { return qpair->stats().aborts_sent == 1; },
                          kRounds))
      << "no Abort (timeouts " << qpair->stats().timeouts << ")";
  EXPECT_EQ(qpair->stats().timeouts, 1u);
  EXPECT_EQ(read.calls, 0) << "the target cannot abort a command inside its bdev";
  EXPECT_GT(qpair->stats().timer_wakeups, 0u) << "the sleeps did not end at the scan timer";

  stalled_.delay->release();
  ASSERT_TRUE(wait_rounds(*controller, *qpair, [&] { return read.calls != 0; }, 64));
  EXPECT_TRUE(read.ok()) << describe(read.status);
  EXPECT_EQ(qpair->stats().qp_errors, 0u);
}

// ---------------------------------------------------------------------------------------
// Blocking waits against the target on reactor threads (interrupt mode, as nvmf_tgt runs):
// the owner only submits and waits; the completions wake it.

constexpr const char* kThreadsNqn = "nqn.2026-11.io.nvmf-rdma:host-events";
constexpr uint32_t kThreadBlocks = 8192;
constexpr int kIosPerDirection = 16;

bool every_one_called(const std::vector<Completion>& completions) {
  return std::all_of(completions.begin(), completions.end(),
                     [](const Completion& c) { return c.calls != 0; });
}

TEST(HostEventsThreads, IoCompletesThroughBlockingWaitsAlone) {
  ReactorThreadsTarget threaded;
  ReactorThreadsTarget::Opts target_opts;
  target_opts.nqn = kThreadsNqn;
  target_opts.bdev_name = "MallocEvents";
  target_opts.block_count = kThreadBlocks;
  target_opts.reactor_count = 1;
  ASSERT_NO_FATAL_FAILURE(threaded.start(target_opts));

  // The host part in a lambda, so that a failed ASSERT still reaches the shutdown below.
  auto exercise = [&] {
    host::ControllerOpts opts;
    opts.keep_alive_timeout_ms = 0;  // this thread does not poll the admin queue meanwhile
    ThreadedHost connected;
    ASSERT_NO_FATAL_FAILURE(
        connect_threaded(threaded.host_provider(), kThreadsNqn, opts, &connected));
    host::Host* host = connected.host.get();
    host::Namespace* ns = connected.ns;
    std::string message;
    auto qpair = connected.controller->alloc_io_qpair(event_opts(), &message);
    ASSERT_TRUE(qpair) << describe(qpair.error()) << ": " << message;

    const size_t io_bytes = size_t{kIoBlocks} * kBlock;
    DmaBuffer out(*host, io_bytes * kIosPerDirection);
    DmaBuffer in(*host, io_bytes * kIosPerDirection);
    ASSERT_TRUE(out && in);
    fill_pattern(out.data(), out.size(), 11);
    int callbacks = 0;  // what the waits returned
    // Every I/O at once, then waits until each called back.
    auto run_all = [&](std::vector<Completion>& completions, bool write) {
      for (int i = 0; i < kIosPerDirection; ++i) {
        const uint64_t lba = uint64_t{static_cast<uint32_t>(i)} * kIoBlocks;
        const size_t offset = size_t{static_cast<uint32_t>(i)} * io_bytes;
        auto submitted =
            write ? ns->write(**qpair, out.data() + offset, lba, kIoBlocks, &on_complete,
                              &completions[i])
                  : ns->read(**qpair, in.data() + offset, lba, kIoBlocks, &on_complete,
                             &completions[i]);
        ASSERT_TRUE(submitted) << describe(submitted.error());
      }
      for (int round = 0; round < 1000 && !every_one_called(completions); ++round) {
        auto waited = (*qpair)->wait_for_completions(kLongWaitMs);
        ASSERT_TRUE(waited) << describe(waited.error());
        callbacks += *waited;
      }
      for (const Completion& completion : completions) {
        EXPECT_TRUE(completion.ok()) << describe(completion.status);
      }
    };
    std::vector<Completion> writes(kIosPerDirection);
    ASSERT_NO_FATAL_FAILURE(run_all(writes, true));
    std::vector<Completion> reads(kIosPerDirection);
    ASSERT_NO_FATAL_FAILURE(run_all(reads, false));
    EXPECT_TRUE(has_pattern(in.data(), in.size(), 11));
    EXPECT_EQ(callbacks, 2 * kIosPerDirection) << "callbacks ran outside the waits";
    const host::IoQpairStats stats = (*qpair)->stats();
    EXPECT_EQ(stats.completed, uint64_t{2 * kIosPerDirection});
    EXPECT_GE(stats.waits, 2u);
    qpair->reset();
    ASSERT_TRUE(connected.controller->disconnect());
  };
  exercise();
  threaded.shut_down();
}

}  // namespace
}  // namespace nvmf::e2e
