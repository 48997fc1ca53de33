// Whole lifecycles: host bring-up to shutdown, keep-alive, SQ head, Disconnect, queue and
// controller teardown, request state walk, options and subsystem API.
#include <nlohmann/json.hpp>

#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class LifecycleTest : public TargetTest {};

TEST_F(LifecycleTest, FullBringUpAndShutdown) {
  // Admin Connect on reactor 0.
  uint16_t cntlid = 0;
  FakeQueue& admin = connect_admin(&cntlid);
  ASSERT_NE(cntlid, 0);
  // CAP and VS.
  const uint64_t cap =
      spec::property_get_value(property_get(admin, spec::property_offset::cap).cqe);
  EXPECT_EQ(spec::cap_mqes(cap) + 1, 128u);
  EXPECT_EQ(spec::property_get_value(property_get(admin, spec::property_offset::vs).cqe),
            spec::make_version(1, 3, 0));
  // CC.EN = 1 -> CSTS.RDY = 1.
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, cc_enable_value()).ok());
  ASSERT_TRUE(spec::csts_rdy(static_cast<uint32_t>(
      spec::property_get_value(property_get(admin, spec::property_offset::csts).cqe))));
  // Identify controller and namespaces.
  const auto id = as<spec::IdentifyController>(
      run(admin, spec::make_identify(0, spec::cns::controller), {}, 4096).data);
  EXPECT_EQ(id.cntlid, cntlid);
  const auto list = as<spec::ActiveNamespaceList>(
      run(admin, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096).data);
  ASSERT_EQ(list.nsid[0], 1u);
  const auto ns = as<spec::IdentifyNamespace>(
      run(admin, spec::make_identify(0, spec::cns::namespace_data, 1), {}, 4096).data);
  const uint64_t block_size = spec::namespace_block_size(ns);
  ASSERT_EQ(block_size, kMallocBlockSize);
  // Number of Queues.
  const Completion queues =
      run(admin, spec::make_set_features(0, spec::feature::number_of_queues,
                                         spec::encode_number_of_queues(2, 2)));
  ASSERT_TRUE(queues.ok());
  EXPECT_EQ(spec::number_of_queues_sq_count(queues.cqe.cdw0), 2u);
  // AER and Keep Alive as the host sends them.
  const uint16_t aer = admin.submit(spec::make_sqe(spec::admin_opcode::async_event_request, 0));
  EXPECT_TRUE(run(admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0)).ok());
  // I/O queues on the other reactor.
  FakeQueue& io1 = connect_io(cntlid, 1);
  FakeQueue& io2 = connect_io(cntlid, 2);
  EXPECT_EQ(&io1.reactor(), &harness_.reactor(1));
  // Data, byte for byte, through both queues.
  const std::vector<uint8_t> data = pattern(8 * block_size, 42);
  ASSERT_TRUE(run(io1, io_sqe(spec::nvm_opcode::write, 1, 512, 8), data).ok());
  const Completion read =
      run(io2, io_sqe(spec::nvm_opcode::read, 1, 512, 8), {}, 8 * kMallocBlockSize, 3);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.data, data);
  // Flush, Write Zeroes, Dataset Management.
  EXPECT_TRUE(run(io1, spec::make_sqe(spec::nvm_opcode::flush, 0, 1)).ok());
  EXPECT_TRUE(run(io1, io_sqe(spec::nvm_opcode::write_zeroes, 1, 512, 2)).ok());
  spec::Sqe dsm = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, 1);
  dsm.cdw11 = 1u << 2;
  spec::DsmRange range{0, 2, 518};
  std::vector<uint8_t> ranges(sizeof(range));
  std::memcpy(ranges.data(), &range, sizeof(range));
  EXPECT_TRUE(run(io2, dsm, ranges).ok());
  const Completion after =
      run(io1, io_sqe(spec::nvm_opcode::read, 1, 512, 8), {}, 8 * kMallocBlockSize);
  for (size_t block = 0; block < 8; ++block) {
    const bool zero = block < 2 || block >= 6;
    const auto begin = after.data.begin() + block * block_size;
    if (zero) {
      EXPECT_TRUE(std::all_of(begin, begin + block_size, [](uint8_t b) { return b == 0; }))
          << block;
    } else {
      EXPECT_TRUE(std::equal(begin, begin + block_size, data.begin() + block * block_size))
          << block;
    }
  }
  // Shutdown via CC.SHN: SHST complete, I/O queues asked to go.
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;
  cc.iocqes = 4;
  cc.shn = spec::shutdown_notification::normal;
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, spec::encode_cc(cc)).ok());
  EXPECT_EQ(spec::csts_shst(static_cast<uint32_t>(
                spec::property_get_value(property_get(admin, spec::property_offset::csts).cqe))),
            spec::shutdown_status::complete);
  harness_.poll_until_idle();
  EXPECT_EQ(io1.disconnects(), 1);
  EXPECT_EQ(io2.disconnects(), 1);
  // The transport tears everything down; the held AER comes back aborted.
  EXPECT_TRUE(io1.destroy());
  EXPECT_TRUE(io2.destroy());
  EXPECT_TRUE(admin.destroy());
  EXPECT_EQ(admin.completion(aer).status().sc, spec::sc_generic::aborted_sq_deletion);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
}

TEST_F(LifecycleTest, KeepAliveRestartsTheTimer) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  for (int i = 0; i < 3; ++i) {
    harness_.advance_ms(kAdminKatoMs - 100);
    ASSERT_TRUE(run(admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0)).ok());
  }
  EXPECT_EQ(admin.disconnects(), 0);
  EXPECT_EQ(io.disconnects(), 0);
  // Other admin commands do not count as keep-alives (no Traffic Based Keep Alive).
  harness_.advance_ms(kAdminKatoMs - 100);
  ASSERT_TRUE(run(admin, spec::make_identify(0, spec::cns::controller), {}, 4096).ok());
  harness_.advance_ms(200);
  EXPECT_EQ(admin.disconnects(), 1);
}

TEST_F(LifecycleTest, KeepAliveTimeoutTearsDownEveryQueue) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io1 = connect_io(cntlid, 1);
  FakeQueue& io2 = connect_io(cntlid, 2, Host{}, 0);  // an I/O queue on the admin reactor too
  harness_.advance_ms(kAdminKatoMs - 1);
  EXPECT_EQ(admin.disconnects(), 0);
  harness_.advance_ms(2);
  // Each queue is told once, on its own reactor.
  EXPECT_EQ(admin.disconnects(), 1);
  EXPECT_EQ(io1.disconnects(), 1);
  EXPECT_EQ(io2.disconnects(), 1);
  // A host still reading properties sees why.
  EXPECT_TRUE(spec::csts_cfs(static_cast<uint32_t>(
      spec::property_get_value(property_get(admin, spec::property_offset::csts).cqe))));
  EXPECT_EQ(run(io1, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 512).status().sc,
            spec::sc_generic::command_sequence_error);
  harness_.advance_ms(kAdminKatoMs * 3);
  EXPECT_EQ(admin.disconnects(), 1);  // not repeated
  // After the transport destroys the queues the controller is gone.
  EXPECT_TRUE(io1.destroy());
  EXPECT_TRUE(admin.destroy());
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 1u);  // io2 still holds it
  EXPECT_TRUE(io2.destroy());
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
}

TEST_F(LifecycleTest, KatoZeroDisablesTheTimer) {
  FakeQueue& admin = connect_admin(nullptr, kSubsystemNqn, Host{}, 0);
  enable(admin);
  harness_.advance_ms(10 * 60 * 1000);
  EXPECT_EQ(admin.disconnects(), 0);
  EXPECT_EQ(run(admin, spec::make_get_features(0, spec::feature::keep_alive_timer)).cqe.cdw0, 0u);
  // Set Features turns it on.
  ASSERT_TRUE(run(admin, spec::make_set_features(0, spec::feature::keep_alive_timer, 3000)).ok());
  harness_.advance_ms(3001);
  EXPECT_EQ(admin.disconnects(), 1);
}

TEST_F(LifecycleTest, SqHeadAdvancesAndWraps) {
  FakeQueue& admin = connect_admin(nullptr, kSubsystemNqn, Host{}, kAdminKatoMs, 8);
  enable(admin);  // Connect, Property Set, Property Get: head 3
  std::vector<uint16_t> heads;
  for (int i = 0; i < 10; ++i)
    heads.push_back(run(admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0)).cqe.sqhd);
  EXPECT_EQ(heads, (std::vector<uint16_t>{4, 5, 6, 7, 0, 1, 2, 3, 4, 5}));
  // Failed commands consume their entry too.
  EXPECT_EQ(run(admin, spec::make_sqe(0xC1, 0)).cqe.sqhd, 6);
}

TEST_F(LifecycleTest, SqFlowControlDisabledReportsFfff) {
  FakeQueue& queue = new_queue(0, 32);
  const Completion done =
      run(queue, connect_sqe(0, 32, 0, spec::connect_cattr::disable_sq_flow_control),
          connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.sqhd, 0xFFFF);
  EXPECT_TRUE(queue.qpair()->sq_flow_control_disabled());
  EXPECT_EQ(property_get(queue, spec::property_offset::vs).cqe.sqhd, 0xFFFF);
}

TEST_F(LifecycleTest, DisconnectCommandTearsDownAnIoQueue) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  spec::DisconnectCommand command{};
  command.opcode = spec::fabrics_opcode;
  command.fctype = spec::fctype::disconnect;
  const uint16_t cid = io.submit(spec::to_sqe(command));
  ASSERT_TRUE(io.completed(cid));
  EXPECT_TRUE(io.completion(cid).ok());
  EXPECT_EQ(io.disconnects(), 0);  // answered first, torn down at the next poll
  harness_.poll_until_idle();
  EXPECT_EQ(io.disconnects(), 1);
  EXPECT_TRUE(io.destroy());
  // The QID is free again.
  connect_io(cntlid, 1);
  // On the admin queue Disconnect is the wrong queue type.
  const Completion wrong = run(admin, spec::to_sqe(command));
  EXPECT_EQ(wrong.status().sct, spec::sct::command_specific);
  EXPECT_EQ(wrong.status().sc, spec::sc_fabrics::invalid_queue_type);
  EXPECT_EQ(admin.disconnects(), 0);
}

TEST_F(LifecycleTest, DestroyingTheAdminQueueEndsTheAssociation) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  EXPECT_TRUE(admin.destroy());
  harness_.poll_until_idle();
  EXPECT_EQ(io.disconnects(), 1);
  // No new queue may join the orphaned controller.
  FakeQueue& late = new_queue(1);
  EXPECT_FALSE(connect_io_expect_failure(late, cntlid, 2).ok());
  EXPECT_TRUE(io.destroy());
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
}

TEST_F(LifecycleTest, RequestStatesAlongTheWay) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  // executing -> need_bdev -> bdev_submitted -> bdev_done -> complete -> free
  const uint16_t cid = io.submit(io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 512);
  Request* req = io.request(cid);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->state, RequestState::bdev_submitted);
  EXPECT_EQ(io.qpair()->outstanding(), 1u);
  wait(io, cid);
  EXPECT_EQ(req->state, RequestState::free);
  EXPECT_EQ(io.qpair()->outstanding(), 0u);
  // held_event
  const uint16_t aer = admin.submit(spec::make_sqe(spec::admin_opcode::async_event_request, 0));
  EXPECT_EQ(admin.request(aer)->state, RequestState::held_event);
  // cross_reactor: an Abort on its way to reactor 1 and back.
  spec::Sqe abort = spec::make_sqe(spec::admin_opcode::abort, 0);
  abort.cdw10 = 1u | (0x1234u << 16);
  const uint16_t abort_cid = admin.submit(abort);
  EXPECT_EQ(admin.request(abort_cid)->state, RequestState::cross_reactor);
  EXPECT_EQ(wait(admin, abort_cid).cqe.cdw0 & 1u, 1u);
  EXPECT_STREQ(request_state_name(RequestState::need_bdev), "need_bdev");
}

TEST(TargetHelpers, XferDirectionFromOpcodeOrFctype) {
  EXPECT_EQ(xfer_direction(spec::make_sqe(spec::nvm_opcode::write, 1)),
            XferDirection::host_to_controller);
  EXPECT_EQ(xfer_direction(spec::make_sqe(spec::nvm_opcode::read, 1)),
            XferDirection::controller_to_host);
  EXPECT_EQ(xfer_direction(spec::make_sqe(spec::nvm_opcode::flush, 1)), XferDirection::none);
  EXPECT_EQ(xfer_direction(connect_sqe(0, 32)), XferDirection::host_to_controller);
  EXPECT_EQ(xfer_direction(spec::to_sqe(spec::make_property_get(0, 0))), XferDirection::none);
  EXPECT_EQ(xfer_direction(spec::make_identify(0, 1)), XferDirection::controller_to_host);
}

TEST(TargetHelpers, OptionsValidateAndDumpAsJson) {
  TargetOpts opts;
  EXPECT_TRUE(opts.validate().has_value());
  EXPECT_EQ(opts.mdts(), 8);  // 1 MiB of 4 KiB pages, the Linux target's MDTS
  const auto json = nlohmann::json::parse(opts.to_json());
  EXPECT_EQ(json["max_queue_depth"], 128);
  EXPECT_EQ(json["max_admin_queue_depth"], 128);
  EXPECT_EQ(json["max_qpairs_per_ctrlr"], 128);
  EXPECT_EQ(json["in_capsule_data_size"], 4096);
  EXPECT_EQ(json["max_io_size"], 1048576);
  EXPECT_EQ(json["discovery_keep_alive_timeout_ms"], 120000);
  TargetOpts bad = opts;
  bad.max_io_size = 3 * 4096;  // not a power of two of pages
  EXPECT_FALSE(bad.validate().has_value());
  EXPECT_FALSE(Target::create(bad).has_value());
  bad = opts;
  bad.in_capsule_data_size = 100;
  EXPECT_EQ(bad.validate().error().code, Errc::invalid_argument);
  bad = opts;
  bad.max_qpairs_per_ctrlr = 1;
  EXPECT_FALSE(bad.validate().has_value());
}

TEST_F(LifecycleTest, SubsystemApiErrors) {
  SubsystemOpts opts;
  opts.nqn = kSubsystemNqn;
  EXPECT_EQ(target_->add_subsystem(opts).error().code, Errc::already_exists);
  opts.nqn = std::string(spec::discovery_nqn);
  EXPECT_EQ(target_->add_subsystem(opts).error().code, Errc::already_exists);
  opts.nqn = "bogus\tname";  // a control character: not even nvmet takes it
  EXPECT_EQ(target_->add_subsystem(opts).error().code, Errc::invalid_argument);
  opts.nqn = std::string(224, 'x');  // longer than an NQN can be
  EXPECT_EQ(target_->add_subsystem(opts).error().code, Errc::invalid_argument);
  opts.nqn = "nqn.2026-01.io.example:long-serial";
  opts.serial_number = std::string(21, 'x');
  EXPECT_EQ(target_->add_subsystem(opts).error().code, Errc::invalid_argument);
  EXPECT_EQ(target_->remove_subsystem(spec::discovery_nqn).error().code, Errc::permission_denied);
  EXPECT_EQ(target_->remove_subsystem("nqn.2026-01.io.example:none").error().code, Errc::not_found);
  NamespaceOpts ns;
  ns.bdev = malloc_.get();
  ns.nsid = 1;
  EXPECT_EQ(target_->add_namespace(kSubsystemNqn, ns).error().code, Errc::already_exists);
  ns.nsid = 9;
  EXPECT_EQ(target_->add_namespace(kSubsystemNqn, ns).error().code, Errc::invalid_argument);
  ns.nsid = 0;  // lowest free: 3
  EXPECT_EQ(*target_->add_namespace(kSubsystemNqn, ns), 3u);
  EXPECT_EQ(target_->remove_namespace(kSubsystemNqn, 7).error().code, Errc::not_found);
  // A subsystem with a controller cannot go.
  connect_admin(nullptr);
  EXPECT_EQ(target_->remove_subsystem(kSubsystemNqn).error().code, Errc::busy);
}

}  // namespace
}  // namespace nvmf::target::testing
