// The target over the simulated HCA, driven by a raw capsule-level host: CM handshake,
// Connect, properties, Identify, I/O with keyed and in-capsule data checked byte for byte,
// send-with-invalidate, malformed SGLs and CM rejects; after each error the target keeps
// serving. Everything runs on the test thread (ReactorHarness), deterministically.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "log_capture.h"
#include "raw_host.h"
#include "reactor/harness.h"
#include "sim_target_fixture.h"
#include "spec/spec.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:e2e";
constexpr uint32_t kBlockSize = 512;

namespace rej = spec::rdma_cm_reject;
namespace sc = spec::sc_generic;

class TargetRdmaTest : public SimTargetFixture {
 protected:
  target::SubsystemOpts subsystem_opts() const override { return open_subsystem(kNqn); }

  // Admin queue: CM connect, Fabrics Connect, enable. Returns the CNTLID.
  uint16_t bring_up_admin(RawHost& host) {
    RawConnectResult cm = host.connect(kSimTargetAddress, kSimTargetPort, 0, 32, 31);
    EXPECT_TRUE(cm.established);
    EXPECT_EQ(cm.crqsize, 32);
    RawCompletion connect = host.fabrics_connect(0, 32, 0xFFFF, kNqn, kSimHostNqn, 10000);
    EXPECT_TRUE(connect.ok()) << spec::status_name(connect.status().sct, connect.status().sc, true);
    const uint16_t cntlid = static_cast<uint16_t>(connect.cqe.cdw0 & 0xFFFF);
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    EXPECT_TRUE(host.property_set(spec::property_offset::cc, spec::encode_cc(cc)).ok());
    RawCompletion csts = host.property_get(spec::property_offset::csts);
    EXPECT_TRUE(csts.ok());
    EXPECT_TRUE(spec::csts_rdy(csts.cqe.cdw0));
    return cntlid;
  }

  static spec::Sqe rw(uint8_t opcode, uint64_t lba, uint32_t blocks) {
    spec::Sqe sqe = spec::make_sqe(opcode, 0, 1);
    spec::rw_set_range(sqe, lba, blocks);
    return sqe;
  }

  RawCompletion run(RawHost& host, spec::Sqe sqe, const std::vector<uint8_t>& in_capsule = {}) {
    sqe.cid = host.next_cid();
    RawCompletion completion;
    EXPECT_TRUE(host.execute(sqe, &completion, in_capsule)) << "no response";
    return completion;
  }
};

TEST_F(TargetRdmaTest, AdminBringUpAndIdentifyOverKeyedSgl) {
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);
  EXPECT_NE(cntlid, 0);
  RawCompletion cap = admin.property_get(spec::property_offset::cap);
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(spec::property_get_value(cap.cqe) & 0xFFFF, 127u) << "CAP.MQES = 128 - 1";

  std::memset(admin.memory() + 8192, 0xCC, 4096);
  spec::Sqe identify = spec::make_identify(0, spec::cns::controller);
  identify.sgl1 = spec::make_keyed_data_block(admin.address(8192), 4096, admin.rkey(), false);
  RawCompletion done = run(admin, identify);
  ASSERT_TRUE(done.ok());
  spec::IdentifyController data;
  std::memcpy(&data, admin.memory() + 8192, sizeof(data));
  EXPECT_EQ(data.cntlid, cntlid);
  EXPECT_STREQ(data.subnqn, kNqn);
  EXPECT_EQ(transport_->stats().connects_accepted, 1u);
}

TEST_F(TargetRdmaTest, KeyedWriteThenReadBackOnAnIoQueue) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  constexpr uint32_t kBlocks = 64;  // 32 KiB: several data buffers, one keyed descriptor
  for (uint32_t i = 0; i < kBlocks * kBlockSize; ++i)
    io.memory()[i] = static_cast<uint8_t>(i * 7 + 3);
  spec::Sqe write = rw(spec::nvm_opcode::write, 100, kBlocks);
  write.sgl1 = spec::make_keyed_data_block(io.address(0), kBlocks * kBlockSize, io.rkey(), false);
  ASSERT_TRUE(run(io, write).ok());

  std::memset(io.memory() + 65536, 0, kBlocks * kBlockSize);
  spec::Sqe read = rw(spec::nvm_opcode::read, 100, kBlocks);
  read.sgl1 =
      spec::make_keyed_data_block(io.address(65536), kBlocks * kBlockSize, io.rkey(), false);
  ASSERT_TRUE(run(io, read).ok());
  EXPECT_EQ(std::memcmp(io.memory(), io.memory() + 65536, kBlocks * kBlockSize), 0);
}

TEST_F(TargetRdmaTest, InCapsuleWriteAndMultiDescriptorRead) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(255 - i % 251);
  spec::Sqe write = rw(spec::nvm_opcode::write, 8, 8);
  write.sgl1 = spec::make_in_capsule_data_block(0, 4096);
  ASSERT_TRUE(run(io, write, payload).ok());

  // Read the 4 KiB back into two separate host areas with a Last Segment of two keyed blocks.
  spec::SglDescriptor list[2] = {
      spec::make_keyed_data_block(io.address(100000), 1024, io.rkey(), false),
      spec::make_keyed_data_block(io.address(200000), 3072, io.rkey(), false)};
  std::vector<uint8_t> list_bytes(sizeof(list));
  std::memcpy(list_bytes.data(), list, sizeof(list));
  spec::Sqe read = rw(spec::nvm_opcode::read, 8, 8);
  read.sgl1 = spec::make_last_segment(0, sizeof(list));
  ASSERT_TRUE(run(io, read, list_bytes).ok());
  EXPECT_EQ(std::memcmp(io.memory() + 100000, payload.data(), 1024), 0);
  EXPECT_EQ(std::memcmp(io.memory() + 200000, payload.data() + 1024, 3072), 0);
}

TEST_F(TargetRdmaTest, SendWithInvalidateWhenTheHostAsks) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  const uint32_t key = io.bind_window(4096, 4096);
  ASSERT_NE(key, 0u);
  spec::Sqe read = rw(spec::nvm_opcode::read, 0, 8);
  read.sgl1 = spec::make_keyed_data_block(io.address(4096), 4096, key, true);
  RawCompletion done = run(io, read);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done.remote_invalidated);
  EXPECT_EQ(done.invalidated_rkey, key);
  EXPECT_EQ(host_provider_->key_state(key), verbs::sim::KeyState::free);
}

TEST_F(TargetRdmaTest, SendWithInvalidateOffLeavesTheKeyToTheHost) {
  TearDown();
  opts_.send_with_invalidate = transport_rdma::SendWithInvalidate::off;
  SetUp();
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  const uint32_t key = io.bind_window(4096, 4096);
  ASSERT_NE(key, 0u);
  spec::Sqe read = rw(spec::nvm_opcode::read, 0, 8);
  read.sgl1 = spec::make_keyed_data_block(io.address(4096), 4096, key, true);
  RawCompletion done = run(io, read);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done.remote_invalidated);
  EXPECT_EQ(host_provider_->key_state(key), verbs::sim::KeyState::valid);
}

// RdmaTargetOpts::acceptor_poll_period_us: the acceptor reads the CM channel once per period
// of the reactor's clock (each read is a system call with rdma-core), so a connection request
// waits for the next read, and is answered then.
TEST_F(TargetRdmaTest, TheAcceptorReadsTheCmChannelOncePerPeriod) {
  TearDown();
  opts_.acceptor_poll_period_us = 10000;
  SetUp();
  harness_.poll_round();  // the acceptor's first read, at t0
  const uint64_t t0_ns = harness_.clock().now_ns();
  constexpr uint64_t kRoundNs = 100 * 1000;
  RawHost host(*host_provider_, [this] {
    harness_.poll_round();
    harness_.clock().advance_ns(kRoundNs);
  });
  RawConnectResult cm = host.connect(kSimTargetAddress, kSimTargetPort, 0, 32, 31);
  ASSERT_TRUE(cm.established);
  const uint64_t waited_ns = harness_.clock().now_ns() - t0_ns;
  EXPECT_GE(waited_ns, 10 * 1000 * 1000 - kRoundNs) << "accepted before the acceptor's next read";
  EXPECT_LE(waited_ns, 12 * 1000 * 1000) << "the acceptor missed its period";
  EXPECT_EQ(transport_->stats().connects_accepted, 1u);
}

TEST_F(TargetRdmaTest, MalformedSglsGetTheirStatusAndTheQueueKeepsServing) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  struct Case {
    const char* what;
    spec::SglDescriptor sgl;
    std::vector<uint8_t> in_capsule;
    uint8_t expected;
  };
  const std::vector<Case> cases = {
      {"data block address",
       spec::make_data_block(io.address(0), 4096),
       {},
       sc::sgl_descriptor_type_invalid},
      {"segment", spec::make_segment(0, 16), std::vector<uint8_t>(16),
       sc::sgl_descriptor_type_invalid},
      {"offset + length wraps", spec::make_in_capsule_data_block(16, 0xFFFFFFF8u),
       std::vector<uint8_t>(4096), sc::data_sgl_length_invalid},
      {"offset beyond the capsule", spec::make_in_capsule_data_block(8192, 512),
       std::vector<uint8_t>(4096), sc::sgl_offset_invalid},
      {"keyed beyond max_io_size",
       spec::make_keyed_data_block(io.address(0), 1048576 + 4096, io.rkey(), false),
       {},
       sc::data_sgl_length_invalid},
  };
  int previous_sqhd = -1;
  for (const Case& c : cases) {
    spec::Sqe write = rw(spec::nvm_opcode::write, 0, 8);
    write.sgl1 = c.sgl;
    RawCompletion done = run(io, write, c.in_capsule);
    EXPECT_EQ(done.status().sct, spec::sct::generic) << c.what;
    EXPECT_EQ(done.status().sc, c.expected) << c.what;
    EXPECT_TRUE(done.status().dnr) << c.what;
    // A refused command still consumed its SQ entry: SQHD moves on by one (64-entry queue).
    if (previous_sqhd >= 0) {
      EXPECT_EQ(done.cqe.sqhd, (previous_sqhd + 1) % 64) << c.what;
    }
    previous_sqhd = done.cqe.sqhd;
  }
  // Still serving: a good write and read.
  std::memset(io.memory(), 0x5A, 4096);
  spec::Sqe write = rw(spec::nvm_opcode::write, 16, 8);
  write.sgl1 = spec::make_keyed_data_block(io.address(0), 4096, io.rkey(), false);
  ASSERT_TRUE(run(io, write).ok());
  spec::Sqe read = rw(spec::nvm_opcode::read, 16, 8);
  read.sgl1 = spec::make_keyed_data_block(io.address(8192), 4096, io.rkey(), false);
  ASSERT_TRUE(run(io, read).ok());
  EXPECT_EQ(std::memcmp(io.memory(), io.memory() + 8192, 4096), 0);
}

TEST_F(TargetRdmaTest, CoreStatusesTravelBack) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  // The SGL is checked first (as SPDK does), so an unknown opcode needs a well-formed one.
  spec::Sqe unknown = spec::make_sqe(0x7E, 0, 1);
  unknown.sgl1 = spec::make_keyed_data_block(io.address(0), kBlockSize, io.rkey(), false);
  EXPECT_EQ(run(io, unknown).status().sc, sc::invalid_opcode);
  spec::Sqe bad_ns = rw(spec::nvm_opcode::read, 0, 1);
  bad_ns.nsid = 99;
  bad_ns.sgl1 = spec::make_keyed_data_block(io.address(0), kBlockSize, io.rkey(), false);
  EXPECT_EQ(run(io, bad_ns).status().sc, sc::invalid_namespace_or_format);
  spec::Sqe beyond = rw(spec::nvm_opcode::read, 8191, 2);
  beyond.sgl1 = spec::make_keyed_data_block(io.address(0), 2 * kBlockSize, io.rkey(), false);
  EXPECT_EQ(run(io, beyond).status().sc, sc::lba_out_of_range);
}

TEST_F(TargetRdmaTest, EveryCmRejectCode) {
  struct Case {
    const char* what;
    std::vector<uint8_t> private_data;
    uint8_t responder_resources;
    uint16_t expected;
  };
  auto request = [](uint16_t recfmt, uint16_t qid, uint16_t hrqsize, uint16_t hsqsize) {
    spec::RdmaCmRequest r{};
    r.recfmt = recfmt;
    r.qid = qid;
    r.hrqsize = hrqsize;
    r.hsqsize = hsqsize;
    std::vector<uint8_t> bytes(sizeof(r));
    std::memcpy(bytes.data(), &r, sizeof(r));
    return bytes;
  };
  // "Invalid private data length" cannot happen through rdma_cm, which pads the REQ's private
  // data to the CM maximum (56 bytes); connect_params_test covers it with a short buffer.
  const std::vector<Case> cases = {
      {"RECFMT 1", request(1, 1, 32, 31), 16, rej::invalid_recfmt},
      {"QID 200", request(0, 200, 32, 31), 16, rej::invalid_qid},
      {"HSQSIZE too big", request(0, 1, 1024, 1023), 16, rej::invalid_hsqsize},
      {"HRQSIZE below HSQSIZE + 1", request(0, 1, 8, 31), 16, rej::invalid_hrqsize},
      {"no RDMA READ resources", request(0, 1, 32, 31), 0, rej::invalid_ird},
  };
  for (const Case& c : cases) {
    RawHost& host = new_host();
    RawConnectResult result =
        host.connect_raw(kSimTargetAddress, kSimTargetPort, c.private_data.data(),
                         static_cast<uint8_t>(c.private_data.size()), c.responder_resources);
    EXPECT_TRUE(result.rejected) << c.what;
    EXPECT_EQ(result.reject_status, c.expected) << c.what;
  }
  EXPECT_EQ(transport_->stats().connects_rejected, cases.size());
  // And a good host still gets in.
  RawHost& admin = new_host();
  EXPECT_NE(bring_up_admin(admin), 0);
}

TEST_F(TargetRdmaTest, HostDisconnectTearsTheQueuesDown) {
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);
  RawHost& io = bring_up_io(cntlid);
  EXPECT_EQ(transport_->connection_count(), 2u);
  EXPECT_EQ(target_->controller_count(kNqn), 1u);
  io.disconnect();
  admin.disconnect();
  EXPECT_TRUE(io.wait_disconnected());
  EXPECT_TRUE(admin.wait_disconnected());
  for (int i = 0; i < 20000 && transport_->connection_count() != 0; ++i) harness_.poll_round();
  EXPECT_EQ(transport_->connection_count(), 0u);
  EXPECT_EQ(target_->controller_count(kNqn), 0u);
  EXPECT_EQ(transport_->stats().disconnects, 2u);
}

// COMM_EST on an I/O queue's QP (its first capsule overtook the CM's RTU): the target tells
// the CM on that connection's id and counts it, and the queue keeps serving. One naming a QP
// that no queue pair has is counted as an event only.
TEST_F(TargetRdmaTest, CommEstablishedIsPassedToTheCmOfItsQueuePairAndCounted) {
  RawHost& admin = new_host();
  RawHost& io = bring_up_io(bring_up_admin(admin));
  const std::vector<uint32_t> qps = target_provider_->qp_nums();
  ASSERT_EQ(qps.size(), 2u);
  verbs::AsyncEvent event;
  event.type = verbs::AsyncEventType::comm_established;
  event.qp_num = qps.back();  // the I/O queue's: numbers grow
  ASSERT_TRUE(target_provider_->inject_async_event(event));
  ASSERT_TRUE(harness_.poll_until(
      [&] { return transport_->stats().established_notifications != 0; }, 2000));
  EXPECT_EQ(transport_->stats().async_event_count(verbs::AsyncEventType::comm_established), 1u);
  EXPECT_EQ(transport_->stats().established_notifications, 1u);
  EXPECT_EQ(target_provider_->counters().established_notifications, 1u);

  event.qp_num = qps.back() + 1000;
  ASSERT_TRUE(target_provider_->inject_async_event(event));
  ASSERT_TRUE(harness_.poll_until(
      [&] {
        return transport_->stats().async_event_count(verbs::AsyncEventType::comm_established) == 2;
      },
      2000));
  harness_.poll_until_idle();  // the groups' messages
  EXPECT_EQ(transport_->stats().established_notifications, 1u);
  EXPECT_EQ(target_provider_->counters().established_notifications, 1u);

  EXPECT_EQ(transport_->connection_count(), 2u);
  spec::Sqe write = rw(spec::nvm_opcode::write, 0, 8);
  write.sgl1 = spec::make_keyed_data_block(io.address(0), 8 * kBlockSize, io.rkey(), false);
  EXPECT_TRUE(run(io, write).ok());
}

}  // namespace
}  // namespace nvmf::e2e

namespace nvmf::e2e {
namespace {

void ignore_message(void*) {}

// I/O queue QID q goes to reactor (q - 1) mod 2 whatever came before it (a Linux host's CPU i
// submits on QID i + 1); admin queues go round-robin. A queue whose reactor already serves two
// I/O queues more than another goes to the least loaded one instead (single-queue hosts).
TEST_F(TargetRdmaTest, IoQueuesGoToTheReactorOfTheirQidUnlessItIsTwoQueuesAhead) {
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);
  RawHost& second = bring_up_io(cntlid, 2);
  EXPECT_EQ(transport_->io_queue_count(0), 0u);
  EXPECT_EQ(transport_->io_queue_count(1), 1u) << "QID 2 on reactor 1";
  bring_up_io(cntlid, 1);
  EXPECT_EQ(transport_->io_queue_count(0), 1u) << "QID 1 on reactor 0";
  // Three more hosts' QID 1 (the CM connect places a queue; no Fabrics Connect needed).
  const size_t expected_on_0[] = {2, 3, 3};
  for (size_t expected : expected_on_0) {
    ASSERT_TRUE(new_host().connect(kSimTargetAddress, kSimTargetPort, 1, 32, 31).established);
    EXPECT_EQ(transport_->io_queue_count(0), expected);
  }
  EXPECT_EQ(transport_->io_queue_count(1), 2u) << "reactor 0 was two ahead: the last went to 1";
  EXPECT_EQ(transport_->io_queue_count(2), 0u) << "no third reactor";

  // A queue that is gone no longer counts.
  second.disconnect();
  ASSERT_TRUE(second.wait_disconnected());
  EXPECT_TRUE(harness_.poll_until([&] { return transport_->io_queue_count(1) == 1; }, 20000));
}

// A queue pair torn down on reactor 1 while the acceptor's (reactor 0's) message ring is full:
// reactor 1 must not spin waiting for room (reactor 0 may be the one waiting on it, and here
// nobody polls reactor 0 until the teardown has returned); the release goes out at a later
// poll and the connection is freed. Before the fix, reactor 1's poll_once() never returned.
TEST_F(TargetRdmaTest, TeardownWithTheAcceptorsRingFullRetriesInsteadOfSpinning) {
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);  // reactor 0 (the first admin queue)
  RawHost& io = bring_up_io(cntlid, 2);           // reactor 1 (QID 2)
  ASSERT_EQ(transport_->connection_count(), 2u);
  std::vector<uint8_t> half(32);  // half an SQE: the target closes the queue on reactor 1
  ASSERT_TRUE(io.send_raw_capsule(half));
  while (harness_.reactor(0).send(&ignore_message, nullptr)) {
  }
  for (int i = 0; i < 2000; ++i) harness_.reactor(1).poll_once();
  EXPECT_EQ(transport_->connection_count(), 2u) << "released with the acceptor's ring full";
  EXPECT_TRUE(harness_.poll_until([&] { return transport_->connection_count() == 1; }, 20000))
      << "the connection was never released once the ring had room";
  EXPECT_TRUE(io.wait_disconnected());
}

}  // namespace
}  // namespace nvmf::e2e

namespace nvmf::e2e {
namespace {

// Each poll group's CQ holds the SRQ's receives and its queue pairs' send queues (2 x depth +
// 17 WRs each): I/O queues of depth 64 connect until a group's CQ has no room, then one is
// refused with a CM reject (no resources) and counted; once the queues have gone, the same
// number connects again (what a torn-down queue reserved is returned).
class TargetCqTest : public TargetRdmaTest {
 protected:
  TargetCqTest() {
    opts_.srq_depth = 64;
    opts_.cq_depth = 1024;  // the SRQ plus a few queues of depth 64 per poll group
  }
  // Connects I/O queues (QID 1, 2, ...) until one is refused; returns how many connected.
  size_t connect_until_refused(uint16_t cntlid, RawConnectResult* refusal) {
    for (uint16_t qid = 1; qid <= 40; ++qid) {
      RawHost& io = new_host();
      const RawConnectResult cm = io.connect(kSimTargetAddress, kSimTargetPort, qid, 64, 63);
      if (!cm.established) {
        *refusal = cm;
        hosts_.pop_back();
        return qid - 1;
      }
      EXPECT_TRUE(io.fabrics_connect(qid, 64, cntlid, kNqn, kSimHostNqn).ok());
      io_hosts_.push_back(&io);
    }
    return 40;
  }
  std::vector<RawHost*> io_hosts_;
};

TEST_F(TargetCqTest, AQueueThatWouldOverrunTheCqIsRejectedAndCountedAndItsRoomComesBack) {
  test::LogCapture log;
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);
  RawConnectResult refusal;
  const size_t connected = connect_until_refused(cntlid, &refusal);
  ASSERT_GT(connected, 2u);
  ASSERT_LT(connected, 40u) << "a CQ of 1024 entries took 40 queues of depth 64";
  EXPECT_TRUE(refusal.rejected);
  EXPECT_EQ(refusal.reject_status, spec::rdma_cm_reject::no_resources);
  EXPECT_EQ(transport_->stats().cq_full_refusals, 1u);
  EXPECT_TRUE(log.contains("completion queue full")) << "no log line saying why";

  for (RawHost* io : io_hosts_) io->disconnect();
  for (RawHost* io : io_hosts_) EXPECT_TRUE(io->wait_disconnected());
  EXPECT_TRUE(harness_.poll_until([&] { return transport_->connection_count() == 1; }, 20000));
  io_hosts_.clear();
  RawConnectResult again;
  EXPECT_EQ(connect_until_refused(cntlid, &again), connected)
      << "fewer queues fit after the first ones went: their CQ room was not returned";
}

}  // namespace
}  // namespace nvmf::e2e
