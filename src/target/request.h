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
//
// A queue pair torn down while commands are stuck inside a bdev (destroy_qpair after
// TargetOpts::teardown_timeout_ms, or with StuckCommands::abandon) lends those Requests to the
// core: destroy_qpair succeeds, no response is ever sent for them, and each one comes back
// through TransportOps::request_released once its bdev lets go of it. Until then the transport
// keeps the Request and its data buffers (the bdev still reads or writes them).
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
struct BdevLane;
struct Request;

namespace detail {
void finish(Request& req) noexcept;
void complete_abort(Request& abort, const spec::Status& status) noexcept;
}  // namespace detail
void refuse(Request& req, const spec::Status& status) noexcept;
void refuse_aborted(Request& req) noexcept;

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
                   // on its namespace's lane (BdevLane) until the poll group retries it
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
  uint16_t dsm_range_next = 0;   // Dataset Management: next range to submit (0..256)
  uint16_t dsm_range_count = 0;  // NR + 1: 1..256
  uint32_t abort_target = 0;     // Abort: the SQID/CID pair it is looking for (CDW10)
  Qpair* abort_qpair = nullptr;  // Abort: the queue pair that SQID names
  // Abort: the transport will answer its command once that command's data transfer ends
  // (TransportAbort::after_transfer); it waits in the queue's abort inbox until then.
  bool abort_after_transfer = false;
  BdevLane* lane = nullptr;  // the namespace's bdev channel on this reactor
  bdev::BdevIo bdev_io{};    // the bdev request this command becomes
  ListNode link{};           // lane wait list, event list or cross-reactor hand-off
};

// What TransportOps::abort_request found for an Abort's CID.
enum class TransportAbort : uint8_t {
  not_found,       // the transport has no such command before execute(): "not aborted"
  aborted,         // it was waiting (for data buffers, or room to post its RDMA READs) and
                   // is answered now with Command Abort Requested through refuse()
  after_transfer,  // its data transfer (RDMA READ) is posted and cannot be recalled: the
                   // transport calls refuse_aborted() when it ends, instead of execute()
};

// How the core calls the transport back: plain function pointers and a context (no
// std::function; STYLE 2). Both run on the queue pair's reactor.
struct TransportOps {
  // The core is done with `req`: send its data (controller->host), then `req.rsp`.
  void (*request_complete)(void* ctx, Request& req) = nullptr;
  // A Request lent to the core when its queue pair was torn down while it was inside a bdev
  // (see the top of this file): the bdev is done with it and its buffers; nothing is to be
  // sent. Called once per lent Request, possibly long after destroy_qpair, with the `ctx` the
  // queue pair was created with.
  void (*request_released)(void* ctx, Request& req) = nullptr;
  // Optional (nullptr: the transport holds no commands before execute()). An Abort names
  // command `cid` of `qpair` and the core does not have it: does the transport? It must not
  // execute() a command it answered `aborted` or `after_transfer` for.
  TransportAbort (*abort_request)(void* ctx, Qpair& qpair, uint16_t cid) = nullptr;
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
  abandoned,   // destroy_qpair() stopped waiting: the transport has let go; requests still
               // inside a bdev are dropped (request_released) as they come back, the last
               // one frees the Qpair
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
  // Of those, requests inside a bdev (destroy_qpair answers busy while this is not 0, until
  // the teardown timeout).
  uint32_t in_bdev() const noexcept { return in_bdev_; }
  // Of those, requests waiting for room in their bdev (BdevLane).
  uint32_t waiting_for_bdev() const noexcept { return waiting_for_bdev_; }
  Controller* controller() const noexcept { return controller_; }
  reactor::Reactor& reactor() const noexcept { return reactor_; }
  Target& target() const noexcept { return target_; }
  const TransportOps& ops() const noexcept { return ops_; }

 private:
  friend class Target;
  friend class Controller;
  friend class PollGroup;
  friend void detail::finish(Request& req) noexcept;
  friend void detail::complete_abort(Request& abort, const spec::Status& status) noexcept;
  friend void refuse(Request& req, const spec::Status& status) noexcept;
  friend void refuse_aborted(Request& req) noexcept;
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
  uint32_t waiting_for_bdev_ = 0;  // on some BdevLane of the poll group
  // Admin queue: its Aborts out on some queue pair's inbox or on their way back (Abort Command
  // Limit). Admin reactor only.
  uint32_t aborts_in_flight_ = 0;
  // Reactor clock time after which destroy_qpair stops waiting for requests inside a bdev;
  // set by its first call.
  uint64_t teardown_deadline_ns_ = 0;
  Controller* controller_ = nullptr;  // set at Connect; read by other threads under the mutex
  // Raised by other threads (under the target mutex) when this queue must be torn down; the
  // poll group calls ops.qpair_disconnect once on the owner thread.
  std::atomic<bool> disconnect_requested_{false};
  bool disconnect_notified_ = false;
  // Aborts from the admin queue looking for a command on this queue, and those waiting for
  // their command's transfer (abort_after_transfer). Guarded by the target mutex (written by
  // the admin reactor, drained by this one).
  IntrusiveList<Request, &Request::link> abort_inbox_;
  ListNode group_link_;  // on PollGroup::qpairs_, or PollGroup::abandoned_
};

// The entry point: runs `req` on its queue pair (req.qpair). Owner thread of the queue pair.
// Completes through req.qpair->ops().request_complete, synchronously or later.
void execute(Request& req) noexcept;

// For a command the transport refuses before it can run (a malformed SGL: the status comes
// from the transport's parser): consumes its SQ entry like execute() and answers `status`
// through request_complete, synchronously, with CID, SQID and SQHD filled. Same thread rules.
void refuse(Request& req, const spec::Status& status) noexcept;
// For a command the transport answered TransportAbort::after_transfer for, once its transfer
// has ended: refuse() with Command Abort Requested, and the Aborts waiting for it are answered
// "aborted" (CQE DW0 bit 0 = 0). A transfer that failed tears the queue down instead; the
// waiting Aborts are then answered "not aborted" when the queue pair is destroyed.
void refuse_aborted(Request& req) noexcept;

}  // namespace nvmf::target
