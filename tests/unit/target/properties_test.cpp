// Property Get/Set: CAP, VS, CC, CSTS and the enable / ready / reset / shutdown handshakes.
#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

class PropertiesTest : public TargetTest {};

uint64_t value_of(const Completion& done) { return spec::property_get_value(done.cqe); }

TEST_F(PropertiesTest, CapReportsQueueDepthAndPageSize) {
  FakeQueue& admin = connect_admin(nullptr);
  const Completion done = property_get(admin, spec::property_offset::cap);
  ASSERT_TRUE(done.ok());
  const uint64_t cap = value_of(done);
  EXPECT_EQ(spec::cap_mqes(cap), 127u);  // max_queue_depth 128, 0's based
  EXPECT_TRUE(spec::cap_cqr(cap));
  EXPECT_EQ(spec::cap_to(cap), 1);
  EXPECT_EQ(spec::cap_css(cap), spec::cap_css_bit::nvm);
  EXPECT_EQ(spec::cap_mpsmin(cap), 0);
  EXPECT_EQ(spec::cap_mpsmax(cap), 0);
  EXPECT_EQ(spec::cap_dstrd(cap), 0);
  EXPECT_FALSE(spec::cap_nssrs(cap));
}

TEST_F(PropertiesTest, CapFollowsMaxQueueDepthOption) {
  TearDown();
  opts_.max_queue_depth = 64;
  build();
  FakeQueue& admin = connect_admin(nullptr);
  EXPECT_EQ(spec::cap_mqes(value_of(property_get(admin, spec::property_offset::cap))), 63u);
}

TEST_F(PropertiesTest, VersionIs13) {
  FakeQueue& admin = connect_admin(nullptr);
  const Completion done = property_get(admin, spec::property_offset::vs);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(value_of(done), spec::make_version(1, 3, 0));
}

TEST_F(PropertiesTest, EnableMakesControllerReady) {
  FakeQueue& admin = connect_admin(nullptr);
  EXPECT_EQ(value_of(property_get(admin, spec::property_offset::csts)), 0u);
  EXPECT_EQ(value_of(property_get(admin, spec::property_offset::cc)), 0u);
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, cc_enable_value()).ok());
  EXPECT_EQ(value_of(property_get(admin, spec::property_offset::cc)), cc_enable_value());
  const uint32_t csts =
      static_cast<uint32_t>(value_of(property_get(admin, spec::property_offset::csts)));
  EXPECT_TRUE(spec::csts_rdy(csts));
  EXPECT_FALSE(spec::csts_cfs(csts));
  EXPECT_EQ(admin.qpair()->controller()->state(), ControllerState::ready);
}

TEST_F(PropertiesTest, EnableWithWrongEntrySizesSetsFatalStatus) {
  FakeQueue& admin = connect_admin(nullptr);
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 5;  // 32-byte SQEs: not NVMe
  cc.iocqes = 4;
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, spec::encode_cc(cc)).ok());
  const uint32_t csts =
      static_cast<uint32_t>(value_of(property_get(admin, spec::property_offset::csts)));
  EXPECT_TRUE(spec::csts_cfs(csts));
  EXPECT_FALSE(spec::csts_rdy(csts));
  // Not ready: admin commands are refused.
  const Completion identify = run(admin, spec::make_identify(0, spec::cns::controller), {}, 4096);
  EXPECT_EQ(identify.status().sc, spec::sc_generic::command_sequence_error);
}

TEST_F(PropertiesTest, AdminCommandsBeforeEnableAreSequenceErrors) {
  FakeQueue& admin = connect_admin(nullptr);
  const Completion identify = run(admin, spec::make_identify(0, spec::cns::controller), {}, 4096);
  EXPECT_EQ(identify.status().sct, spec::sct::generic);
  EXPECT_EQ(identify.status().sc, spec::sc_generic::command_sequence_error);
  enable(admin);
  EXPECT_TRUE(run(admin, spec::make_identify(0, spec::cns::controller), {}, 4096).ok());
}

TEST_F(PropertiesTest, UnknownOffsetsAndSizesAreInvalidField) {
  FakeQueue& admin = connect_admin(nullptr);
  // Reserved offset.
  EXPECT_EQ(property_get(admin, 0x30).status().sc, spec::sc_generic::invalid_field);
  // CAP read with a 4-byte size.
  auto get_cap = spec::make_property_get(0, spec::property_offset::cap);
  get_cap.attrib = spec::property_attrib::size_4_bytes;
  EXPECT_EQ(run(admin, spec::to_sqe(get_cap)).status().sc, spec::sc_generic::invalid_field);
  // Read-only properties cannot be set.
  EXPECT_EQ(property_set(admin, spec::property_offset::vs, 0).status().sc,
            spec::sc_generic::invalid_field);
  EXPECT_EQ(property_set(admin, spec::property_offset::csts, 1).status().sc,
            spec::sc_generic::invalid_field);
  // NSSR is not implemented (CAP.NSSRS = 0).
  EXPECT_EQ(property_set(admin, spec::property_offset::nssr, spec::nssr_reset_value).status().sc,
            spec::sc_generic::invalid_field);
}

TEST_F(PropertiesTest, PropertiesOnIoQueueAreInvalidOpcode) {
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  const Completion get = property_get(io, spec::property_offset::cap);
  EXPECT_EQ(get.status().sct, spec::sct::generic);
  EXPECT_EQ(get.status().sc, spec::sc_generic::invalid_opcode);
  EXPECT_EQ(property_set(io, spec::property_offset::cc, 0).status().sc,
            spec::sc_generic::invalid_opcode);
}

TEST_F(PropertiesTest, ResetDisconnectsIoQueuesAndClearsStatus) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, 0).ok());
  harness_.poll_until_idle();
  EXPECT_EQ(io.disconnects(), 1);
  EXPECT_EQ(admin.disconnects(), 0);
  EXPECT_EQ(value_of(property_get(admin, spec::property_offset::csts)), 0u);
  // I/O on the disabled controller is refused until the host tears the queue down.
  const Completion read = run(io, io_sqe(spec::nvm_opcode::read, 1, 0, 1), {}, 512);
  EXPECT_EQ(read.status().sc, spec::sc_generic::command_sequence_error);
  // The controller can be enabled again.
  enable(admin);
}

TEST_F(PropertiesTest, ShutdownCompletesAndStopsIo) {
  uint16_t cntlid = 0;
  FakeQueue& admin = bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;
  cc.iocqes = 4;
  cc.shn = spec::shutdown_notification::normal;
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, spec::encode_cc(cc)).ok());
  const uint32_t csts =
      static_cast<uint32_t>(value_of(property_get(admin, spec::property_offset::csts)));
  EXPECT_EQ(spec::csts_shst(csts), spec::shutdown_status::complete);
  EXPECT_FALSE(spec::csts_rdy(csts));
  harness_.poll_until_idle();
  EXPECT_EQ(io.disconnects(), 1);
  const Completion write = run(io, io_sqe(spec::nvm_opcode::write, 1, 0, 1), pattern(512, 1));
  EXPECT_EQ(write.status().sc, spec::sc_generic::command_sequence_error);
  EXPECT_EQ(admin.qpair()->controller()->state(), ControllerState::shutdown);
}

// Found by tests/fuzz (fabrics_connect): an enable refused for its entry sizes leaves the
// controller failed, and a shutdown notification then took the transition failed ->
// shutdown, which the state machine did not list (an assert in builds that keep them; a
// silent unchecked transition otherwise).
TEST_F(PropertiesTest, ShutdownOfAFailedControllerCompletes) {
  FakeQueue& admin = connect_admin(nullptr);
  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 8;  // 256-byte SQEs: refused, CSTS.CFS
  cc.iocqes = 2;
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, spec::encode_cc(cc)).ok());
  ASSERT_EQ(admin.qpair()->controller()->state(), ControllerState::failed);
  cc.shn = spec::shutdown_notification::abrupt;
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, spec::encode_cc(cc)).ok());
  const uint32_t csts =
      static_cast<uint32_t>(value_of(property_get(admin, spec::property_offset::csts)));
  EXPECT_EQ(spec::csts_shst(csts), spec::shutdown_status::complete);
  EXPECT_FALSE(spec::csts_rdy(csts));
  EXPECT_EQ(admin.qpair()->controller()->state(), ControllerState::shutdown);
  // Disabled, then enabled with the right sizes, it serves the host again.
  ASSERT_TRUE(property_set(admin, spec::property_offset::cc, 0).ok());
  EXPECT_EQ(admin.qpair()->controller()->state(), ControllerState::disabled);
  enable(admin);
  EXPECT_EQ(admin.qpair()->controller()->state(), ControllerState::ready);
}

}  // namespace
}  // namespace nvmf::target::testing
