// The contract between a transport (RDMA later, a fake in tests) and the target core, kept as
// narrow as the kernel's nvmet_fabrics_ops: the transport hands the core one Request per
// command capsule through execute(); the core answers through TransportOps::request_complete()
// and asks for a queue's teardown through TransportOps::qpair_disconnect().
//
// The transport's side of one command:
//   1. Take a preallocated Request of the queue pair (one per queue slot), copy the 64-byte SQE
//      into `cmd`, set `qpair`, `xfer` (xfer_direction()), and describe the data buffer in
//      local memory with `iov`/`iovcnt`/`length` (`length` = what the host's SGL described).
//      For host->controller commands the data must already be there (in-capsule data, or the
//      RDMA READs done). For controller->host commands the buffer may hold anything.
//   2. Call execute(req) on the queue pair's reactor thread.
//   3. request_complete(req) runs exactly once per execute(), on the same thread, possibly
//      before execute() returns (every command that needs no bdev and no event completes
//      synchronously). `rsp` is then final, CID/SQID/SQHD included. For controller->host
//      commands the transport sends all `length` bytes of the buffer (the core has defined
//      every byte: data, or zeroes past the end of a log page), then the response. After
//      request_complete the Request is the transport's again.
//
// Threads: a Qpair belongs to the reactor it was created on (Target::create_qpair). execute(),
// destroy_qpair() and every callback of its TransportOps run there only.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>

#include "bdev/bdev.h"
#include "common/intrusive_list.h"
#include "common/util.h"
#include "spec/nvme.h"

namespace nvmf::reactor {
class Reactor;
}

namespace nvmf::target {

class Controller;
class PollGroup;
class Qpair;
class Target;
struct Request;

namespace detail {
void finish(Request& req) noexcept;
}
void refuse(Request& req, const spec::Status& status) noexcept;

// Data segments a Request may carry: 16 = MSDBD, the most keyed SGL descriptors one command
// may use (anchors.md: SPDK RDMA), each landing in one buffer.
inline constexpr unsigned kRequestIovMax = 16;

// Direction of a command's data, from the opcode's bits 1:0 (for Fabrics commands: FCTYPE's).
enum class XferDirection : uint8_t {
  none = 0,
  host_to_controller = 1,
  controller_to_host = 2,
  bidirectional = 3,
};
// What a transport sets `xfer` to for a received SQE.
XferDirection xfer_direction(const spec::Sqe& cmd) noexcept;

// Where a Request is inside the core (STYLE 3). Only the core changes it; a test may read it.
enum class RequestState : uint8_t {
  free = 0,        // the transport's: not inside the core
  executing,       // inside execute(): being parsed and checked, synchronously
  need_bdev,       // checked; waits for its bdev submit. If the channel answered busy it sits
                   // on the queue pair's pending list until the poll group retries it
  bdev_submitted,  // inside the bdev; waits for the BdevIo callback
  bdev_done,       // the callback ran: next Dataset Management range, or complete
  held_event,      // an Asynchronous Event Request held by its controller until an event,
                   // an Abort or the queue's teardown
  cross_reactor,   // an Abort waiting on another reactor's queue pair, or its way back
  complete,        // the response is built; handed back through request_complete next
};
const char* request_state_name(RequestState state) noexcept;

// One command. Preallocated by the transport (one per queue slot), never allocated by the core.
struct Request {
  // ---- Set by the transport before execute(); read-only to the core ----
  spec::Sqe cmd{};                           // the command capsule's SQE, copied in
  iovec iov[kRequestIovMax]{};               // the data buffer in local memory
  unsigned iovcnt = 0;                       // 0 when the command carries no data
  uint32_t length = 0;                       // bytes the host's SGL described (sum of iov lengths)
  XferDirection xfer = XferDirection::none;  // xfer_direction(cmd)
  Qpair* qpair = nullptr;                    // the queue it arrived on
  void* transport_ctx = nullptr;             // the transport's own back pointer; never read

  // ---- Built by the core; final when request_complete() runs ----
  // CID, SQID and SQHD are filled by the core (the SQ head lives in the Qpair), CDW0/DW1 and
  // the status as the command defines. The phase tag is 0: it belongs to PCIe queues.
  spec::Cqe rsp{};

  // ---- Core-private: the transport never touches them ----
  RequestState state = RequestState::free;
  uint16_t dsm_range_next = 0;         // Dataset Management: next range to submit (0..256)
  uint16_t dsm_range_count = 0;        // NR + 1: 1..256
  uint32_t abort_target = 0;           // Abort: the SQID/CID pair it is looking for (CDW10)
  bdev::IoChannel* channel = nullptr;  // the channel the bdev I/O goes to
  bdev::BdevIo bdev_io{};              // the bdev request this command becomes
  ListNode link{};                     // pending list, event list or cross-reactor hand-off
};

// How the core calls the transport back: plain function pointers and a context (no
// std::function; STYLE 2). Both run on the queue pair's reactor.
struct TransportOps {
  // The core is done with `req`: send its data (controller->host), then `req.rsp`.
  void (*request_complete)(void* ctx, Request& req) = nullptr;
  // The core wants the queue pair torn down (keep-alive timeout, controller reset, shutdown,
  // Disconnect, the admin queue went away). Called at most once per queue pair. The transport
  // disconnects and later calls Target::destroy_qpair(); it may do so from inside this call.
  void (*qpair_disconnect)(void* ctx, Qpair& qpair) = nullptr;
  void* ctx = nullptr;
};

// Queue pair lifecycle; transitions are checked (old -> new).
enum class QpairState : uint8_t {
  idle = 0,    // created; only a Connect is accepted
  connected,   // attached to a controller
  destroying,  // destroy_qpair() ran; waits for requests still inside a bdev
};

// The core's per-queue state. Created by Target::create_qpair() when the transport accepts a
// connection, destroyed by Target::destroy_qpair(). Owned by one reactor.
class Qpair {
 public:
  Qpair(const Qpair&) = delete;
  Qpair& operator=(const Qpair&) = delete;

  // Owner thread (or a test). 0 until Connect; then the QID the host connected.
  uint16_t qid() const noexcept { return qid_; }
  bool is_admin() const noexcept { return qid_ == 0; }
  QpairState state() const noexcept { return state_; }
  bool connected() const noexcept { return state_ == QpairState::connected; }
  // Entries of the submission queue: the transport's depth until Connect, SQSIZE + 1 after.
  // Any thread under the target mutex too (snapshots): Connect sets it once, atomically.
  uint32_t sq_size() const noexcept { return sq_size_.load(std::memory_order_relaxed); }
  // The SQ head the next completion reports (SQHD).
  uint16_t sq_head() const noexcept { return sq_head_; }
  // CATTR "disable SQ flow control": completions report SQHD FFFFh.
  bool sq_flow_control_disabled() const noexcept { return sq_flow_control_disabled_; }
  // Requests between execute() and request_complete().
  uint32_t outstanding() const noexcept { return outstanding_; }
  // Of those, requests inside a bdev (destroy_qpair answers busy while this is not 0).
  uint32_t in_bdev() const noexcept { return in_bdev_; }
  Controller* controller() const noexcept { return controller_; }
  reactor::Reactor& reactor() const noexcept { return reactor_; }
  Target& target() const noexcept { return target_; }
  const TransportOps& ops() const noexcept { return ops_; }

 private:
  friend class Target;
  friend class Controller;
  friend class PollGroup;
  friend void detail::finish(Request& req) noexcept;
  friend void refuse(Request& req, const spec::Status& status) noexcept;
  Qpair(Target& target, PollGroup& group, reactor::Reactor& reactor, const TransportOps& ops,
        uint32_t queue_depth) noexcept;
  ~Qpair();

  void set_state(QpairState next) noexcept;
  // Consumes one SQ entry: called once per execute().
  void advance_sq_head() noexcept {
    sq_head_ = static_cast<uint16_t>((uint32_t{sq_head_} + 1) % sq_size());
  }

  Target& target_;
  PollGroup& group_;
  reactor::Reactor& reactor_;
  TransportOps ops_;
  ThreadOwner owner_;
  QpairState state_ = QpairState::idle;
  uint16_t qid_ = 0;
  uint16_t sq_head_ = 0;
  // Written by the owner thread (create, Connect), read by Target::subsystems_info() on the
  // control path: atomic so that read is race-free (a relaxed load per command costs nothing).
  std::atomic<uint32_t> sq_size_;
  bool sq_flow_control_disabled_ = false;
  uint32_t outstanding_ = 0;
  uint32_t in_bdev_ = 0;
  Controller* controller_ = nullptr;  // set at Connect; read by other threads under the mutex
  // I/O commands that could not be submitted yet (bdev busy), oldest first. Owner thread only.
  IntrusiveList<Request, &Request::link> pending_;
  // Raised by other threads (under the target mutex) when this queue must be torn down; the
  // poll group calls ops.qpair_disconnect once on the owner thread.
  std::atomic<bool> disconnect_requested_{false};
  bool disconnect_notified_ = false;
  // Aborts from the admin queue looking for a command on this queue. Guarded by the target
  // mutex (written by the admin reactor, drained by this one).
  IntrusiveList<Request, &Request::link> abort_inbox_;
  ListNode group_link_;  // on PollGroup::qpairs_
};

// The entry point: runs `req` on its queue pair (req.qpair). Owner thread of the queue pair.
// Completes through req.qpair->ops().request_complete, synchronously or later.
void execute(Request& req) noexcept;

// For a command the transport refuses before it can run (a malformed SGL: the status comes
// from the transport's parser): consumes its SQ entry like execute() and answers `status`
// through request_complete, synchronously, with CID, SQID and SQHD filled. Same thread rules.
void refuse(Request& req, const spec::Status& status) noexcept;

}  // namespace nvmf::target
