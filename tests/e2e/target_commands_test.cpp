// Every command the target core implements, driven over the simulated HCA by the raw
// capsule-level host (raw_host.h): the command travels as a capsule, its data moves by RDMA
// READ/WRITE or in the capsule, and the test checks the status and the bytes that come back.
// Fabrics (discovery log, properties, shutdown, Disconnect), admin (Identify, Get Log Page,
// features, AER, Keep Alive, Abort), I/O (Flush, Write Zeroes, Dataset Management, Read,
// Write, many in flight) and the negative cases (bad Connects, unknown opcodes, bad NSIDs,
// LBA ranges, transfer lengths, malformed SGLs, broken capsules and keys, CM rejects). After
// every negative case the same queue and another host keep working and the data written at
// the start of the test reads back unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bdev/malloc_bdev.h"
#include "raw_host.h"
#include "reactor/harness.h"
#include "sim_target_fixture.h"
#include "spec/spec.h"
#include "spec/string_field.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/sim/sim.h"

namespace nvmf::e2e {
namespace {

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:e2e";
constexpr const char* kRestrictedNqn = "nqn.2026-11.io.nvmf-rdma:e2e-restricted";
constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:0f0e0d0c-0b0a-0908-0706-050403020100";
constexpr const char* kOtherHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kAddress = "10.0.0.1";
constexpr uint16_t kPort = 4420;
constexpr const char* kSerial = "E2E-SERIAL-0001";
constexpr const char* kModel = "nvmf-rdma e2e model";
constexpr uint32_t kBlockSize = 512;
constexpr uint64_t kBlockCount = 8192;
constexpr uint32_t kMaxIo = 1048576;  // TargetOpts' default max_io_size (MDTS 8)
constexpr uint32_t kInCapsule = 4096;

// Data written at the start of a test and read back at its end: LBA 0, so a target that
// truncated or wrapped an LBA would overwrite it.
constexpr uint64_t kKnownLba = 0;
constexpr uint32_t kKnownBlocks = 32;
constexpr uint8_t kKnownSeed = 0xA5;
// Blocks the health check writes on the queue under test.
constexpr uint64_t kScratchLba = 7000;

// Areas of the raw host's 8 MiB of registered memory ([0, 1024) holds the Connect data).
constexpr uint32_t kScratch = 0x80000;   // log pages, Identify data, range lists (512 KiB)
constexpr uint32_t kDataOut = 0x100000;  // what writes send (2 MiB: kMaxIo, or 16 pieces with gaps)
constexpr uint32_t kDataIn = 0x300000;   // where reads land (2 MiB, as kDataOut)

namespace rej = spec::rdma_cm_reject;
namespace sc = spec::sc_generic;
namespace scf = spec::sc_fabrics;
namespace sct = spec::sct;

// Block contents no other test pattern repeats.
std::vector<uint8_t> pattern(uint64_t lba, uint32_t blocks, uint8_t seed,
                             uint32_t block_size = kBlockSize) {
  std::vector<uint8_t> out(size_t{blocks} * block_size);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t block = lba + i / block_size;
    const uint64_t within = i % block_size;
    out[i] = static_cast<uint8_t>(block * 131 + within * 7 + (within >> 8) + seed * 17u + 1);
  }
  return out;
}

template <typename T>
std::vector<uint8_t> bytes_of(const T& value) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

::testing::AssertionResult StatusIs(const RawCompletion& done, uint8_t type, uint8_t code,
                                    bool dnr = true) {
  const spec::Status got = done.status();
  if (got.sct == type && got.sc == code && (got.is_success() || got.dnr == dnr)) {
    return ::testing::AssertionSuccess();
  }
  const bool fabrics = type == sct::command_specific;
  return ::testing::AssertionFailure()
         << "status SCT " << int{got.sct} << " SC " << hex(got.sc) << " DNR " << got.dnr << " ("
         << spec::status_name(got.sct, got.sc, fabrics) << "), expected SCT " << int{type} << " SC "
         << hex(code) << " DNR " << dnr << " (" << spec::status_name(type, code, fabrics) << ")";
}

::testing::AssertionResult Ok(const RawCompletion& done) {
  return StatusIs(done, sct::generic, sc::success);
}

::testing::AssertionResult AllBytesAre(const uint8_t* data, size_t size, uint8_t value) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != value) {
      return ::testing::AssertionFailure()
             << "byte " << i << " is " << hex(data[i]) << ", expected " << hex(value);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameBytes(const uint8_t* got, const uint8_t* expected, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (got[i] != expected[i]) {
      return ::testing::AssertionFailure() << "first difference at byte " << i << ": "
                                           << hex(got[i]) << ", expected " << hex(expected[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

class TargetCommandsTest : public SimTargetFixture {
 protected:
  struct Association {
    RawHost* admin = nullptr;
    RawHost* io = nullptr;
    uint16_t cntlid = 0;
  };

  target::SubsystemOpts subsystem_opts() const override {
    target::SubsystemOpts subsystem;
    subsystem.nqn = kNqn;
    subsystem.serial_number = kSerial;
    subsystem.model_number = kModel;
    subsystem.allow_any_host = true;
    return subsystem;
  }
  uint32_t block_size() const override { return kBlockSize; }
  uint64_t block_count() const override { return kBlockCount; }

  // ---- bring-up ----

  // A host with only its CM connection up (no Fabrics Connect yet).
  RawHost& cm_connected(uint16_t qid) {
    RawHost& host = new_host();
    const uint16_t entries = qid == 0 ? 32 : 64;
    RawConnectResult cm = host.connect(kAddress, kPort, qid, entries, entries - 1);
    EXPECT_TRUE(cm.established) << "CM connect of QID " << qid;
    return host;
  }

  static bool enable(RawHost& admin) {
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    if (!admin.property_set(spec::property_offset::cc, spec::encode_cc(cc)).ok()) return false;
    RawCompletion csts = admin.property_get(spec::property_offset::csts);
    return csts.ok() && spec::csts_rdy(csts.cqe.cdw0);
  }

  // Admin queue of a new controller: CM connect, Fabrics Connect, enable. Returns the CNTLID.
  uint16_t bring_up_admin(RawHost& host, const std::string& hostnqn = kHostNqn,
                          const std::string& subnqn = kNqn) {
    RawConnectResult cm = host.connect(kAddress, kPort, 0, 32, 31);
    EXPECT_TRUE(cm.established);
    RawCompletion connect = host.fabrics_connect(0, 32, 0xFFFF, subnqn, hostnqn, 10000);
    EXPECT_TRUE(Ok(connect)) << "admin Connect to " << subnqn;
    const uint16_t cntlid = spec::connect_response_cntlid(connect.cqe);
    EXPECT_TRUE(enable(host)) << "enable";
    return cntlid;
  }

  RawHost& bring_up_io(uint16_t cntlid, uint16_t qid = 1, const std::string& hostnqn = kHostNqn) {
    RawHost& io = cm_connected(qid);
    EXPECT_TRUE(Ok(io.fabrics_connect(qid, 64, cntlid, kNqn, hostnqn))) << "I/O Connect " << qid;
    return io;
  }

  Association associate(const std::string& hostnqn = kHostNqn) {
    Association a;
    a.admin = &new_host();
    a.cntlid = bring_up_admin(*a.admin, hostnqn);
    a.io = &bring_up_io(a.cntlid, 1, hostnqn);
    return a;
  }

  // ---- commands ----

  static RawCompletion run(RawHost& host, spec::Sqe sqe,
                           const std::vector<uint8_t>& in_capsule = {}) {
    sqe.cid = host.next_cid();
    RawCompletion completion;
    EXPECT_TRUE(host.execute(sqe, &completion, in_capsule)) << "no response";
    return completion;
  }

  static spec::SglDescriptor keyed(RawHost& host, uint32_t offset, uint32_t length,
                                   bool invalidate = false) {
    return spec::make_keyed_data_block(host.address(offset), length, host.rkey(), invalidate);
  }

  static spec::Sqe io_cmd(uint8_t opcode, uint64_t lba, uint32_t blocks, uint32_t nsid = 1) {
    spec::Sqe sqe = spec::make_sqe(opcode, 0, nsid);
    spec::rw_set_range(sqe, lba, blocks);
    return sqe;
  }

  static RawCompletion write_keyed(RawHost& io, uint64_t lba, const std::vector<uint8_t>& data,
                                   uint32_t nsid = 1, uint32_t block_size = kBlockSize) {
    std::memcpy(io.memory() + kDataOut, data.data(), data.size());
    spec::Sqe sqe =
        io_cmd(spec::nvm_opcode::write, lba, static_cast<uint32_t>(data.size() / block_size), nsid);
    sqe.sgl1 = keyed(io, kDataOut, static_cast<uint32_t>(data.size()));
    return run(io, sqe);
  }

  static RawCompletion write_in_capsule(RawHost& io, uint64_t lba,
                                        const std::vector<uint8_t>& data) {
    spec::Sqe sqe =
        io_cmd(spec::nvm_opcode::write, lba, static_cast<uint32_t>(data.size() / kBlockSize));
    sqe.sgl1 = spec::make_in_capsule_data_block(0, static_cast<uint32_t>(data.size()));
    return run(io, sqe, data);
  }

  // Reads into kDataIn (pre-filled with EEh so untouched bytes show).
  static RawCompletion read_keyed(RawHost& io, uint64_t lba, uint32_t blocks, uint32_t nsid = 1,
                                  uint32_t block_size = kBlockSize) {
    std::memset(io.memory() + kDataIn, 0xEE, size_t{blocks} * block_size);
    spec::Sqe sqe = io_cmd(spec::nvm_opcode::read, lba, blocks, nsid);
    sqe.sgl1 = keyed(io, kDataIn, blocks * block_size);
    return run(io, sqe);
  }

  static ::testing::AssertionResult Holds(RawHost& io, uint64_t lba,
                                          const std::vector<uint8_t>& expected, uint32_t nsid = 1,
                                          uint32_t block_size = kBlockSize) {
    const auto blocks = static_cast<uint32_t>(expected.size() / block_size);
    RawCompletion done = read_keyed(io, lba, blocks, nsid, block_size);
    if (!done.ok()) return ::testing::AssertionFailure() << "read: " << Ok(done).message();
    return SameBytes(io.memory() + kDataIn, expected.data(), expected.size());
  }

  static RawCompletion identify(RawHost& admin, uint8_t cns, uint32_t nsid = 0,
                                uint32_t length = spec::identify_data_size) {
    std::memset(admin.memory() + kScratch, 0xCC, length);
    spec::Sqe sqe = spec::make_identify(0, cns, nsid);
    sqe.sgl1 = keyed(admin, kScratch, length);
    return run(admin, sqe);
  }

  // Get Log Page of `length` bytes at `offset` into kScratch (pre-filled with CCh, and kGuard
  // bytes past it); the keyed buffer is `buffer` bytes (0: `length`).
  static constexpr uint32_t kGuard = 256;
  static RawCompletion get_log(RawHost& admin, uint8_t lid, uint32_t length, uint64_t offset = 0,
                               uint32_t nsid = spec::nsid_all, uint32_t buffer = 0) {
    if (buffer == 0) buffer = length;
    std::memset(admin.memory() + kScratch, 0xCC, buffer + kGuard);
    spec::Sqe sqe = spec::make_get_log_page(0, lid, length, offset, nsid);
    sqe.sgl1 = keyed(admin, kScratch, buffer);
    return run(admin, sqe);
  }

  // Set/Get Features carry data for some features only; without any, hosts (Linux
  // nvme_rdma_set_sg_null, SPDK nvme_rdma_build_null_request) send a keyed SGL of length 0.
  static constexpr spec::SglDescriptor kNullSgl = spec::make_keyed_data_block(0, 0, 0, false);
  static RawCompletion set_feature(RawHost& admin, uint8_t fid, uint32_t value) {
    spec::Sqe sqe = spec::make_set_features(0, fid, value);
    sqe.sgl1 = kNullSgl;
    return run(admin, sqe);
  }
  static RawCompletion get_feature(RawHost& admin, uint8_t fid) {
    spec::Sqe sqe = spec::make_get_features(0, fid);
    sqe.sgl1 = kNullSgl;
    return run(admin, sqe);
  }

  static spec::Sqe dsm_deallocate(uint32_t ranges, uint32_t nsid = 1) {
    spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, nsid);
    sqe.cdw10 = ranges - 1;
    sqe.cdw11 = 1u << 2;  // AD
    return sqe;
  }

  static spec::Sqe abort_command(uint16_t sqid, uint16_t cid) {
    spec::Sqe sqe = spec::make_sqe(spec::admin_opcode::abort, 0);
    sqe.cdw10 = uint32_t{sqid} | (uint32_t{cid} << 16);
    return sqe;
  }

  static spec::Sqe disconnect_command() {
    spec::DisconnectCommand command{};
    command.opcode = spec::fabrics_opcode;
    command.flags = static_cast<uint8_t>(spec::psdt::sgl_mptr_contiguous << 6);
    command.fctype = spec::fctype::disconnect;
    return spec::to_sqe(command);
  }

  // A Connect with its 1024 bytes of data in the capsule (what hosts do on I/O queues when
  // the target offers in-capsule data), or keyed with `keyed_length` bytes.
  static RawCompletion connect_custom(RawHost& host, spec::ConnectCommand command,
                                      const spec::ConnectData& data, bool in_capsule,
                                      uint32_t keyed_length = spec::connect_data_size) {
    command.cid = host.next_cid();
    spec::Sqe sqe = spec::to_sqe(command);
    RawCompletion completion;
    if (in_capsule) {
      sqe.sgl1 = spec::make_in_capsule_data_block(0, sizeof(data));
      EXPECT_TRUE(host.execute(sqe, &completion, bytes_of(data))) << "no response";
    } else {
      std::memcpy(host.memory() + kScratch, &data, sizeof(data));
      sqe.sgl1 = keyed(host, kScratch, keyed_length);
      EXPECT_TRUE(host.execute(sqe, &completion)) << "no response";
    }
    return completion;
  }

  static spec::ConnectData connect_data(uint16_t cntlid, const std::string& subnqn,
                                        const std::string& hostnqn) {
    spec::ConnectData data{};
    for (int i = 0; i < 16; ++i) data.hostid[i] = static_cast<uint8_t>(0xA0 + i);  // RawHost's
    data.cntlid = cntlid;
    spec::put_nul_padded(data.subnqn, subnqn);
    spec::put_nul_padded(data.hostnqn, hostnqn);
    return data;
  }

  // Expects a Connect Invalid Parameters naming the field at `offset` of the data or the SQE.
  static void expect_invalid_parameter(const RawCompletion& done, bool in_data, uint16_t offset,
                                       const char* what) {
    SCOPED_TRACE(what);
    EXPECT_TRUE(StatusIs(done, sct::command_specific, scf::connect_invalid_parameters));
    EXPECT_EQ(spec::connect_invalid_in_data(done.cqe), in_data) << "IATTR";
    EXPECT_EQ(spec::connect_invalid_offset(done.cqe), offset) << "IPO";
  }

  // Waits until the target has `count` connections (teardowns finish asynchronously).
  bool wait_connections(size_t count) {
    return harness_.poll_until([&] { return transport_->connection_count() == count; }, 20000);
  }

  // ---- the data every test protects ----

  static void seed_known_data(RawHost& io) {
    ASSERT_TRUE(Ok(write_keyed(io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed))));
  }

  // The queue still serves (a write and a read), the known data is intact, and another host
  // with a fresh association reads the same known data.
  void expect_healthy(RawHost& io, const char* after) {
    SCOPED_TRACE(std::string("after ") + after);
    const auto scratch = pattern(kScratchLba, 8, ++health_seed_);
    EXPECT_TRUE(Ok(write_keyed(io, kScratchLba, scratch))) << "same queue: write";
    EXPECT_TRUE(Holds(io, kScratchLba, scratch)) << "same queue: read";
    EXPECT_TRUE(Holds(io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)))
        << "same queue: known data";
    expect_other_host_serves(after);
  }

  void expect_other_host_serves(const char* after) {
    SCOPED_TRACE(std::string("another host, after ") + after);
    Association other = associate(kOtherHostNqn);
    EXPECT_TRUE(Holds(*other.io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)))
        << "known data";
    const auto scratch = pattern(kScratchLba + 8, 8, ++health_seed_);
    EXPECT_TRUE(Ok(write_keyed(*other.io, kScratchLba + 8, scratch)));
    EXPECT_TRUE(Holds(*other.io, kScratchLba + 8, scratch));
  }

  // Namespaces added at run time; TearDown destroys the target before these go.
  std::unique_ptr<bdev::Bdev> extra_bdev_;
  std::unique_ptr<bdev::Bdev> extra_bdev2_;
  std::vector<std::unique_ptr<bdev::Bdev>> retired_bdevs_;
  uint8_t health_seed_ = 0;
};

target::ListenerAddress listener(const char* traddr, const char* trsvcid) {
  target::ListenerAddress address;
  address.traddr = traddr;
  address.trsvcid = trsvcid;
  return address;
}

// =============================================================================================
// Fabrics: discovery, properties, shutdown, Disconnect

TEST_F(TargetCommandsTest, DiscoveryLogPageOverKeyedSgl) {
  ASSERT_TRUE(target_->add_listener(kNqn, listener(kAddress, "4420")));
  RawHost& discovery = new_host();
  const uint16_t cntlid = bring_up_admin(discovery, kHostNqn, std::string(spec::discovery_nqn));
  EXPECT_NE(cntlid, 0);

  ASSERT_TRUE(Ok(identify(discovery, spec::cns::controller)));
  spec::IdentifyController id;
  std::memcpy(&id, discovery.memory() + kScratch, sizeof(id));
  EXPECT_EQ(id.cntrltype, spec::controller_type::discovery);
  EXPECT_EQ(id.cntlid, cntlid);
  EXPECT_EQ(spec::get_nul_terminated(id.subnqn), spec::discovery_nqn);

  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 4096)));
  const uint8_t* page = discovery.memory() + kScratch;
  spec::DiscoveryLogPageHeader header;
  std::memcpy(&header, page, sizeof(header));
  EXPECT_EQ(header.genctr, target_->discovery_generation());
  EXPECT_EQ(header.numrec, 1u);
  EXPECT_EQ(header.recfmt, 0);
  EXPECT_TRUE(AllBytesAre(header.reserved18, sizeof(header.reserved18), 0));

  spec::DiscoveryLogEntry entry;
  std::memcpy(&entry, page + 1024, sizeof(entry));
  EXPECT_EQ(entry.trtype, spec::trtype::rdma);
  EXPECT_EQ(entry.adrfam, spec::adrfam::ipv4);
  EXPECT_EQ(entry.subtype, spec::subsystem_type::nvm);
  EXPECT_EQ(entry.portid, 1);
  EXPECT_EQ(entry.cntlid, spec::cntlid_dynamic);
  EXPECT_EQ(entry.asqsz, 128);
  EXPECT_EQ(spec::get_nul_terminated(entry.subnqn), kNqn);
  EXPECT_EQ(spec::get_nul_terminated(entry.traddr), kAddress);
  EXPECT_EQ(spec::get_nul_terminated(entry.trsvcid), "4420");
  const spec::RdmaTsas tsas = spec::entry_rdma_tsas(entry);
  EXPECT_EQ(tsas.qptype, spec::rdma_qptype::reliable_connected);
  EXPECT_EQ(tsas.cms, spec::rdma_cms::rdma_cm);

  // Byte for byte: the entry as the spec lays it out with these values, NUL padded.
  spec::DiscoveryLogEntry expected{};
  expected.trtype = spec::trtype::rdma;
  expected.adrfam = spec::adrfam::ipv4;
  expected.subtype = spec::subsystem_type::nvm;
  expected.treq = entry.treq;  // transport requirements are the target's choice
  expected.portid = 1;
  expected.cntlid = spec::cntlid_dynamic;
  expected.asqsz = 128;
  spec::put_nul_padded(expected.trsvcid, "4420");
  spec::put_nul_padded(expected.subnqn, kNqn);
  spec::put_nul_padded(expected.traddr, kAddress);
  spec::set_entry_rdma_tsas(expected, spec::make_rdma_tsas(tsas.prtype));
  EXPECT_TRUE(SameBytes(page + 1024, reinterpret_cast<const uint8_t*>(&expected), 1024));
  // The host's buffer past the page's end comes back zeroed, not left as it was.
  EXPECT_TRUE(AllBytesAre(page + 2048, 2048, 0));
}

TEST_F(TargetCommandsTest, DiscoveryLogPartialReadsGenerationAndHostFiltering) {
  ASSERT_TRUE(target_->add_listener(kNqn, listener(kAddress, "4420")));
  target::SubsystemOpts restricted;
  restricted.nqn = kRestrictedNqn;
  restricted.allow_any_host = false;
  restricted.hosts = {kOtherHostNqn};
  ASSERT_TRUE(target_->add_subsystem(restricted));
  ASSERT_TRUE(target_->add_listener(kRestrictedNqn, listener(kAddress, "4420")));
  RawHost& discovery = new_host();
  bring_up_admin(discovery, kHostNqn, std::string(spec::discovery_nqn));
  const uint8_t* page = discovery.memory() + kScratch;

  // The header alone; the restricted subsystem is not this host's to see.
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 1024)));
  spec::DiscoveryLogPageHeader header;
  std::memcpy(&header, page, sizeof(header));
  const uint64_t generation = header.genctr;
  EXPECT_EQ(generation, target_->discovery_generation());
  EXPECT_EQ(header.numrec, 1u);
  // NUMREC alone (offset 8, 8 bytes).
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 8, 8)));
  uint64_t numrec = 0;
  std::memcpy(&numrec, page, 8);
  EXPECT_EQ(numrec, 1u);
  EXPECT_TRUE(AllBytesAre(page + 8, 8, 0xCC)) << "no byte past the buffer";
  // The first entry's SUBNQN alone (offset 1024 + 256).
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 256, 1024 + 256)));
  EXPECT_EQ(spec::get_nul_terminated(reinterpret_cast<const char*>(page), 256), kNqn);
  // A window across the end of the page: the page's last 8 bytes, then zeroes.
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 16, 2040)));
  EXPECT_TRUE(AllBytesAre(page, 16, 0));
  // At the end of the page: nothing to read.
  EXPECT_TRUE(StatusIs(get_log(discovery, spec::log_page::discovery, 16, 2048), sct::generic,
                       sc::invalid_field));

  // The host the restricted subsystem allows sees both.
  RawHost& other = new_host();
  bring_up_admin(other, kOtherHostNqn, std::string(spec::discovery_nqn));
  ASSERT_TRUE(Ok(get_log(other, spec::log_page::discovery, 3072)));
  std::memcpy(&header, other.memory() + kScratch, sizeof(header));
  EXPECT_EQ(header.numrec, 2u);

  // A new listener changes the log: GENCTR moves, NUMREC grows, the new entry has its port.
  ASSERT_TRUE(target_->add_listener(kNqn, listener("10.0.0.2", "4421")));
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 4096)));
  std::memcpy(&header, page, sizeof(header));
  EXPECT_GT(header.genctr, generation);
  EXPECT_EQ(header.numrec, 2u);
  spec::DiscoveryLogEntry second;
  std::memcpy(&second, page + 2048, sizeof(second));
  EXPECT_EQ(spec::get_nul_terminated(second.traddr), "10.0.0.2");
  EXPECT_EQ(spec::get_nul_terminated(second.trsvcid), "4421");
  EXPECT_EQ(second.portid, 2);
  EXPECT_TRUE(AllBytesAre(page + 3072, 1024, 0));

  // What a discovery controller does not serve.
  EXPECT_TRUE(StatusIs(get_log(discovery, spec::log_page::smart_health, 512), sct::generic,
                       sc::invalid_field));
  EXPECT_TRUE(
      StatusIs(identify(discovery, spec::cns::namespace_data, 1), sct::generic, sc::invalid_field));
  EXPECT_TRUE(StatusIs(run(discovery, abort_command(0, 1)), sct::generic, sc::invalid_opcode));
  // And it keeps serving.
  EXPECT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 1024)));
}

TEST_F(TargetCommandsTest, DiscoveryLogChangeNotice) {
  RawHost& discovery = new_host();
  bring_up_admin(discovery, kHostNqn, std::string(spec::discovery_nqn));
  EXPECT_EQ(get_feature(discovery, spec::feature::async_event_configuration).cqe.cdw0, 0u)
      << "discovery notices are opt-in";
  ASSERT_TRUE(Ok(set_feature(discovery, spec::feature::async_event_configuration,
                             spec::async_event_config_bit::discovery_log_page_change)));
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 1024)));
  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  aer.cid = discovery.next_cid();
  ASSERT_TRUE(discovery.send_capsule(aer));
  RawCompletion event;
  EXPECT_FALSE(discovery.wait_response(&event, 200));
  ASSERT_TRUE(target_->add_listener(kNqn, listener(kAddress, "4420")));
  ASSERT_TRUE(discovery.wait_response(&event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_TRUE(Ok(event));
  EXPECT_EQ(spec::async_event_type_of(event.cqe.cdw0), spec::async_event_type::notice);
  EXPECT_EQ(spec::async_event_info_of(event.cqe.cdw0),
            spec::async_event_notice::discovery_log_page_change);
  EXPECT_EQ(spec::async_event_log_page_of(event.cqe.cdw0), spec::log_page::discovery);
  ASSERT_TRUE(Ok(get_log(discovery, spec::log_page::discovery, 2048)));
  spec::DiscoveryLogPageHeader header;
  std::memcpy(&header, discovery.memory() + kScratch, sizeof(header));
  EXPECT_EQ(header.numrec, 1u);
  EXPECT_EQ(header.genctr, target_->discovery_generation());
  EXPECT_TRUE(Ok(run(discovery, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
}

TEST_F(TargetCommandsTest, PropertiesOverTheWire) {
  RawHost& admin = new_host();
  ASSERT_TRUE(admin.connect(kAddress, kPort, 0, 32, 31).established);
  RawCompletion connected = admin.fabrics_connect(0, 32, 0xFFFF, kNqn, kHostNqn, 10000);
  ASSERT_TRUE(Ok(connected));
  const uint16_t cntlid = spec::connect_response_cntlid(connected.cqe);

  RawCompletion cap = admin.property_get(spec::property_offset::cap);
  ASSERT_TRUE(Ok(cap));
  spec::CapFields fields;
  fields.mqes = 127;
  fields.cqr = true;
  fields.to = spec::cap_to(spec::property_get_value(cap.cqe));
  fields.css = spec::cap_css_bit::nvm;
  EXPECT_EQ(spec::property_get_value(cap.cqe), spec::encode_cap(fields))
      << "MQES 127, CQR, CSS NVM, MPSMIN = MPSMAX = 0 (4 KiB)";
  EXPECT_GE(fields.to, 1);
  RawCompletion vs = admin.property_get(spec::property_offset::vs);
  ASSERT_TRUE(Ok(vs));
  EXPECT_EQ(spec::property_get_value(vs.cqe), spec::make_version(1, 3, 0));
  RawCompletion cc = admin.property_get(spec::property_offset::cc);
  ASSERT_TRUE(Ok(cc));
  EXPECT_EQ(spec::property_get_value(cc.cqe), 0u);
  RawCompletion csts = admin.property_get(spec::property_offset::csts);
  ASSERT_TRUE(Ok(csts));
  EXPECT_EQ(spec::property_get_value(csts.cqe), 0u);

  // Not enabled yet: admin commands wait.
  EXPECT_TRUE(
      StatusIs(identify(admin, spec::cns::controller), sct::generic, sc::command_sequence_error));

  spec::CcFields enable_fields;
  enable_fields.en = true;
  enable_fields.iosqes = 6;
  enable_fields.iocqes = 4;
  const uint32_t enabled = spec::encode_cc(enable_fields);
  ASSERT_TRUE(Ok(admin.property_set(spec::property_offset::cc, enabled)));
  cc = admin.property_get(spec::property_offset::cc);
  EXPECT_EQ(spec::property_get_value(cc.cqe), enabled);
  csts = admin.property_get(spec::property_offset::csts);
  EXPECT_EQ(spec::property_get_value(csts.cqe), spec::encode_csts(spec::CstsFields{.rdy = true}));
  EXPECT_TRUE(Ok(identify(admin, spec::cns::controller)));

  // Wrong sizes, read-only and unknown properties.
  spec::PropertyGetCommand half_cap = spec::make_property_get(0, spec::property_offset::cap);
  half_cap.attrib = spec::property_attrib::size_4_bytes;
  EXPECT_TRUE(StatusIs(run(admin, spec::to_sqe(half_cap)), sct::generic, sc::invalid_field));
  EXPECT_TRUE(StatusIs(admin.property_set(spec::property_offset::csts, 0), sct::generic,
                       sc::invalid_field));
  EXPECT_TRUE(
      StatusIs(admin.property_get(spec::property_offset::intms), sct::generic, sc::invalid_field));

  // Properties live on the admin queue only.
  RawHost& io = bring_up_io(cntlid);
  EXPECT_TRUE(
      StatusIs(io.property_get(spec::property_offset::cap), sct::generic, sc::invalid_opcode));
  seed_known_data(io);
  expect_healthy(io, "property errors");

  // An enable with bad CC fields fails the controller (CSTS.CFS); a reset recovers it.
  RawHost& second = new_host();
  ASSERT_TRUE(second.connect(kAddress, kPort, 0, 32, 31).established);
  ASSERT_TRUE(Ok(second.fabrics_connect(0, 32, 0xFFFF, kNqn, kOtherHostNqn, 10000)));
  spec::CcFields bad = enable_fields;
  bad.iosqes = 5;
  ASSERT_TRUE(Ok(second.property_set(spec::property_offset::cc, spec::encode_cc(bad))));
  csts = second.property_get(spec::property_offset::csts);
  EXPECT_TRUE(spec::csts_cfs(csts.cqe.cdw0));
  EXPECT_FALSE(spec::csts_rdy(csts.cqe.cdw0));
  EXPECT_TRUE(
      StatusIs(identify(second, spec::cns::controller), sct::generic, sc::command_sequence_error));
  ASSERT_TRUE(Ok(second.property_set(spec::property_offset::cc, 0)));
  EXPECT_EQ(second.property_get(spec::property_offset::csts).cqe.cdw0, 0u);
  EXPECT_TRUE(enable(second));
  EXPECT_TRUE(Ok(identify(second, spec::cns::controller)));
}

TEST_F(TargetCommandsTest, ShutdownNotificationCompletesAndTheHostMayEnableAgain) {
  Association a = associate();
  seed_known_data(*a.io);
  ASSERT_EQ(transport_->connection_count(), 2u);

  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;
  cc.iocqes = 4;
  cc.shn = spec::shutdown_notification::normal;
  ASSERT_TRUE(Ok(a.admin->property_set(spec::property_offset::cc, spec::encode_cc(cc))));
  RawCompletion csts = a.admin->property_get(spec::property_offset::csts);
  ASSERT_TRUE(Ok(csts));
  EXPECT_EQ(spec::csts_shst(csts.cqe.cdw0), spec::shutdown_status::complete);
  EXPECT_FALSE(spec::csts_cfs(csts.cqe.cdw0));
  // The I/O queue goes away; the admin queue stays, for Fabrics commands only.
  EXPECT_TRUE(a.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(1));
  EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::controller), sct::generic,
                       sc::command_sequence_error));

  // CC.SHN and CC.EN cleared, then enabled again: a working controller with a new I/O queue.
  ASSERT_TRUE(Ok(a.admin->property_set(spec::property_offset::cc, 0)));
  csts = a.admin->property_get(spec::property_offset::csts);
  EXPECT_EQ(spec::csts_shst(csts.cqe.cdw0), spec::shutdown_status::normal);
  ASSERT_TRUE(enable(*a.admin));
  EXPECT_TRUE(Ok(identify(*a.admin, spec::cns::controller)));
  RawHost& io = bring_up_io(a.cntlid);
  expect_healthy(io, "shutdown and re-enable");
}

TEST_F(TargetCommandsTest, DisconnectCommandClosesOnlyThatIoQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  // On the admin queue it is refused (the association goes with the admin queue).
  EXPECT_TRUE(StatusIs(run(*a.admin, disconnect_command()), sct::command_specific,
                       scf::invalid_queue_type));

  RawCompletion done = run(*a.io, disconnect_command());
  EXPECT_TRUE(Ok(done));
  EXPECT_EQ(done.cqe.sqid, 1);
  EXPECT_TRUE(a.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(1));
  EXPECT_EQ(target_->controller_count(kNqn), 1u) << "the controller stays";
  EXPECT_TRUE(Ok(run(*a.admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  // The QID is free again.
  RawHost& io = bring_up_io(a.cntlid, 1);
  expect_healthy(io, "Disconnect");
}

// =============================================================================================
// Admin commands

TEST_F(TargetCommandsTest, IdentifyNamespace) {
  Association a = associate();
  seed_known_data(*a.io);
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::namespace_data, 1)));
  spec::IdentifyNamespace ns;
  std::memcpy(&ns, a.admin->memory() + kScratch, sizeof(ns));
  EXPECT_EQ(ns.nsze, kBlockCount);
  EXPECT_EQ(ns.ncap, kBlockCount);
  EXPECT_EQ(ns.nuse, kBlockCount);
  EXPECT_EQ(ns.nlbaf, 0) << "one LBA format";
  EXPECT_EQ(spec::flbas_format_index(ns.flbas), 0);
  EXPECT_FALSE(spec::flbas_extended_metadata(ns.flbas));
  EXPECT_EQ(ns.lbaf[0].lbads, 9);
  EXPECT_EQ(ns.lbaf[0].ms, 0);
  EXPECT_EQ(spec::namespace_block_size(ns), kBlockSize);
  EXPECT_EQ(ns.nvmcap.low, kBlockCount * kBlockSize);
  EXPECT_EQ(ns.nvmcap.high, 0u);
  EXPECT_TRUE(AllBytesAre(ns.nguid, sizeof(ns.nguid), 0)) << "no NGUID configured";
  EXPECT_TRUE(AllBytesAre(ns.eui64, sizeof(ns.eui64), 0)) << "no EUI64 configured";
  EXPECT_TRUE(AllBytesAre(reinterpret_cast<const uint8_t*>(&ns.lbaf[1]),
                          sizeof(ns.lbaf) - sizeof(ns.lbaf[0]), 0));
  EXPECT_TRUE(AllBytesAre(ns.vs, sizeof(ns.vs), 0));

  // An inactive NSID within NN reads as zeroes; others are invalid.
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::namespace_data, 5)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 4096, 0));
  for (uint32_t nsid : {0u, 33u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
    EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::namespace_data, nsid), sct::generic,
                         sc::invalid_namespace_or_format))
        << "NSID " << nsid;
  }
  // The Identify data is 4 KiB: a smaller buffer is refused.
  EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::namespace_data, 1, 2048), sct::generic,
                       sc::data_sgl_length_invalid));
  expect_healthy(*a.io, "Identify Namespace errors");
}

TEST_F(TargetCommandsTest, IdentifyControllerOverTwoKeyedDescriptors) {
  Association a = associate();
  // Identify data split over a Last Segment of two keyed descriptors (the in-capsule list).
  std::memset(a.admin->memory() + kScratch, 0xCC, 8192);
  spec::SglDescriptor list[2] = {keyed(*a.admin, kScratch, 1000),
                                 keyed(*a.admin, kScratch + 4096, 3096)};
  spec::Sqe sqe = spec::make_identify(0, spec::cns::controller);
  sqe.sgl1 = spec::make_last_segment(0, sizeof(list));
  std::vector<uint8_t> list_bytes(sizeof(list));
  std::memcpy(list_bytes.data(), list, sizeof(list));
  ASSERT_TRUE(Ok(run(*a.admin, sqe, list_bytes)));
  uint8_t raw[4096];
  std::memcpy(raw, a.admin->memory() + kScratch, 1000);
  std::memcpy(raw + 1000, a.admin->memory() + kScratch + 4096, 3096);
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch + 1000, 4096 - 1000, 0xCC))
      << "nothing written between the two descriptors";
  spec::IdentifyController id;
  std::memcpy(&id, raw, sizeof(id));

  EXPECT_EQ(id.cntlid, a.cntlid);
  EXPECT_EQ(spec::get_nul_terminated(id.subnqn), kNqn);
  EXPECT_TRUE(AllBytesAre(reinterpret_cast<const uint8_t*>(id.subnqn) + std::strlen(kNqn),
                          sizeof(id.subnqn) - std::strlen(kNqn), 0))
      << "SUBNQN NUL padded";
  EXPECT_EQ(spec::get_space_padded(id.sn), kSerial);
  EXPECT_EQ(id.sn[sizeof(id.sn) - 1], ' ') << "SN space padded";
  EXPECT_EQ(spec::get_space_padded(id.mn), kModel);
  EXPECT_EQ(id.mn[sizeof(id.mn) - 1], ' ') << "MN space padded";
  EXPECT_EQ(id.mdts, 8) << "1 MiB of 4 KiB pages";
  EXPECT_EQ(id.ver, spec::make_version(1, 3, 0));
  EXPECT_EQ(id.cntrltype, spec::controller_type::io);
  EXPECT_EQ(id.ioccsz, (64u + kInCapsule) / 16);
  EXPECT_EQ(id.iorcsz, 1u);
  EXPECT_EQ(id.icdoff, 0);
  EXPECT_EQ(id.fcatt & spec::fcatt_bit::static_controller_model, 0) << "dynamic model";
  EXPECT_EQ(id.msdbd, 16);
  EXPECT_NE(id.ofcs & spec::ofcs_bit::disconnect, 0);
  EXPECT_EQ(id.sgls & 0x3u, spec::sgls_bit::supported_no_alignment);
  EXPECT_NE(id.sgls & spec::sgls_bit::keyed_data_block, 0u);
  EXPECT_NE(id.sgls & spec::sgls_bit::address_as_offset, 0u);
  EXPECT_EQ(id.nn, 32u);
  EXPECT_EQ(id.sqes, spec::make_queue_entry_sizes(6, 6));
  EXPECT_EQ(id.cqes, spec::make_queue_entry_sizes(4, 4));
  EXPECT_EQ(id.maxcmd, 128);
  EXPECT_EQ(id.kas, 10) << "1 s keep-alive granularity in 100 ms units";
  EXPECT_EQ(id.aerl, 3);
  EXPECT_NE(id.oncs & spec::oncs_bit::write_zeroes, 0);
  EXPECT_NE(id.oncs & spec::oncs_bit::dataset_management, 0);
  EXPECT_NE(id.oaes & (1u << 8), 0u) << "namespace attribute notices";
  EXPECT_TRUE(AllBytesAre(reinterpret_cast<const uint8_t*>(id.vs), sizeof(id.vs), 0));
}

TEST_F(TargetCommandsTest, IdentifyActiveNamespaceListAndDescriptors) {
  Association a = associate();
  seed_known_data(*a.io);
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::active_namespace_list, 0)));
  spec::ActiveNamespaceList list;
  std::memcpy(&list, a.admin->memory() + kScratch, sizeof(list));
  EXPECT_EQ(list.nsid[0], 1u);
  EXPECT_TRUE(AllBytesAre(reinterpret_cast<const uint8_t*>(&list.nsid[1]), 4092, 0));
  // NSIDs greater than 1: none.
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::active_namespace_list, 1)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 4096, 0));
  EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::active_namespace_list, 0xFFFFFFFE),
                       sct::generic, sc::invalid_namespace_or_format));

  // The descriptor list carries the bdev's UUID (no NGUID or EUI64 configured).
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::namespace_id_descriptor_list, 1)));
  const uint8_t* data = a.admin->memory() + kScratch;
  uint8_t expected[4096] = {};
  expected[0] = spec::nidt::uuid;
  expected[1] = 16;
  std::memcpy(expected + 4, bdev_->uuid().data(), 16);
  EXPECT_FALSE(bdev::uuid_is_null(bdev_->uuid()));
  EXPECT_TRUE(SameBytes(data, expected, sizeof(expected)));
  spec::NamespaceIdentifiers ids;
  ASSERT_TRUE(spec::decode_ns_id_descriptor_list(data, 4096, &ids));
  EXPECT_TRUE(ids.has_uuid);
  EXPECT_FALSE(ids.has_nguid);
  EXPECT_FALSE(ids.has_eui64);
  EXPECT_EQ(std::memcmp(ids.uuid, bdev_->uuid().data(), 16), 0);

  for (uint32_t nsid : {0u, 2u, 0xFFFFFFFFu}) {
    EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::namespace_id_descriptor_list, nsid),
                         sct::generic, sc::invalid_namespace_or_format))
        << "NSID " << nsid;
  }
  EXPECT_TRUE(StatusIs(identify(*a.admin, spec::cns::allocated_namespace_list, 0), sct::generic,
                       sc::invalid_field))
      << "unsupported CNS";
  expect_healthy(*a.io, "Identify errors");
}

TEST_F(TargetCommandsTest, ErrorLogAndLogPageArgumentChecks) {
  Association a = associate();
  seed_known_data(*a.io);
  // Error Information: one (invalid, all zero) 64-byte entry.
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::error_information, 64)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 64, 0));
  // A 4 KiB buffer for it: the page, then zeroes.
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::error_information, 4096)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 4096, 0));

  // Unsupported pages, the discovery page on an I/O controller, an offset past the page.
  EXPECT_TRUE(StatusIs(get_log(*a.admin, spec::log_page::commands_supported_effects, 4096),
                       sct::generic, sc::invalid_field));
  EXPECT_TRUE(StatusIs(get_log(*a.admin, spec::log_page::discovery, 4096), sct::generic,
                       sc::invalid_field));
  EXPECT_TRUE(StatusIs(get_log(*a.admin, spec::log_page::error_information, 64, 64), sct::generic,
                       sc::invalid_field));
  // An offset that is not a dword multiple.
  std::memset(a.admin->memory() + kScratch, 0xCC, 64);
  spec::Sqe unaligned = spec::make_get_log_page(0, spec::log_page::error_information, 32);
  unaligned.cdw12 = 2;
  unaligned.sgl1 = keyed(*a.admin, kScratch, 32);
  EXPECT_TRUE(StatusIs(run(*a.admin, unaligned), sct::generic, sc::invalid_field));
  // NUMD asks for more than the SGL describes.
  EXPECT_TRUE(
      StatusIs(get_log(*a.admin, spec::log_page::error_information, 128, 0, spec::nsid_all, 64),
               sct::generic, sc::data_sgl_length_invalid));
  expect_healthy(*a.io, "Get Log Page errors");
}

TEST_F(TargetCommandsTest, SmartLogCountsHostReadsAndWrites) {
  Association a = associate();
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::smart_health, 512)));
  spec::SmartHealthLog log;
  std::memcpy(&log, a.admin->memory() + kScratch, sizeof(log));
  EXPECT_EQ(log.host_write_commands.low, 0u);
  EXPECT_EQ(log.host_read_commands.low, 0u);
  EXPECT_EQ(log.data_units_written.low, 0u);
  EXPECT_EQ(log.critical_warning, 0);

  // 8 writes of 128 KiB and one of a block: 1 049 088 bytes = 3 units of 512 000 (rounded up).
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(Ok(write_keyed(*a.io, uint64_t{i} * 256, pattern(uint64_t{i} * 256, 256, 3))));
  }
  ASSERT_TRUE(Ok(write_in_capsule(*a.io, 4000, pattern(4000, 1, 3))));
  // 4 reads of 128 KiB: 524 288 bytes = 2 units.
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(Ok(read_keyed(*a.io, uint64_t{i} * 256, 256)));
  // Commands that fail do not count.
  EXPECT_FALSE(read_keyed(*a.io, kBlockCount, 1).ok());

  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::smart_health, 512)));
  std::memcpy(&log, a.admin->memory() + kScratch, sizeof(log));
  EXPECT_EQ(log.host_write_commands.low, 9u);
  EXPECT_EQ(log.host_read_commands.low, 4u);
  EXPECT_EQ(log.data_units_written.low, 3u);
  EXPECT_EQ(log.data_units_read.low, 2u);
  EXPECT_EQ(log.host_write_commands.high, 0u);
  EXPECT_TRUE(AllBytesAre(log.reserved232, sizeof(log.reserved232), 0));
  // NSID 0 means the controller too; a single namespace is not supported (LPA bit 0 clear).
  EXPECT_TRUE(Ok(get_log(*a.admin, spec::log_page::smart_health, 512, 0, 0)));
  EXPECT_TRUE(StatusIs(get_log(*a.admin, spec::log_page::smart_health, 512, 0, 1), sct::generic,
                       sc::invalid_field));
  // A partial read: Host Read Commands alone (offset 64, 16 bytes).
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::smart_health, 16, 64)));
  uint64_t reads = 0;
  std::memcpy(&reads, a.admin->memory() + kScratch, 8);
  EXPECT_EQ(reads, 4u);
}

TEST_F(TargetCommandsTest, NamespaceAddAndRemoveRaiseEventsAndChangeTheList) {
  Association a = associate();
  seed_known_data(*a.io);
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::changed_namespace_list, 4096)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 4096, 0)) << "nothing changed yet";

  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  aer.cid = a.admin->next_cid();
  ASSERT_TRUE(a.admin->send_capsule(aer));
  RawCompletion early;
  EXPECT_FALSE(a.admin->wait_response(&early, 200)) << "the AER must be held";

  // A namespace of 4 KiB blocks appears at run time.
  extra_bdev_ = make_bdev("Malloc1", 4096, 1024);
  ASSERT_TRUE(extra_bdev_);
  target::NamespaceOpts ns;
  ns.bdev = extra_bdev_.get();
  auto nsid = target_->add_namespace(kNqn, ns);
  ASSERT_TRUE(nsid);
  ASSERT_EQ(*nsid, 2u);

  RawCompletion event;
  ASSERT_TRUE(a.admin->wait_response(&event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_TRUE(Ok(event));
  EXPECT_EQ(spec::async_event_type_of(event.cqe.cdw0), spec::async_event_type::notice);
  EXPECT_EQ(spec::async_event_info_of(event.cqe.cdw0),
            spec::async_event_notice::namespace_attribute_changed);
  EXPECT_EQ(spec::async_event_log_page_of(event.cqe.cdw0), spec::log_page::changed_namespace_list);

  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::changed_namespace_list, 4096)));
  spec::ChangedNamespaceList changed;
  std::memcpy(&changed, a.admin->memory() + kScratch, sizeof(changed));
  EXPECT_EQ(changed.nsid[0], 2u);
  EXPECT_TRUE(AllBytesAre(reinterpret_cast<const uint8_t*>(&changed.nsid[1]), 4092, 0));
  // Reading cleared it.
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::changed_namespace_list, 4096)));
  EXPECT_TRUE(AllBytesAre(a.admin->memory() + kScratch, 4096, 0));

  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::active_namespace_list, 0)));
  spec::ActiveNamespaceList active;
  std::memcpy(&active, a.admin->memory() + kScratch, sizeof(active));
  EXPECT_EQ(active.nsid[0], 1u);
  EXPECT_EQ(active.nsid[1], 2u);
  EXPECT_EQ(active.nsid[2], 0u);
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::namespace_data, 2)));
  spec::IdentifyNamespace id;
  std::memcpy(&id, a.admin->memory() + kScratch, sizeof(id));
  EXPECT_EQ(id.nsze, 1024u);
  EXPECT_EQ(id.lbaf[0].lbads, 12);

  // The I/O queue that existed before sees the new namespace, with its block size.
  const auto block = pattern(5, 1, 0x42, 4096);
  EXPECT_TRUE(Ok(write_keyed(*a.io, 5, block, 2, 4096)));
  EXPECT_TRUE(Holds(*a.io, 5, block, 2, 4096));
  EXPECT_TRUE(StatusIs(read_keyed(*a.io, 1024, 1, 2, 4096), sct::generic, sc::lba_out_of_range));
  EXPECT_TRUE(StatusIs(read_keyed(*a.io, 5, 1, 2, 512), sct::generic, sc::data_sgl_length_invalid))
      << "512 bytes for one 4 KiB block";

  // Removal: another event, the list names it again, and I/O to it fails.
  aer.cid = a.admin->next_cid();
  ASSERT_TRUE(a.admin->send_capsule(aer));
  ASSERT_TRUE(target_->remove_namespace(kNqn, 2));
  ASSERT_TRUE(a.admin->wait_response(&event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_EQ(spec::async_event_info_of(event.cqe.cdw0),
            spec::async_event_notice::namespace_attribute_changed);
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::changed_namespace_list, 8)));
  std::memcpy(&changed, a.admin->memory() + kScratch, 8);
  EXPECT_EQ(changed.nsid[0], 2u);
  EXPECT_EQ(changed.nsid[1], 0u);
  EXPECT_TRUE(
      StatusIs(read_keyed(*a.io, 5, 1, 2, 4096), sct::generic, sc::invalid_namespace_or_format));
  expect_healthy(*a.io, "namespace add and remove");
}

TEST_F(TargetCommandsTest, NamespaceNoticeIsQueuedThenMaskedUntilTheLogIsRead) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& admin = *a.admin;
  auto add = [&](const char* name) {
    retired_bdevs_.push_back(make_bdev(name, 512, 64));  // outlives the target
    target::NamespaceOpts ns;
    ns.bdev = retired_bdevs_.back().get();
    auto nsid = target_->add_namespace(kNqn, ns);
    return nsid ? *nsid : 0u;
  };
  auto list = [&](bool rae) {
    std::memset(admin.memory() + kScratch, 0xCC, 64);
    spec::Sqe sqe = spec::make_get_log_page(0, spec::log_page::changed_namespace_list, 16, 0,
                                            spec::nsid_all, 0, rae);
    sqe.sgl1 = keyed(admin, kScratch, 16);
    EXPECT_TRUE(Ok(run(admin, sqe)));
    std::vector<uint32_t> nsids(4);
    std::memcpy(nsids.data(), admin.memory() + kScratch, 16);
    return nsids;
  };
  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);

  // A change with no AER outstanding waits for the next one, which completes at once.
  ASSERT_EQ(add("Ns2"), 2u);
  aer.cid = admin.next_cid();
  RawCompletion event;
  ASSERT_TRUE(admin.execute(aer, &event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_EQ(spec::async_event_log_page_of(event.cqe.cdw0), spec::log_page::changed_namespace_list);

  // Until the host reads the log page, further changes raise no notice.
  aer.cid = admin.next_cid();
  ASSERT_TRUE(admin.send_capsule(aer));
  ASSERT_EQ(add("Ns3"), 3u);
  EXPECT_FALSE(admin.wait_response(&event, 300)) << "masked";
  // Read with Retain Asynchronous Event: the list stays, the notice stays masked.
  EXPECT_EQ(list(true), (std::vector<uint32_t>{2, 3, 0, 0}));
  EXPECT_FALSE(admin.wait_response(&event, 300)) << "still masked (RAE)";
  // Read without RAE: the list is handed over and cleared; nothing new to report yet.
  EXPECT_EQ(list(false), (std::vector<uint32_t>{2, 3, 0, 0}));
  EXPECT_EQ(list(false), (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_FALSE(admin.wait_response(&event, 300)) << "no change since the read";
  // The next change is reported to the AER that has been waiting.
  ASSERT_EQ(add("Ns4"), 4u);
  ASSERT_TRUE(admin.wait_response(&event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_EQ(spec::async_event_info_of(event.cqe.cdw0),
            spec::async_event_notice::namespace_attribute_changed);
  EXPECT_EQ(list(false), (std::vector<uint32_t>{4, 0, 0, 0}));
  expect_healthy(*a.io, "namespace notices");
}

TEST_F(TargetCommandsTest, AsyncEventConfigurationGatesTheNotice) {
  Association a = associate();
  RawCompletion aec = get_feature(*a.admin, spec::feature::async_event_configuration);
  ASSERT_TRUE(Ok(aec));
  EXPECT_EQ(aec.cqe.cdw0, spec::async_event_config_bit::namespace_attribute) << "on by default";
  // Only what the controller supports sticks.
  ASSERT_TRUE(Ok(set_feature(*a.admin, spec::feature::async_event_configuration, 0xFFFFFFFF)));
  EXPECT_EQ(get_feature(*a.admin, spec::feature::async_event_configuration).cqe.cdw0,
            spec::async_event_config_bit::namespace_attribute);
  ASSERT_TRUE(Ok(set_feature(*a.admin, spec::feature::async_event_configuration, 0)));
  EXPECT_EQ(get_feature(*a.admin, spec::feature::async_event_configuration).cqe.cdw0, 0u);

  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  aer.cid = a.admin->next_cid();
  ASSERT_TRUE(a.admin->send_capsule(aer));
  extra_bdev_ = make_bdev("Malloc1", 512, 64);
  target::NamespaceOpts ns;
  ns.bdev = extra_bdev_.get();
  ASSERT_TRUE(target_->add_namespace(kNqn, ns));
  RawCompletion event;
  EXPECT_FALSE(a.admin->wait_response(&event, 300)) << "notices are disabled";

  ASSERT_TRUE(Ok(set_feature(*a.admin, spec::feature::async_event_configuration,
                             spec::async_event_config_bit::namespace_attribute)));
  extra_bdev2_ = make_bdev("Malloc2", 512, 64);
  ns.bdev = extra_bdev2_.get();
  ASSERT_TRUE(target_->add_namespace(kNqn, ns));
  ASSERT_TRUE(a.admin->wait_response(&event));
  EXPECT_EQ(event.cqe.cid, aer.cid);
  EXPECT_EQ(spec::async_event_info_of(event.cqe.cdw0),
            spec::async_event_notice::namespace_attribute_changed);
  // The list kept both changes.
  ASSERT_TRUE(Ok(get_log(*a.admin, spec::log_page::changed_namespace_list, 16)));
  uint32_t listed[4];
  std::memcpy(listed, a.admin->memory() + kScratch, sizeof(listed));
  EXPECT_EQ(listed[0], 2u);
  EXPECT_EQ(listed[1], 3u);
  EXPECT_EQ(listed[2], 0u);
}

TEST_F(TargetCommandsTest, NumberOfQueuesLimitsIoConnects) {
  RawHost& admin = new_host();
  const uint16_t cntlid = bring_up_admin(admin);
  RawCompletion queues = get_feature(admin, spec::feature::number_of_queues);
  ASSERT_TRUE(Ok(queues));
  EXPECT_EQ(queues.cqe.cdw0, spec::encode_number_of_queues(127, 127));
  EXPECT_TRUE(StatusIs(set_feature(admin, spec::feature::number_of_queues, 0xFFFF), sct::generic,
                       sc::invalid_field));

  // Ask for 4 SQs and 2 CQs: granted as asked; 2 queue pairs can connect.
  queues = set_feature(admin, spec::feature::number_of_queues, spec::encode_number_of_queues(4, 2));
  ASSERT_TRUE(Ok(queues));
  EXPECT_EQ(queues.cqe.cdw0, spec::encode_number_of_queues(4, 2));
  EXPECT_EQ(get_feature(admin, spec::feature::number_of_queues).cqe.cdw0,
            spec::encode_number_of_queues(4, 2));
  // More than the target has: capped at 127.
  queues = set_feature(admin, spec::feature::number_of_queues,
                       spec::encode_number_of_queues(1000, 1000));
  EXPECT_EQ(queues.cqe.cdw0, spec::encode_number_of_queues(127, 127));
  ASSERT_TRUE(
      Ok(set_feature(admin, spec::feature::number_of_queues, spec::encode_number_of_queues(2, 2))));

  RawHost& io1 = bring_up_io(cntlid, 1);
  seed_known_data(io1);
  bring_up_io(cntlid, 2);
  RawHost& io3 = cm_connected(3);
  expect_invalid_parameter(io3.fabrics_connect(3, 64, cntlid, kNqn, kHostNqn), false,
                           offsetof(spec::ConnectCommand, qid), "QID 3 of 2 granted");
  // With I/O queues connected the count is fixed.
  EXPECT_TRUE(StatusIs(
      set_feature(admin, spec::feature::number_of_queues, spec::encode_number_of_queues(8, 8)),
      sct::generic, sc::command_sequence_error));
  expect_healthy(io1, "Number of Queues");
}

TEST_F(TargetCommandsTest, KeepAliveTimerFeatureKeepAliveAndTimeout) {
  Association a = associate();
  seed_known_data(*a.io);
  RawCompletion kato = get_feature(*a.admin, spec::feature::keep_alive_timer);
  ASSERT_TRUE(Ok(kato));
  EXPECT_EQ(kato.cqe.cdw0, 10000u) << "the Connect's KATO";
  ASSERT_TRUE(Ok(set_feature(*a.admin, spec::feature::keep_alive_timer, 2500)));
  EXPECT_EQ(get_feature(*a.admin, spec::feature::keep_alive_timer).cqe.cdw0, 3000u)
      << "rounded up to the 1 s granularity (KAS 10)";
  // Nothing is saveable.
  spec::Sqe save = spec::make_set_features(0, spec::feature::keep_alive_timer, 5000, true);
  save.sgl1 = kNullSgl;
  EXPECT_TRUE(StatusIs(run(*a.admin, save), sct::command_specific,
                       spec::sc_command::feature_id_not_saveable));
  EXPECT_TRUE(StatusIs(get_feature(*a.admin, spec::feature::lba_range_type), sct::generic,
                       sc::invalid_field));

  // Keep Alive restarts the 3 s timer.
  const spec::Sqe keep_alive = spec::make_sqe(spec::admin_opcode::keep_alive, 0);
  for (int i = 0; i < 3; ++i) {
    harness_.advance_ms(2000);
    ASSERT_TRUE(Ok(run(*a.admin, keep_alive))) << "keep alive " << i;
  }
  EXPECT_TRUE(Holds(*a.io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)));
  // Without it the controller fails and every queue goes.
  harness_.advance_ms(3500);
  EXPECT_TRUE(a.admin->wait_disconnected());
  EXPECT_TRUE(a.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(0));
  EXPECT_TRUE(harness_.poll_until([&] { return target_->controller_count(kNqn) == 0; }));
  expect_other_host_serves("keep-alive timeout");
}

TEST_F(TargetCommandsTest, AbortOfAHeldAerAndTheAerLimit) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& admin = *a.admin;

  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  aer.cid = admin.next_cid();
  ASSERT_TRUE(admin.send_capsule(aer));
  spec::Sqe abort = abort_command(0, aer.cid);
  abort.cid = admin.next_cid();
  ASSERT_TRUE(admin.send_capsule(abort));
  std::map<uint16_t, RawCompletion> done;
  for (int i = 0; i < 2; ++i) {
    RawCompletion completion;
    ASSERT_TRUE(admin.wait_response(&completion)) << "response " << i;
    done[completion.cqe.cid] = completion;
  }
  ASSERT_EQ(done.count(aer.cid), 1u);
  ASSERT_EQ(done.count(abort.cid), 1u);
  EXPECT_TRUE(StatusIs(done[aer.cid], sct::generic, sc::abort_requested, false));
  EXPECT_TRUE(Ok(done[abort.cid]));
  EXPECT_EQ(done[abort.cid].cqe.cdw0 & 1u, 0u) << "DW0 bit 0 = 0: the command was aborted";

  // Nothing to abort: the Abort succeeds with bit 0 set, on the admin queue and on an I/O
  // queue (whose reactor answers through the admin queue's).
  RawCompletion none = run(admin, abort_command(0, 0x7777));
  EXPECT_TRUE(Ok(none));
  EXPECT_EQ(none.cqe.cdw0 & 1u, 1u);
  none = run(admin, abort_command(1, 0x7777));
  EXPECT_TRUE(Ok(none));
  EXPECT_EQ(none.cqe.cdw0 & 1u, 1u);

  // AERL + 1 = 4 held at once; the fifth is refused at once.
  std::vector<uint16_t> held;
  for (int i = 0; i < 4; ++i) {
    aer.cid = admin.next_cid();
    ASSERT_TRUE(admin.send_capsule(aer));
    held.push_back(aer.cid);
  }
  aer.cid = admin.next_cid();
  RawCompletion fifth;
  ASSERT_TRUE(admin.execute(aer, &fifth));
  EXPECT_EQ(fifth.cqe.cid, aer.cid);
  EXPECT_TRUE(StatusIs(fifth, sct::command_specific,
                       spec::sc_command::async_event_request_limit_exceeded, false));
  for (uint16_t cid : held) {
    spec::Sqe cancel = abort_command(0, cid);
    cancel.cid = admin.next_cid();
    ASSERT_TRUE(admin.send_capsule(cancel));
    std::map<uint16_t, RawCompletion> pair;
    for (int i = 0; i < 2; ++i) {
      RawCompletion completion;
      ASSERT_TRUE(admin.wait_response(&completion));
      pair[completion.cqe.cid] = completion;
    }
    EXPECT_TRUE(StatusIs(pair[cid], sct::generic, sc::abort_requested, false)) << "AER " << cid;
    EXPECT_EQ(pair[cancel.cid].cqe.cdw0 & 1u, 0u);
  }
  EXPECT_TRUE(Ok(run(admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  expect_healthy(*a.io, "Abort");
}

// =============================================================================================
// I/O commands

TEST_F(TargetCommandsTest, FlushAndWriteZeroes) {
  Association a = associate();
  seed_known_data(*a.io);
  auto data = pattern(200, 16, 7);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 200, data)));
  EXPECT_TRUE(Ok(run(*a.io, spec::make_sqe(spec::nvm_opcode::flush, 0, 1))));
  EXPECT_TRUE(Ok(run(*a.io, io_cmd(spec::nvm_opcode::write_zeroes, 204, 4))));
  std::fill(data.begin() + 4 * kBlockSize, data.begin() + 8 * kBlockSize, 0);
  EXPECT_TRUE(Holds(*a.io, 200, data));
  // The last block of the namespace, and the whole of it in one command.
  EXPECT_TRUE(Ok(run(*a.io, io_cmd(spec::nvm_opcode::write_zeroes, kBlockCount - 1, 1))));
  ASSERT_TRUE(Ok(write_keyed(*a.io, 300, pattern(300, 8, 1))));
  EXPECT_TRUE(Ok(run(*a.io, io_cmd(spec::nvm_opcode::write_zeroes, 256, 256))));
  EXPECT_TRUE(Holds(*a.io, 296, std::vector<uint8_t>(16 * kBlockSize, 0)));
  EXPECT_TRUE(StatusIs(run(*a.io, spec::make_sqe(spec::nvm_opcode::flush, 0, spec::nsid_all)),
                       sct::generic, sc::invalid_namespace_or_format))
      << "VWC says broadcast flush is not supported";
  expect_healthy(*a.io, "Flush and Write Zeroes");
}

TEST_F(TargetCommandsTest, DatasetManagementDeallocateInCapsuleRanges) {
  Association a = associate();
  seed_known_data(*a.io);
  auto data = pattern(300, 32, 9);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 300, data)));
  spec::DsmRange ranges[2] = {{0, 4, 302}, {0, 8, 320}};
  spec::Sqe dsm = dsm_deallocate(2);
  dsm.sgl1 = spec::make_in_capsule_data_block(0, sizeof(ranges));
  std::vector<uint8_t> list(sizeof(ranges));
  std::memcpy(list.data(), ranges, sizeof(ranges));
  ASSERT_TRUE(Ok(run(*a.io, dsm, list)));
  std::fill(data.begin() + 2 * kBlockSize, data.begin() + 6 * kBlockSize, 0);
  std::fill(data.begin() + 20 * kBlockSize, data.begin() + 28 * kBlockSize, 0);
  EXPECT_TRUE(Holds(*a.io, 300, data)) << "deallocated blocks read as zeroes (DLFEAT)";
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::namespace_data, 1)));
  spec::IdentifyNamespace id;
  std::memcpy(&id, a.admin->memory() + kScratch, sizeof(id));
  EXPECT_EQ(id.dlfeat & 0x7, 0x1) << "DLFEAT: deallocated blocks read as zeroes";
  expect_healthy(*a.io, "Dataset Management in capsule");
}

TEST_F(TargetCommandsTest, DatasetManagementDeallocateKeyedRangesAndBadRanges) {
  Association a = associate();
  seed_known_data(*a.io);
  auto data = pattern(400, 64, 11);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 400, data)));
  // Three ranges (one empty) sent keyed from host memory.
  spec::DsmRange ranges[3] = {{0, 1, 400}, {0, 0, 410}, {0, 16, 440}};
  std::memcpy(a.io->memory() + kScratch, ranges, sizeof(ranges));
  spec::Sqe dsm = dsm_deallocate(3);
  dsm.sgl1 = keyed(*a.io, kScratch, sizeof(ranges));
  ASSERT_TRUE(Ok(run(*a.io, dsm)));
  std::fill(data.begin(), data.begin() + kBlockSize, 0);
  std::fill(data.begin() + 40 * kBlockSize, data.begin() + 56 * kBlockSize, 0);
  EXPECT_TRUE(Holds(*a.io, 400, data));

  // A good range then a bad one: nothing is deallocated.
  const auto fresh = pattern(400, 64, 12);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 400, fresh)));
  spec::DsmRange mixed[2] = {{0, 8, 400}, {0, 2, kBlockCount - 1}};
  std::memcpy(a.io->memory() + kScratch, mixed, sizeof(mixed));
  dsm = dsm_deallocate(2);
  dsm.sgl1 = keyed(*a.io, kScratch, sizeof(mixed));
  EXPECT_TRUE(StatusIs(run(*a.io, dsm), sct::generic, sc::lba_out_of_range));
  // A range whose end wraps 64 bits, and one with a 32-bit length past the end.
  spec::DsmRange wraps[1] = {{0, 2, UINT64_MAX}};
  std::memcpy(a.io->memory() + kScratch, wraps, sizeof(wraps));
  dsm = dsm_deallocate(1);
  dsm.sgl1 = keyed(*a.io, kScratch, sizeof(wraps));
  EXPECT_TRUE(StatusIs(run(*a.io, dsm), sct::generic, sc::lba_out_of_range));
  spec::DsmRange huge[1] = {{0, 0xFFFFFFFF, 400}};
  std::memcpy(a.io->memory() + kScratch, huge, sizeof(huge));
  dsm.sgl1 = keyed(*a.io, kScratch, sizeof(huge));
  EXPECT_TRUE(StatusIs(run(*a.io, dsm), sct::generic, sc::lba_out_of_range));
  // NR says 2 ranges but the SGL holds one.
  dsm = dsm_deallocate(2);
  dsm.sgl1 = keyed(*a.io, kScratch, 16);
  EXPECT_TRUE(StatusIs(run(*a.io, dsm), sct::generic, sc::data_sgl_length_invalid));
  // Attributes without AD are hints: success, nothing changes.
  std::memcpy(a.io->memory() + kScratch, mixed, sizeof(mixed));
  dsm = dsm_deallocate(1);
  dsm.cdw11 = 1u << 0;  // IDR only
  dsm.sgl1 = keyed(*a.io, kScratch, 16);
  EXPECT_TRUE(Ok(run(*a.io, dsm)));
  EXPECT_TRUE(Holds(*a.io, 400, fresh)) << "no bad range deallocated anything";
  expect_healthy(*a.io, "Dataset Management errors");
}

TEST_F(TargetCommandsTest, SingleBlockKeyedAndInCapsule) {
  Association a = associate();
  seed_known_data(*a.io);
  const auto one = pattern(1234, 1, 21);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 1234, one)));
  EXPECT_TRUE(Holds(*a.io, 1234, one));
  const auto two = pattern(1235, 1, 22);
  ASSERT_TRUE(Ok(write_in_capsule(*a.io, 1235, two)));
  EXPECT_TRUE(Holds(*a.io, 1235, two));
  // The last block of the namespace.
  const auto last = pattern(kBlockCount - 1, 1, 23);
  ASSERT_TRUE(Ok(write_keyed(*a.io, kBlockCount - 1, last)));
  EXPECT_TRUE(Holds(*a.io, kBlockCount - 1, last));
  // A one-block read through a memory window bound for just that block, answered with
  // send-with-invalidate of the window's key.
  const uint32_t window = a.io->bind_window(kDataIn + 8192, kBlockSize);
  ASSERT_NE(window, 0u);
  std::memset(a.io->memory() + kDataIn + 8192, 0xEE, kBlockSize);
  spec::Sqe read = io_cmd(spec::nvm_opcode::read, 1234, 1);
  read.sgl1 = spec::make_keyed_data_block(a.io->address(kDataIn + 8192), kBlockSize, window, true);
  RawCompletion done = run(*a.io, read);
  ASSERT_TRUE(Ok(done));
  EXPECT_TRUE(done.remote_invalidated);
  EXPECT_EQ(done.invalidated_rkey, window);
  EXPECT_TRUE(SameBytes(a.io->memory() + kDataIn + 8192, one.data(), kBlockSize));
  expect_healthy(*a.io, "single blocks");
}

TEST_F(TargetCommandsTest, MaxIoSizeKeyedWriteAndSixteenDescriptorRead) {
  Association a = associate();
  seed_known_data(*a.io);
  constexpr uint32_t kBlocks = kMaxIo / kBlockSize;  // 2048
  const auto data = pattern(2048, kBlocks, 31);
  ASSERT_TRUE(Ok(write_keyed(*a.io, 2048, data)));
  EXPECT_TRUE(Holds(*a.io, 2048, data));

  // The same 1 MiB read into 16 scattered 64 KiB host areas (MSDBD descriptors).
  constexpr uint32_t kPiece = kMaxIo / 16;
  std::memset(a.io->memory() + kDataIn, 0xEE, 2 * kMaxIo);
  spec::SglDescriptor list[16];
  for (uint32_t i = 0; i < 16; ++i) {
    // Backwards and with gaps: piece i lands at kDataIn + (15 - i) * 2 * kPiece.
    list[i] = keyed(*a.io, kDataIn + (15 - i) * 2 * kPiece, kPiece);
  }
  std::vector<uint8_t> list_bytes(sizeof(list));
  std::memcpy(list_bytes.data(), list, sizeof(list));
  spec::Sqe read = io_cmd(spec::nvm_opcode::read, 2048, kBlocks);
  read.sgl1 = spec::make_last_segment(0, sizeof(list));
  ASSERT_TRUE(Ok(run(*a.io, read, list_bytes)));
  for (uint32_t i = 0; i < 16; ++i) {
    const uint8_t* piece = a.io->memory() + kDataIn + (15 - i) * 2 * kPiece;
    EXPECT_TRUE(SameBytes(piece, data.data() + i * kPiece, kPiece)) << "piece " << i;
    EXPECT_TRUE(AllBytesAre(piece + kPiece, kPiece, 0xEE)) << "gap after piece " << i;
  }

  // A 1 MiB write gathered from 16 descriptors, read back in one.
  const auto gathered = pattern(3000, kBlocks, 32);
  for (uint32_t i = 0; i < 16; ++i) {
    std::memcpy(a.io->memory() + kDataOut + i * 2 * kPiece, gathered.data() + i * kPiece, kPiece);
    list[i] = keyed(*a.io, kDataOut + i * 2 * kPiece, kPiece);
  }
  std::memcpy(list_bytes.data(), list, sizeof(list));
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, 3000, kBlocks);
  write.sgl1 = spec::make_last_segment(0, sizeof(list));
  ASSERT_TRUE(Ok(run(*a.io, write, list_bytes)));
  EXPECT_TRUE(Holds(*a.io, 3000, gathered));

  // A descriptor list at an offset inside the capsule, with a zero-length descriptor (no data,
  // as the base spec defines a length of 0) between two real ones.
  const auto small = pattern(3500, 2, 33);
  std::memcpy(a.io->memory() + kDataOut, small.data(), kBlockSize);
  std::memcpy(a.io->memory() + kDataOut + 8192, small.data() + kBlockSize, kBlockSize);
  std::vector<uint8_t> capsule(48, 0xEE);
  for (const spec::SglDescriptor& d :
       {keyed(*a.io, kDataOut, kBlockSize), keyed(*a.io, kDataOut + 4096, 0),
        keyed(*a.io, kDataOut + 8192, kBlockSize)}) {
    const auto b = bytes_of(d);
    capsule.insert(capsule.end(), b.begin(), b.end());
  }
  write = io_cmd(spec::nvm_opcode::write, 3500, 2);
  write.sgl1 = spec::make_last_segment(48, 48);
  EXPECT_TRUE(Ok(run(*a.io, write, capsule)));
  EXPECT_TRUE(Holds(*a.io, 3500, small));
  expect_healthy(*a.io, "max_io_size transfers");
}

// A target configured with max_sgl_descriptors 4 (MSDBD 4) refuses a list of 5 with Data SGL
// Length Invalid, and takes 4.
class TargetMsdbdTest : public TargetCommandsTest {
 protected:
  target::TargetOpts target_opts() const override {
    target::TargetOpts opts;
    opts.max_sgl_descriptors = 4;
    return opts;
  }
};

TEST_F(TargetMsdbdTest, ListsLongerThanMsdbdAreRefused) {
  Association a = associate();
  seed_known_data(*a.io);
  ASSERT_TRUE(Ok(identify(*a.admin, spec::cns::controller)));
  spec::IdentifyController id;
  std::memcpy(&id, a.admin->memory() + kScratch, sizeof(id));
  EXPECT_EQ(id.msdbd, 4);
  auto read_over = [&](uint32_t pieces) {
    std::vector<spec::SglDescriptor> list;
    for (uint32_t i = 0; i < pieces; ++i) list.push_back(keyed(*a.io, kDataIn + i * 4096, kBlockSize));
    std::vector<uint8_t> list_bytes(list.size() * sizeof(spec::SglDescriptor));
    std::memcpy(list_bytes.data(), list.data(), list_bytes.size());
    spec::Sqe read = io_cmd(spec::nvm_opcode::read, 0, pieces);
    read.sgl1 = spec::make_last_segment(0, static_cast<uint32_t>(list_bytes.size()));
    return run(*a.io, read, list_bytes);
  };
  EXPECT_TRUE(Ok(read_over(4)));
  EXPECT_TRUE(StatusIs(read_over(5), sct::generic, sc::data_sgl_length_invalid));
  expect_healthy(*a.io, "MSDBD");
}

TEST_F(TargetCommandsTest, FullInCapsuleWriteAndReadBack) {
  Association a = associate();
  seed_known_data(*a.io);
  const auto data = pattern(5000, kInCapsule / kBlockSize, 41);
  ASSERT_TRUE(Ok(write_in_capsule(*a.io, 5000, data)));
  EXPECT_TRUE(Holds(*a.io, 5000, data));
  // Data at an offset inside the capsule: 512 bytes at 3584 (the capsule's last block).
  std::vector<uint8_t> capsule(kInCapsule, 0x11);
  const auto block = pattern(5100, 1, 42);
  std::memcpy(capsule.data() + 3584, block.data(), kBlockSize);
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, 5100, 1);
  write.sgl1 = spec::make_in_capsule_data_block(3584, kBlockSize);
  ASSERT_TRUE(Ok(run(*a.io, write, capsule)));
  EXPECT_TRUE(Holds(*a.io, 5100, block));
  // In-capsule data that the capsule does not carry: SGL 4096, capsule 1024.
  write = io_cmd(spec::nvm_opcode::write, 5200, 8);
  write.sgl1 = spec::make_in_capsule_data_block(0, kInCapsule);
  EXPECT_TRUE(StatusIs(run(*a.io, write, std::vector<uint8_t>(1024, 0x22)), sct::generic,
                       sc::data_sgl_length_invalid));
  EXPECT_TRUE(Holds(*a.io, 5200, std::vector<uint8_t>(8 * kBlockSize, 0)));
  expect_healthy(*a.io, "in-capsule writes");
}

TEST_F(TargetCommandsTest, ThirtyTwoCommandsInFlight) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  // The SQ head before the burst (the queue has 64 entries: HSQSIZE 63).
  RawCompletion before = run(io, spec::make_sqe(spec::nvm_opcode::flush, 0, 1));
  ASSERT_TRUE(Ok(before));
  constexpr uint32_t kSqEntries = 64;
  constexpr uint32_t kCount = RawHost::kBurstMax;
  constexpr uint32_t kBlocks = 8;  // 4 KiB each
  std::vector<spec::Sqe> writes;
  std::vector<std::vector<uint8_t>> capsules;
  std::vector<std::vector<uint8_t>> expected;
  for (uint32_t i = 0; i < kCount; ++i) {
    const uint64_t lba = 6000 + uint64_t{i} * kBlocks;
    expected.push_back(pattern(lba, kBlocks, static_cast<uint8_t>(0x60 + i)));
    spec::Sqe write = io_cmd(spec::nvm_opcode::write, lba, kBlocks);
    write.cid = io.next_cid();
    if (i % 2 == 0) {  // keyed: the target reads it with RDMA READ
      std::memcpy(io.memory() + kDataOut + i * 4096, expected[i].data(), 4096);
      write.sgl1 = keyed(io, kDataOut + i * 4096, 4096);
      capsules.emplace_back();
    } else {  // in the capsule
      write.sgl1 = spec::make_in_capsule_data_block(0, 4096);
      capsules.push_back(expected[i]);
    }
    writes.push_back(write);
  }
  ASSERT_TRUE(io.send_burst(writes, capsules));
  std::set<uint16_t> cids;
  uint32_t furthest = 0;  // SQ entries consumed since `before`, as the responses report
  for (uint32_t i = 0; i < kCount; ++i) {
    RawCompletion done;
    ASSERT_TRUE(io.wait_response(&done)) << "write response " << i;
    EXPECT_TRUE(Ok(done)) << "cid " << done.cqe.cid;
    EXPECT_EQ(done.cqe.sqid, 1);
    cids.insert(done.cqe.cid);
    const uint32_t consumed = (done.cqe.sqhd + kSqEntries - before.cqe.sqhd) % kSqEntries;
    EXPECT_GE(consumed, 1u) << "SQHD " << done.cqe.sqhd << " behind the burst";
    EXPECT_LE(consumed, kCount) << "SQHD " << done.cqe.sqhd << " ahead of the burst";
    furthest = std::max(furthest, consumed);
  }
  EXPECT_EQ(cids.size(), kCount) << "every command answered once";
  EXPECT_EQ(furthest, kCount) << "the SQ head passed all 32 commands";

  std::vector<spec::Sqe> reads;
  std::map<uint16_t, uint32_t> index_of;
  std::memset(io.memory() + kDataIn, 0xEE, kCount * 4096);
  for (uint32_t i = 0; i < kCount; ++i) {
    spec::Sqe read = io_cmd(spec::nvm_opcode::read, 6000 + uint64_t{i} * kBlocks, kBlocks);
    read.cid = io.next_cid();
    read.sgl1 = keyed(io, kDataIn + i * 4096, 4096);
    index_of[read.cid] = i;
    reads.push_back(read);
  }
  ASSERT_TRUE(io.send_burst(reads));
  for (uint32_t i = 0; i < kCount; ++i) {
    RawCompletion done;
    ASSERT_TRUE(io.wait_response(&done)) << "read response " << i;
    EXPECT_TRUE(Ok(done));
    ASSERT_EQ(index_of.count(done.cqe.cid), 1u);
    index_of.erase(done.cqe.cid);
  }
  EXPECT_TRUE(index_of.empty());
  for (uint32_t i = 0; i < kCount; ++i) {
    EXPECT_TRUE(SameBytes(io.memory() + kDataIn + i * 4096, expected[i].data(), 4096))
        << "command " << i;
  }
  expect_healthy(io, "32 in flight");
}

TEST_F(TargetCommandsTest, DatasetManagementWith256RangesFillsTheCapsule) {
  Association a = associate();
  seed_known_data(*a.io);
  // 256 ranges (NR = FFh) of 16 bytes: exactly the 4 KiB of in-capsule data. Every other
  // block of LBAs 1024..1535 is deallocated.
  auto data = pattern(1024, 512, 51);
  constexpr uint32_t kHalf = 256 * kBlockSize;
  for (uint32_t i = 0; i < 2; ++i) {
    std::vector<uint8_t> part(data.begin() + i * kHalf, data.begin() + (i + 1) * kHalf);
    ASSERT_TRUE(Ok(write_keyed(*a.io, 1024 + i * 256, part)));
  }
  std::vector<uint8_t> list(256 * sizeof(spec::DsmRange));
  for (uint32_t i = 0; i < 256; ++i) {
    const spec::DsmRange range{0, 1, 1024 + 2 * uint64_t{i}};
    std::memcpy(list.data() + i * sizeof(range), &range, sizeof(range));
    std::fill(data.begin() + 2 * i * kBlockSize, data.begin() + (2 * i + 1) * kBlockSize, 0);
  }
  ASSERT_EQ(list.size(), kInCapsule);
  spec::Sqe dsm = dsm_deallocate(256);
  dsm.sgl1 = spec::make_in_capsule_data_block(0, kInCapsule);
  ASSERT_TRUE(Ok(run(*a.io, dsm, list)));
  for (uint32_t i = 0; i < 2; ++i) {
    const std::vector<uint8_t> part(data.begin() + i * kHalf, data.begin() + (i + 1) * kHalf);
    EXPECT_TRUE(Holds(*a.io, 1024 + i * 256, part)) << "part " << i;
  }
  expect_healthy(*a.io, "256 ranges");
}

TEST_F(TargetCommandsTest, FuaWriteAndFusedCommands) {
  Association a = associate();
  seed_known_data(*a.io);
  const auto data = pattern(777, 4, 61);
  std::memcpy(a.io->memory() + kDataOut, data.data(), data.size());
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, 777, 4);
  spec::rw_set_fua(write, true);
  write.sgl1 = keyed(*a.io, kDataOut, 2048);
  EXPECT_TRUE(Ok(run(*a.io, write))) << "FUA";
  EXPECT_TRUE(Holds(*a.io, 777, data));
  // Fused operations are not supported (FUSES = 0): Invalid Field, and nothing written.
  for (uint8_t fuse : {spec::fuse::first, spec::fuse::second}) {
    spec::Sqe fused = io_cmd(spec::nvm_opcode::write, 900, 1);
    fused.set_fuse(fuse);
    fused.sgl1 = spec::make_in_capsule_data_block(0, kBlockSize);
    EXPECT_TRUE(StatusIs(run(*a.io, fused, std::vector<uint8_t>(kBlockSize, 0x44)), sct::generic,
                         sc::invalid_field))
        << "FUSE " << int{fuse};
  }
  EXPECT_TRUE(Holds(*a.io, 900, std::vector<uint8_t>(kBlockSize, 0)));
  expect_healthy(*a.io, "fused commands");
}

TEST_F(TargetCommandsTest, AbortOfACommandWaitingForTheBdev) {
  Association a = associate();
  seed_known_data(*a.io);
  // A namespace whose bdev takes one I/O at a time: of 32 writes sent at once, the last
  // waits on the queue's pending list for many polls.
  bdev::MallocBdevOpts slow;
  slow.name = "Slow";
  slow.block_size_bytes = kBlockSize;
  slow.block_count = 1024;
  slow.queue_depth_max = 1;
  auto made = bdev::create_malloc_bdev(slow);
  ASSERT_TRUE(made);
  extra_bdev_ = std::move(*made);
  target::NamespaceOpts ns;
  ns.bdev = extra_bdev_.get();
  ASSERT_TRUE(target_->add_namespace(kNqn, ns));

  RawHost& io = *a.io;
  constexpr uint32_t kCount = RawHost::kBurstMax;
  std::vector<spec::Sqe> writes;
  std::vector<std::vector<uint8_t>> capsules;
  for (uint32_t i = 0; i < kCount; ++i) {
    spec::Sqe write = io_cmd(spec::nvm_opcode::write, i, 1, 2);
    write.cid = io.next_cid();
    write.sgl1 = spec::make_in_capsule_data_block(0, kBlockSize);
    writes.push_back(write);
    capsules.push_back(pattern(i, 1, 71));
  }
  const uint16_t victim = writes.back().cid;
  ASSERT_TRUE(io.send_burst(writes, capsules));
  // Let the target take in every capsule (the bdev completes about one write per poll), so
  // the last one is on the pending list when the Abort arrives.
  for (int i = 0; i < 4; ++i) harness_.poll_round();
  spec::Sqe abort = abort_command(1, victim);
  abort.cid = a.admin->next_cid();
  ASSERT_TRUE(a.admin->send_capsule(abort));
  RawCompletion abort_done;
  ASSERT_TRUE(a.admin->wait_response(&abort_done));
  EXPECT_TRUE(Ok(abort_done));
  EXPECT_EQ(abort_done.cqe.cdw0 & 1u, 0u) << "the waiting command was aborted";

  std::map<uint16_t, RawCompletion> done;
  for (uint32_t i = 0; i < kCount; ++i) {
    RawCompletion completion;
    ASSERT_TRUE(io.wait_response(&completion)) << "write response " << i;
    done[completion.cqe.cid] = completion;
  }
  ASSERT_EQ(done.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    const uint16_t cid = writes[i].cid;
    if (cid == victim) {
      EXPECT_TRUE(StatusIs(done[cid], sct::generic, sc::abort_requested, false));
      EXPECT_TRUE(Holds(io, i, std::vector<uint8_t>(kBlockSize, 0), 2)) << "never written";
    } else {
      EXPECT_TRUE(Ok(done[cid])) << "write " << i;
      EXPECT_TRUE(Holds(io, i, pattern(i, 1, 71), 2)) << "write " << i;
    }
  }
  expect_healthy(io, "Abort of a waiting command");
}

TEST_F(TargetCommandsTest, ControllerResetAbortsHeldAerAndClosesIoQueues) {
  Association a = associate();
  seed_known_data(*a.io);
  spec::Sqe aer = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  aer.cid = a.admin->next_cid();
  ASSERT_TRUE(a.admin->send_capsule(aer));
  spec::Sqe reset = spec::to_sqe(spec::make_property_set(0, spec::property_offset::cc, 0));
  reset.cid = a.admin->next_cid();  // CC.EN 1 -> 0
  ASSERT_TRUE(a.admin->send_capsule(reset));
  std::map<uint16_t, RawCompletion> done;
  for (int i = 0; i < 2; ++i) {
    RawCompletion completion;
    ASSERT_TRUE(a.admin->wait_response(&completion)) << "response " << i;
    done[completion.cqe.cid] = completion;
  }
  ASSERT_EQ(done.count(aer.cid), 1u);
  ASSERT_EQ(done.count(reset.cid), 1u);
  EXPECT_TRUE(Ok(done[reset.cid]));
  EXPECT_TRUE(StatusIs(done[aer.cid], sct::generic, sc::aborted_sq_deletion, false));
  EXPECT_EQ(a.admin->property_get(spec::property_offset::csts).cqe.cdw0, 0u);
  EXPECT_TRUE(a.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(1));
  ASSERT_TRUE(enable(*a.admin));
  RawHost& io = bring_up_io(a.cntlid);
  expect_healthy(io, "controller reset");
}

TEST_F(TargetCommandsTest, SqFlowControlDisabledReportsSqhdFFFF) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = cm_connected(2);
  spec::ConnectCommand command =
      spec::make_connect_command(0, 2, 64, 0, spec::connect_cattr::disable_sq_flow_control);
  ASSERT_TRUE(Ok(connect_custom(io, command, connect_data(a.cntlid, kNqn, kHostNqn), true)));
  const auto data = pattern(50, 2, 81);
  RawCompletion write = write_keyed(io, 50, data);
  ASSERT_TRUE(Ok(write));
  EXPECT_EQ(write.cqe.sqhd, 0xFFFF);
  RawCompletion read = read_keyed(io, 50, 2);
  ASSERT_TRUE(Ok(read));
  EXPECT_EQ(read.cqe.sqhd, 0xFFFF);
  EXPECT_TRUE(SameBytes(io.memory() + kDataIn, data.data(), data.size()));
  // Queue 1 keeps flow control: its SQHD moves.
  const uint16_t first = read_keyed(*a.io, 50, 2).cqe.sqhd;
  const uint16_t second = read_keyed(*a.io, 50, 2).cqe.sqhd;
  EXPECT_NE(first, 0xFFFF);
  EXPECT_EQ(second, (first + 1) % 64);
  expect_healthy(io, "SQ flow control disabled");
}

// =============================================================================================
// Negative: Connect

TEST_F(TargetCommandsTest, ConnectToAnUnknownSubsystemThenRetryOnTheSameQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& admin = cm_connected(0);
  expect_invalid_parameter(
      admin.fabrics_connect(0, 32, 0xFFFF, "nqn.2026-11.io.nvmf-rdma:nobody", kHostNqn), true,
      offsetof(spec::ConnectData, subnqn), "unknown SUBNQN");
  // Before a successful Connect only Connect is served.
  EXPECT_TRUE(StatusIs(admin.property_get(spec::property_offset::cap), sct::generic,
                       sc::command_sequence_error));
  EXPECT_TRUE(
      StatusIs(identify(admin, spec::cns::controller), sct::generic, sc::command_sequence_error));
  // The same queue connects once it names a subsystem that exists.
  RawCompletion connect = admin.fabrics_connect(0, 32, 0xFFFF, kNqn, kHostNqn, 10000);
  ASSERT_TRUE(Ok(connect));
  EXPECT_TRUE(enable(admin));
  // A second Connect on a connected queue.
  EXPECT_TRUE(StatusIs(admin.fabrics_connect(0, 32, 0xFFFF, kNqn, kHostNqn), sct::generic,
                       sc::command_sequence_error));
  EXPECT_TRUE(Ok(identify(admin, spec::cns::controller)));
  expect_healthy(*a.io, "unknown SUBNQN");
}

TEST_F(TargetCommandsTest, ConnectFromAHostTheSubsystemDoesNotAllow) {
  Association a = associate();
  seed_known_data(*a.io);
  target::SubsystemOpts restricted;
  restricted.nqn = kRestrictedNqn;
  restricted.allow_any_host = false;
  restricted.hosts = {kOtherHostNqn};
  ASSERT_TRUE(target_->add_subsystem(restricted));

  RawHost& refused = cm_connected(0);
  RawCompletion done = refused.fabrics_connect(0, 32, 0xFFFF, kRestrictedNqn, kHostNqn);
  EXPECT_TRUE(StatusIs(done, sct::command_specific, scf::connect_invalid_host));
  // Linux also points IPO at HOSTNQN here; SPDK leaves DW0 zero. Either way, not a success
  // result: no CNTLID.
  EXPECT_TRUE(done.cqe.cdw0 == 0 ||
              done.cqe.cdw0 ==
                  spec::connect_invalid_parameter_dw0(true, offsetof(spec::ConnectData, hostnqn)))
      << std::hex << done.cqe.cdw0;
  EXPECT_EQ(target_->controller_count(kRestrictedNqn), 0u);
  // The allowed host gets in, on the same queue too.
  EXPECT_TRUE(Ok(refused.fabrics_connect(0, 32, 0xFFFF, kRestrictedNqn, kOtherHostNqn)));
  EXPECT_EQ(target_->controller_count(kRestrictedNqn), 1u);
  RawHost& allowed = new_host();
  bring_up_admin(allowed, kOtherHostNqn, kRestrictedNqn);
  EXPECT_EQ(target_->controller_count(kRestrictedNqn), 2u);
  expect_healthy(*a.io, "host not allowed");
}

TEST_F(TargetCommandsTest, ConnectQueueSizesOutOfRange) {
  Association a = associate();
  seed_known_data(*a.io);
  constexpr uint16_t kSqsize = offsetof(spec::ConnectCommand, sqsize);
  RawHost& admin = cm_connected(0);
  expect_invalid_parameter(admin.fabrics_connect(0, 1, 0xFFFF, kNqn, kHostNqn), false, kSqsize,
                           "admin SQSIZE 0");
  expect_invalid_parameter(admin.fabrics_connect(0, 129, 0xFFFF, kNqn, kHostNqn), false, kSqsize,
                           "admin SQSIZE 128 (129 entries, max 128)");
  EXPECT_TRUE(Ok(admin.fabrics_connect(0, 128, 0xFFFF, kNqn, kHostNqn))) << "128 entries";

  RawHost& io = cm_connected(2);
  expect_invalid_parameter(io.fabrics_connect(2, 1, a.cntlid, kNqn, kHostNqn), false, kSqsize,
                           "I/O SQSIZE 0");
  expect_invalid_parameter(io.fabrics_connect(2, 129, a.cntlid, kNqn, kHostNqn), false, kSqsize,
                           "I/O SQSIZE 128 (129 entries, max 128)");
  expect_invalid_parameter(io.fabrics_connect(2, 65536, a.cntlid, kNqn, kHostNqn), false, kSqsize,
                           "I/O SQSIZE FFFFh");
  ASSERT_TRUE(Ok(io.fabrics_connect(2, 64, a.cntlid, kNqn, kHostNqn)));
  expect_healthy(io, "bad SQSIZE (QID 2)");
  expect_healthy(*a.io, "bad SQSIZE (QID 1)");
}

TEST_F(TargetCommandsTest, IoConnectWithABadQidCntlidOrHost) {
  Association a = associate();
  seed_known_data(*a.io);
  constexpr uint16_t kQid = offsetof(spec::ConnectCommand, qid);
  constexpr uint16_t kCntlid = offsetof(spec::ConnectData, cntlid);
  RawHost& io = cm_connected(2);
  expect_invalid_parameter(io.fabrics_connect(2, 64, 0x1234, kNqn, kHostNqn), true, kCntlid,
                           "unknown CNTLID");
  expect_invalid_parameter(io.fabrics_connect(2, 64, a.cntlid, kNqn, kOtherHostNqn), true, kCntlid,
                           "another host's NQN");
  spec::ConnectData other_id = connect_data(a.cntlid, kNqn, kHostNqn);
  other_id.hostid[15] ^= 0xFF;
  expect_invalid_parameter(
      connect_custom(io, spec::make_connect_command(0, 2, 64, 0), other_id, false), true, kCntlid,
      "the host's NQN with another HOSTID");
  // QID 1 is taken already (the CM allows it; the core refuses the duplicate).
  RawHost& dup = cm_connected(1);
  expect_invalid_parameter(dup.fabrics_connect(1, 64, a.cntlid, kNqn, kHostNqn), false, kQid,
                           "QID 1 connected twice");
  // The discovery controller has no I/O queues.
  RawHost& discovery = new_host();
  const uint16_t discovery_cntlid =
      bring_up_admin(discovery, kHostNqn, std::string(spec::discovery_nqn));
  RawHost& disc_io = cm_connected(1);
  expect_invalid_parameter(
      disc_io.fabrics_connect(1, 64, discovery_cntlid, std::string(spec::discovery_nqn), kHostNqn),
      false, kQid, "I/O queue to a discovery controller");
  // I/O Connect to a controller that is not enabled yet.
  RawHost& idle_admin = cm_connected(0);
  RawCompletion idle = idle_admin.fabrics_connect(0, 32, 0xFFFF, kNqn, kOtherHostNqn);
  ASSERT_TRUE(Ok(idle));
  RawHost& early = cm_connected(1);
  expect_invalid_parameter(
      early.fabrics_connect(1, 64, spec::connect_response_cntlid(idle.cqe), kNqn, kOtherHostNqn),
      false, kQid, "controller not enabled");
  // The refused queue connects when it names the right controller.
  ASSERT_TRUE(Ok(io.fabrics_connect(2, 64, a.cntlid, kNqn, kHostNqn)));
  expect_healthy(io, "bad I/O Connects");
}

TEST_F(TargetCommandsTest, ConnectRecfmtShortDataAndInCapsuleData) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = cm_connected(2);
  spec::ConnectCommand command = spec::make_connect_command(0, 2, 64, 0);
  const spec::ConnectData data = connect_data(a.cntlid, kNqn, kHostNqn);
  command.recfmt = 1;
  EXPECT_TRUE(StatusIs(connect_custom(io, command, data, false), sct::command_specific,
                       scf::incompatible_format));
  command.recfmt = 0;
  EXPECT_TRUE(StatusIs(connect_custom(io, command, data, false, 512), sct::generic,
                       sc::data_sgl_length_invalid))
      << "512 of the 1024 bytes of Connect data";
  // A Connect whose data travels in the capsule (hosts do this on I/O queues).
  RawCompletion done = connect_custom(io, command, data, true);
  ASSERT_TRUE(Ok(done));
  EXPECT_EQ(spec::connect_response_cntlid(done.cqe), a.cntlid);
  EXPECT_EQ(done.cqe.sqid, 2);
  expect_healthy(io, "RECFMT and short Connect data");
}

// =============================================================================================
// Negative: commands

TEST_F(TargetCommandsTest, UnknownAdminOpcodes) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& admin = *a.admin;
  struct Case {
    uint8_t opcode;
    const char* what;
  };
  // Each with an SGL that suits its direction (opcode bits 1:0).
  const Case cases[] = {
      {spec::admin_opcode::delete_io_sq, "Delete I/O SQ"},
      {spec::admin_opcode::create_io_sq, "Create I/O SQ"},
      {spec::admin_opcode::delete_io_cq, "Delete I/O CQ"},
      {spec::admin_opcode::create_io_cq, "Create I/O CQ"},
      {spec::admin_opcode::namespace_management, "Namespace Management"},
      {spec::admin_opcode::firmware_commit, "Firmware Commit"},
      {spec::admin_opcode::firmware_image_download, "Firmware Image Download"},
      {spec::admin_opcode::device_self_test, "Device Self-test"},
      {spec::admin_opcode::format_nvm, "Format NVM"},
      {spec::admin_opcode::security_receive, "Security Receive"},
      {0xC2, "vendor specific, controller to host"},
      {0xC1, "vendor specific, host to controller"},
  };
  for (const Case& c : cases) {
    spec::Sqe sqe = spec::make_sqe(c.opcode, 0);
    std::vector<uint8_t> in_capsule;
    switch (spec::opcode_data_transfer(c.opcode)) {
      case spec::data_transfer::controller_to_host:
        sqe.sgl1 = keyed(admin, kScratch, 4096);
        break;
      case spec::data_transfer::host_to_controller:
        sqe.sgl1 = spec::make_in_capsule_data_block(0, 64);
        in_capsule.assign(64, 0x5A);
        break;
      default:
        break;
    }
    EXPECT_TRUE(StatusIs(run(admin, sqe, in_capsule), sct::generic, sc::invalid_opcode)) << c.what;
  }
  // A Fabrics command type that does not exist (7Eh: controller to host, keyed data).
  spec::Sqe fabrics = spec::make_sqe(spec::fabrics_opcode, 0);
  fabrics.nsid = 0x7E;  // FCTYPE overlays NSID byte 0
  fabrics.sgl1 = keyed(admin, kScratch, 64);
  EXPECT_TRUE(StatusIs(run(admin, fabrics), sct::generic, sc::invalid_opcode)) << "FCTYPE 7Eh";
  // I/O commands on the admin queue (Read is 02h, Get Log Page there: Write 01h is Create
  // I/O SQ, above; Write Zeroes 08h is Abort; Dataset Management 09h is Set Features).
  EXPECT_TRUE(Ok(run(admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  expect_healthy(*a.io, "unknown admin opcodes");
}

TEST_F(TargetCommandsTest, UnknownIoOpcodes) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  struct Case {
    uint8_t opcode;
    const char* what;
  };
  const Case cases[] = {
      {spec::nvm_opcode::write_uncorrectable, "Write Uncorrectable"},
      {spec::nvm_opcode::compare, "Compare"},
      {spec::nvm_opcode::verify, "Verify"},
      {spec::nvm_opcode::reservation_register, "Reservation Register"},
      {spec::nvm_opcode::reservation_report, "Reservation Report"},
      {spec::nvm_opcode::copy, "Copy"},
      {spec::admin_opcode::identify, "Identify on an I/O queue"},
      {spec::admin_opcode::get_features, "Get Features on an I/O queue"},
      {spec::admin_opcode::keep_alive, "Keep Alive on an I/O queue"},
      {0x7E, "7Eh"},
      {0x81, "vendor specific, host to controller"},
  };
  for (const Case& c : cases) {
    spec::Sqe sqe = io_cmd(c.opcode, 0, 1);
    std::vector<uint8_t> in_capsule;
    switch (spec::opcode_data_transfer(c.opcode)) {
      case spec::data_transfer::controller_to_host:
        sqe.sgl1 = keyed(io, kDataIn, kBlockSize);
        break;
      case spec::data_transfer::host_to_controller:
        sqe.sgl1 = keyed(io, kDataOut, kBlockSize);
        break;
      default:
        break;
    }
    EXPECT_TRUE(StatusIs(run(io, sqe, in_capsule), sct::generic, sc::invalid_opcode)) << c.what;
  }
  // Properties are admin-queue only.
  EXPECT_TRUE(
      StatusIs(io.property_get(spec::property_offset::cap), sct::generic, sc::invalid_opcode));
  expect_healthy(io, "unknown I/O opcodes");
}

TEST_F(TargetCommandsTest, BidirectionalOpcodeIsAnInvalidOpcode) {
  // Bits 1:0 = 11b would mean data both ways: no such command, so Invalid Command Opcode.
  Association a = associate();
  seed_known_data(*a.io);
  spec::Sqe sqe = io_cmd(0x03, 0, 1);
  sqe.sgl1 = keyed(*a.io, kDataOut, kBlockSize);
  EXPECT_TRUE(StatusIs(run(*a.io, sqe), sct::generic, sc::invalid_opcode));
  spec::Sqe admin = spec::make_sqe(0xC3, 0);
  admin.sgl1 = keyed(*a.admin, kScratch, 64);
  EXPECT_TRUE(StatusIs(run(*a.admin, admin), sct::generic, sc::invalid_opcode));
  expect_healthy(*a.io, "bidirectional opcodes");
}

TEST_F(TargetCommandsTest, BadNamespaceIds) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  for (uint32_t nsid : {0u, 2u, 33u, 0xFFFFFFFFu}) {
    SCOPED_TRACE(::testing::Message() << "NSID 0x" << std::hex << nsid);
    spec::Sqe read = io_cmd(spec::nvm_opcode::read, 0, 1, nsid);
    read.sgl1 = keyed(io, kDataIn, kBlockSize);
    EXPECT_TRUE(StatusIs(run(io, read), sct::generic, sc::invalid_namespace_or_format));
    spec::Sqe write = io_cmd(spec::nvm_opcode::write, 0, 1, nsid);
    write.sgl1 = spec::make_in_capsule_data_block(0, kBlockSize);
    EXPECT_TRUE(StatusIs(run(io, write, std::vector<uint8_t>(kBlockSize, 0x77)), sct::generic,
                         sc::invalid_namespace_or_format));
    EXPECT_TRUE(StatusIs(run(io, io_cmd(spec::nvm_opcode::write_zeroes, 0, 1, nsid)), sct::generic,
                         sc::invalid_namespace_or_format));
    EXPECT_TRUE(StatusIs(run(io, spec::make_sqe(spec::nvm_opcode::flush, 0, nsid)), sct::generic,
                         sc::invalid_namespace_or_format));
    spec::Sqe dsm = dsm_deallocate(1, nsid);
    spec::DsmRange range{0, 8, 0};
    dsm.sgl1 = spec::make_in_capsule_data_block(0, sizeof(range));
    EXPECT_TRUE(
        StatusIs(run(io, dsm, bytes_of(range)), sct::generic, sc::invalid_namespace_or_format));
  }
  expect_healthy(io, "bad NSIDs");
}

TEST_F(TargetCommandsTest, LbaOutOfRangeIncludingU64Wrap) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  struct Case {
    uint64_t lba;
    uint32_t blocks;
    const char* what;
  };
  const Case cases[] = {
      {kBlockCount, 1, "first LBA past the end"},
      {kBlockCount - 1, 2, "runs past the end"},
      {kBlockCount - 255, 256, "128 KiB running past the end"},
      {uint64_t{1} << 32, 1, "LBA 2^32 (CDW11 = 1): a 32-bit target would hit LBA 0"},
      {UINT64_MAX, 1, "LBA FFFFFFFFFFFFFFFFh"},
      {UINT64_MAX, 2, "LBA + NLB wraps to 1"},
      {UINT64_MAX - 255, 256, "LBA + NLB wraps to exactly 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const uint32_t bytes = c.blocks * kBlockSize;
    spec::Sqe read = io_cmd(spec::nvm_opcode::read, c.lba, c.blocks);
    read.sgl1 = keyed(io, kDataIn, bytes);
    EXPECT_TRUE(StatusIs(run(io, read), sct::generic, sc::lba_out_of_range));
    // Writes that would land on LBA 0 if anything wrapped or truncated.
    std::memset(io.memory() + kDataOut, 0x99, bytes);
    spec::Sqe write = io_cmd(spec::nvm_opcode::write, c.lba, c.blocks);
    write.sgl1 = keyed(io, kDataOut, bytes);
    EXPECT_TRUE(StatusIs(run(io, write), sct::generic, sc::lba_out_of_range));
    EXPECT_TRUE(StatusIs(run(io, io_cmd(spec::nvm_opcode::write_zeroes, c.lba, c.blocks)),
                         sct::generic, sc::lba_out_of_range));
    spec::DsmRange range{0, c.blocks, c.lba};
    spec::Sqe dsm = dsm_deallocate(1);
    dsm.sgl1 = spec::make_in_capsule_data_block(0, sizeof(range));
    EXPECT_TRUE(StatusIs(run(io, dsm, bytes_of(range)), sct::generic, sc::lba_out_of_range));
  }
  // The largest NLB (65536 blocks) anywhere: Write Zeroes has no MDTS limit, the range does.
  EXPECT_TRUE(StatusIs(run(io, io_cmd(spec::nvm_opcode::write_zeroes, 0, 65536)), sct::generic,
                       sc::lba_out_of_range));
  expect_healthy(io, "out-of-range LBAs");
}

TEST_F(TargetCommandsTest, TransferLengthMismatchAndMdts) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  // SGL shorter or longer than NLB blocks.
  spec::Sqe read = io_cmd(spec::nvm_opcode::read, 100, 2);
  read.sgl1 = keyed(io, kDataIn, kBlockSize);
  EXPECT_TRUE(StatusIs(run(io, read), sct::generic, sc::data_sgl_length_invalid)) << "short read";
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, 100, 1);
  write.sgl1 = keyed(io, kDataOut, 2 * kBlockSize);
  EXPECT_TRUE(StatusIs(run(io, write), sct::generic, sc::data_sgl_length_invalid)) << "long write";
  write = io_cmd(spec::nvm_opcode::write, 100, 8);
  write.sgl1 = spec::make_in_capsule_data_block(0, 2048);
  EXPECT_TRUE(StatusIs(run(io, write, std::vector<uint8_t>(2048, 0x31)), sct::generic,
                       sc::data_sgl_length_invalid))
      << "in-capsule 2 KiB for 4 KiB";
  write.sgl1 = keyed(io, kDataOut, 0);
  EXPECT_TRUE(StatusIs(run(io, write), sct::generic, sc::data_sgl_length_invalid))
      << "keyed length 0";
  spec::SglDescriptor list[2] = {keyed(io, kDataOut, 512), keyed(io, kDataOut + 4096, 512)};
  std::vector<uint8_t> list_bytes(sizeof(list));
  std::memcpy(list_bytes.data(), list, sizeof(list));
  write = io_cmd(spec::nvm_opcode::write, 100, 1);
  write.sgl1 = spec::make_last_segment(0, sizeof(list));
  EXPECT_TRUE(StatusIs(run(io, write, list_bytes), sct::generic, sc::data_sgl_length_invalid))
      << "two descriptors, 1 KiB for one block";

  // Beyond MDTS (1 MiB): 2049 blocks described by a 1 MiB SGL is Invalid Field (the base
  // spec's MDTS rule); an SGL longer than max_io_size is refused by the transport first.
  constexpr uint32_t kMdtsBlocks = kMaxIo / kBlockSize;  // 2048
  read = io_cmd(spec::nvm_opcode::read, 100, kMdtsBlocks + 1);
  read.sgl1 = keyed(io, kDataIn, kMaxIo);
  EXPECT_TRUE(StatusIs(run(io, read), sct::generic, sc::invalid_field)) << "NLB 2049";
  read.sgl1 = keyed(io, kDataIn, kMaxIo + kBlockSize);
  EXPECT_TRUE(StatusIs(run(io, read), sct::generic, sc::data_sgl_length_invalid))
      << "SGL of 2049 blocks";
  write = io_cmd(spec::nvm_opcode::write, 0, 4096);
  write.sgl1 = keyed(io, kDataOut, kMaxIo);
  EXPECT_TRUE(StatusIs(run(io, write), sct::generic, sc::invalid_field)) << "NLB 4096 (2 MiB)";
  spec::SglDescriptor big[2] = {keyed(io, kDataOut, kMaxIo / 2 + kBlockSize),
                                keyed(io, kDataOut, kMaxIo / 2)};
  std::memcpy(list_bytes.data(), big, sizeof(big));
  write = io_cmd(spec::nvm_opcode::write, 100, kMdtsBlocks + 1);
  write.sgl1 = spec::make_last_segment(0, sizeof(big));
  EXPECT_TRUE(StatusIs(run(io, write, list_bytes), sct::generic, sc::data_sgl_length_invalid))
      << "two descriptors summing past max_io_size";
  EXPECT_TRUE(Holds(io, 100, std::vector<uint8_t>(8 * kBlockSize, 0))) << "nothing written";
  expect_healthy(io, "length mismatches");
}

TEST_F(TargetCommandsTest, MalformedSglDescriptors) {
  Association a = associate();
  seed_known_data(*a.io);
  RawHost& io = *a.io;
  auto list_of = [](std::initializer_list<spec::SglDescriptor> descriptors) {
    std::vector<uint8_t> bytes;
    for (const auto& d : descriptors) {
      const auto b = bytes_of(d);
      bytes.insert(bytes.end(), b.begin(), b.end());
    }
    return bytes;
  };
  spec::SglDescriptor keyed_offset = keyed(io, kDataOut, 4096);
  keyed_offset.set_identifier(spec::sgl_type::keyed_data_block, spec::sgl_subtype::offset);
  spec::SglDescriptor bit_bucket = spec::make_data_block(0, 4096);
  bit_bucket.set_identifier(spec::sgl_type::bit_bucket, 0);
  spec::SglDescriptor transport_block = spec::make_data_block(0, 4096);
  transport_block.set_identifier(spec::sgl_type::transport_data_block,
                                 spec::sgl_subtype::transport);
  const uint32_t key = io.rkey();
  std::vector<uint8_t> seventeen;
  for (int i = 0; i < 17; ++i) {
    const auto b = bytes_of(keyed(io, kDataOut + i * 256, 256));
    seventeen.insert(seventeen.end(), b.begin(), b.end());
  }
  struct Case {
    const char* what;
    uint8_t opcode;
    spec::SglDescriptor sgl;
    std::vector<uint8_t> in_capsule;
    uint8_t expected;
  };
  const std::vector<Case> cases = {
      {"in-capsule data for a read", spec::nvm_opcode::read,
       spec::make_in_capsule_data_block(0, 4096), std::vector<uint8_t>(4096), sc::invalid_field},
      {"keyed with subtype Offset",
       spec::nvm_opcode::write,
       keyed_offset,
       {},
       sc::sgl_descriptor_type_invalid},
      {"bit bucket", spec::nvm_opcode::read, bit_bucket, {}, sc::sgl_descriptor_type_invalid},
      {"transport data block",
       spec::nvm_opcode::write,
       transport_block,
       {},
       sc::sgl_descriptor_type_invalid},
      {"last segment with subtype Address",
       spec::nvm_opcode::read,
       spec::make_last_segment(io.address(kScratch), 32, spec::sgl_subtype::address),
       {},
       sc::sgl_descriptor_type_invalid},
      {"last segment of 0 bytes", spec::nvm_opcode::read, spec::make_last_segment(0, 0),
       std::vector<uint8_t>(64), sc::data_sgl_length_invalid},
      {"last segment of 24 bytes", spec::nvm_opcode::read, spec::make_last_segment(0, 24),
       std::vector<uint8_t>(64), sc::data_sgl_length_invalid},
      {"last segment beyond the capsule", spec::nvm_opcode::read, spec::make_last_segment(32, 32),
       list_of({keyed(io, kDataIn, 2048), keyed(io, kDataIn, 2048)}), sc::sgl_offset_invalid},
      {"last segment whose offset + length wraps", spec::nvm_opcode::read,
       spec::make_last_segment(UINT64_MAX - 15, 32),
       list_of({keyed(io, kDataIn, 2048), keyed(io, kDataIn, 2048)}), sc::sgl_offset_invalid},
      {"last segment holding an in-capsule block", spec::nvm_opcode::read,
       spec::make_last_segment(0, 32),
       list_of({keyed(io, kDataIn, 2048), spec::make_in_capsule_data_block(0, 2048)}),
       sc::sgl_descriptor_type_invalid},
      {"last segment of 17 descriptors (MSDBD 16)", spec::nvm_opcode::read,
       spec::make_last_segment(0, 17 * 16), seventeen, sc::data_sgl_length_invalid},
      {"two descriptors asking to invalidate different keys", spec::nvm_opcode::read,
       spec::make_last_segment(0, 32),
       list_of({spec::make_keyed_data_block(io.address(kDataIn), 2048, key, true),
                spec::make_keyed_data_block(io.address(kDataIn + 2048), 2048, key + 1, true)}),
       sc::invalid_field},
      {"in-capsule block crossing the capsule's end", spec::nvm_opcode::write,
       spec::make_in_capsule_data_block(3584, 1024), std::vector<uint8_t>(4096),
       sc::data_sgl_length_invalid},
  };
  for (const Case& c : cases) {
    spec::Sqe sqe = io_cmd(c.opcode, 0, 8);
    sqe.sgl1 = c.sgl;
    RawCompletion done = run(io, sqe, c.in_capsule);
    EXPECT_TRUE(StatusIs(done, sct::generic, c.expected)) << c.what;
  }
  // PSDT other than "SGL, MPTR contiguous" on a command with data.
  spec::Sqe prp = io_cmd(spec::nvm_opcode::read, 0, 8);
  prp.set_psdt(spec::psdt::prp);
  prp.sgl1 = keyed(io, kDataIn, 4096);
  EXPECT_TRUE(StatusIs(run(io, prp), sct::generic, sc::invalid_field)) << "PSDT PRP";
  // The admin queue parses the same way.
  spec::Sqe log = spec::make_get_log_page(0, spec::log_page::error_information, 64);
  log.sgl1 = spec::make_in_capsule_data_block(0, 64);
  EXPECT_TRUE(
      StatusIs(run(*a.admin, log, std::vector<uint8_t>(64)), sct::generic, sc::invalid_field))
      << "in-capsule data for Get Log Page";
  spec::Sqe id = spec::make_identify(0, spec::cns::controller);
  id.sgl1 = spec::make_segment(0, 16);
  EXPECT_TRUE(StatusIs(run(*a.admin, id, std::vector<uint8_t>(16)), sct::generic,
                       sc::sgl_descriptor_type_invalid))
      << "Segment descriptor for Identify";
  EXPECT_TRUE(Holds(io, 0, pattern(kKnownLba, 8, kKnownSeed))) << "no write landed";
  expect_healthy(io, "malformed SGLs");
}

TEST_F(TargetCommandsTest, OversizeCapsuleClosesOnlyThatQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  Association b = associate(kOtherHostNqn);
  // 64 + 4608 bytes: more than the target's receive buffers (64 + in_capsule_data_size) hold.
  // The target cannot even read the SQE, so it closes the connection.
  const auto data = pattern(kKnownLba, 9, 0x13);
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, kKnownLba, 9);
  write.cid = b.io->next_cid();
  write.sgl1 = spec::make_in_capsule_data_block(0, static_cast<uint32_t>(data.size()));
  ASSERT_TRUE(b.io->send_capsule(write, data));
  EXPECT_TRUE(b.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(3));
  // That host's admin queue still answers; it may connect a new I/O queue.
  EXPECT_TRUE(Ok(run(*b.admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  RawHost& again = bring_up_io(b.cntlid, 1, kOtherHostNqn);
  EXPECT_TRUE(Holds(again, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)));
  expect_healthy(*a.io, "an oversize capsule on another host's queue");
}

TEST_F(TargetCommandsTest, BadRemoteKeyClosesOnlyThatQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  Association b = associate(kOtherHostNqn);
  // A write whose keyed descriptor names a key the host never registered: the target's RDMA
  // READ fails, nothing reaches the bdev, and the queue is closed.
  std::memset(b.io->memory() + kDataOut, 0x66, 4096);
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, kKnownLba, 8);
  write.sgl1 =
      spec::make_keyed_data_block(b.io->address(kDataOut), 4096, b.io->rkey() ^ 0x5A5A00, false);
  write.cid = b.io->next_cid();
  ASSERT_TRUE(b.io->send_capsule(write));
  EXPECT_TRUE(b.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(3));
  // A read into host memory past the registered region (RDMA WRITE fails) on a new queue.
  RawHost& again = bring_up_io(b.cntlid, 1, kOtherHostNqn);
  spec::Sqe read = io_cmd(spec::nvm_opcode::read, kKnownLba, 8);
  read.sgl1 = spec::make_keyed_data_block(again.address(0) + RawHost::kMemoryBytes, 4096,
                                          again.rkey(), false);
  read.cid = again.next_cid();
  ASSERT_TRUE(again.send_capsule(read));
  EXPECT_TRUE(again.wait_disconnected());
  EXPECT_TRUE(wait_connections(3));
  EXPECT_TRUE(Ok(run(*b.admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  expect_healthy(*a.io, "bad remote keys on another host's queues");
}

TEST_F(TargetCommandsTest, ShortCapsuleClosesOnlyThatQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  Association b = associate(kOtherHostNqn);
  // 32 bytes: half an SQE. Nothing can be answered; the target closes the connection.
  spec::Sqe write = io_cmd(spec::nvm_opcode::write, kKnownLba, 1);
  std::vector<uint8_t> half(32);
  std::memcpy(half.data(), &write, half.size());
  ASSERT_TRUE(b.io->send_raw_capsule(half));
  EXPECT_TRUE(b.io->wait_disconnected());
  EXPECT_TRUE(wait_connections(3));
  EXPECT_TRUE(Ok(run(*b.admin, spec::make_sqe(spec::admin_opcode::keep_alive, 0))));
  expect_healthy(*a.io, "a short capsule on another host's queue");
}

TEST_F(TargetCommandsTest, QueueOverrunClosesOnlyThatQueue) {
  Association a = associate();
  seed_known_data(*a.io);
  Association b = associate(kOtherHostNqn);
  // A queue of 2 entries (HSQSIZE 1, Connect SQSIZE 1) that gets 5 commands at once: more
  // than the 2 x depth requests the target keeps (a host may send `depth` new commands while
  // `depth` answered ones still wait for the target's send completions).
  RawHost& small = new_host();
  ASSERT_TRUE(small.connect(kAddress, kPort, 2, 2, 1).established);
  ASSERT_TRUE(Ok(small.fabrics_connect(2, 2, b.cntlid, kNqn, kOtherHostNqn)));
  std::vector<spec::Sqe> flushes;
  for (int i = 0; i < 5; ++i) {
    spec::Sqe flush = spec::make_sqe(spec::nvm_opcode::flush, 0, 1);
    flush.cid = small.next_cid();
    flushes.push_back(flush);
  }
  ASSERT_TRUE(small.send_burst(flushes));
  EXPECT_TRUE(small.wait_disconnected());
  EXPECT_TRUE(wait_connections(4));
  EXPECT_TRUE(Holds(*b.io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)))
      << "the same host's other queue";
  expect_healthy(*a.io, "a queue overrun on another host's queue");
}

TEST_F(TargetCommandsTest, CmRejectsNoResourcesWhileShuttingDown) {
  Association a = associate();
  seed_known_data(*a.io);
  EXPECT_TRUE(Holds(*a.io, kKnownLba, pattern(kKnownLba, kKnownBlocks, kKnownSeed)));
  const uint64_t rejected = transport_->stats().connects_rejected;
  transport_->begin_shutdown();
  RawHost& late = new_host();
  RawConnectResult result = late.connect(kAddress, kPort, 0, 32, 31);
  EXPECT_TRUE(result.rejected);
  EXPECT_FALSE(result.established);
  EXPECT_EQ(result.reject_status, rej::no_resources);
  EXPECT_EQ(transport_->stats().connects_rejected, rejected + 1);
  // Existing hosts are disconnected and the transport drains.
  EXPECT_TRUE(a.io->wait_disconnected());
  EXPECT_TRUE(a.admin->wait_disconnected());
  EXPECT_TRUE(harness_.poll_until([&] { return transport_->drained(); }, 20000));
  EXPECT_EQ(target_->controller_count(kNqn), 0u);
}

}  // namespace
}  // namespace nvmf::e2e
