// What the core survives (issue 14): a busy or stalled bdev holds up only its own namespace;
// Abort of commands waiting in the core, held by the transport before execute() or in the
// middle of their data transfer, within the Abort Command Limit; the teardown of a queue pair
// whose commands are stuck in a bdev ends after teardown_timeout_ms, and their late
// completions are dropped and counted.
#include <nlohmann/json.hpp>

#include <cstring>

#include "bdev/delay_bdev.h"
#include "fake_transport.h"
#include "target/config.h"

namespace nvmf::target::testing {
namespace {

namespace sc = spec::sc_generic;

spec::Sqe abort_sqe(uint16_t sqid, uint16_t cid) {
  spec::Sqe sqe = spec::make_sqe(spec::admin_opcode::abort, 0);
  sqe.cdw10 = uint32_t{sqid} | (uint32_t{cid} << 16);
  return sqe;
}

// NS 3 on a delay bdev over a malloc base of `queue_depth` I/Os per channel (so a stall fills
// it and later commands wait in the core), NS 1 malloc and NS 2 null from the fixture.
class ReliabilityTest : public TargetTest {
 protected:
  void SetUp() override {}  // each test sets opts_ first, then calls start()
  void start(uint32_t queue_depth = 2) {
    build();
    bdev::MallocBdevOpts base;
    base.name = "Base0";
    base.block_count = 1024;
    base.queue_depth_max = queue_depth;
    base.clock = &harness_.clock();
    auto made_base = bdev::create_malloc_bdev(base);
    ASSERT_TRUE(made_base.has_value());
    base_ = std::move(*made_base);
    bdev::DelayBdevOpts delay;
    delay.name = "Delay0";
    delay.clock = &harness_.clock();
    auto made = bdev::create_delay_bdev(delay, *base_);
    ASSERT_TRUE(made.has_value());
    delay_bdev_ = std::move(*made);
    delay_ = bdev::as_delay_bdev(*delay_bdev_);
    NamespaceOpts ns;
    ns.nsid = 3;
    ns.bdev = delay_bdev_.get();
    ASSERT_TRUE(target_->add_namespace(kSubsystemNqn, ns).has_value());
    admin_ = &bring_up(&cntlid_);
    io_ = &connect_io(cntlid_, 1);
  }
  void TearDown() override {
    if (delay_ != nullptr) delay_->release();
    TargetTest::TearDown();
    delay_bdev_.reset();
    base_.reset();
  }
  uint16_t write_stalled(uint64_t lba) {
    return io_->submit(io_sqe(spec::nvm_opcode::write, 3, lba, 1), pattern(512, 9));
  }

  std::unique_ptr<bdev::Bdev> base_;
  std::unique_ptr<bdev::Bdev> delay_bdev_;
  bdev::DelayBdev* delay_ = nullptr;
  FakeQueue* admin_ = nullptr;
  FakeQueue* io_ = nullptr;
  uint16_t cntlid_ = 0;
};

// Two commands fill the stalled bdev, two more wait for it in the core; a read of NS 1 on the
// same queue pair goes straight to its own bdev. (One wait list per queue pair held it behind
// the waiting ones: the stall spread to every namespace of the queue.)
TEST_F(ReliabilityTest, AFullStalledBdevHoldsUpOnlyItsOwnNamespace) {
  start();
  delay_->stall();
  std::vector<uint16_t> stuck;
  for (uint64_t lba = 0; lba < 4; ++lba) stuck.push_back(write_stalled(lba));
  harness_.poll_round();
  EXPECT_EQ(io_->qpair()->in_bdev(), 2u);
  EXPECT_EQ(io_->qpair()->waiting_for_bdev(), 2u);
  const Completion other = run(*io_, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 512);
  EXPECT_TRUE(other.ok());
  const Completion null = run(*io_, io_sqe(spec::nvm_opcode::read, 2, 0, 1), {}, 4096);
  EXPECT_TRUE(null.ok());
  for (uint16_t cid : stuck) EXPECT_FALSE(io_->completed(cid));
  EXPECT_EQ(target_->stats().bdev_busy_waits, 2u);
  delay_->release();
  for (uint16_t cid : stuck) EXPECT_TRUE(wait(*io_, cid).ok());
}

TEST_F(ReliabilityTest, IdentifyAdvertisesTheAbortLimitItEnforces) {
  start();
  const Completion identify = run(*admin_, spec::make_identify(0, spec::cns::controller), {}, 4096);
  ASSERT_TRUE(identify.ok());
  EXPECT_EQ(as<spec::IdentifyController>(identify.data).acl, kAbortsInFlightMax - 1);
  // Four Aborts on their way to reactor 1 (not polled yet); a fifth is over the limit.
  std::vector<uint16_t> aborts;
  for (unsigned i = 0; i < kAbortsInFlightMax; ++i) {
    aborts.push_back(admin_->submit(abort_sqe(1, static_cast<uint16_t>(0x100 + i))));
    EXPECT_EQ(admin_->request(aborts.back())->state, RequestState::cross_reactor);
  }
  const uint16_t over = admin_->submit(abort_sqe(1, 0x200));
  ASSERT_TRUE(admin_->completed(over));
  EXPECT_EQ(admin_->completion(over).status().sct, spec::sct::command_specific);
  EXPECT_EQ(admin_->completion(over).status().sc, spec::sc_command::abort_command_limit_exceeded);
  for (uint16_t cid : aborts) {
    const Completion done = wait(*admin_, cid);
    EXPECT_TRUE(done.ok());
    EXPECT_EQ(done.cqe.cdw0 & 1u, 1u);  // nothing with those CIDs: not aborted
  }
  // Answered ones no longer count.
  EXPECT_TRUE(run(*admin_, abort_sqe(1, 0x300)).ok());
}

// A command waiting in the core for a full (stalled) bdev is aborted; one inside is not.
TEST_F(ReliabilityTest, AbortTakesACommandWaitingForAStalledBdevButNotOneInsideIt) {
  start();
  delay_->stall();
  const uint16_t inside = write_stalled(0);
  write_stalled(1);
  const uint16_t waiting = write_stalled(2);
  harness_.poll_round();
  Completion done = run(*admin_, abort_sqe(1, waiting));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);
  EXPECT_EQ(io_->completion(waiting).status().sc, sc::abort_requested);
  done = run(*admin_, abort_sqe(1, inside));
  EXPECT_EQ(done.cqe.cdw0 & 1u, 1u);
  EXPECT_EQ(io_->abort_queries(), 1) << "the core found the waiting one itself";
  delay_->release();
  EXPECT_TRUE(wait(*io_, inside).ok());
}

// The transport still holds the command (waiting for a data buffer): answered at once.
TEST_F(ReliabilityTest, AbortOfACommandTheTransportHoldsAnswersItWithoutRunningIt) {
  start();
  const uint16_t held = io_->hold(io_sqe(spec::nvm_opcode::write, 1, 5, 1), false, pattern(512, 1));
  const Completion done = run(*admin_, abort_sqe(1, held));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);
  ASSERT_TRUE(io_->completed(held));
  EXPECT_EQ(io_->completion(held).status().sc, sc::abort_requested);
  EXPECT_EQ(malloc_->stats().ops_of(bdev::IoType::write), 0u) << "the aborted write ran";
}

// Its data transfer is under way (RDMA READs posted cannot be recalled): the Abort waits for
// the transfer's end, the command is answered Abort Requested instead of executed, then the
// Abort says "aborted".
TEST_F(ReliabilityTest, AbortOfACommandInTransferIsAnsweredWhenTheTransferEnds) {
  start();
  const uint16_t moving =
      io_->hold(io_sqe(spec::nvm_opcode::write, 1, 6, 1), true, pattern(512, 2));
  const uint16_t abort = admin_->submit(abort_sqe(1, moving));
  for (int round = 0; round < 10; ++round) harness_.poll_round();
  EXPECT_FALSE(admin_->completed(abort)) << "answered before the transfer ended";
  EXPECT_EQ(admin_->request(abort)->state, RequestState::cross_reactor);
  io_->end_transfer(moving);
  ASSERT_TRUE(io_->completed(moving));  // at once, before the Abort's answer
  EXPECT_FALSE(admin_->completed(abort));
  EXPECT_EQ(io_->completion(moving).status().sc, sc::abort_requested);
  const Completion done = wait(*admin_, abort);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);
  EXPECT_EQ(malloc_->stats().ops_of(bdev::IoType::write), 0u) << "the aborted write ran";
  // A transfer nobody aborted executes as usual.
  const uint16_t plain = io_->hold(io_sqe(spec::nvm_opcode::write, 1, 7, 1), true, pattern(512, 3));
  io_->end_transfer(plain);
  EXPECT_TRUE(wait(*io_, plain).ok());
}

// The queue goes while the Abort waits for the transfer: "not aborted" (the command never ran
// either: its queue is gone), and the admin queue is not left with an Abort in flight.
TEST_F(ReliabilityTest, AnAbortWaitingForATransferIsAnsweredWhenTheQueueGoes) {
  start();
  const uint16_t moving = io_->hold(io_sqe(spec::nvm_opcode::write, 1, 6, 1), true);
  const uint16_t abort = admin_->submit(abort_sqe(1, moving));
  for (int round = 0; round < 5; ++round) harness_.poll_round();
  ASSERT_TRUE(io_->destroy());
  const Completion done = wait(*admin_, abort);
  EXPECT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cdw0 & 1u, 1u);
  EXPECT_TRUE(admin_->destroy()) << "the answered Abort still counts as in flight";
}

// Commands stuck in a stalled bdev hold the teardown up for teardown_timeout_ms, no longer;
// the queue pair goes, and when the bdev lets go of them their completions are dropped (no
// response: the queue is gone), given back to the transport and counted.
TEST_F(ReliabilityTest, StuckCommandsStopHoldingTheTeardownAfterTheTimeout) {
  opts_.teardown_timeout_ms = 1000;
  start();
  delay_->stall();
  for (uint64_t lba = 0; lba < 2; ++lba) write_stalled(lba);
  harness_.poll_round();
  const size_t answered = io_->completion_count();
  EXPECT_FALSE(io_->destroy());
  harness_.clock().advance_ms(999);
  EXPECT_FALSE(io_->destroy());
  harness_.clock().advance_ms(1);
  EXPECT_TRUE(io_->destroy());
  EXPECT_EQ(target_->stats().abandoned_qpairs, 1u);
  // The controller lives on its admin queue; new I/O queues work beside the stuck commands.
  FakeQueue& again = connect_io(cntlid_, 1);
  EXPECT_TRUE(run(again, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 512).ok());
  EXPECT_EQ(io_->released(), 0);
  delay_->release();
  harness_.poll_until_idle();
  EXPECT_EQ(io_->released(), 2);
  EXPECT_EQ(io_->completion_count(), answered) << "a response for a queue that is gone";
  EXPECT_EQ(target_->stats().late_completions, 2u);
}

TEST_F(ReliabilityTest, AtShutdownStuckCommandsAreAbandonedAtOnceAndReleasedWithTheReactor) {
  start();
  delay_->stall();
  write_stalled(0);
  write_stalled(1);
  const uint16_t waiting = write_stalled(2);  // waits in the core: failed, never lent
  harness_.poll_round();
  EXPECT_TRUE(io_->destroy(StuckCommands::abandon));
  EXPECT_EQ(io_->completion(waiting).status().sc, sc::aborted_sq_deletion);
  // Closing reactor 1's channels completes the held I/O (aborted), which gives it back.
  ASSERT_TRUE(target_->release_reactor(harness_.reactor(1)).has_value());
  EXPECT_EQ(io_->released(), 2);
  EXPECT_EQ(target_->stats().late_completions, 2u);
}

TEST_F(ReliabilityTest, TeardownTimeoutZeroDoesNotWait) {
  opts_.teardown_timeout_ms = 0;
  start();
  delay_->stall();
  write_stalled(0);
  harness_.poll_round();
  EXPECT_TRUE(io_->destroy());
  delay_->release();
  harness_.poll_until_idle();
  EXPECT_EQ(io_->released(), 1);
}

// An admin command the transport holds (a Get Log Page waiting for its data buffer, or one in
// transfer) is found by an Abort of SQID 0 as an I/O command is.
TEST_F(ReliabilityTest, AbortOnTheAdminQueueAsksTheTransportToo) {
  start();
  const spec::Sqe log_page = spec::make_get_log_page(0, spec::log_page::smart_health, 512);
  const std::vector<uint8_t> buffer(512, 0);
  const uint16_t waiting = admin_->hold(log_page, false, buffer);
  Completion done = run(*admin_, abort_sqe(0, waiting));
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);
  EXPECT_EQ(admin_->completion(waiting).status().sc, sc::abort_requested);

  const uint16_t moving = admin_->hold(log_page, true, buffer);
  const uint16_t abort = admin_->submit(abort_sqe(0, moving));
  for (int round = 0; round < 5; ++round) harness_.poll_round();
  EXPECT_FALSE(admin_->completed(abort));
  admin_->end_transfer(moving);
  EXPECT_EQ(admin_->completion(moving).status().sc, sc::abort_requested);
  done = wait(*admin_, abort);
  EXPECT_EQ(done.cqe.cdw0 & 1u, 0u);
  EXPECT_EQ(run(*admin_, abort_sqe(0, 0x7777)).cqe.cdw0 & 1u, 1u);  // nobody has it
}

// A Dataset Management of two ranges whose queue goes while the first is inside the bdev:
// the second is never sent (the teardown waits only for what is inside already).
TEST_F(ReliabilityTest, ATearingDownQueueSendsNoFurtherDatasetManagementRanges) {
  start();
  delay_->stall();
  spec::DsmRange ranges[2] = {};
  ranges[0].starting_lba = 0;
  ranges[0].block_count = 8;
  ranges[1].starting_lba = 64;
  ranges[1].block_count = 8;
  spec::Sqe dsm = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, 3);
  dsm.cdw10 = 1;        // two ranges, 0's based
  dsm.cdw11 = 1u << 2;  // deallocate
  std::vector<uint8_t> data(sizeof(ranges));
  std::memcpy(data.data(), ranges, sizeof(ranges));
  io_->submit(dsm, data);
  harness_.poll_round();
  EXPECT_FALSE(io_->destroy());
  delay_->release();
  ASSERT_TRUE(harness_.poll_until([&] { return io_->destroy(); }));
  EXPECT_EQ(base_->stats().ops_of(bdev::IoType::unmap), 1u);
  EXPECT_EQ(target_->stats().abandoned_qpairs, 0u);
}

TEST(ReliabilityOptions, TeardownTimeoutHasARangeAndAConfigKey) {
  TargetOpts opts;
  EXPECT_EQ(opts.teardown_timeout_ms, 10000u);
  opts.teardown_timeout_ms = 3600 * 1000 + 1;
  EXPECT_FALSE(opts.validate().has_value());
  std::string message;
  auto parsed = parse_target_config(R"({"target": {"teardown_timeout_ms": 2500}})", &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  EXPECT_EQ(parsed->opts.teardown_timeout_ms, 2500u);
  const auto saved = nlohmann::json::parse(target_config_to_json(*parsed));
  EXPECT_EQ(saved["target"]["teardown_timeout_ms"], 2500);
  EXPECT_FALSE(
      parse_target_config(R"({"target": {"teardown_timeout_ms": 3600001}})", &message).has_value());
  EXPECT_NE(message.find("target.teardown_timeout_ms"), std::string::npos) << message;
  EXPECT_EQ(parse_target_config("{}", &message)->opts.teardown_timeout_ms, 10000u);
}

}  // namespace
}  // namespace nvmf::target::testing
