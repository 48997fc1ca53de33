// Internals of libnvmf_host shared by its .cpp files: the Impl structs behind host.h.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "memreg/memory_map.h"
#include "nvmf/host.h"
#include "spec/spec.h"
#include "transport_rdma/host_queue.h"
#include "verbs/verbs.h"

namespace nvmf::host {

struct Host::Impl {
  HostOpts opts;
  MonotonicClock monotonic;
  const Clock* clock = nullptr;
  std::unique_ptr<verbs::Provider> owned_provider;  // rdma-core, when opts.provider is null
  verbs::Provider* provider = nullptr;
  std::unique_ptr<memreg::MemoryMap> map;
  std::unique_ptr<transport_rdma::HostDomains> domains;

  ~Impl() {
    domains.reset();  // PDs detach (MRs deregistered) before the map frees its memory
    map.reset();
  }
  void idle() const {
    if (opts.idle != nullptr) opts.idle(opts.idle_ctx);
  }
  uint64_t now_ns() const { return clock->now_ns(); }
};

// An Abort an I/O qpair's owner asks the admin thread to send (a command timed out).
struct AbortRequest {
  uint16_t sqid = 0;
  uint16_t cid = 0;
};
// Timed-out commands whose Aborts may wait for the admin thread at once: timeouts are rare,
// and a burst beyond this (a whole stalled queue) resets its queue, which Aborts sent
// a few at a time (the controller's Abort Command Limit) could not have freed sooner.
inline constexpr uint32_t kAbortRequestsMax = 64;

// The controller the I/O qpairs connect to, as one word the admin thread publishes
// (QpairRegistry::controller) and each qpair's owner compares in process_completions():
// a new generation is a controller reset, after which every I/O queue reconnects with the new
// controller ID.
enum class ControllerLink : uint8_t {
  live,       // connected: I/O queues connect with `cntlid`
  resetting,  // the admin queue is being reconnected: I/O queues wait for it
  lost,       // given up (ctrl_loss_timeout_ms): I/O queues give up too
};
struct ControllerEpoch {
  uint32_t generation = 0;  // +1 at each reset
  ControllerLink link = ControllerLink::live;
  uint16_t cntlid = 0;

  uint64_t pack() const noexcept {
    return (uint64_t{generation} << 32) | (uint64_t{static_cast<uint8_t>(link)} << 16) | cntlid;
  }
  static ControllerEpoch unpack(uint64_t word) noexcept {
    return ControllerEpoch{static_cast<uint32_t>(word >> 32),
                           static_cast<ControllerLink>((word >> 16) & 0xFF),
                           static_cast<uint16_t>(word & 0xFFFF)};
  }
};

// The I/O qpairs of a controller, shared with them so either may go first.
struct QpairRegistry {
  // ControllerEpoch::pack(), written by the admin thread (controller.cpp).
  std::atomic<uint64_t> controller{0};
  // A qpair's timed-out command was not freed by its Abort: the admin thread resets the
  // controller (ControllerOpts::controller_recovery), as the kernel host's error recovery.
  std::atomic<bool> reset_requested{false};
  std::atomic<uint64_t> reconnects{0};  // I/O queue reconnects, summed over qpairs
  // Controller::set_memreg_policy(): (request number << 8) | MemregPolicy; 0 = none yet. Each
  // qpair's owner thread compares it with the last it took in process_completions().
  std::atomic<uint32_t> memreg_request{0};
  std::mutex mutex;
  std::vector<bool> qid_used;          // index = QID - 1
  std::vector<IoQpair::Impl*> live;    // allocated and not yet freed
  // Aborts asked for by qpair owners (IoQpair::Impl::request_abort), oldest first, sent by
  // send_requested_aborts() on the admin thread. The ring is guarded by `mutex`;
  // aborts_requested mirrors its count so the admin thread skips the lock when it is empty.
  std::atomic<uint32_t> aborts_requested{0};
  std::array<AbortRequest, kAbortRequestsMax> abort_ring{};
  uint32_t abort_ring_head = 0;
  uint32_t aborts_in_flight = 0;  // admin thread only: sent, not yet answered
};

struct IoQpair::Impl {
  // Error recovery of this queue (the kernel host's: wait reconnect_delay, reconnect, resend,
  // give up after ctrl_loss_timeout). Driven from process_completions() on the owner thread.
  enum class Recovery : uint8_t { none, waiting, connecting, fabric_connect, gave_up };

  Host::Impl* host = nullptr;
  std::shared_ptr<QpairRegistry> registry;
  std::unique_ptr<transport_rdma::HostQueue> queue;
  uint16_t qid = 0;
  uint16_t cntlid = 0;
  std::string subnqn;  // for log lines
  uint32_t reconnect_delay_ms = 0;
  uint32_t ctrl_loss_timeout_ms = 0;
  Recovery recovery = Recovery::none;
  uint64_t retry_at_ns = 0;
  uint64_t loss_deadline_ns = 0;
  uint32_t attempts = 0;
  bool connect_answered = false;
  spec::Status connect_status;
  uint32_t max_transfer_bytes = 0;  // 0 = no limit
  spec::DsmRange* dsm_ranges = nullptr;  // one per command slot (index = CID), DMA memory
  void* connect_data = nullptr;          // the Connect command's 1 KiB, DMA memory
  uint32_t memreg_request_taken = 0;     // the registry's memreg_request this qpair last took
  uint64_t controller_seen = 0;          // the registry's `controller` word at the last look
  uint32_t generation = 0;               // the controller generation the queue connected to
  bool controller_recovery = false;      // ControllerOpts::controller_recovery
  bool warned_unsafe = false;            // logged once that a switch chose `unsafe`
  IoQpairStats stats;
  // I/O timeouts (ControllerOpts::io_timeout_ms; HostCommand::timer is each command's).
  uint64_t io_timeout_ns = 0;                 // 0 = none
  uint64_t timeout_scan_interval_ns = 0;
  uint64_t next_timeout_scan_ns = 0;
  // Written by the admin thread under registry->mutex (abort.cpp), read by the owner.
  std::atomic<uint64_t> aborts_sent{0};
  std::atomic<uint64_t> aborts_failed{0};
  uint64_t aborts_failed_seen = 0;            // aborts_failed at the owner's last scan
  // fast_io_fail (ControllerOpts::fast_io_fail_timeout_ms); UINT64_MAX = off.
  uint64_t fast_io_fail_ns = UINT64_MAX;
  uint64_t lost_at_ns = 0;    // when recovery began
  bool failing_fast = false;  // reconnecting past fast_io_fail: submits answer bad_state
  // Event mode (IoQpairOpts::completion_events; qpair.cpp "Event mode"). event_fd() is
  // epoll_fd: the queue's CQ and CM channel fds (the HostQueue keeps them in it across
  // reconnects) and timer_fd, set for next_timer_ns() before each sleep. -1: poll mode.
  int epoll_fd = -1;
  int timer_fd = -1;
  uint64_t timer_deadline_ns = UINT64_MAX;  // what timer_fd is set for; UINT64_MAX: disarmed

  ~Impl();
  // Event mode: makes epoll_fd and timer_fd (alloc_io_qpair); closed by ~Impl.
  Result<void> open_events() noexcept;
  // When process_completions() next has timed work to do (the I/O timeout scan while commands
  // are outstanding; recovery's steps); UINT64_MAX: none.
  uint64_t next_timer_ns() const noexcept;
  void set_timer(uint64_t deadline_ns) noexcept;
  // Takes what an epoll_wait() on epoll_fd returned (consumes the CQ event, the CM events,
  // the timer's expiry); true when the timer was among them.
  bool take_wakeups(const epoll_event* events, int count) noexcept;
  void release_qid() noexcept;
  bool recovering() const noexcept {
    return recovery == Recovery::waiting || recovery == Recovery::connecting ||
           recovery == Recovery::fabric_connect;
  }
  // One step of error recovery; returns callbacks it ran.
  int recover() noexcept;
  // IoQpair::set_memreg_policy().
  Result<void> set_memreg_policy(MemregPolicy policy) noexcept;
  // Controller::set_memreg_policy() asked for another policy: ask the queue.
  void take_memreg_request(uint32_t request) noexcept;
  void schedule_retry(const char* why) noexcept;
  // Owner thread, from process_completions() every timeout_scan_interval_ns: starts the timers
  // of new commands, asks for an Abort of each that timed out, resets the queue for one whose
  // Abort did not free it within another io_timeout (or failed).
  void check_timeouts(uint64_t now_ns) noexcept;
  // Queues an Abort of `cid` for the admin thread; false when kAbortRequestsMax are waiting.
  bool request_abort(uint16_t cid) noexcept;
  // After a reconnect: the resent commands' timers start again.
  void restart_timers() noexcept;
  // Recovery past fast_io_fail_timeout_ms: fail what is held, refuse new submits.
  void check_fast_io_fail() noexcept;
  // The registry's `controller` word changed: a queue connected to an older controller
  // generation resets (and reconnects once the new controller is live).
  void take_controller_epoch(uint64_t word) noexcept;
  // Recovery::waiting, from recover(): what the controller's reset says about this attempt.
  enum class EpochVerdict : uint8_t { as_scheduled, now, wait, give_up };
  EpochVerdict consult_controller() noexcept;
  void give_up(const char* why) noexcept;
};

struct Controller::Impl {
  Host::Impl* host = nullptr;
  TransportId trid;
  ControllerOpts opts;
  HostIdentity identity;
  bool discovery = false;
  // Written by the admin thread, read by threads allocating I/O qpairs.
  std::atomic<bool> connected{false};
  ControllerData data;
  ControllerStats stats;
  std::unique_ptr<transport_rdma::HostQueue> admin;
  void* scratch = nullptr;  // 4 KiB of DMA memory for admin data (identify, log pages)
  void* aer_log = nullptr;  // 4 KiB for the log page an async event points at
  std::vector<uint32_t> active;
  std::vector<std::unique_ptr<Namespace>> namespaces;  // parallel to `active`
  std::shared_ptr<QpairRegistry> registry = std::make_shared<QpairRegistry>();
  uint64_t next_keep_alive_ns = 0;
  bool keep_alive_outstanding = false;
  uint64_t keep_alive_sent_ns = 0;  // when the outstanding Keep Alive went out
  uint32_t aers_outstanding = 0;
  bool aer_log_busy = false;
  bool shutting_down = false;  // no AER or log read is submitted once shutdown() began
  bool rescan_pending = false;  // a Namespace Attribute Changed notice came in
  // Namespaces replaced by a rescan: kept because callers may still hold their pointers.
  std::vector<std::unique_ptr<Namespace>> retired_namespaces;
  // Controller reset (ControllerOpts::controller_recovery), admin thread only.
  enum class Reset : uint8_t { none, waiting, gave_up };
  Reset reset = Reset::none;
  ControllerEpoch epoch;  // what registry->controller says
  uint64_t reset_retry_at_ns = 0;
  uint64_t reset_deadline_ns = 0;
  uint32_t reset_attempts = 0;
  std::thread::id admin_thread;  // the thread that connected the controller
  bool bringing_up = false;      // bring_up() runs: its failures are its caller's to handle

  ~Impl();

  // Runs one admin command to completion (polling, calling the host's idle hook). On a
  // timeout the admin queue is disconnected (aborting the command) and timed_out returned.
  Result<spec::Cqe> execute(spec::Sqe sqe, transport_rdma::DataDirection direction, void* buffer,
                            uint32_t length);
  // Fabrics Connect on `queue` (admin or I/O) with Connect data in `connect_data`.
  Result<spec::Cqe> fabrics_connect(transport_rdma::HostQueue& queue, void* connect_data,
                                    uint16_t cntlid, std::string* message);
  Result<uint64_t> property_get(uint32_t offset, std::string* message);
  Result<void> property_set(uint32_t offset, uint64_t value, std::string* message);

  // `resetting`: a controller reset's bring-up, which keeps the QID table of the live qpairs.
  Result<void> bring_up(std::string* message, bool resetting = false);
  // Reads the active namespace list and each namespace; unchanged Namespace objects stay,
  // changed and removed ones move to retired_namespaces. On failure nothing changes.
  Result<void> identify_namespaces(std::string* message);
  void publish_epoch(ControllerEpoch next) noexcept;
  // The admin queue is gone: controller reset (or, without controller_recovery, lost).
  void admin_lost(const char* why) noexcept;
  // Controller reset: one attempt when its time came; returns whether the admin queue is up.
  bool reset_step() noexcept;
  void rescan_namespaces() noexcept;
  // Admin queue poll, keep-alive timeout and Keep Alive due (process_admin_completions()).
  int service_admin_queue() noexcept;
  // From an I/O queue's blocking connect (alloc_io_qpair()): on the admin thread, whose
  // process_admin_completions() cannot run meanwhile, the admin queue is serviced so that a
  // long series of connects does not outlast KATO at the target (whose keep-alive timer only a
  // Keep Alive restarts). On any other thread: nothing.
  void keep_alive_while_connecting() noexcept;
  void submit_aer() noexcept;
  void submit_keep_alive() noexcept;
  Result<std::vector<DiscoveryEntry>> read_discovery_log(std::string* message);
  void shutdown() noexcept;
};

// Admin thread (abort.cpp; process_admin_completions() calls it): sends the Aborts the I/O
// qpairs asked for (at most ACL + 1 outstanding), and reports a failed one to its
// qpair, which then resets. With no usable admin queue every request fails at once.
void send_requested_aborts(Controller::Impl& ctrl) noexcept;

// Connects `queue` (blocking on the host's idle hook) and fills *message on failure. With
// `keep_alive`, an I/O queue's connect on the admin thread keeps that controller's keep-alive
// going (Controller::Impl::keep_alive_while_connecting).
Result<void> wait_connected(Host::Impl& host, transport_rdma::HostQueue& queue,
                            const TransportId& trid, std::string* message,
                            Controller::Impl* keep_alive = nullptr);

// "text" into *message when message is not null.
void set_message(std::string* message, const std::string& text);

}  // namespace nvmf::host
