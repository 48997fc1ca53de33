// The target under pressure over the simulated HCA (issue 14), driven by the raw host: a
// burst of large writes that exhausts the data buffers waits and succeeds; Abort of a command
// waiting for data buffers, of one whose RDMA READ is on its way, of one waiting for a full
// bdev; a stalled namespace holds up only itself on a shared queue pair; and a disconnect
// with commands stuck in a stalled bdev ends within teardown_timeout_ms, the late completions
// dropped and counted once the bdev lets go.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bdev/delay_bdev.h"
#include "raw_host.h"
#include "sim_target_fixture.h"
#include "spec/spec.h"
#include "stalled_bdev.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:reliability";
constexpr uint32_t kBlockSize = 512;
constexpr uint32_t kStalledNsid = 2;  // the delay bdev; NSID 1 is the fixture's malloc bdev
constexpr uint32_t kTeardownTimeoutMs = 2000;
// Areas of the raw host's 8 MiB ([0, 1024) holds the Connect data).
constexpr uint32_t kDataOut = 0x100000;  // 4 MiB of what writes send
constexpr uint32_t kDataIn = 0x500000;   // 2 MiB where reads land

namespace sc = spec::sc_generic;

class TargetReliabilityTest : public SimTargetFixture {
 protected:
  target::SubsystemOpts subsystem_opts() const override { return open_subsystem(kNqn); }
  target::TargetOpts target_opts() const override {
    target::TargetOpts opts;
    opts.teardown_timeout_ms = kTeardownTimeoutMs;
    return opts;
  }

  void SetUp() override {
    // The fewest data buffers the transport takes: one command of max_io_size (1 MiB in
    // 64 KiB units).
    opts_.data_buffers_per_group = 16;
    SimTargetFixture::SetUp();
    // Two commands fill the stalled bdev; more wait in the core.
    stalled_.create("Delay0", 8192, 2, harness_.clock());
    if (HasFatalFailure()) return;
    delay_ = stalled_.delay;
    target::NamespaceOpts ns;
    ns.nsid = kStalledNsid;
    ns.bdev = stalled_.bdev.get();
    ASSERT_TRUE(target_->add_namespace(kNqn, ns));
  }
  void TearDown() override {
    stalled_.release();
    SimTargetFixture::TearDown();
    stalled_.destroy();
  }

  // Admin queue (reactor 0: connections go round-robin) connected and enabled.
  RawHost& bring_up_admin(uint16_t* cntlid) {
    RawHost& host = new_host();
    EXPECT_TRUE(host.connect(kSimTargetAddress, kSimTargetPort, 0, 32, 31).established);
    RawCompletion connect = host.fabrics_connect(0, 32, 0xFFFF, kNqn, kSimHostNqn, 10000);
    EXPECT_TRUE(connect.ok());
    *cntlid = static_cast<uint16_t>(connect.cqe.cdw0 & 0xFFFF);
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    EXPECT_TRUE(host.property_set(spec::property_offset::cc, spec::encode_cc(cc)).ok());
    return host;
  }

  static spec::Sqe rw(RawHost& host, uint8_t opcode, uint32_t nsid, uint64_t lba, uint32_t blocks,
                      uint32_t offset) {
    spec::Sqe sqe = spec::make_sqe(opcode, host.next_cid(), nsid);
    spec::rw_set_range(sqe, lba, blocks);
    sqe.sgl1 =
        spec::make_keyed_data_block(host.address(offset), blocks * kBlockSize, host.rkey(), false);
    return sqe;
  }
  static spec::Sqe abort_of(RawHost& admin, uint16_t sqid, uint16_t cid) {
    spec::Sqe sqe = spec::make_sqe(spec::admin_opcode::abort, admin.next_cid());
    sqe.cdw10 = uint32_t{sqid} | (uint32_t{cid} << 16);
    return sqe;
  }
  // Responses of `host` until `count` arrived (keyed by CID), or the rounds run out.
  static std::map<uint16_t, RawCompletion> collect(RawHost& host, size_t count,
                                                   int max_rounds = 20000) {
    std::map<uint16_t, RawCompletion> done;
    RawCompletion completion;
    while (done.size() < count && host.wait_response(&completion, max_rounds)) {
      done[completion.cqe.cid] = completion;
    }
    return done;
  }
  // True when `host` got no response within `rounds` polls.
  static bool silent(RawHost& host, int rounds = 200) {
    RawCompletion completion;
    return !host.wait_response(&completion, rounds);
  }

  StalledBdev stalled_;
  bdev::DelayBdev* delay_ = nullptr;  // stalled_.delay
};

void fill(uint8_t* data, size_t size, uint8_t seed) {
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 9));
}

// 32 writes of 128 KiB at once need 64 data buffers; the poll group has 16. The rest wait for
// buffers (counted), none fails, and every byte reads back.
TEST_F(TargetReliabilityTest, ABurstThatExhaustsTheDataBuffersWaitsAndEveryWriteSucceeds) {
  uint16_t cntlid = 0;
  bring_up_admin(&cntlid);
  RawHost& io = bring_up_io(cntlid);
  constexpr uint32_t kWrites = 32;
  constexpr uint32_t kBlocks = 256;  // 128 KiB: two 64 KiB buffers each
  constexpr uint32_t kBytes = kBlocks * kBlockSize;
  fill(io.memory() + kDataOut, size_t{kWrites} * kBytes, 0x3C);
  std::vector<spec::Sqe> writes;
  for (uint32_t i = 0; i < kWrites; ++i) {
    writes.push_back(
        rw(io, spec::nvm_opcode::write, 1, i * kBlocks, kBlocks, kDataOut + i * kBytes));
  }
  ASSERT_TRUE(io.send_burst(writes));
  const auto written = collect(io, kWrites);
  ASSERT_EQ(written.size(), kWrites);
  for (const auto& [cid, done] : written) {
    EXPECT_TRUE(done.ok()) << "CID " << cid << ": " << spec::status_name(done.status(), false);
  }
  EXPECT_GT(transport_->stats().buffer_waits, 0u) << "the burst never ran out of buffers";
  // Read back in two bursts of 16 (2 MiB of landing room), through the same small pool.
  for (uint32_t half = 0; half < 2; ++half) {
    std::memset(io.memory() + kDataIn, 0, size_t{16} * kBytes);
    std::vector<spec::Sqe> reads;
    for (uint32_t i = 0; i < 16; ++i) {
      const uint32_t index = half * 16 + i;
      reads.push_back(
          rw(io, spec::nvm_opcode::read, 1, index * kBlocks, kBlocks, kDataIn + i * kBytes));
    }
    ASSERT_TRUE(io.send_burst(reads));
    const auto read = collect(io, 16);
    ASSERT_EQ(read.size(), 16u);
    for (const auto& [cid, done] : read) EXPECT_TRUE(done.ok()) << "CID " << cid;
    EXPECT_EQ(std::memcmp(io.memory() + kDataIn, io.memory() + kDataOut + half * 16 * kBytes,
                          size_t{16} * kBytes),
              0)
        << "half " << half << " read back wrong";
  }
}

// Two writes of 512 KiB take all 16 buffers and sit in the stalled bdev; a third waits for
// buffers in the transport: Abort answers it at once, "aborted". The ones inside the bdev are
// not recalled ("not aborted") and succeed after the release.
TEST_F(TargetReliabilityTest, AbortOfAWriteWaitingForDataBuffers) {
  uint16_t cntlid = 0;
  RawHost& admin = bring_up_admin(&cntlid);
  RawHost& io = bring_up_io(cntlid);
  constexpr uint32_t kBlocks = 1024;  // 512 KiB: eight buffers
  delay_->stall();
  std::vector<spec::Sqe> writes;
  for (uint32_t i = 0; i < 3; ++i) {
    writes.push_back(rw(io, spec::nvm_opcode::write, kStalledNsid, i * kBlocks, kBlocks, kDataOut));
  }
  ASSERT_TRUE(io.send_burst(writes));
  EXPECT_TRUE(silent(io));
  EXPECT_EQ(transport_->stats().buffer_waits, 1u);

  RawCompletion answer;
  ASSERT_TRUE(admin.execute(abort_of(admin, 1, writes[2].cid), &answer));
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer.cqe.cdw0 & 1u, 0u) << "the waiting write was not aborted";
  auto first = collect(io, 1);
  ASSERT_EQ(first.count(writes[2].cid), 1u);
  EXPECT_EQ(first[writes[2].cid].status().sc, sc::abort_requested);

  ASSERT_TRUE(admin.execute(abort_of(admin, 1, writes[0].cid), &answer));
  EXPECT_EQ(answer.cqe.cdw0 & 1u, 1u) << "a write inside the bdev cannot be recalled";
  delay_->release();
  auto rest = collect(io, 2);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_TRUE(rest[writes[0].cid].ok());
  EXPECT_TRUE(rest[writes[1].cid].ok());
}

// The write's RDMA READ is posted when the Abort reaches its queue: it cannot be recalled, so
// the target lets it finish, answers the write Command Abort Requested instead of running it,
// then the Abort "aborted". The reactors are polled one by one to land the Abort in between.
TEST_F(TargetReliabilityTest, AbortOfAWriteWhoseDataIsOnItsWay) {
  uint16_t cntlid = 0;
  RawHost& admin = bring_up_admin(&cntlid);
  RawHost& io = bring_up_io(cntlid, 2);  // QID 2: reactor 1, the admin queue is on 0
  constexpr uint32_t kBlocks = 8;
  fill(io.memory() + kDataOut, kBlocks * kBlockSize, 0x77);
  const spec::Sqe write = rw(io, spec::nvm_opcode::write, 1, 100, kBlocks, kDataOut);
  ASSERT_TRUE(io.send_capsule(write));
  harness_.reactor(1).poll_once();  // the capsule arrives; its READ is posted
  ASSERT_TRUE(admin.send_capsule(abort_of(admin, 2, write.cid)));
  harness_.reactor(0).poll_once();  // the Abort runs and goes to reactor 1 by message
  harness_.reactor(1).poll_once();  // the message before the READ's completion
  auto io_done = collect(io, 1);
  ASSERT_EQ(io_done.count(write.cid), 1u);
  EXPECT_EQ(io_done[write.cid].status().sc, sc::abort_requested);
  auto admin_done = collect(admin, 1);
  ASSERT_EQ(admin_done.size(), 1u);
  EXPECT_TRUE(admin_done.begin()->second.ok());
  EXPECT_EQ(admin_done.begin()->second.cqe.cdw0 & 1u, 0u) << "not aborted";
  // The data never reached the namespace.
  std::memset(io.memory() + kDataIn, 0xEE, kBlocks * kBlockSize);
  RawCompletion read;
  ASSERT_TRUE(io.execute(rw(io, spec::nvm_opcode::read, 1, 100, kBlocks, kDataIn), &read));
  ASSERT_TRUE(read.ok());
  for (uint32_t i = 0; i < kBlocks * kBlockSize; ++i) {
    ASSERT_EQ(io.memory()[kDataIn + i], 0) << "byte " << i << " of the aborted write landed";
  }
}

// On one queue pair: four reads of the stalled namespace (two inside its bdev, two waiting
// for room in the core), then one of NS 1, which is answered while the four are stuck.
TEST_F(TargetReliabilityTest, AStalledNamespaceHoldsUpOnlyItselfOnASharedQueue) {
  uint16_t cntlid = 0;
  RawHost& admin = bring_up_admin(&cntlid);
  RawHost& io = bring_up_io(cntlid);
  delay_->stall();
  std::vector<spec::Sqe> stuck;
  for (uint32_t i = 0; i < 4; ++i) {
    stuck.push_back(rw(io, spec::nvm_opcode::read, kStalledNsid, i * 8, 8, kDataIn + i * 4096));
  }
  ASSERT_TRUE(io.send_burst(stuck));
  EXPECT_TRUE(silent(io));
  RawCompletion other;
  ASSERT_TRUE(io.execute(rw(io, spec::nvm_opcode::read, 1, 0, 8, kDataIn + 0x10000), &other));
  EXPECT_TRUE(other.ok());
  EXPECT_GE(target_->stats().bdev_busy_waits, 2u);
  // One waiting for room in the core is abortable too.
  RawCompletion answer;
  ASSERT_TRUE(admin.execute(abort_of(admin, 1, stuck[3].cid), &answer));
  EXPECT_EQ(answer.cqe.cdw0 & 1u, 0u);
  auto aborted = collect(io, 1);
  EXPECT_EQ(aborted[stuck[3].cid].status().sc, sc::abort_requested);
  delay_->release();
  auto rest = collect(io, 3);
  ASSERT_EQ(rest.size(), 3u);
  for (const auto& [cid, done] : rest) EXPECT_TRUE(done.ok()) << "CID " << cid;
}

// The host goes while writes sit in the stalled bdev: the controller goes at once, the I/O
// queue's connection within teardown_timeout_ms (not when the bdev lets go), and the late
// completions after the release are dropped and counted. Valgrind/ASan: no use after free.
TEST_F(TargetReliabilityTest, DisconnectWithWritesStuckInABdevEndsWithinTheTimeout) {
  uint16_t cntlid = 0;
  RawHost& admin = bring_up_admin(&cntlid);
  RawHost& io = bring_up_io(cntlid);
  delay_->stall();
  std::vector<spec::Sqe> writes;
  for (uint32_t i = 0; i < 3; ++i) {
    writes.push_back(rw(io, spec::nvm_opcode::write, kStalledNsid, i * 8, 8, kDataOut));
  }
  ASSERT_TRUE(io.send_burst(writes));
  EXPECT_TRUE(silent(io));
  io.disconnect();
  admin.disconnect();
  EXPECT_TRUE(io.wait_disconnected());
  EXPECT_TRUE(admin.wait_disconnected());
  EXPECT_TRUE(harness_.poll_until([&] { return target_->controller_count(kNqn) == 0; }, 2000));
  for (int i = 0; i < 500; ++i) harness_.poll_round();
  EXPECT_EQ(transport_->connection_count(), 1u) << "gone before the timeout: nothing waited";
  harness_.clock().advance_ms(kTeardownTimeoutMs);
  EXPECT_TRUE(harness_.poll_until([&] { return transport_->connection_count() == 0; }, 2000))
      << "the queue pair still waits for its stalled bdev";
  EXPECT_EQ(target_->stats().abandoned_qpairs, 1u);
  EXPECT_EQ(target_->stats().late_completions, 0u);
  delay_->release();
  harness_.poll_until_idle();
  EXPECT_EQ(target_->stats().late_completions, 2u);  // the third waited in the core: failed
  // A new host is served by the same namespace.
  uint16_t again = 0;
  bring_up_admin(&again);
  RawHost& io2 = bring_up_io(again);
  RawCompletion done;
  ASSERT_TRUE(io2.execute(rw(io2, spec::nvm_opcode::write, kStalledNsid, 0, 8, kDataOut), &done));
  EXPECT_TRUE(done.ok());
}

}  // namespace
}  // namespace nvmf::e2e
