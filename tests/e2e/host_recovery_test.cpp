// Error recovery of an I/O qpair: a failed work request moves the QP to error; the qpair
// reconnects after reconnect_delay_ms (fake time), resends what was in flight and loses
// nothing; it gives up after ctrl_loss_timeout_ms, failing what is left exactly once.
#include <gtest/gtest.h>

#include <vector>

#include "host_fixture.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kBlock = 512;
constexpr uint32_t kIoBlocks = 8;
constexpr uint32_t kCommands = 32;

class HostRecoveryTest : public HostFixture {
 protected:
  // Rounds with the fake clock moving `step_ms` per round, until done() or max_rounds.
  template <typename Done>
  bool run_with_time(host::IoQpair& qpair, Done done, uint64_t step_ms, int max_rounds = 20000) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      qpair.process_completions();
      harness_.poll_round();
      harness_.clock().advance_ms(step_ms);
    }
    return done();
  }
};

TEST_F(HostRecoveryTest, QpErrorReconnectsResendsAndLosesNothing) {
  auto controller = connect(kNqn512, recovery_opts());
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  ASSERT_NE(ns, nullptr);

  // 32 writes of 4.5 KiB each (keyed: the target reads them by RDMA), all in flight when the
  // first WR to execute on the fabric fails.
  constexpr uint32_t kBlocksPerIo = kIoBlocks + 1;
  const size_t io_bytes = size_t{kBlocksPerIo} * kBlock;
  DmaBuffer data(*host_, io_bytes * kCommands);
  ASSERT_TRUE(data);
  fill_pattern(data.data(), io_bytes * kCommands, 7);
  std::vector<Completion> completions(kCommands);
  for (uint32_t i = 0; i < kCommands; ++i) {
    ASSERT_TRUE(ns->write(*qpair, static_cast<uint8_t*>(data.data()) + i * io_bytes,
                          uint64_t{i} * kBlocksPerIo, kBlocksPerIo, &on_complete, &completions[i]));
  }
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);

  ASSERT_TRUE(run_with_time(*qpair, [&] { return all_called(completions); }, 20))
      << "outstanding " << qpair->outstanding() << ", reconnecting " << qpair->reconnecting();
  for (int i = 0; i < 16; ++i) round({qpair.get()});
  for (uint32_t i = 0; i < kCommands; ++i) {
    EXPECT_EQ(completions[i].calls, 1) << "command " << i;
    EXPECT_TRUE(completions[i].status.is_success())
        << "command " << i << ": " << describe(completions[i].status);
  }
  const host::IoQpairStats stats = qpair->stats();
  EXPECT_EQ(stats.qp_errors, 1u);
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_GT(stats.resubmitted, 0u);
  EXPECT_EQ(controller->stats().reconnects, 1u);
  EXPECT_TRUE(qpair->connected());

  // Every write landed: read all of it back.
  DmaBuffer back(*host_, io_bytes * kCommands);
  ASSERT_TRUE(back);
  for (uint32_t half = 0; half < 2; ++half) {  // 144 KiB in two reads of 72 KiB
    const uint32_t blocks = kBlocksPerIo * kCommands / 2;
    ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
      return ns->read(*qpair, static_cast<uint8_t*>(back.data()) + size_t{half} * blocks * kBlock,
                      uint64_t{half} * blocks, blocks, cb, ctx);
    }));
  }
  EXPECT_TRUE(has_pattern(back.data(), io_bytes * kCommands, 7));
}

TEST_F(HostRecoveryTest, SubmitsWhileReconnectingAnswerBusy) {
  auto controller = connect(kNqn512, recovery_opts());
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  DmaBuffer buffer(*host_, 4096);
  ASSERT_TRUE(buffer);
  Completion first;
  ASSERT_TRUE(ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &first));
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);
  ASSERT_TRUE(run_with_time(*qpair, [&] { return qpair->reconnecting(); }, 0, 2000));
  Completion second;
  auto submitted = ns->read(*qpair, buffer.data(), 0, 8, &on_complete, &second);
  ASSERT_FALSE(submitted);
  EXPECT_EQ(submitted.error().code, Errc::busy);
  ASSERT_TRUE(run_with_time(*qpair, [&] { return first.calls == 1 && qpair->connected(); }, 20));
  EXPECT_TRUE(first.status.is_success()) << describe(first.status);
  ASSERT_TRUE(run_io(*qpair, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
}

TEST_F(HostRecoveryTest, GivesUpAfterTheControllerLossTimeout) {
  auto controller = connect(kNqn512, recovery_opts());
  ASSERT_NE(controller, nullptr);
  auto qpair = alloc_qpair(*controller);
  ASSERT_NE(qpair, nullptr);
  host::Namespace* ns = controller->ns(1);
  DmaBuffer buffer(*host_, 4096 * kCommands);
  ASSERT_TRUE(buffer);
  std::vector<Completion> completions(kCommands);
  for (uint32_t i = 0; i < kCommands; ++i) {
    ASSERT_TRUE(ns->read(*qpair, static_cast<uint8_t*>(buffer.data()) + i * 4096, 0, 8,
                         &on_complete, &completions[i]));
  }
  // Every reconnect is refused from now on.
  target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                       verbs::sim::RefuseMode::reject);
  host_provider_->fail_next_wrs(1, verbs::WcStatus::general_error);
  ASSERT_TRUE(run_with_time(*qpair, [&] { return all_called(completions); }, 50))
      << "outstanding " << qpair->outstanding();
  for (int i = 0; i < 16; ++i) round({qpair.get()});
  for (uint32_t i = 0; i < kCommands; ++i) {
    EXPECT_EQ(completions[i].calls, 1) << "command " << i;
    EXPECT_TRUE(is_sq_deletion_abort(completions[i].status))
        << "command " << i << ": " << describe(completions[i].status);
  }
  EXPECT_FALSE(qpair->reconnecting());
  EXPECT_FALSE(qpair->connected());
  EXPECT_EQ(qpair->stats().reconnects, 0u);
  EXPECT_TRUE(refused(*qpair, Errc::bad_state, [&](host::IoCallback cb, void* ctx) {
    return ns->read(*qpair, buffer.data(), 0, 8, cb, ctx);
  }));
  target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                       verbs::sim::RefuseMode::none);
}

}  // namespace
}  // namespace nvmf::e2e
