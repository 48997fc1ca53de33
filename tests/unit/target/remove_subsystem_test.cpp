// Removing a subsystem that hosts are connected to (ConnectedControllers::disconnect, what
// nvmf_tgt's subsystem_delete does) and the snapshot the control plane reads
// (Target::subsystems_info).
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class RemoveSubsystemTest : public TargetTest {};

TEST_F(RemoveSubsystemTest, DisconnectsEveryQueueThenTheControllerGoes) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  ASSERT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 1, 0, 1), pattern(kMallocBlockSize, 1)).ok());
  const uint64_t generation = target_->discovery_generation();

  // Refused by default while the controller exists; nothing changes.
  EXPECT_EQ(target_->remove_subsystem(kSubsystemNqn).error().code, Errc::busy);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 1u);

  ASSERT_TRUE(target_->remove_subsystem(kSubsystemNqn, ConnectedControllers::disconnect));
  EXPECT_GT(target_->discovery_generation(), generation);
  // The NQN is unknown at once; the controller lives until its queues are destroyed.
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
  EXPECT_EQ(target_->removed_controller_count(kSubsystemNqn), 1u);
  for (const SubsystemInfo& info : target_->subsystems_info()) EXPECT_NE(info.nqn, kSubsystemNqn);
  // Every queue pair, the admin queue included, is asked to disconnect, once.
  harness_.poll_until_idle();
  EXPECT_EQ(admin.disconnects(), 1);
  EXPECT_EQ(io.disconnects(), 1);
  // I/O still in the pipe finds no namespace.
  const Completion late = run(io, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, kMallocBlockSize);
  EXPECT_FALSE(late.ok());
  // A new admin Connect to the NQN is refused (unknown subsystem).
  FakeQueue& again = new_queue(0);
  const uint16_t cid =
      again.submit(connect_sqe(0, 32), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  EXPECT_FALSE(wait(again, cid).ok());

  ASSERT_TRUE(io.destroy());
  EXPECT_EQ(target_->removed_controller_count(kSubsystemNqn), 1u);
  ASSERT_TRUE(admin.destroy());
  EXPECT_EQ(target_->removed_controller_count(kSubsystemNqn), 0u);
  // The NQN may be used again.
  SubsystemOpts opts;
  opts.nqn = kSubsystemNqn;
  EXPECT_TRUE(target_->add_subsystem(opts));
}

TEST_F(RemoveSubsystemTest, SubsystemsInfoIsTheWholePicture) {
  ListenerAddress address;
  address.traddr = "10.0.0.7";
  address.trsvcid = "4421";
  ASSERT_TRUE(target_->add_listener(kSubsystemNqn, address));
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  connect_io(cntlid, 1, Host{}, 1, 64);

  const std::vector<SubsystemInfo> infos = target_->subsystems_info();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_TRUE(infos[0].discovery);
  const SubsystemInfo& info = infos[1];
  EXPECT_EQ(info.nqn, kSubsystemNqn);
  EXPECT_FALSE(info.discovery);
  ASSERT_EQ(info.namespaces.size(), 2u);
  EXPECT_EQ(info.namespaces[0].nsid, 1u);
  EXPECT_EQ(info.namespaces[0].bdev, malloc_->name());
  EXPECT_EQ(info.namespaces[0].uuid, malloc_->uuid());
  EXPECT_EQ(info.namespaces[1].bdev, null_->name());
  ASSERT_EQ(info.listeners.size(), 1u);
  EXPECT_EQ(info.listeners[0], address);
  ASSERT_EQ(info.controllers.size(), 1u);
  const ControllerInfo& controller = info.controllers[0];
  EXPECT_EQ(controller.cntlid, cntlid);
  EXPECT_EQ(controller.hostnqn, kHostNqn);
  EXPECT_EQ(controller.hostid, Host{}.id);
  ASSERT_EQ(controller.qpairs.size(), 2u);
  EXPECT_EQ(controller.qpairs[0].qid, 0u);
  EXPECT_EQ(controller.qpairs[0].depth, 32u);  // the admin Connect's SQSIZE + 1
  EXPECT_EQ(controller.qpairs[1].qid, 1u);
  EXPECT_EQ(controller.qpairs[1].depth, 64u);
}

}  // namespace
}  // namespace nvmf::target::testing
