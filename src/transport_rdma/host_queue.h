// The host side of the NVMe/RDMA binding: one NVMe queue (admin or I/O) over one RC queue pair.
//
// A HostQueue connects through rdma_cm (REQ private data {RECFMT, QID, HRQSIZE, HSQSIZE,
// CNTLID}, the accept's CRQSIZE bounds the depth), owns the command capsules and response
// buffers (carved from the host's memreg::MemoryMap, so one registration covers them), and
// runs each command as a small state machine:
//
//   free -> taken -> posted -> { response, SEND completion, [signaled LOCAL_INV] } -> free
//                      \-> pending_retry (QP lost; resent after reconnect())
//
// A command completes only once both its response and its SEND completion are in: until the
// SEND completes the HCA may still read (and retransmit) the capsule. Data travels in the
// capsule (a write that fits the target's in-capsule size, gathered from the caller's buffer
// as a second SGE: no copy), or through keyed SGL descriptors the target reaches by RDMA
// (one in the SQE, or up to 16 in a Last Segment list carried in the capsule). The key of a
// keyed descriptor comes from the queue's memreg::KeyPolicy: the MR's static key (`global`)
// or a type-2 window bound just before the SEND (the other policies), invalidated by the
// target or by the LOCAL_INV the policy asks for.
//
// Key policy switch (request_key_policy(), on a live queue): draining (submit() answers busy;
// the commands in flight complete, and so do the policy's signaled LOCAL_INVs) -> switching
// (nothing holds a window: the new policy is built) -> resumed. The old policy's windows are
// deallocated only once the HCA has retired every WR that names them (an unsignaled LOCAL_INV
// is retired by the next signaled completion), so a live key never loses its window.
//
// Errors: any failed WR (a bind failing with status 6 included), a response for a command not
// outstanding, or a CM disconnect moves the QP to error. Once the HCA has returned every WR,
// outstanding commands either complete with Command Aborted due to SQ Deletion (no recovery)
// or wait as pending_retry until the owner reconnects the queue (reconnect(), Fabrics Connect
// on reserved_command(), resubmit_pending()).
//
// Threads: a queue belongs to the thread that created it; nothing locks, allocates or throws
// after connect. WRs queued by submit() reach the HCA at the next poll() (one doorbell per
// poll, like SPDK's delay_cmd_submit): a burst of submissions costs one doorbell.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "common/result.h"
#include "memreg/key_policy.h"
#include "memreg/memory_map.h"
#include "spec/nvme.h"
#include "spec/sgl.h"
#include "transport_rdma/host_async_events.h"
#include "verbs/verbs.h"

namespace nvmf::transport_rdma {

// One PD per RDMA device, shared by every queue of a host and attached to its memory map, so
// DMA memory is registered once per device. Thread-safe (a mutex; setup path only).
class HostDomains {
 public:
  explicit HostDomains(memreg::MemoryMap& map) : map_(map) {}
  ~HostDomains();
  HostDomains(const HostDomains&) = delete;
  HostDomains& operator=(const HostDomains&) = delete;

  struct Domain {
    verbs::ProtectionDomain* pd = nullptr;
    uint32_t index = 0;  // the memory map's domain index
  };
  Result<Domain> get(verbs::Device& device) noexcept;
  memreg::MemoryMap& map() noexcept { return map_; }
  // The devices' async events, for every queue of this host (host_async_events.h).
  HostAsyncEvents& async_events() noexcept { return async_events_; }

 private:
  struct Entry {
    verbs::Device* device = nullptr;
    std::unique_ptr<verbs::ProtectionDomain> pd;
    uint32_t index = 0;
  };
  memreg::MemoryMap& map_;
  std::mutex mutex_;
  std::vector<Entry> entries_;
  HostAsyncEvents async_events_;
};

enum class HostQueueState : uint8_t {
  resolving,     // CM resolve() sent, waiting for route_resolved
  connecting,    // CM connect() sent, waiting for established
  connected,
  failed,        // the connection did not come up (see failure())
  disconnected,  // was connected; every WR is back (commands may wait in pending_retry)
};
const char* host_queue_state_name(HostQueueState state) noexcept;

// Where a key policy switch stands (request_key_policy()).
enum class KeySwitchState : uint8_t {
  none,       // the policy in use serves every submit
  draining,   // submit() answers busy; waits for every command and every window in use
  switching,  // nothing in flight: poll() builds the new policy and retires the old one
};

struct HostQueueOpts {
  std::string address;
  uint16_t port = 4420;
  uint16_t qid = 0;
  uint16_t entries = 32;     // queue entries asked for (HSQSIZE + 1); depth = entries - 1
  uint16_t cntlid = 0xFFFF;  // I/O queues: the controller's CNTLID (CM REQ private data)
  uint32_t connect_timeout_ms = 5000;
  memreg::KeyPolicyKind key_policy = memreg::KeyPolicyKind::global;
  // After a QP error keep outstanding commands for resubmit_pending() instead of aborting.
  bool keep_commands_on_error = false;
  const Clock* clock = nullptr;  // nullptr = monotonic
  // Event mode (an I/O qpair's completion_events): the CQ gets a completion channel, and the
  // CQ's and the CM channel's fds are kept in this epoll set (the owner's, tagged
  // kWakeCompletion and kWakeConnection), each time a reconnect makes them anew. -1: poll mode.
  int wake_epoll_fd = -1;
};

// Event mode: epoll_event.data.u64 of the fds a HostQueue puts in HostQueueOpts::wake_epoll_fd.
inline constexpr uint64_t kWakeCompletion = 1;  // the CQ's completion channel
inline constexpr uint64_t kWakeConnection = 2;  // the CM channel

// Why a connection did not come up.
struct HostQueueFailure {
  Errc code = Errc::ok;
  uint16_t reject_status = 0;  // NVMe/RDMA CM REJ STS when the target rejected (0 = none)
  const char* reason = "";     // static text for the log and the caller's message
};

enum class DataDirection : uint8_t { none, host_to_controller, controller_to_host };

inline constexpr uint32_t kHostMaxIovecs = 16;

struct HostCommand;
using HostCommandCallback = void (*)(HostCommand& command, const spec::Cqe& cqe);

// One command slot. The owner fills `sqe` (except CID and the SGL, which submit() sets) and
// the callback fields between get_command() and submit().
struct HostCommand {
  enum class State : uint8_t { free, taken, posted, pending_retry };

  spec::Sqe sqe{};
  // Completion: `callback` with the whole CQE when set, else `status_fn(cb_ctx, status)`.
  HostCommandCallback callback = nullptr;
  void (*status_fn)(void* ctx, const spec::Status& status) = nullptr;
  void* cb_ctx = nullptr;
  void* owner = nullptr;  // the owner's back pointer (e.g. its qpair), for `callback`
  // The owner's timer of this command (an I/O qpair's io_timeout_ms), set like the SQE
  // before submit(); the queue neither reads nor changes it.
  enum class Timer : uint8_t {
    unarmed,     // submitted or resent: the owner's next timeout scan starts the timer
    running,     // on the wire since timer_started_ns
    abort_sent,  // timed out; an Abort for it was asked for at timer_started_ns
  };
  Timer timer = Timer::unarmed;
  uint64_t timer_started_ns = 0;

  // Owned by the queue.
  State state = State::free;
  bool response_arrived = false;
  bool send_completed = false;
  bool wait_local_inv = false;  // sagi: the response asked for a signaled LOCAL_INV
  uint16_t cid = 0;
  uint32_t window = memreg::kNoWindow;
  DataDirection direction = DataDirection::none;
  uint8_t iovcnt = 0;
  iovec iov[kHostMaxIovecs] = {};  // kept for a resend after reconnect
  spec::Cqe cqe{};
  StackNode link;
};

struct HostQueueStats {
  uint64_t in_capsule_writes = 0;
  uint64_t qp_errors = 0;         // times the QP went to error (not counting disconnect())
  uint64_t bind_errors = 0;       // BIND_MW completions with an error (status 6 and others)
  uint64_t resubmitted = 0;       // commands sent again after a reconnect
  // The work a key policy costs, counted where it is posted (reconnects included), so a
  // benchmark can divide by its I/Os: send-queue WRs by opcode, their flags, the doorbells
  // poll() rings for what was posted since its last one (receives included; the set-up's and
  // a drain's flush aside) and the completions poll() reaps.
  uint64_t sends_posted = 0;              // SEND: command capsules, and the drain of a failure
  uint64_t binds_posted = 0;              // BIND_MW
  uint64_t local_invalidates_posted = 0;  // LOCAL_INV
  uint64_t signaled_posted = 0;           // send-queue WRs with kWrSignaled
  uint64_t fenced_posted = 0;             // send-queue WRs with kWrFenced
  uint64_t doorbells = 0;
  uint64_t cqes_reaped = 0;          // work completions polled from the CQ, receives included
  uint64_t key_policy_switches = 0;  // request_key_policy() switches done
  uint64_t key_policy_switch_failures = 0;  // ... that could not build the new policy
};

class HostQueue {
 public:
  // Starts connecting (resolve); drive it with progress_connect() until connected or failed.
  static Result<std::unique_ptr<HostQueue>> create(verbs::Provider& provider,
                                                   HostDomains& domains,
                                                   const HostQueueOpts& opts) noexcept;
  ~HostQueue();
  HostQueue(const HostQueue&) = delete;
  HostQueue& operator=(const HostQueue&) = delete;

  // Connection set-up: handles CM events and timeouts; returns the state.
  HostQueueState progress_connect() noexcept;
  HostQueueState state() const noexcept { return state_; }
  const HostQueueFailure& failure() const noexcept { return failure_; }

  uint16_t qid() const noexcept { return opts_.qid; }
  uint16_t entries() const noexcept { return entries_; }   // negotiated (min of ours, CRQSIZE)
  uint32_t depth() const noexcept { return depth_; }       // commands at once: entries - 1
  uint32_t outstanding() const noexcept { return outstanding_; }
  uint32_t pending_retry() const noexcept { return pending_retry_; }
  const char* error_reason() const noexcept { return error_reason_; }

  // Writes up to this many bytes go in the capsule (0 = never). The owner sets it from the
  // controller's IOCCSZ; it is also bounded by the SGEs the QP was granted.
  void set_in_capsule_limit(uint32_t bytes) noexcept { in_capsule_limit_ = bytes; }

  // A free command slot, or nullptr when `depth()` are outstanding (the caller says busy).
  // Inline: called per I/O from another translation unit (the initiator's).
  HostCommand* get_command() noexcept {
    HostCommand* command = free_.pop();
    if (command != nullptr) command->state = HostCommand::State::taken;
    return command;
  }
  // Returns a slot taken by get_command() that will not be submitted.
  void put_command(HostCommand& command) noexcept;
  // The slot kept for Fabrics Connect (never handed out by get_command()): the Connect of a
  // reconnect must go out while every other slot waits in pending_retry. nullptr while in use.
  HostCommand* reserved_command() noexcept;
  // Describes the data (buffers must come from the memory map), sets CID and SGL, queues the
  // SEND (after a BIND_MW under a window policy). invalid_argument: a buffer outside
  // registered memory, more than 16 iovecs, several iovecs under a window policy; busy: no
  // free window (deferred); bad_state: not connected. On error the slot returns to the free
  // list (a reserved slot stays reserved).
  // Inline (below): called per I/O from another translation unit (the initiator's).
  Result<void> submit(HostCommand& command, DataDirection direction, const iovec* iov,
                      int iovcnt) noexcept;

  // Rings the doorbell for queued WRs, reaps completions and runs callbacks (at most
  // `max_completions`, 0 = no limit). Returns callbacks run.
  int poll(uint32_t max_completions = 0) noexcept;

  // Event mode (HostQueueOpts::wake_epoll_fd). Asks the CQ for an event at its next
  // completion unless it is still armed (no event taken since the last arm): true when it
  // armed now. false without a CQ (reconnecting: the CM channel and the owner's timer wake
  // it then). Errors: what the device answered to the arm.
  Result<bool> arm_completions() noexcept;
  // The CQ's fd woke the owner: takes the event, so that the next arm_completions() arms.
  void consume_completion_event() noexcept;
  // Handles the CM channel's events and the devices' async events now (poll() looks only
  // every kCmPollInterval polls): after the CM channel's fd or a timer woke the owner.
  void poll_connection_events() noexcept;

  // Disconnects: the QP goes to error, every WR flushes, every outstanding command's callback
  // (pending_retry ones included) runs once with Command Aborted due to SQ Deletion.
  // Idempotent. Waits (polling) at most a few seconds for the HCA to return the WRs.
  void disconnect() noexcept;

  // After a QP error (state disconnected): a new QP, CQ and CM id to the same address and
  // QID; drive it with progress_connect(). Commands in pending_retry keep their slots.
  Result<void> reconnect(uint16_t cntlid) noexcept;
  // Connected again (and Fabrics Connect done): sends every pending_retry command again,
  // with new keys. Returns how many.
  uint32_t resubmit_pending() noexcept;
  // Gives up on the pending_retry commands: each completes once, aborted.
  void abort_pending() noexcept;
  // Fails the pending_retry commands: each completes once with `status` (an I/O qpair's
  // fast_io_fail: Host Pathing Error).
  void fail_pending(const spec::Status& status) noexcept;
  // Command slot `cid` (below entries()), for an owner that walks its commands (I/O timeouts:
  // the posted ones, HostCommand::timer).
  HostCommand& command_at(uint32_t cid) noexcept;

  // Drops the connection as a transport error would (e.g. the Fabrics Connect of a reconnect
  // was refused): outstanding commands settle as after any QP error.
  void fail_connection(const char* why) noexcept { enter_error(why); }
  bool stopping() const noexcept { return stopping_; }
  // The QP failed and the HCA is still handing WRs back (state() is still connected).
  bool in_error() const noexcept { return in_error_; }

  const HostQueueStats& stats() const noexcept { return stats_; }
  const memreg::KeyPolicy* key_policy() const noexcept;

  // Asks for key policy `kind` from now on (see the top of this file). A request while a
  // switch is pending replaces its target; asking for the policy in use then cancels it, and
  // is a no-op otherwise. On a queue whose QP is down (after a QP error) the switch happens in
  // reconnect(): the new QP starts with it. If the new policy cannot be built (the device is
  // out of windows), the old one stays (stats().key_policy_switch_failures, an error logged).
  // Errors, changing nothing: not_supported when the device cannot do `kind` (no type-2
  // windows), bad_state after disconnect(). Owner thread.
  Result<void> request_key_policy(memreg::KeyPolicyKind kind) noexcept;
  // Whether the queue's device can do `kind` (what request_key_policy() answers
  // not_supported for). Any thread once connected: the device's caps do not change.
  bool supports_key_policy(memreg::KeyPolicyKind kind) const noexcept;
  memreg::KeyPolicyKind key_policy_kind() const noexcept { return opts_.key_policy; }
  KeySwitchState key_switch_state() const noexcept { return key_switch_; }

 private:
  struct Resources;
  HostQueue(verbs::Provider& provider, HostDomains& domains, const HostQueueOpts& opts);
  Result<void> start() noexcept;
  Result<void> create_buffers() noexcept;
  Result<void> create_qp() noexcept;
  void fail(Errc code, const char* reason, uint16_t reject_status = 0) noexcept;
  void handle_cm_event(const verbs::CmEvent& event) noexcept;
  void handle_completion(const verbs::WorkCompletion& wc, uint32_t* callbacks) noexcept;
  void handle_response(const verbs::WorkCompletion& wc, uint32_t* callbacks) noexcept;
  void maybe_finish(HostCommand& command, uint32_t* callbacks) noexcept;
  void finish(HostCommand& command, uint32_t* callbacks) noexcept;
  void enter_error(const char* why, bool requested = false) noexcept;
  // An async event failed the QP (async_watch_): fail as a QP error does.
  void take_async_error() noexcept;
  void settle_after_error(uint32_t* callbacks) noexcept;
  // Completes outstanding commands once, aborted (a response that came stands): posted and
  // pending_retry ones, or only the pending_retry ones.
  void abort_outstanding(uint32_t* callbacks, bool pending_only = false,
                         const spec::Status& status = kAbortedSqDeletion) noexcept;
  static constexpr spec::Status kAbortedSqDeletion =
      spec::generic_status(spec::sc_generic::aborted_sq_deletion);
  void post_receive(uint32_t index) noexcept;
  // Event mode: adds `fd` to the owner's epoll set under `tag` and keeps it in *watched (no-op
  // in poll mode); unwatch() takes it out again.
  Result<void> watch(int fd, uint64_t tag, int* watched) noexcept;
  void unwatch(int* fd) noexcept;
  Result<void> post_command(HostCommand& command) noexcept;
  Result<void> post_send_wr(verbs::SendWr& wr, uint8_t kind, uint32_t window,
                            uint32_t cid) noexcept;
  // Key policy switch: one step of the state machine per call until it stops changing.
  void advance_key_switch() noexcept;
  // Builds the policy asked for; on success the old one retires (retire_key_policy).
  bool replace_key_policy() noexcept;
  void retire_key_policy(std::unique_ptr<memreg::KeyPolicy> old) noexcept;
  // Deallocates the retired policy once every WR posted before the switch is retired.
  void release_retired_key_policy() noexcept;
  // The policy whose window a send WR of sequence `seq` names.
  memreg::KeyPolicy& key_policy_of(uint32_t seq) noexcept;
  // True once the HCA retired every send WR posted before sequence `seq`.
  bool retired_before(uint32_t seq) const noexcept;

  verbs::Provider& provider_;
  HostDomains& domains_;
  HostQueueOpts opts_;
  MonotonicClock monotonic_;
  const Clock* clock_;
  HostQueueState state_ = HostQueueState::resolving;
  HostQueueFailure failure_;
  const char* error_reason_ = "";
  uint64_t deadline_ns_ = 0;
  uint16_t entries_ = 0;
  uint32_t depth_ = 0;
  uint32_t outstanding_ = 0;   // posted or pending_retry, callback not yet run
  uint32_t pending_retry_ = 0;
  uint32_t in_capsule_limit_ = 0;
  uint32_t send_posted_ = 0;   // send-queue WRs posted (24-bit sequence, wraps)
  uint32_t send_retired_ = 0;  // ... and retired (completed, or retired by a later signaled one)
  uint32_t recv_wrs_posted_ = 0;
  bool ever_connected_ = false;
  bool reserved_in_use_ = false;
  bool in_error_ = false;
  bool stopping_ = false;  // disconnect() ran: no more reconnects, nothing kept for a resend
  bool doorbell_due_ = false;
  uint32_t cm_poll_countdown_ = 0;
  KeySwitchState key_switch_ = KeySwitchState::none;
  memreg::KeyPolicyKind key_switch_to_ = memreg::KeyPolicyKind::global;  // while not none
  uint32_t retired_keys_seq_ = 0;  // send_posted_ at the switch that retired res_->retired_keys
  HostQueueStats stats_;
  HostAsyncWatch async_watch_;     // this QP's registration with domains_.async_events()
  bool completions_lost_ = false;  // CQ_ERR / DEVICE_FATAL: settle without waiting for WRs
  // Event mode: the fds in the owner's epoll set (-1: none), and whether the CQ is armed.
  int watched_cq_fd_ = -1;
  int watched_cm_fd_ = -1;
  bool cq_armed_ = false;
  std::unique_ptr<Resources> res_;
  IntrusiveStack<HostCommand, &HostCommand::link> free_;
};

inline Result<void> HostQueue::submit(HostCommand& command, DataDirection direction,
                                      const iovec* iov, int iovcnt) noexcept {
  assert(command.state == HostCommand::State::taken);
  if (state_ != HostQueueState::connected || in_error_) {
    put_command(command);
    return Unexpected(Errc::bad_state, "queue not connected");
  }
  // A draining queue takes no new command, but the Connect of a reconnect (reserved slot) must
  // go out for the commands it resends to drain at all.
  if (key_switch_ != KeySwitchState::none && command.cid != depth_) {
    put_command(command);
    return Unexpected(Errc::busy, "key policy switch draining");
  }
  if (iovcnt < 0 || static_cast<uint32_t>(iovcnt) > kHostMaxIovecs ||
      (direction != DataDirection::none && iovcnt == 0)) {
    put_command(command);
    return Unexpected(Errc::invalid_argument, "1 to 16 iovecs");
  }
  command.direction = direction;
  command.iovcnt = static_cast<uint8_t>(direction == DataDirection::none ? 0 : iovcnt);
  for (uint32_t i = 0; i < command.iovcnt; ++i) command.iov[i] = iov[i];
  // One result object for every way out: built once, where the caller wants it.
  Result<void> posted = post_command(command);
  if (posted) {
    ++outstanding_;
  } else {
    put_command(command);
  }
  return posted;
}

}  // namespace nvmf::transport_rdma
