// The target core under a fake transport for the fuzz targets: what tests/unit/target's
// FakeQueue does, without gtest, with the transport's rules enforced (at most `depth` commands
// outstanding per queue, one request_complete per execute, destroy after qpair_disconnect)
// and every callback checked (CID echoed, SQID the queue's, the request handed back free).
// A record interpreter drives it from fuzz input: queues made and destroyed, commands with
// their data, polls and clock steps, so one input is a whole session of a transport.
// Single-threaded: two reactors of a ReactorHarness, polled by the fuzzer's thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bdev/bdev.h"
#include "fuzz_input.h"
#include "reactor/harness.h"
#include "spec/spec.h"
#include "target/target.h"

namespace nvmf::fuzz {

using target::Qpair;
using target::Request;
using target::Target;
using target::TargetOpts;

inline constexpr const char* kSubsystemNqn = "nqn.2026-01.io.example:disk1";
inline constexpr const char* kHostNqn =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
inline constexpr std::array<uint8_t, 16> kHostId = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
                                                    0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
// Small namespaces: every input makes them again. NS 1 malloc (stores data), NS 2 null.
inline constexpr uint32_t kMallocBlockSize = 512;
inline constexpr uint64_t kMallocBlocks = 64;  // 32 KiB: its pages are faulted in at creation
inline constexpr uint32_t kNullBlockSize = 4096;
inline constexpr uint64_t kNullBlocks = 1 << 20;
// A command's data buffer in run_records, at most: more than any admin page but the
// discovery log (discovery_log_fuzz.cpp reads that with buffers of its own), 32 blocks of
// NS 1. The transport checks max_io_size itself; the core only compares lengths.
inline constexpr uint32_t kDataBytesMax = 16 * 1024;
// Queue slots at most, whatever depth the input asks for.
inline constexpr uint32_t kQueueDepthMax = 64;

struct Completion {
  spec::Cqe cqe{};
  std::vector<uint8_t> data;  // controller->host: the buffer as the transport would send it
  spec::Status status() const { return cqe.decoded_status(); }
};

class FakeQueue {
 public:
  FakeQueue(Target& target, reactor::Reactor& reactor, uint32_t depth);
  ~FakeQueue();
  FakeQueue(const FakeQueue&) = delete;
  FakeQueue& operator=(const FakeQueue&) = delete;

  // Executes `sqe` as the host sent it (its CID too: duplicates are the host's business) with
  // `h2c` as host->controller data, or a controller->host buffer of `c2h_length` bytes filled
  // with `fill`; the data is split into `segments` iovecs, each an allocation of its own (a
  // copy past one is caught). A bidirectional opcode is refused as the RDMA transport's SGL
  // parser refuses it. Returns the slot, or -1 when every slot is busy (a transport would not
  // have received the capsule: it posts `depth` receives).
  int submit(const spec::Sqe& sqe, const std::vector<uint8_t>& h2c, uint32_t c2h_length,
             unsigned segments, uint8_t fill = 0xEE);
  // The completion of the command in `slot`, once it came (then the slot is free again).
  bool take_completion(int slot, Completion* out);
  void forget_completions();
  // Tries Target::destroy_qpair; false while requests are inside a bdev.
  bool destroy();
  bool destroyed() const { return qpair_ == nullptr; }
  bool disconnect_asked() const { return disconnects_ != 0; }
  Qpair* qpair() const { return qpair_; }
  uint32_t outstanding() const;

 private:
  struct Slot {
    Request req;
    std::vector<std::vector<uint8_t>> segments;
    bool busy = false;  // between execute() and request_complete()
    bool done = false;  // completed: `cqe` and the data in `segments` wait to be taken
    spec::Cqe cqe{};
  };
  static void on_complete(void* ctx, Request& req);
  static void on_disconnect(void* ctx, Qpair& qpair);
  static void on_released(void* ctx, Request& req);

  Target& target_;
  Qpair* qpair_ = nullptr;
  std::vector<std::unique_ptr<Slot>> slots_;
  int disconnects_ = 0;
};

class TargetHarness {
 public:
  // Makes the target (two reactors), a malloc and a null bdev.
  explicit TargetHarness(const TargetOpts& opts = {});
  // Destroys every queue (polling until the bdevs let go), then checks nothing is left
  // behind: no request outstanding, no controller alive, the reactors released.
  ~TargetHarness();

  Target& target() { return *target_; }
  reactor::ReactorHarness& reactors() { return reactors_; }
  bdev::Bdev& malloc_bdev() { return *malloc_; }
  bdev::Bdev& null_bdev() { return *null_; }

  // kSubsystemNqn with NS 1 (malloc) and NS 2 (null), max_namespaces 8; kHostNqn allowed.
  void add_default_subsystem(bool allow_any_host);

  // A new queue pair on reactor `reactor_index` (0 or 1), as after a CM accept.
  FakeQueue& new_queue(size_t reactor_index, uint32_t depth);
  size_t queue_count() const { return queues_.size(); }
  FakeQueue& queue(size_t index) { return *queues_[index]; }

  // Submits and polls until the command completes (bounded); false if it never does.
  bool run(FakeQueue& queue, const spec::Sqe& sqe, const std::vector<uint8_t>& h2c,
           uint32_t c2h_length, Completion* out);
  // Destroys the queues whose transport was asked to disconnect them (what a transport does
  // after qpair_disconnect), retrying busy ones at later calls.
  void reap_disconnected();

  // Admin Connect + CC.EN + Set Features Number of Queues on a new queue of reactor 0, then
  // an I/O Connect for QID 1 on reactor 1. Returns false if any step fails (it must not).
  bool bring_up(uint16_t* cntlid);

  // Interprets the rest of `in` as records until it runs out (or `records_max`):
  //   op % 8 == 0..3  command: [queue u8] [SQE 64] [data length u16] [segments u8]
  //                            [host->controller data: `length` bytes]
  //             4     poll: [rounds u8]
  //             5     clock: [milliseconds u16] (keep-alive timers, events)
  //             6     new queue: [reactor u8] [depth u8]
  //             7     destroy queue: [queue u8]
  // Queue numbers are taken modulo the live queues. Checks each completion as it comes.
  void run_records(Input& in, unsigned records_max = 64);
  // run_records runs every successful Identify on an admin queue twice, into buffers filled
  // with different bytes, and checks both return the same: every byte defined.
  void set_check_defined_bytes(bool on) { check_defined_bytes_ = on; }

 private:
  void check_defined_bytes(FakeQueue& queue, int slot, const spec::Sqe& sqe, uint32_t length);

  reactor::ReactorHarness reactors_;
  std::unique_ptr<Target> target_;
  std::unique_ptr<bdev::Bdev> malloc_;
  std::unique_ptr<bdev::Bdev> null_;
  std::vector<std::unique_ptr<FakeQueue>> queues_;
  bool check_defined_bytes_ = false;
};

// The Connect data of kHostNqn to `subnqn`, for seeds and bring_up.
std::vector<uint8_t> connect_data(const std::string& subnqn, uint16_t cntlid,
                                  const std::string& hostnqn = kHostNqn);
uint32_t cc_enable_value();

}  // namespace nvmf::fuzz
