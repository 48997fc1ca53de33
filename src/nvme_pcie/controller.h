// The userspace NVMe PCIe driver: one Controller per PCIe function, one IoQueue (SQ + CQ pair)
// per thread that uses it. Polled only (no interrupts), like SPDK's nvme driver.
//
// Bring-up (Controller::create, setup path, blocking): disable and wait for CSTS.RDY = 0 within
// CAP.TO, admin queue (AQA/ASQ/ACQ), enable with 4 KiB pages and 64/16-byte entries, wait for
// RDY, Identify Controller, the active namespace list and each namespace (with its
// identification descriptors), Set Features Number of Queues, and Asynchronous Event Requests.
//
// Recovery runs on the controller's own thread (never on a data-path thread): it polls the
// admin queue (AER completions), watches CSTS every health_check_interval_ms (CFS -> reset,
// all ones -> removed), sends Abort for commands that passed io_timeout_ms, and resets the
// controller when an Abort does not help within another timeout. A reset quiesces every
// IoQueue (each stops touching its rings on its next poll), disables and re-enables the
// controller, recreates the I/O queues in the same memory, and lets each queue resubmit its
// outstanding commands once; a command already retried fails with a status. After surprise
// removal every outstanding and every new command fails with a status. No command completes
// twice: a queue's rings are zeroed and its phase reset when the device queue is recreated,
// so nothing from before the reset can be reaped.
//
// Threads: Controller methods are setup-path calls from any thread (they take the admin lock).
// An IoQueue belongs to the thread that created it (debug-asserted); that thread alone
// submits, polls and destroys it. Destroy every IoQueue before its Controller.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/intrusive_list.h"
#include "common/result.h"
#include "common/util.h"
#include "env/memory.h"
#include "nvme_pcie/device.h"
#include "nvme_pcie/prp.h"
#include "spec/admin.h"
#include "spec/nvme.h"

namespace nvmf::nvme_pcie {

struct ControllerOpts {
  uint32_t admin_queue_entries = 32;
  // Entries of each I/O SQ and CQ, capped by CAP.MQES + 1; a queue holds entries - 1 commands.
  uint32_t io_queue_entries = 256;
  // I/O queue pairs to ask for in Set Features Number of Queues (what the controller grants
  // is the limit of create_io_queue()).
  uint32_t io_queues_requested = 64;
  // Our own cap on one command's transfer, below the controller's MDTS: it sizes the PRP list
  // pages each command reserves. Larger bdev requests are split.
  uint32_t max_transfer_bytes = 1u << 20;
  uint32_t admin_timeout_ms = 5000;
  uint32_t io_timeout_ms = 30000;  // 0: no per-command timeout
  uint32_t health_check_interval_ms = 100;
  // Bounce buffers per I/O queue, each max_transfer_bytes, for data outside DMA memory or
  // with an alignment PRPs cannot express. Exhausted -> the submit answers busy.
  uint32_t bounce_buffers_per_queue = 4;
  const Clock* clock = &MonotonicClock::instance();

  std::string to_json() const;
};

// One active namespace as Identify Namespace describes it.
struct NamespaceInfo {
  uint32_t nsid = 0;
  uint32_t block_size_bytes = 0;  // from the LBA format in use (FLBAS)
  uint64_t block_count = 0;       // NSZE
  std::array<uint8_t, 16> nguid{};
  std::array<uint8_t, 8> eui64{};
  std::array<uint8_t, 16> uuid{};  // from the descriptor list (type 3), zero when absent
  uint8_t dlfeat = 0;              // Deallocate Logical Block Features (bits 2:0 = 001b: zeroes)
};

enum class ControllerState : uint8_t {
  live,       // I/O flows
  resetting,  // queues are quiescing or being recreated; submits answer busy
  failed,     // a reset did not bring the controller back: everything fails with a status
  removed,    // surprise removal (registers read all ones): everything fails with a status
  shut_down,  // after shutdown(): submits fail
};
const char* controller_state_name(ControllerState state) noexcept;

struct ControllerStats {
  uint64_t resets = 0;
  uint64_t aborts_sent = 0;
  uint64_t timeouts = 0;
  uint64_t async_events = 0;
};

using CompletionFn = void (*)(void* ctx, const spec::Status& status);

class IoQueue;

class Controller {
 public:
  // Brings the controller up (see above). Errors name the step: timed_out (RDY did not follow
  // CC.EN within CAP.TO, an admin command did not complete), io_error (controller fatal
  // status, a failing admin command), not_supported (MPSMIN above 4 KiB, no NVM command set),
  // no_memory.
  static Result<std::unique_ptr<Controller>> create(std::unique_ptr<PciDevice> device,
                                                    const ControllerOpts& opts);
  // Stops the recovery thread, then a normal shutdown (CC.SHN, waits for CSTS.SHST complete)
  // unless shutdown() ran or the device is removed. Every IoQueue must be gone.
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const std::string& address() const noexcept { return device_->address(); }
  const spec::IdentifyController& identify() const noexcept { return identify_; }
  const std::vector<NamespaceInfo>& namespaces() const noexcept { return namespaces_; }
  const NamespaceInfo* find_namespace(uint32_t nsid) const noexcept;
  // min(MDTS, opts.max_transfer_bytes).
  uint32_t max_transfer_bytes() const noexcept { return max_transfer_bytes_; }
  uint32_t io_queues_granted() const noexcept { return io_queues_granted_; }
  uint32_t io_queue_entries() const noexcept { return io_queue_entries_; }
  bool sgl_supported() const noexcept { return sgl_supported_; }
  ControllerState state() const noexcept { return state_.load(std::memory_order_acquire); }
  ControllerStats stats() const noexcept;
  PciDevice& device() noexcept { return *device_; }

  // Creates an I/O SQ + CQ owned by the calling thread. Errors: busy (every granted queue is
  // in use), bad_state (not live), no_memory, io_error (the create command failed).
  Result<std::unique_ptr<IoQueue>> create_io_queue();

  // Resets the controller now (what recovery does on a timeout or CFS) and waits for it.
  // Errors: io_error / timed_out when the controller does not come back (state failed).
  Result<void> reset();

  // Normal shutdown: CC.SHN = 01b, waits for CSTS.SHST = 10b within CAP.TO. Afterwards every
  // submit fails. Errors: timed_out.
  Result<void> shutdown();

  // Called on the recovery thread for each namespace-attribute-changed notice (after the
  // changed namespace list was read). Set before I/O starts; nullptr for none.
  using NamespaceChangedFn = void (*)(void* ctx, Controller& controller);
  void set_namespace_changed_callback(NamespaceChangedFn fn, void* ctx) noexcept;
  // Called once on the recovery thread when the device is found removed.
  using RemovedFn = void (*)(void* ctx, Controller& controller);
  void set_removed_callback(RemovedFn fn, void* ctx) noexcept;

 private:
  friend class IoQueue;
  struct AdminQueue;
  // An Abort sent for a queue's oldest command (identified by its packed deadline and CID):
  // if that command is still the oldest at escalate_at_ms, the controller is reset.
  struct PendingAbort {
    IoQueue* queue = nullptr;
    uint64_t oldest = 0;
    uint64_t escalate_at_ms = 0;
  };

  Controller(std::unique_ptr<PciDevice> device, const ControllerOpts& opts);
  // Everything below runs with admin_mutex_ held.
  Result<void> bring_up();
  uint32_t ready_timeout_ms() const noexcept;
  Result<void> wait_ready(bool ready, const char* step);
  Result<void> disable_and_wait();
  Result<void> setup_admin_queue();
  Result<void> enable_and_wait();
  Result<void> identify_all();
  Result<void> identify_namespace(uint32_t nsid);
  Result<void> set_queue_count();
  Result<void> set_queue_count_again_locked();
  void enable_async_events_locked();
  // Submits on the admin queue and polls until it completes or the timeout (0:
  // admin_timeout_ms) passes. `data` (4 KiB of DMA memory) becomes PRP1 when not null.
  Result<spec::Cqe> admin_command_locked(spec::Sqe sqe, const env::DmaRegion* data,
                                         uint32_t timeout_ms = 0);
  void admin_push_locked(spec::Sqe sqe);
  bool admin_reap_locked(spec::Cqe* out);
  void post_async_event_requests_locked();
  void poll_admin_locked();
  void handle_async_event_locked(const spec::Cqe& cqe);
  Result<void> create_device_queues_locked(IoQueue& queue);
  Result<void> delete_device_queues_locked(IoQueue& queue, uint32_t timeout_ms);
  void delete_queues_before_reset_locked();
  void destroy_io_queue(IoQueue& queue);  // takes admin_mutex_ itself
  Result<void> reset_locked();
  Result<void> shutdown_locked();

  // Recovery thread.
  void recovery_main();
  void check_health_locked();
  void check_timeouts_locked();
  void mark_removed_locked(const char* why);
  bool removal_requested() noexcept;
  void request_recovery() noexcept;
  void count(uint64_t ControllerStats::*field) noexcept;

  std::unique_ptr<PciDevice> device_;
  ControllerOpts opts_;
  uint64_t cap_ = 0;
  uint32_t doorbell_stride_bytes_ = 4;
  uint32_t max_transfer_bytes_ = 0;
  uint32_t io_queues_granted_ = 0;
  uint32_t io_queue_entries_ = 0;
  bool sgl_supported_ = false;
  spec::IdentifyController identify_{};
  std::vector<NamespaceInfo> namespaces_;
  std::atomic<ControllerState> state_{ControllerState::resetting};
  std::atomic<uint64_t> generation_{0};  // bumped when a reset finishes

  std::mutex admin_mutex_;  // admin queue, queue list, reset: control path only
  std::unique_ptr<AdminQueue> admin_;
  std::vector<IoQueue*> io_queues_;  // live queues, under admin_mutex_
  std::vector<bool> qid_in_use_;     // index = qid
  std::vector<PendingAbort> pending_aborts_;  // recovery thread, under admin_mutex_

  NamespaceChangedFn namespace_changed_fn_ = nullptr;
  void* namespace_changed_ctx_ = nullptr;
  RemovedFn removed_fn_ = nullptr;
  void* removed_ctx_ = nullptr;

  std::mutex recovery_mutex_;
  std::condition_variable recovery_wake_;
  bool recovery_stop_ = false;
  bool recovery_requested_ = false;
  std::thread recovery_thread_;

  mutable std::mutex stats_mutex_;
  ControllerStats stats_;
};

// Statistics of one queue; read by its owner or, racily but safely, by anyone.
struct IoQueueStats {
  std::atomic<uint64_t> submitted{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> bounced{0};          // data copied through a bounce buffer
  std::atomic<uint64_t> bytes_copied{0};     // bytes copied into or out of bounce buffers
  std::atomic<uint64_t> sq_doorbells{0};
  std::atomic<uint64_t> cq_doorbells{0};
  std::atomic<uint64_t> commands_split{0};   // requests that took more than one command
  std::atomic<uint64_t> retried{0};          // commands resubmitted after a reset
  std::atomic<uint64_t> failed_after_reset{0};  // commands that had been retried already
  std::atomic<uint64_t> spurious_completions{0};  // a CQE for a CID not outstanding
};

// One submission: what the caller asks for. iov is only read during submit.
struct IoCommand {
  uint8_t opcode = 0;  // spec::nvm_opcode::read / write / flush / write_zeroes / dataset_management
  uint32_t nsid = 0;
  uint64_t lba = 0;
  uint64_t block_count = 0;  // read, write, write_zeroes; deallocate: the one range's length
  // Read only during submit(), except for a read that bounces (data outside DMA memory): its
  // iovecs are written at completion, so they must stay valid until `done` runs.
  const iovec* iov = nullptr;
  unsigned iovcnt = 0;
  bool fua = false;
};

class IoQueue {
 public:
  // Owner thread: deletes the device queues first (so the device has let go of every buffer),
  // then completes each outstanding request once with "aborted".
  ~IoQueue();
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  // Owner thread. Queues the command (split into several when it exceeds the transfer limit
  // or NLB's 65536 blocks); the SQ doorbell is written at the next poll. `done` runs once, from
  // poll(), never from here. Errors (nothing queued, done never runs): busy (not enough free
  // commands or bounce buffers, or a reset in progress), invalid_argument (lengths, an iovec
  // total that is not block_count * block size, too many segments), not_found (namespace),
  // out_of_range (LBA range), disconnected (controller removed, failed or shut down).
  [[nodiscard]] Result<void> submit(const IoCommand& command, CompletionFn done,
                                    void* ctx) noexcept;

  // Owner thread. Reaps up to `budget` completions by phase tag, runs their callbacks, then
  // writes the CQ head doorbell and the SQ tail doorbell once each if they moved. Also
  // resubmits or fails requests after a reset. Returns the completions delivered.
  unsigned poll(unsigned budget = 32) noexcept;

  uint16_t qid() const noexcept { return qid_; }
  uint32_t outstanding() const noexcept { return requests_outstanding_; }
  uint32_t commands_max() const noexcept { return entries_ - 1; }
  const IoQueueStats& stats() const noexcept { return stats_; }

 private:
  friend class Controller;
  class ActiveScope;

  // A caller's request: one or more commands ("children") that complete together.
  struct Request {
    CompletionFn done = nullptr;
    void* ctx = nullptr;
    uint16_t children_left = 0;
    spec::Status status{};  // the first failure among the children
    // A bounced read copies back to the caller's iovecs at completion.
    const iovec* read_iov = nullptr;
    unsigned read_iovcnt = 0;
    uint8_t* bounce = nullptr;
    ListNode link;  // free list
  };
  // One NVMe command; its CID is its index in trackers_.
  struct Tracker {
    Request* request = nullptr;  // set while outstanding
    spec::Sqe sqe{};             // kept for a resubmit after a reset
    uint64_t deadline_ms = 0;    // 0: no timeout
    uint8_t retries_left = 1;
    PrpListPage* list_pages = nullptr;  // prp_list_pages_per_tracker_ pages
    ListNode link;  // free list, or the outstanding list in submission order
  };
  enum class QueuePhase : uint8_t {
    live,  // normal operation
    dead,  // controller removed / failed / shut down: outstanding requests failed, new ones too
  };

  IoQueue(Controller& controller, uint16_t qid, uint32_t entries);
  Result<void> allocate();
  Result<const NamespaceInfo*> check_range(const IoCommand& command) const noexcept;
  Result<void> submit_rw(const IoCommand& command, Request& request) noexcept;
  Result<void> submit_simple(const IoCommand& command, Request& request) noexcept;
  Result<void> submit_deallocate(const IoCommand& command, Request& request) noexcept;
  enum class DataPointer : uint8_t { prp, sgl, bounce };
  DataPointer data_pointer_for(const iovec* iov, unsigned iovcnt) const noexcept;
  void fill_sgl(Tracker& tracker, const PrpSegment* segments, unsigned count) noexcept;
  Result<void> take_bounce(const IoCommand& command, uint64_t length, uint64_t children,
                           Request& request, iovec* bounced) noexcept;
  unsigned collect_segments(const iovec* iov, unsigned iovcnt, uint64_t offset, uint64_t length,
                            PrpSegment* segments) const noexcept;
  bool take_trackers(Request& request, uint32_t count, Tracker** out) noexcept;
  void return_trackers(Tracker** trackers, uint32_t count) noexcept;
  uint16_t tracker_cid(const Tracker& tracker) const noexcept;
  void push_sqe(Tracker& tracker) noexcept;
  void ring_doorbells() noexcept;
  void complete_child(Tracker& tracker, const spec::Status& status) noexcept;
  void finish_request(Request& request) noexcept;
  void release_bounce(Request& request) noexcept;
  unsigned fail_all(const spec::Status& status) noexcept;
  unsigned resubmit_after_reset() noexcept;
  void reset_rings() noexcept;  // controller side, with the owner outside (see ActiveScope)
  void publish_oldest() noexcept;
  // poll() when the controller is not live: waits, resubmits after a reset, or fails all.
  unsigned poll_not_live(ControllerState state) noexcept;

  Controller& controller_;
  ThreadOwner owner_;
  const uint16_t qid_;
  const uint32_t entries_;
  uint32_t sq_tail_ = 0;
  uint32_t sq_tail_rung_ = 0;  // last value written to the SQ tail doorbell
  uint32_t sq_head_ = 0;       // from CQEs
  uint32_t cq_head_ = 0;
  bool cq_phase_ = true;
  bool cq_head_dirty_ = false;
  uint32_t sq_doorbell_ = 0;
  uint32_t cq_doorbell_ = 0;
  uint32_t requests_outstanding_ = 0;
  uint32_t prp_list_pages_per_tracker_ = 0;
  QueuePhase phase_ = QueuePhase::live;
  uint64_t generation_seen_ = 0;
  uint64_t now_ms_ = 0;  // read once per poll; submits stamp deadlines with it
  unsigned active_depth_ = 0;
  // Set by the owner while inside submit() or poll(); a reset waits for it to clear after
  // publishing `resetting`, so the rings are never touched by both (Dekker, seq_cst).
  std::atomic<bool> active_{false};

  env::DmaRegion sq_region_;
  env::DmaRegion cq_region_;
  env::DmaRegion prp_region_;
  env::DmaRegion bounce_region_;
  spec::Sqe* sq_ = nullptr;
  volatile spec::Cqe* cq_ = nullptr;
  std::unique_ptr<Tracker[]> trackers_;
  std::unique_ptr<PrpListPage[]> prp_pages_;
  std::unique_ptr<Request[]> requests_;
  std::vector<uint8_t*> free_bounce_;  // a stack, filled at creation
  IntrusiveList<Tracker, &Tracker::link> free_trackers_;
  IntrusiveList<Tracker, &Tracker::link> outstanding_;
  IntrusiveList<Request, &Request::link> free_requests_;
  uint32_t free_tracker_count_ = 0;
  // The oldest outstanding command for the recovery thread: deadline_ms << 16 | CID, 0 when
  // none (or no timeout). One word, so the pair is never torn.
  std::atomic<uint64_t> oldest_{0};
  IoQueueStats stats_;
};

}  // namespace nvmf::nvme_pcie
