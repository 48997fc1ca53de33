// Test support for the target core: a fake transport that owns Requests and data buffers,
// builds command capsules with the spec helpers (SGL content is irrelevant: data is handed to
// the core as iovecs), calls execute() and records every request_complete() and
// qpair_disconnect(); plus a fixture with a 2-reactor harness on a FakeClock (admin queues on
// reactor 0, I/O queues on reactor 1), a malloc and a null bdev, and one subsystem.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bdev/bdev.h"
#include "bdev/malloc_bdev.h"
#include "bdev/null_bdev.h"
#include "reactor/harness.h"
#include "spec/spec.h"
#include "target/target.h"

namespace nvmf::target::testing {

inline constexpr const char* kSubsystemNqn = "nqn.2026-01.io.example:disk1";
inline constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
inline constexpr const char* kOtherHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:99999999-2222-3333-4444-555555555555";
inline constexpr uint32_t kMallocBlockSize = 512;
inline constexpr uint64_t kMallocBlocks = 8192;  // 4 MiB
inline constexpr uint32_t kNullBlockSize = 4096;
inline constexpr uint64_t kNullBlocks = 1 << 20;  // 4 GiB, nothing stored
inline constexpr uint32_t kAdminKatoMs = 10000;

struct Host {
  std::string nqn = kHostNqn;
  std::array<uint8_t, 16> id{0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
                             0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
};

struct Completion {
  spec::Cqe cqe{};
  std::vector<uint8_t> data;  // controller->host buffer as the transport would send it
  spec::Status status() const { return cqe.decoded_status(); }
  bool ok() const { return status().is_success(); }
};

// One queue pair seen from the transport.
class FakeQueue {
 public:
  FakeQueue(Target& target, reactor::Reactor& reactor, uint32_t queue_depth);
  ~FakeQueue();
  FakeQueue(const FakeQueue&) = delete;
  FakeQueue& operator=(const FakeQueue&) = delete;

  Qpair* qpair() const { return qpair_; }
  reactor::Reactor& reactor() const { return reactor_; }
  // Builds a Request for `sqe` (its CID replaced by the next free one, returned), with
  // `h2c` as host->controller data or a `c2h_length` buffer for controller->host data, split
  // into `segments` iovecs, and executes it.
  uint16_t submit(spec::Sqe sqe, const std::vector<uint8_t>& h2c = {}, uint32_t c2h_length = 0,
                  unsigned segments = 1);
  // As submit() but with an explicit length that may differ from the data (SGL length tests).
  uint16_t submit_with_length(spec::Sqe sqe, uint32_t length, const std::vector<uint8_t>& h2c = {});
  bool completed(uint16_t cid) const;
  Completion completion(uint16_t cid) const;
  size_t completion_count() const { return completions_.size(); }
  const std::vector<std::pair<uint16_t, Completion>>& completions() const { return completions_; }
  Request* request(uint16_t cid) const;  // the in-flight Request of `cid`, or nullptr
  int disconnects() const { return disconnects_; }
  // Destroys the qpair; false while the core still has requests inside a bdev (until the
  // teardown timeout, or at once with StuckCommands::abandon).
  bool destroy(StuckCommands stuck = StuckCommands::wait);
  bool destroyed() const { return qpair_ == nullptr; }
  // Requests the core lent to a bdev and gave back (TransportOps::request_released).
  int released() const { return released_; }

  // A command this transport keeps before execute(), as the RDMA transport does: waiting for
  // a data buffer (`in_transfer` false: an Abort answers it at once) or with its data on the
  // way (`in_transfer` true: an Abort is answered when end_transfer() runs).
  uint16_t hold(spec::Sqe sqe, bool in_transfer, const std::vector<uint8_t>& h2c = {});
  // The held command's data is here: execute() it, or refuse_aborted() if an Abort came.
  void end_transfer(uint16_t cid);
  int abort_queries() const { return abort_queries_; }

 private:
  enum class Held : uint8_t { no, waiting, in_transfer, in_transfer_aborted };
  struct Slot {
    Request req;
    std::vector<uint8_t> buffer;
    uint16_t cid = 0;
    bool busy = false;
    Held held = Held::no;
  };
  static void on_complete(void* ctx, Request& req);
  static void on_disconnect(void* ctx, Qpair& qpair);
  static void on_released(void* ctx, Request& req);
  static TransportAbort on_abort(void* ctx, Qpair& qpair, uint16_t cid);
  Slot& free_slot();
  Slot& prepare(spec::Sqe sqe, const std::vector<uint8_t>& h2c, uint32_t c2h_length,
                unsigned segments);

  Target& target_;
  reactor::Reactor& reactor_;
  Qpair* qpair_ = nullptr;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::pair<uint16_t, Completion>> completions_;
  uint16_t next_cid_ = 1;
  int disconnects_ = 0;
  int released_ = 0;
  int abort_queries_ = 0;
};

// Wire helpers (host side).
spec::Sqe connect_sqe(uint16_t qid, uint32_t sq_entries, uint32_t kato_ms = 0, uint8_t cattr = 0);
std::vector<uint8_t> connect_data(const std::string& subnqn, const Host& host, uint16_t cntlid);
spec::Sqe io_sqe(uint8_t opcode, uint32_t nsid, uint64_t lba, uint32_t blocks);
std::vector<uint8_t> pattern(size_t size, uint8_t seed);
uint32_t cc_enable_value();

template <typename T>
T as(const std::vector<uint8_t>& data, size_t offset = 0) {
  T value{};
  EXPECT_GE(data.size(), offset + sizeof(T));
  if (data.size() >= offset + sizeof(T)) std::memcpy(&value, data.data() + offset, sizeof(T));
  return value;
}

class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Makes the target (with opts_), the bdevs and the default subsystem with NS 1 (malloc) and
  // NS 2 (null). Called by SetUp unless a test changes opts_ and calls it again after reset().
  void build();
  void teardown_queues();

  FakeQueue& new_queue(size_t reactor_index, uint32_t depth = 128);
  // Runs a command on `queue` and polls until it completes (fails the test if it does not).
  Completion run(FakeQueue& queue, const spec::Sqe& sqe, const std::vector<uint8_t>& h2c = {},
                 uint32_t c2h_length = 0, unsigned segments = 1);
  Completion wait(FakeQueue& queue, uint16_t cid, int max_rounds = 1000);

  // Admin Connect on a new queue of reactor 0; returns the queue (cntlid in *cntlid).
  FakeQueue& connect_admin(uint16_t* cntlid, const std::string& nqn = kSubsystemNqn,
                           const Host& host = Host{}, uint32_t kato_ms = kAdminKatoMs,
                           uint32_t sq_entries = 32);
  Completion property_set(FakeQueue& queue, uint32_t offset, uint64_t value);
  Completion property_get(FakeQueue& queue, uint32_t offset);
  void enable(FakeQueue& admin);
  // Connect, enable, and Set Features Number of Queues: ready for I/O Connects.
  FakeQueue& bring_up(uint16_t* cntlid, const Host& host = Host{});
  FakeQueue& connect_io(uint16_t cntlid, uint16_t qid, const Host& host = Host{},
                        size_t reactor_index = 1, uint32_t sq_entries = 128);
  Completion connect_io_expect_failure(FakeQueue& queue, uint16_t cntlid, uint16_t qid,
                                       const Host& host = Host{}, uint32_t sq_entries = 128);

  reactor::ReactorHarness harness_{2};
  TargetOpts opts_{};
  std::unique_ptr<Target> target_;
  std::unique_ptr<bdev::Bdev> malloc_;
  std::unique_ptr<bdev::Bdev> null_;
  std::vector<std::unique_ptr<FakeQueue>> queues_;
};

}  // namespace nvmf::target::testing
