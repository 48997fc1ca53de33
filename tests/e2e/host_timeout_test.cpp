// The per-I/O timeout of an I/O qpair (ControllerOpts::io_timeout_ms: an Abort at the timeout,
// a controller reset, or without controller_recovery a reset of the queue, one more timeout
// later) and fast_io_fail (ControllerOpts::fast_io_fail_timeout_ms: held I/O fails with Host
// Pathing Error while the queue reconnects),
// on the fixture's fake clock. The stuck commands sit in a stalled delay bdev (NSID 2 of
// kNqn512) whose base takes one command at a time, so a second one waits in the target's core,
// where an Abort can reach it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bdev/delay_bdev.h"
#include "host_fixture.h"
#include "stalled_bdev.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kStalledNsid = 2;
constexpr uint32_t kIoTimeoutMs = 1000;
// The library checks timeouts every min(1 s, io_timeout / 8) (host.h): a command times out
// between io_timeout and io_timeout + 2 checks after its submit.
constexpr uint32_t kCheckMs = kIoTimeoutMs / 8;
constexpr uint32_t kStepMs = 5;  // divides kCheckMs, so the checks fall on whole steps
constexpr uint32_t kReconnectDelayMs = 200;
constexpr uint32_t kCtrlLossMs = 5000;
constexpr uint32_t kFastIoFailMs = 1000;

bool is_abort_requested(const spec::Status& status) {
  return status.sct == spec::sct::generic && status.sc == spec::sc_generic::abort_requested;
}
bool is_host_path_error(const spec::Status& status) {
  return status.sct == spec::sct::path_related && status.sc == spec::sc_path::host_pathing_error;
}

class HostTimeoutTest : public HostFixture {
 protected:
  void SetUp() override {
    HostFixture::SetUp();
    if (HasFatalFailure()) return;
    // One command fills the stalled bdev; the next waits in the core.
    stalled_.create("TimeoutDelay", 2048, 1, harness_.clock());
    if (HasFatalFailure()) return;
    delay_ = stalled_.delay;
    target::NamespaceOpts ns;
    ns.nsid = kStalledNsid;
    ns.bdev = stalled_.bdev.get();
    ASSERT_TRUE(target_->add_namespace(kNqn512, ns));
  }
  void TearDown() override {
    stalled_.release();
    HostFixture::TearDown();  // the target (and its channels of the delay bdev) go first
    stalled_.destroy();
  }

  void stuck_command_is_reset_and_resent(bool controller_recovery);

  static host::ControllerOpts timeout_opts() {
    host::ControllerOpts opts = controller_opts();
    opts.io_timeout_ms = kIoTimeoutMs;
    opts.reconnect_delay_ms = kReconnectDelayMs;
    opts.ctrl_loss_timeout_ms = kCtrlLossMs;
    return opts;
  }

  // Connects to kNqn512 and lets the admin queue's first doorbell (its AERs) go out, so that a
  // work request failure a test injects later hits the I/O queue.
  std::unique_ptr<host::Controller> connect_timeout_controller(const host::ControllerOpts& opts) {
    auto controller = connect(kNqn512, opts);
    if (controller == nullptr) return nullptr;
    for (int i = 0; i < 16; ++i) {
      controller->process_admin_completions();
      harness_.poll_round();
    }
    return controller;
  }

  // What every test starts from: a controller (connect_timeout_controller), one I/O qpair and
  // namespace `nsid`. Members in this order, so that the qpair goes before its controller.
  // Tests take named references to the members, not a structured binding: clang 14-16 cannot
  // capture a binding in a lambda (the ASan+UBSan tier builds with clang).
  struct TimeoutQueue {
    std::unique_ptr<host::Controller> controller;
    std::unique_ptr<host::IoQpair> qpair;
    host::Namespace* ns = nullptr;  // nullptr when a step failed (the failure is recorded)
  };
  TimeoutQueue open_queue(const host::ControllerOpts& opts, uint32_t nsid) {
    TimeoutQueue queue;
    queue.controller = connect_timeout_controller(opts);
    if (queue.controller == nullptr) return queue;  // connect() recorded why
    queue.qpair = alloc_qpair(*queue.controller);
    if (queue.qpair == nullptr) return queue;  // alloc_qpair() recorded why
    queue.ns = queue.controller->ns(nsid);
    if (queue.ns == nullptr) ADD_FAILURE() << "namespace " << nsid << " is not active";
    return queue;
  }

  uint64_t now_ms() { return harness_.clock().now_ns() / (1000 * 1000); }

  // One round at the current time: the admin thread's poll (it sends the Aborts), the qpair's,
  // the target's.
  void tick(host::Controller& controller, host::IoQpair& qpair) {
    controller.process_admin_completions();
    qpair.process_completions();
    harness_.poll_round();
  }
  // Rounds, the clock moving `step_ms` after each, until done() holds after a round (the clock
  // then still shows that round's time) or max_rounds ran.
  template <typename Done>
  bool run_with_time(host::Controller& controller, host::IoQpair& qpair, Done done,
                     uint64_t step_ms, int max_rounds = 20000) {
    for (int i = 0; i < max_rounds; ++i) {
      tick(controller, qpair);
      if (done()) return true;
      harness_.clock().advance_ms(step_ms);
    }
    return done();
  }
  // Rounds every kStepMs until the clock shows `until_ms` (that round not run).
  void run_until_ms(host::Controller& controller, host::IoQpair& qpair, uint64_t until_ms) {
    while (now_ms() < until_ms) {
      tick(controller, qpair);
      harness_.clock().advance_ms(kStepMs);
    }
  }

  // Submits one 4 KiB read of LBA 0 per entry of `reads` (into consecutive 4 KiB of
  // `buffer`), makes the target refuse connections and fails the queue pair: true once the
  // qpair is reconnecting with the reads held.
  bool lose_queue_under_reads(host::Controller& controller, host::IoQpair& qpair,
                              host::Namespace& ns, DmaBuffer& buffer,
                              std::vector<Completion>& reads) {
    for (size_t i = 0; i < reads.size(); ++i) {
      if (!ns.read(qpair, buffer.data() + i * 4096, 0, 8, &on_complete, &reads[i])) return false;
    }
    target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                         verbs::sim::RefuseMode::reject);
    host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);
    return run_with_time(controller, qpair, [&] { return qpair.reconnecting(); }, kStepMs);
  }

  StalledBdev stalled_;
  bdev::DelayBdev* delay_ = nullptr;  // stalled_.delay
};

// A read stuck in the stalled bdev: no Abort before io_timeout_ms, one at it (the target
// cannot free a command inside a bdev and says so); the stall ends and the read completes
// once, successfully, with no reset.
TEST_F(HostTimeoutTest, AbortAtTheIoTimeoutThenTheTargetCompletesTheCommand) {
  TimeoutQueue queue = open_queue(timeout_opts(), kStalledNsid);
  auto& controller = queue.controller;
  auto& qpair = queue.qpair;
  host::Namespace* ns = queue.ns;
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  delay_->stall();
  Completion read;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &read));
  const uint64_t submitted_ms = now_ms();

  run_until_ms(*controller, *qpair, submitted_ms + kIoTimeoutMs);
  EXPECT_EQ(qpair->stats().timeouts, 0u) << "timed out before io_timeout_ms";
  EXPECT_EQ(qpair->stats().aborts_sent, 0u);
  EXPECT_EQ(read.calls, 0);

  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return qpair->stats().aborts_sent == 1; }, kStepMs,
      2 * kCheckMs / kStepMs + 1))
      << "no Abort within two checks of io_timeout_ms";
  EXPECT_EQ(qpair->stats().timeouts, 1u);
  EXPECT_EQ(read.calls, 0) << "the target cannot abort a command inside its bdev";

  delay_->release();
  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return read.calls != 0; }, kStepMs));
  EXPECT_TRUE(read.ok()) << describe(read.status);
  // Well past a second timeout: the command completed, so nothing more happens to the queue.
  run_until_ms(*controller, *qpair, now_ms() + 3 * kIoTimeoutMs);
  EXPECT_EQ(read.calls, 1);
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.timeouts, 1u);
  EXPECT_EQ(stats.aborts_sent, 1u);
  EXPECT_EQ(stats.qp_errors, 0u);
  EXPECT_EQ(stats.reconnects, 0u);
  EXPECT_TRUE(qpair->connected());
}

// Two reads: the first stuck in the stalled bdev, the second waiting behind it in the target's
// core. Both time out together; the Abort frees the second (Command Abort Requested, so its
// SQID and CID reached the target right), not the first, which is reset one more io_timeout
// later, not sooner (the controller, or with controller_recovery off its queue alone); the
// first is resent after the reconnect and succeeds. Each callback runs once.
void HostTimeoutTest::stuck_command_is_reset_and_resent(bool controller_recovery) {
  host::ControllerOpts opts = timeout_opts();
  opts.controller_recovery = controller_recovery;
  TimeoutQueue queue = open_queue(opts, kStalledNsid);
  auto& controller = queue.controller;
  auto& qpair = queue.qpair;
  host::Namespace* ns = queue.ns;
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, 2 * 4096);
  ASSERT_TRUE(buffer);
  fill_pattern(buffer.data(), 4096, 3);
  ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->write(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
  delay_->stall();
  Completion stuck;
  Completion behind;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &stuck));
  ASSERT_TRUE(ns->read(*qpair, buffer.data() + 4096, 8, 8, &on_complete, &behind));
  const uint64_t submitted_ms = now_ms();

  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return qpair->stats().aborts_sent == 2 && behind.calls != 0; },
      kStepMs, (kIoTimeoutMs + 2 * kCheckMs) / kStepMs + 16));
  EXPECT_EQ(behind.calls, 1);
  EXPECT_TRUE(is_abort_requested(behind.status)) << describe(behind.status);
  EXPECT_EQ(stuck.calls, 0);
  EXPECT_EQ(qpair->stats().timeouts, 2u);

  // Until two timeouts after the submit (the second counts from the Abort): no reset.
  run_until_ms(*controller, *qpair, submitted_ms + 2 * kIoTimeoutMs);
  EXPECT_EQ(qpair->stats().qp_errors, 0u) << "reset before the Abort had its io_timeout";
  EXPECT_FALSE(qpair->reconnecting());
  EXPECT_EQ(stuck.calls, 0);

  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return qpair->reconnecting(); }, kStepMs,
      2 * kCheckMs / kStepMs + 16))
      << "no reset one io_timeout after the Abort";
  EXPECT_EQ(stuck.calls, 0) << "held for the resend, not failed";
  delay_->release();  // the old queue pair's command ends; the resent one goes through
  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return stuck.calls != 0; }, kStepMs));
  EXPECT_TRUE(stuck.ok()) << describe(stuck.status);
  EXPECT_TRUE(has_pattern(buffer.data(), 4096, 3));
  for (int i = 0; i < 16; ++i) tick(*controller, *qpair);
  EXPECT_EQ(stuck.calls, 1);
  EXPECT_EQ(behind.calls, 1);
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_EQ(stats.resubmitted, 1u);
  EXPECT_EQ(stats.timeouts, 2u);
  EXPECT_TRUE(qpair->connected());
  EXPECT_EQ(controller->stats().resets, controller_recovery ? 1u : 0u);
  EXPECT_TRUE(controller->connected());
  ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data() + 4096, 8, 8, cb, ctx);
  }));
}

TEST_F(HostTimeoutTest, AStuckCommandResetsTheControllerOneTimeoutAfterItsAbort) {
  stuck_command_is_reset_and_resent(true);
}

TEST_F(HostTimeoutTest, WithoutControllerRecoveryAStuckCommandResetsItsQueueAlone) {
  stuck_command_is_reset_and_resent(false);
}

// io_timeout_ms = 0: a command may take as long as it takes.
TEST_F(HostTimeoutTest, ZeroIoTimeoutNeverAborts) {
  host::ControllerOpts opts = timeout_opts();
  opts.io_timeout_ms = 0;
  TimeoutQueue queue = open_queue(opts, kStalledNsid);
  auto& controller = queue.controller;
  auto& qpair = queue.qpair;
  host::Namespace* ns = queue.ns;
  ASSERT_NE(ns, nullptr);
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  delay_->stall();
  Completion read;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &read));
  for (int i = 0; i < 600; ++i) {  // ten minutes
    tick(*controller, *qpair);
    harness_.clock().advance_ms(1000);
  }
  EXPECT_EQ(qpair->stats().timeouts, 0u);
  EXPECT_EQ(qpair->stats().aborts_sent, 0u);
  EXPECT_EQ(read.calls, 0);
  delay_->release();
  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return read.calls != 0; }, kStepMs));
  EXPECT_TRUE(read.ok()) << describe(read.status);
  EXPECT_EQ(qpair->stats().reconnects, 0u);
}

// The target refuses every reconnect: the held reads fail with Host Pathing Error
// fast_io_fail_timeout_ms after the loss (not before; submits answer busy until then,
// bad_state after), the qpair keeps reconnecting until ctrl_loss_timeout_ms and then gives
// up, and no callback runs a second time.
TEST_F(HostTimeoutTest, FastIoFailFailsHeldIoWithHostPathErrorBeforeTheLossTimeout) {
  host::ControllerOpts opts = timeout_opts();
  opts.fast_io_fail_timeout_ms = kFastIoFailMs;
  TimeoutQueue queue = open_queue(opts, 1);
  auto& controller = queue.controller;
  auto& qpair = queue.qpair;
  host::Namespace* ns = queue.ns;
  ASSERT_NE(ns, nullptr);
  constexpr uint32_t kReads = 8;
  DmaBuffer buffer(*host_, 4096 * kReads);
  ASSERT_TRUE(buffer);
  std::vector<Completion> reads(kReads);
  ASSERT_TRUE(lose_queue_under_reads(*controller, *qpair, *ns, buffer, reads));
  const uint64_t lost_ms = now_ms();
  EXPECT_EQ(qpair->stats().fast_failed, 0u);
  Completion early;
  auto submitted = ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &early);
  ASSERT_FALSE(submitted);
  EXPECT_EQ(submitted.error().code, Errc::busy) << "before fast_io_fail: busy, as ever";

  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return all_called(reads); }, kStepMs));
  const uint64_t failed_after_ms = now_ms() - lost_ms;
  EXPECT_GE(failed_after_ms, kFastIoFailMs) << "failed before fast_io_fail_timeout_ms";
  EXPECT_LE(failed_after_ms, kFastIoFailMs + kStepMs);
  for (uint32_t i = 0; i < kReads; ++i) {
    EXPECT_EQ(reads[i].calls, 1) << "read " << i;
    EXPECT_TRUE(is_host_path_error(reads[i].status))
        << "read " << i << ": " << describe(reads[i].status);
  }
  EXPECT_EQ(qpair->stats().fast_failed, kReads);
  EXPECT_TRUE(qpair->reconnecting()) << "the reconnect goes on";
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));

  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return !qpair->reconnecting(); }, kStepMs));
  EXPECT_GE(now_ms() - lost_ms, kCtrlLossMs) << "gave up before ctrl_loss_timeout_ms";
  for (uint32_t i = 0; i < kReads; ++i) EXPECT_EQ(reads[i].calls, 1) << "read " << i;
  EXPECT_EQ(early.calls, 0);
  EXPECT_EQ(qpair->stats().fast_failed, kReads);
  EXPECT_FALSE(qpair->connected());
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
  target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                       verbs::sim::RefuseMode::none);
}

// fast_io_fail_timeout_ms = 0: held I/O fails as soon as the loss is known; once the target
// takes the reconnect, submits work again.
TEST_F(HostTimeoutTest, FastIoFailZeroFailsAtOnceAndTheReconnectedQueueTakesIoAgain) {
  host::ControllerOpts opts = timeout_opts();
  opts.fast_io_fail_timeout_ms = 0;
  TimeoutQueue queue = open_queue(opts, 1);
  auto& controller = queue.controller;
  auto& qpair = queue.qpair;
  host::Namespace* ns = queue.ns;
  ASSERT_NE(ns, nullptr);
  constexpr uint32_t kReads = 4;
  DmaBuffer buffer(*host_, 4096 * kReads);
  ASSERT_TRUE(buffer);
  std::vector<Completion> reads(kReads);
  ASSERT_TRUE(lose_queue_under_reads(*controller, *qpair, *ns, buffer, reads));
  for (uint32_t i = 0; i < kReads; ++i) {
    EXPECT_EQ(reads[i].calls, 1) << "read " << i << ": not failed with the loss";
    EXPECT_TRUE(is_host_path_error(reads[i].status))
        << "read " << i << ": " << describe(reads[i].status);
  }
  EXPECT_EQ(qpair->stats().fast_failed, kReads);
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));

  target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                       verbs::sim::RefuseMode::none);
  ASSERT_TRUE(run_with_time(
      *controller, *qpair, [&] { return qpair->connected(); }, kStepMs));
  EXPECT_EQ(qpair->stats().reconnects, 1u);
  EXPECT_EQ(qpair->stats().resubmitted, 0u) << "nothing was held any more";
  ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
  for (uint32_t i = 0; i < kReads; ++i) EXPECT_EQ(reads[i].calls, 1) << "read " << i;
}

}  // namespace
}  // namespace nvmf::e2e
