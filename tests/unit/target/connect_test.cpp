// Connect: the dynamic controller model and every bad Connect with the status (and IATTR/IPO)
// the spec names.
#include <cstddef>

#include "fake_transport.h"

namespace nvmf::target::testing {
namespace {

constexpr uint16_t kIpoQid = offsetof(spec::ConnectCommand, qid);
constexpr uint16_t kIpoSqsize = offsetof(spec::ConnectCommand, sqsize);
constexpr uint16_t kIpoCntlid = offsetof(spec::ConnectData, cntlid);
constexpr uint16_t kIpoSubnqn = offsetof(spec::ConnectData, subnqn);
constexpr uint16_t kIpoHostnqn = offsetof(spec::ConnectData, hostnqn);

void expect_invalid_parameter(const Completion& done, bool in_data, uint16_t ipo) {
  EXPECT_EQ(done.status().sct, spec::sct::command_specific);
  EXPECT_EQ(done.status().sc, spec::sc_fabrics::connect_invalid_parameters);
  EXPECT_TRUE(done.status().dnr);
  EXPECT_EQ(spec::connect_invalid_in_data(done.cqe), in_data);
  EXPECT_EQ(spec::connect_invalid_offset(done.cqe), ipo);
  // Byte layout as SPDK's spdk_nvmf_fabric_connect_rsp: IPO at bytes 0..1, IATTR at byte 2.
  EXPECT_EQ(done.cqe.cdw0 & 0xFFFF, ipo);
  EXPECT_EQ((done.cqe.cdw0 >> 16) & 0xFF, in_data ? 1u : 0u);
}

class ConnectTest : public TargetTest {};

TEST_F(ConnectTest, AdminConnectAllocatesUniqueCntlids) {
  uint16_t first = 0;
  uint16_t second = 0;
  connect_admin(&first);
  connect_admin(&second);
  EXPECT_GE(first, 1);
  EXPECT_LE(first, 0xFFEF);
  EXPECT_GE(second, 1);
  EXPECT_NE(first, second);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 2u);
}

TEST_F(ConnectTest, SuccessfulConnectFillsResponseHeader) {
  FakeQueue& queue = new_queue(0, 32);
  const uint16_t cid =
      queue.submit(connect_sqe(0, 32, kAdminKatoMs), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  // Connect needs no bdev: it completes inside execute().
  ASSERT_TRUE(queue.completed(cid));
  const Completion done = queue.completion(cid);
  EXPECT_TRUE(done.ok());
  EXPECT_EQ(done.cqe.cid, cid);
  EXPECT_EQ(done.cqe.sqid, 0);
  EXPECT_EQ(done.cqe.sqhd, 1);  // the Connect itself consumed entry 0
  EXPECT_EQ(queue.qpair()->sq_size(), 32u);
  EXPECT_TRUE(queue.qpair()->connected());
  EXPECT_EQ(done.cqe.cdw0 >> 16, 0u);  // AUTHREQ: no authentication
}

TEST_F(ConnectTest, RecfmtNotZeroIsIncompatibleFormat) {
  FakeQueue& queue = new_queue(0);
  spec::Sqe sqe = connect_sqe(0, 32);
  auto command = spec::sqe_as<spec::ConnectCommand>(sqe);
  command.recfmt = 1;
  const Completion done =
      run(queue, spec::to_sqe(command), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  EXPECT_EQ(done.status().sct, spec::sct::command_specific);
  EXPECT_EQ(done.status().sc, spec::sc_fabrics::incompatible_format);
  EXPECT_TRUE(done.status().dnr);
  EXPECT_FALSE(queue.qpair()->connected());
}

TEST_F(ConnectTest, UnknownSubsystemPointsAtSubnqn) {
  FakeQueue& queue = new_queue(0);
  const Completion done =
      run(queue, connect_sqe(0, 32), connect_data("nqn.2026-01.io.example:nope", Host{}, 0xFFFF));
  expect_invalid_parameter(done, true, kIpoSubnqn);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 0u);
}

TEST_F(ConnectTest, UnterminatedSubnqnPointsAtSubnqn) {
  FakeQueue& queue = new_queue(0);
  std::vector<uint8_t> data = connect_data(kSubsystemNqn, Host{}, 0xFFFF);
  std::memset(data.data() + kIpoSubnqn, 'a', 256);  // no NUL anywhere in the field
  expect_invalid_parameter(run(queue, connect_sqe(0, 32), data), true, kIpoSubnqn);
}

TEST_F(ConnectTest, InvalidHostNqnPointsAtHostnqn) {
  FakeQueue& queue = new_queue(0);
  Host host;
  host.nqn = "not-an-nqn";
  expect_invalid_parameter(
      run(queue, connect_sqe(0, 32), connect_data(kSubsystemNqn, host, 0xFFFF)), true, kIpoHostnqn);
}

TEST_F(ConnectTest, HostNotAllowedIsConnectInvalidHost) {
  ASSERT_TRUE(target_->set_allow_any_host(kSubsystemNqn, false).has_value());
  ASSERT_TRUE(target_->add_host(kSubsystemNqn, kOtherHostNqn).has_value());
  FakeQueue& refused = new_queue(0);
  const Completion done =
      run(refused, connect_sqe(0, 32), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  EXPECT_EQ(done.status().sct, spec::sct::command_specific);
  EXPECT_EQ(done.status().sc, spec::sc_fabrics::connect_invalid_host);
  EXPECT_TRUE(done.status().dnr);
  // The listed host gets in.
  Host other;
  other.nqn = kOtherHostNqn;
  uint16_t cntlid = 0;
  connect_admin(&cntlid, kSubsystemNqn, other);
  EXPECT_NE(cntlid, 0);
}

// spdk_nvme_perf sends an empty host NQN unless told otherwise; SPDK's and the kernel's targets
// accept it where any host may connect, and so do we. Elsewhere it is not an allowed host.
TEST_F(ConnectTest, EmptyHostNqnConnectsWhereAnyHostIsAllowed) {
  Host anonymous;
  anonymous.nqn = "";
  uint16_t cntlid = 0;
  connect_admin(&cntlid, kSubsystemNqn, anonymous);
  EXPECT_NE(cntlid, 0);
  ASSERT_TRUE(target_->set_allow_any_host(kSubsystemNqn, false).has_value());
  FakeQueue& refused = new_queue(0);
  const Completion done =
      run(refused, connect_sqe(0, 32), connect_data(kSubsystemNqn, anonymous, 0xFFFF));
  EXPECT_EQ(done.status().sct, spec::sct::command_specific);
  EXPECT_EQ(done.status().sc, spec::sc_fabrics::connect_invalid_host);
}

// Subsystem names without the nqn. form, as nvmet takes them (configfs directory names).
TEST_F(ConnectTest, SubsystemNamesOutsideTheNqnFormAreAccepted) {
  SubsystemOpts opts;
  opts.nqn = "testnqn";
  opts.allow_any_host = true;
  ASSERT_TRUE(target_->add_subsystem(opts).has_value());
  uint16_t cntlid = 0;
  connect_admin(&cntlid, "testnqn");
  EXPECT_NE(cntlid, 0);
  opts.nqn = "bad\x01name";
  EXPECT_FALSE(target_->add_subsystem(opts).has_value());
  opts.nqn = "";
  EXPECT_FALSE(target_->add_subsystem(opts).has_value());
}

TEST_F(ConnectTest, SqsizeZeroPointsAtSqsize) {
  FakeQueue& queue = new_queue(0);
  spec::Sqe sqe = connect_sqe(0, 32);
  auto command = spec::sqe_as<spec::ConnectCommand>(sqe);
  command.sqsize = 0;  // one entry: not a queue
  expect_invalid_parameter(
      run(queue, spec::to_sqe(command), connect_data(kSubsystemNqn, Host{}, 0xFFFF)), false,
      kIpoSqsize);
}

TEST_F(ConnectTest, SqsizeAboveMaximumPointsAtSqsize) {
  FakeQueue& admin = new_queue(0);
  // max_admin_queue_depth 128: 129 entries are too many, 128 fit.
  expect_invalid_parameter(
      run(admin, connect_sqe(0, 129), connect_data(kSubsystemNqn, Host{}, 0xFFFF)), false,
      kIpoSqsize);
  uint16_t cntlid = 0;
  FakeQueue& ok = connect_admin(&cntlid, kSubsystemNqn, Host{}, kAdminKatoMs, 128);
  enable(ok);
  FakeQueue& io = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(io, cntlid, 1, Host{}, 129), false,
                           kIpoSqsize);
}

TEST_F(ConnectTest, AdminConnectWithStaticCntlidPointsAtCntlid) {
  FakeQueue& queue = new_queue(0);
  expect_invalid_parameter(run(queue, connect_sqe(0, 32), connect_data(kSubsystemNqn, Host{}, 5)),
                           true, kIpoCntlid);
}

TEST_F(ConnectTest, ShortConnectDataIsSglLengthInvalid) {
  FakeQueue& queue = new_queue(0);
  std::vector<uint8_t> data = connect_data(kSubsystemNqn, Host{}, 0xFFFF);
  data.resize(512);
  const Completion done = run(queue, connect_sqe(0, 32), data);
  EXPECT_EQ(done.status().sct, spec::sct::generic);
  EXPECT_EQ(done.status().sc, spec::sc_generic::data_sgl_length_invalid);
}

TEST_F(ConnectTest, IoConnectToUnknownCntlidPointsAtCntlid) {
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  FakeQueue& io = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(io, static_cast<uint16_t>(cntlid + 100), 1),
                           true, kIpoCntlid);
}

TEST_F(ConnectTest, IoConnectFromAnotherHostPointsAtCntlid) {
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  Host other_nqn;
  other_nqn.nqn = kOtherHostNqn;
  FakeQueue& first = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(first, cntlid, 1, other_nqn), true,
                           kIpoCntlid);
  Host other_id;
  other_id.id[0] ^= 0xFF;
  FakeQueue& second = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(second, cntlid, 1, other_id), true,
                           kIpoCntlid);
}

TEST_F(ConnectTest, IoConnectQidAboveGrantedOrDuplicatePointsAtQid) {
  uint16_t cntlid = 0;
  bring_up(&cntlid);  // 4 I/O queues granted
  FakeQueue& above = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(above, cntlid, 5), false, kIpoQid);
  connect_io(cntlid, 4);
  FakeQueue& duplicate = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(duplicate, cntlid, 4), false, kIpoQid);
}

TEST_F(ConnectTest, IoConnectBeforeEnablePointsAtQid) {
  uint16_t cntlid = 0;
  connect_admin(&cntlid);
  FakeQueue& io = new_queue(1);
  expect_invalid_parameter(connect_io_expect_failure(io, cntlid, 1), false, kIpoQid);
}

TEST_F(ConnectTest, IoConnectToDiscoveryPointsAtQid) {
  uint16_t cntlid = 0;
  FakeQueue& admin = connect_admin(&cntlid, std::string(spec::discovery_nqn));
  enable(admin);
  FakeQueue& io = new_queue(1);
  const Completion done =
      run(io, connect_sqe(1, 32), connect_data(std::string(spec::discovery_nqn), Host{}, cntlid));
  expect_invalid_parameter(done, false, kIpoQid);
}

TEST_F(ConnectTest, CommandsBeforeConnectAreSequenceErrors) {
  FakeQueue& queue = new_queue(0);
  const Completion property = property_get(queue, spec::property_offset::cap);
  EXPECT_EQ(property.status().sc, spec::sc_generic::command_sequence_error);
  const Completion identify = run(queue, spec::make_identify(0, spec::cns::controller), {}, 4096);
  EXPECT_EQ(identify.status().sct, spec::sct::generic);
  EXPECT_EQ(identify.status().sc, spec::sc_generic::command_sequence_error);
}

TEST_F(ConnectTest, SecondConnectOnConnectedQueueIsSequenceError) {
  uint16_t cntlid = 0;
  FakeQueue& admin = connect_admin(&cntlid);
  const Completion again =
      run(admin, connect_sqe(0, 32), connect_data(kSubsystemNqn, Host{}, 0xFFFF));
  EXPECT_EQ(again.status().sc, spec::sc_generic::command_sequence_error);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 1u);
}

TEST_F(ConnectTest, TargetKeepsServingAfterEveryBadConnect) {
  // A burst of failures of every kind, then a good host does a full write/read cycle.
  Host bad_host;
  bad_host.nqn = "garbage";
  const std::vector<std::vector<uint8_t>> bad_data = {
      connect_data("nqn.2026-01.io.example:missing", Host{}, 0xFFFF),
      connect_data(kSubsystemNqn, bad_host, 0xFFFF), connect_data(kSubsystemNqn, Host{}, 7)};
  for (const auto& data : bad_data) {
    FakeQueue& queue = new_queue(0);
    EXPECT_FALSE(run(queue, connect_sqe(0, 32), data).ok());
  }
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  FakeQueue& bad_io = new_queue(1);
  EXPECT_FALSE(connect_io_expect_failure(bad_io, cntlid, 9).ok());
  FakeQueue& io = connect_io(cntlid, 1);
  const std::vector<uint8_t> data = pattern(4096, 3);
  EXPECT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 1, 64, 8), data).ok());
  const Completion read = run(io, io_sqe(spec::nvm_opcode::read, 1, 64, 8), {}, 4096);
  EXPECT_TRUE(read.ok());
  EXPECT_EQ(read.data, data);
  EXPECT_EQ(target_->controller_count(kSubsystemNqn), 1u);
}

}  // namespace
}  // namespace nvmf::target::testing
