// Controller reset (ControllerOpts::controller_recovery): the admin queue is lost (its queue
// pair fails on the host's device, or the whole target goes away and comes back), the admin
// thread reconnects the controller after reconnect_delay_ms, every I/O qpair follows it to the
// new controller ID and resends what it held, nothing is lost; without a target the reset
// gives up at ctrl_loss_timeout_ms and each held command fails once. Namespace lists are read
// again at a reset and on a Namespace Attribute Changed notice, keeping unchanged Namespace
// objects.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "host_fixture.h"
#include "log_capture.h"

namespace nvmf::e2e {
namespace {

constexpr uint32_t kBlock = 512;
constexpr uint32_t kBlocksPerIo = 9;  // 4.5 KiB: above the in-capsule size, read by RDMA
constexpr uint32_t kCommands = 16;
constexpr size_t kIoBytes = size_t{kBlocksPerIo} * kBlock;

class HostResetTest : public HostFixture {
 protected:
  static host::ControllerOpts reset_opts() { return recovery_opts(2, 3000); }

  // Connects kNqn512 and one I/O qpair; remembers the admin queue's QP number on the host.
  void open(const host::ControllerOpts& opts = reset_opts()) {
    const auto before = host_provider_->qp_nums();
    controller_ = connect(kNqn512, opts);
    ASSERT_NE(controller_, nullptr);
    const auto after = host_provider_->qp_nums();
    std::vector<uint32_t> added;
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                        std::back_inserter(added));
    ASSERT_EQ(added.size(), 1u);
    admin_qp_ = added.front();
    qpair_ = alloc_qpair(*controller_);
    ASSERT_NE(qpair_, nullptr);
    ns_ = controller_->ns(1);
    ASSERT_NE(ns_, nullptr);
    data_ = std::make_unique<DmaBuffer>(*host_, kIoBytes * kCommands);
    ASSERT_TRUE(*data_);
  }

  // kCommands writes of `seed`'s pattern, submitted (not yet sent: the qpair is not polled).
  void submit_writes(uint32_t seed) {
    fill_pattern(data_->data(), kIoBytes * kCommands, seed);
    completions_.assign(kCommands, Completion{});
    for (uint32_t i = 0; i < kCommands; ++i) {
      ASSERT_TRUE(ns_->write(*qpair_, data_->data() + i * kIoBytes, uint64_t{i} * kBlocksPerIo,
                             kBlocksPerIo, &on_complete, &completions_[i]));
    }
  }

  // A QP fatal event on the admin queue's QP, polled by the admin thread alone until the
  // controller sees it (the queue reads the device's events every 256 polls): the I/O qpair,
  // not polled meanwhile, still holds what was submitted to it.
  void lose_admin_queue() {
    verbs::AsyncEvent event;
    event.type = verbs::AsyncEventType::qp_fatal;
    event.qp_num = admin_qp_;
    ASSERT_TRUE(host_provider_->inject_async_event(event));
    for (int i = 0; i < 1000 && controller_->connected(); ++i) {
      controller_->process_admin_completions();
      harness_.poll_round();
    }
    ASSERT_FALSE(controller_->connected());
  }

  // Rounds of admin thread, qpair and target with the clock moving `step_ms` each.
  template <typename Done>
  bool run_with_time(Done done, uint64_t step_ms = 20, int max_rounds = 20000) {
    for (int i = 0; i < max_rounds && !done(); ++i) {
      controller_->process_admin_completions();
      if (qpair_) qpair_->process_completions();
      harness_.poll_round();
      harness_.clock().advance_ms(step_ms);
    }
    return done();
  }

  ::testing::AssertionResult each_once_with(bool (*expected)(const spec::Status&)) const {
    for (uint32_t i = 0; i < kCommands; ++i) {
      if (completions_[i].calls != 1 || !expected(completions_[i].status)) {
        return ::testing::AssertionFailure() << "command " << i << ": " << completions_[i].calls
                                             << " calls, " << describe(completions_[i].status);
      }
    }
    return ::testing::AssertionSuccess();
  }
  static bool success(const spec::Status& status) { return status.is_success(); }

  ::testing::AssertionResult reads_back(uint32_t seed) {
    DmaBuffer back(*host_, kIoBytes * kCommands);
    if (!back) return ::testing::AssertionFailure() << "no DMA memory";
    for (uint32_t i = 0; i < kCommands; ++i) {
      auto read = run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
        return ns_->read(*qpair_, back.data() + i * kIoBytes, uint64_t{i} * kBlocksPerIo,
                         kBlocksPerIo, cb, ctx);
      });
      if (!read) return read << " (read " << i << ")";
    }
    return has_pattern(back.data(), kIoBytes * kCommands, seed);
  }

  void TearDown() override {
    qpair_.reset();
    if (controller_) {
      EXPECT_TRUE(controller_->disconnect());
    }
    controller_.reset();
    data_.reset();
    HostFixture::TearDown();
  }

  std::unique_ptr<host::Controller> controller_;
  std::unique_ptr<host::IoQpair> qpair_;
  host::Namespace* ns_ = nullptr;
  std::unique_ptr<DmaBuffer> data_;
  std::vector<Completion> completions_;
  uint32_t admin_qp_ = 0;
};

TEST_F(HostResetTest, LostAdminQueueResetsTheControllerAndTheIoQueueFollowsLosingNothing) {
  ASSERT_NO_FATAL_FAILURE(open());
  const uint16_t old_cntlid = controller_->data().cntlid;
  ASSERT_NO_FATAL_FAILURE(submit_writes(21));
  test::LogCapture log;
  ASSERT_NO_FATAL_FAILURE(lose_admin_queue());  // the I/O queue, still up, resets at its poll
  EXPECT_TRUE(controller_->recovering());
  ASSERT_TRUE(run_with_time([&] {
    return all_called(completions_) && controller_->connected() && qpair_->connected();
  })) << "connected " << controller_->connected() << ", recovering " << controller_->recovering()
      << ", qpair reconnecting " << qpair_->reconnecting();
  EXPECT_TRUE(each_once_with(success));
  EXPECT_FALSE(controller_->recovering());
  EXPECT_NE(controller_->data().cntlid, old_cntlid) << "the I/O queue joined the old controller";
  const host::ControllerStats stats = controller_->stats();
  EXPECT_EQ(stats.resets, 1u);
  EXPECT_EQ(stats.reset_attempts_failed, 0u);
  EXPECT_EQ(qpair_->stats().reconnects, 1u);
  EXPECT_GT(qpair_->stats().resubmitted, 0u);
  EXPECT_EQ(controller_->ns(1), ns_) << "an unchanged namespace keeps its object";
  EXPECT_EQ(target_->controller_count(kNqn512), 1u) << "the old controller stayed";
  EXPECT_TRUE(log.contains("resetting the controller in 0.2 seconds"));
  EXPECT_TRUE(log.contains("controller reset (attempt 1)"));
  EXPECT_TRUE(reads_back(21));
  // The reset controller serves the next I/O queue too.
  auto second = alloc_qpair(*controller_);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(run_io(*second, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*second, data_->data(), 0, 8, cb, ctx);
  }));
}

TEST_F(HostResetTest, TargetGoneAndBackGivesANewControllerAndEveryWriteLands) {
  ASSERT_NO_FATAL_FAILURE(open());
  ASSERT_NO_FATAL_FAILURE(submit_writes(22));
  qpair_->process_completions();  // the writes go out
  // The target's transport goes away with every connection (its controllers with them) and a
  // new one listens on the same address, as nvmf_tgt restarted.
  transport_->begin_shutdown();
  for (int i = 0; i < kMaxRounds && !transport_->drained(); ++i) harness_.poll_round();
  ASSERT_TRUE(transport_->drained());
  harness_.poll_until_idle();
  transport_.reset();
  EXPECT_EQ(target_->controller_count(kNqn512), 0u);
  auto transport = transport_rdma::RdmaTargetTransport::create(
      *target_provider_, *target_, {&harness_.reactor(0), &harness_.reactor(1)},
      harness_transport_opts(transport_opts()));
  ASSERT_TRUE(transport);
  transport_ = std::move(*transport);
  ASSERT_TRUE(transport_->listen(kHostTargetAddress, kHostTargetPort));

  ASSERT_TRUE(run_with_time([&] {
    return all_called(completions_) && controller_->connected() && qpair_->connected();
  })) << "connected " << controller_->connected() << ", recovering " << controller_->recovering();
  EXPECT_TRUE(each_once_with(success));
  EXPECT_EQ(controller_->stats().resets, 1u);
  EXPECT_EQ(target_->controller_count(kNqn512), 1u);
  EXPECT_TRUE(reads_back(22));
}

TEST_F(HostResetTest, WithoutControllerRecoveryALostAdminQueueStaysLost) {
  host::ControllerOpts opts = reset_opts();
  opts.controller_recovery = false;
  ASSERT_NO_FATAL_FAILURE(open(opts));
  test::LogCapture log;
  ASSERT_NO_FATAL_FAILURE(lose_admin_queue());
  run_with_time([] { return false; }, 5, 1000);  // 5 s: 25 reconnect delays
  EXPECT_FALSE(controller_->connected());
  EXPECT_FALSE(controller_->recovering());
  EXPECT_EQ(controller_->stats().resets, 0u);
  EXPECT_EQ(controller_->stats().reset_attempts_failed, 0u);
  EXPECT_TRUE(log.contains("admin queue lost (controller 1)"));
  EXPECT_FALSE(log.contains("resetting the controller"));
}

TEST_F(HostResetTest, NoTargetToResetToGivesUpAtTheLossTimeoutAndHeldIoFailsOnce) {
  ASSERT_NO_FATAL_FAILURE(open());
  ASSERT_NO_FATAL_FAILURE(submit_writes(23));
  target_provider_->refuse_connections(kHostTargetAddress, kHostTargetPort,
                                       verbs::sim::RefuseMode::reject);
  test::LogCapture log;
  ASSERT_NO_FATAL_FAILURE(lose_admin_queue());
  ASSERT_TRUE(run_with_time([&] { return all_called(completions_); }, 50))
      << "recovering " << controller_->recovering() << ", outstanding " << qpair_->outstanding();
  for (int i = 0; i < 16; ++i) round({qpair_.get()});
  EXPECT_TRUE(each_once_with(is_sq_deletion_abort));
  EXPECT_FALSE(controller_->connected());
  EXPECT_FALSE(controller_->recovering());
  EXPECT_FALSE(qpair_->reconnecting());
  EXPECT_EQ(controller_->stats().resets, 0u);
  EXPECT_GE(controller_->stats().reset_attempts_failed, 10u);  // 3 s of 0.2 s delays
  EXPECT_TRUE(log.contains("controller loss timeout (3000 ms) reached: giving up"));
  EXPECT_TRUE(refused(*qpair_, Errc::bad_state, [&](host::IoCallback cb, void* ctx) {
    return ns_->read(*qpair_, data_->data(), 0, 8, cb, ctx);
  }));
}

TEST_F(HostResetTest, NamespaceAttributeChangedRescansAndKeepsUnchangedNamespaces) {
  ASSERT_NO_FATAL_FAILURE(open());
  auto extra = make_bdev("MallocExtra", 4096, 256);
  ASSERT_NE(extra, nullptr);
  target::NamespaceOpts ns_opts;
  ns_opts.bdev = extra.get();
  auto added = target_->add_namespace(kNqn512, ns_opts);
  ASSERT_TRUE(added);
  ASSERT_TRUE(run_with_time([&] { return controller_->ns(*added) != nullptr; }, 0, 2000))
      << "rescans " << controller_->stats().namespace_rescans;
  EXPECT_EQ(controller_->active_namespaces(), (std::vector<uint32_t>{1, *added}));
  EXPECT_EQ(controller_->ns(1), ns_);
  host::Namespace* second = controller_->ns(*added);
  EXPECT_EQ(second->block_size(), 4096u);
  EXPECT_EQ(second->block_count(), 256u);
  EXPECT_TRUE(run_io(*qpair_, [&](host::IoCallback cb, void* ctx) {
    return second->read(*qpair_, data_->data(), 0, 1, cb, ctx);
  }));

  ASSERT_TRUE(target_->remove_namespace(kNqn512, *added));
  ASSERT_TRUE(run_with_time([&] { return controller_->ns(*added) == nullptr; }, 0, 2000));
  EXPECT_EQ(controller_->active_namespaces(), (std::vector<uint32_t>{1}));
  EXPECT_EQ(controller_->stats().namespace_rescans, 2u);
  EXPECT_EQ(second->block_size(), 4096u) << "a removed namespace's object stays readable";
  EXPECT_EQ(controller_->ns(1), ns_);
}

}  // namespace
}  // namespace nvmf::e2e
