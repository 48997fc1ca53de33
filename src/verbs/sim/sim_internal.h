// Internals of the sim provider: the fabric (one lock, the list of QPs with pending work, the
// CM registry), devices with their key tables, and the verbs objects. Only src/verbs/sim/*.cpp
// include this.
//
// Lock discipline: every field below marked [L] is read and written only with Fabric::mu
// held. Fields marked [O] belong to the owner thread of the object (post_* calls) and are
// published to the device by a doorbell taken under the lock. [I] = immutable after creation.
// Nothing here calls user code with the lock held (the Clock is read under it: FakeClock and
// MonotonicClock never block).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/spin_lock.h"

#include "common/intrusive_list.h"
#include "common/log.h"
#include "verbs/sim/sim.h"

NVMF_LOG_COMPONENT_DECLARE(sim);

namespace nvmf::verbs::sim {

class Fabric;
class SimCmChannel;
class SimCmId;
class SimCq;
class SimDevice;
class SimPd;
class SimQp;
class SimSrq;

// SplitMix64: tiny, fast and the same on every platform (std distributions are not), so a
// seed reproduces an adversarial run anywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) noexcept : state_(seed) {}
  uint64_t next() noexcept {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound); 0 when bound is 0.
  uint64_t below(uint64_t bound) noexcept { return bound == 0 ? 0 : next() % bound; }

 private:
  uint64_t state_;
};

// An MR or type-2 MW key slot (memreg-2017-race.md section 4). `valid` is the committed
// state that remote accesses and LOCAL_INV check; `visible_valid` is what a later BIND_MW's
// "is it FREE?" check sees, which lags behind a BIND_MW or LOCAL_INV by its commit lag.
struct KeySlot {
  enum class Kind : uint8_t { mr, mw };
  Kind kind = Kind::mr;                // [I]
  uint32_t index = 0;                  // [I] the key's high 24 bits
  uint64_t generation = 0;             // [I] unique per slot ever created on the fabric
  const SimPd* pd = nullptr;           // [I]
  uint8_t key8 = 0;                    // [L] the key's low 8 bits
  bool valid = false;                  // [L] MR: registered; MW: VALID (bound)
  bool visible_valid = false;          // [L]
  uint64_t addr = 0;                   // [L] MR: the registration; MW: the bound range
  uint64_t length = 0;                 // [L]
  uint32_t access = 0;                 // [L]
  const SimQp* bound_qp = nullptr;     // [L] MW: the QP it is bound to
  const KeySlot* parent_mr = nullptr;  // [L] MW: the MR it is bound to

  uint32_t key() const noexcept { return (index << 8) | key8; }
};

// A posted WR's SGEs into its slot: post_send and post_recv, per WR. One SGE (the usual WR)
// without the loop's overhead.
inline void copy_posted_sges(Sge* slot, const Sge* sg_list, uint32_t count) noexcept {
  if (count == 1) {
    slot[0] = sg_list[0];
  } else {
    for (uint32_t i = 0; i < count; ++i) slot[i] = sg_list[i];
  }
}

// A receive ring (a QP's RQ or an SRQ). Slots in [head, db) are on the device; [db, tail) were
// posted but not yet rung in; the owner thread writes slots at tail.
struct RecvWqe {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
};

struct RecvRing {
  std::vector<RecvWqe> wqes;      // [I] size: capacity (a power of two)
  std::vector<Sge> sges;          // [I] capacity * max_sge
  uint32_t max_sge = 1;           // [I]
  uint32_t max_wr = 0;            // [I] granted: busy beyond this
  uint64_t mask = 0;              // [I]
  uint64_t tail = 0;              // [O]
  uint64_t db = 0;                // [L]
  std::atomic<uint64_t> head{0};  // [L] written under the lock, read by the owner for busy

  void init(uint32_t wr, uint32_t sge);
  // Owner thread. Inline: every receive posted, on a QP or an SRQ, goes through it.
  Result<void> post(const RecvWr& wr) noexcept {
    if (wr.num_sge > max_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) {
      return Unexpected(Errc::invalid_argument, "post_recv: too many SGEs");
    }
    if (tail - head.load(std::memory_order_acquire) >= max_wr) {
      return Unexpected(Errc::busy, "post_recv: receive queue full");
    }
    RecvWqe& wqe = wqes[tail & mask];
    wqe.wr_id = wr.wr_id;
    wqe.num_sge = wr.num_sge;
    copy_posted_sges(&sges[(tail & mask) * max_sge], wr.sg_list, wr.num_sge);
    ++tail;
    return {};
  }
  const Sge* sge_of(uint64_t position) const noexcept { return &sges[(position & mask) * max_sge]; }
};

// One send-queue entry: the WR as posted plus the execution state of the WQE.
struct SendWqe {
  // As posted [O, then L once rung in].
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::send;
  uint32_t flags = 0;
  uint32_t num_sge = 0;
  uint32_t inline_length = 0;  // kWrInline: payload copied into the QP's inline area
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t invalidate_rkey = 0;
  uint32_t bind_mw_index = 0;
  uint64_t bind_mw_generation = 0;
  uint32_t bind_mr_lkey = 0;
  uint64_t bind_addr = 0;
  uint64_t bind_length = 0;
  uint32_t bind_access = 0;
  uint32_t bind_rkey = 0;
  // Execution state [L].
  WcStatus status = WcStatus::success;
  uint32_t byte_len = 0;
  uint64_t complete_at_step = 0;  // completes (and takes effect) once the QP reaches this step
  bool rnr_waiting = false;       // got an RNR NAK; retrying
  uint32_t rnr_retries = 0;
  uint64_t rnr_next_ns = 0;
  bool pending_visibility = false;  // BIND_MW / LOCAL_INV whose key change is not yet visible
  uint32_t mm_index = 0;            // ... on this slot
  uint64_t mm_generation = 0;
  uint64_t visible_at_step = 0;  // ... until the QP reaches this step (its commit lag)
};

class SimDevice final : public Device {
 public:
  // `first_index`: devices of one fabric number their keys from different bases, so that a key
  // of one device is never mistaken for a key of another in logs and tests.
  SimDevice(Fabric& fabric, const DeviceCaps& caps, uint32_t first_index);
  ~SimDevice() override;
  const DeviceCaps& caps() const noexcept override { return caps_; }
  Result<std::unique_ptr<ProtectionDomain>> allocate_pd() noexcept override;
  // Lock-free when nothing waits (the callers poll it on a timer-like cadence).
  bool poll_async_event(AsyncEvent* event) noexcept override;
  int async_event_fd() const noexcept override { return async_fd_; }
  // [L] Queues an event for poll_async_event (the device's event queue: unbounded, as the
  // kernel's; only faults and injections add to it).
  void raise(const AsyncEvent& event) noexcept;

  Fabric& fabric() const noexcept { return fabric_; }
  // Key table [L]. add assigns index and generation; lookup is by the index bits only.
  bool add_slot(KeySlot& slot, uint8_t key8);  // false when the table is full
  void remove_slot(KeySlot& slot) noexcept;
  KeySlot* slot_by_key(uint32_t key) const noexcept {
    const uint32_t index = key >> 8;
    return index < slots_.size() ? slots_[index] : nullptr;
  }
  KeySlot* slot_by_generation(uint32_t index, uint64_t generation) const noexcept {
    KeySlot* slot = index < slots_.size() ? slots_[index] : nullptr;
    return slot != nullptr && slot->generation == generation ? slot : nullptr;
  }
  const std::vector<KeySlot*>& slots() const noexcept { return slots_; }

  // [L] SimProvider::skip_payloads: is [addr, addr + length) inside one marked range?
  bool add_payload_skip_range(uint64_t addr, uint64_t length) noexcept;
  bool skips_payload(uint64_t addr, uint64_t length) const noexcept {
    for (uint32_t i = 0; i < payload_skip_count_; ++i) {
      const AddressRange& range = payload_skip_ranges_[i];
      if (addr >= range.begin && addr < range.end && range.end - addr >= length) return true;
    }
    return false;
  }

  SimCounters counters;  // [L]

 private:
  Fabric& fabric_;
  DeviceCaps caps_;
  std::vector<KeySlot*> slots_;                // index 0 is never used: key 0 is no key
  std::deque<uint32_t> free_indices_;          // FIFO: a freed index is reused as late as possible
  std::deque<AsyncEvent> async_events_;        // [L]
  std::atomic<bool> has_async_events_{false};  // !async_events_.empty(), read without the lock
  const int async_fd_;                         // [I] eventfd, readable while events wait
  struct AddressRange {
    uint64_t begin = 0;
    uint64_t end = 0;  // exclusive
  };
  std::array<AddressRange, kPayloadSkipRangesMax> payload_skip_ranges_{};  // [L]
  uint32_t payload_skip_count_ = 0;                                         // [L]
};

class SimPd final : public ProtectionDomain {
 public:
  SimPd(std::shared_ptr<Fabric> fabric, SimDevice& device) noexcept
      : fabric_(std::move(fabric)), device_(device) {}
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t length,
                                                        uint32_t access) noexcept override;
  Result<std::unique_ptr<MemoryWindow>> allocate_window() noexcept override;
  Result<std::unique_ptr<CompletionQueue>> create_cq(const CqOpts& opts) noexcept override;
  Result<std::unique_ptr<SharedReceiveQueue>> create_srq(const SrqOpts& opts) noexcept override;
  SimDevice& device() const noexcept { return device_; }

 private:
  std::shared_ptr<Fabric> fabric_;  // keeps the fabric alive as long as objects exist
  SimDevice& device_;
};

class SimMr final : public MemoryRegion {
 public:
  explicit SimMr(SimDevice& device) noexcept;
  ~SimMr() override;
  void* addr() const noexcept override { return reinterpret_cast<void*>(addr_); }
  size_t length() const noexcept override { return length_; }
  uint32_t lkey() const noexcept override { return lkey_; }
  uint32_t rkey() const noexcept override { return rkey_; }
  uint32_t access() const noexcept override { return access_; }

  KeySlot slot;
  uint64_t addr_ = 0;
  size_t length_ = 0;
  uint32_t access_ = 0;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;

 private:
  std::shared_ptr<Fabric> fabric_;  // keeps the device alive (children may outlive parents)
  SimDevice& device_;
};

class SimMw final : public MemoryWindow {
 public:
  explicit SimMw(SimDevice& device) noexcept;
  ~SimMw() override;
  uint32_t rkey() const noexcept override { return posted_rkey_; }
  SimDevice& device() const noexcept { return device_; }

  KeySlot slot;
  uint32_t posted_rkey_ = 0;  // [O] the key of the most recently posted bind

 private:
  std::shared_ptr<Fabric> fabric_;  // keeps the device alive (children may outlive parents)
  SimDevice& device_;
};

class SimCq final : public CompletionQueue {
 public:
  SimCq(SimDevice& device, uint32_t depth, int event_fd);
  ~SimCq() override;
  int poll(std::span<WorkCompletion> out) noexcept override;
  int event_fd() const noexcept override { return event_fd_; }
  Result<void> arm() noexcept override;
  Result<void> consume_event() noexcept override;
  uint32_t depth() const noexcept override { return depth_; }

  SimDevice& device() const noexcept { return device_; }
  // [L] Inline, as it runs for every CQE: the rare cases (overrun, delay, armed) are calls.
  void push(const WorkCompletion& wc) noexcept {
    SimCounters& counters = device_.counters;
    ++counters.completions;
    if (wc.status == WcStatus::wr_flush_error) {
      ++counters.flush_completions;
    } else if (wc.status != WcStatus::success) {
      ++counters.error_completions;
    }
    if (failed_) {
      ++counters.cq_overruns;
      return;
    }
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) >= depth_) {
      overrun(wc);
      return;
    }
    Entry& entry = ring_[tail & mask_];
    entry.wc = wc;
    entry.ready_poll = 0;
    entry.ready_ns = 0;
    if (delay_left_ > 0) delay(entry);
    tail_.store(tail + 1, std::memory_order_release);  // publishes the entry to a lock-free poll
    if (armed_) signal();
  }
  void set_delay(const CompletionDelay& delay) noexcept;  // [L]
  // [L] An overrun or an injected CQ_ERR: raises cq_error once; every later CQE is dropped
  // (a CQ in error writes nothing), those already queued can still be polled.
  void fail() noexcept;

 private:
  struct Entry {
    WorkCompletion wc;
    uint64_t ready_poll = 0;  // the poll() count from which it may be reaped
    uint64_t ready_ns = 0;    // the clock time from which it may be reaped (0: any)
  };
  // Without the lock: -1 when the locked path must run (a delay was set, or the fabric has
  // work that a poll must progress), else the number reaped.
  int reap_unlocked(std::span<WorkCompletion> out) noexcept;
  void overrun(const WorkCompletion& wc) noexcept;  // [L] counts, logs, fail()
  void delay(Entry& entry) noexcept;                // [L] set_delay() holds the entry back
  void signal() noexcept;                           // [L] armed: the event fd, once
  std::shared_ptr<Fabric> fabric_;  // keeps the device alive (children may outlive parents)
  SimDevice& device_;
  const uint32_t depth_;
  const uint64_t mask_;
  const int event_fd_;
  // The ring is single-producer (push, always [L]) single-consumer (poll, the CQ's owner
  // thread): poll reaps without the lock while the fabric is idle and no delay was ever set
  // (reap_unlocked), so a thread reaping its CQ does not take the lock from the thread that
  // is posting. Entries in [head_, tail_) are published by tail_'s release store.
  std::vector<Entry> ring_;                // written [L] at tail_, read by the consumer
  // Each on a cache line of its own: the two threads write one each, and [L] fields next to
  // either would move between their cores with every push and reap.
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the consumer, read [L] for overruns
  alignas(64) std::atomic<uint64_t> tail_{0};  // written [L], read by the consumer
  std::atomic<bool> ever_delayed_{false};  // written [L]: set_delay() was called (sticky)
  alignas(64) uint64_t polls_ = 0;         // [L] counted by the locked path only
  bool armed_ = false;             // [L]
  bool failed_ = false;            // [L] fail(): in error
  CompletionDelay delay_{};        // [L]
  uint32_t delay_left_ = 0;        // [L]
};

class SimSrq final : public SharedReceiveQueue {
 public:
  SimSrq(SimDevice& device, uint32_t max_wr, uint32_t max_sge);
  Result<void> post_recv(const RecvWr& wr) noexcept override { return ring.post(wr); }
  Result<void> flush() noexcept override;
  uint32_t max_wr() const noexcept override { return ring.max_wr; }
  SimDevice& device() const noexcept { return device_; }

  RecvRing ring;

 private:
  std::shared_ptr<Fabric> fabric_;  // keeps the device alive (children may outlive parents)
  SimDevice& device_;
};

// An RC queue pair and its WQE engine (sim_qp.cpp).
class SimQp final : public QueuePair {
 public:
  SimQp(SimDevice& device, const SimPd& pd, SimCq& send_cq, SimCq& recv_cq, SimSrq* srq,
        const QpOpts& granted, uint32_t qp_num);
  ~SimQp() override = default;

  uint32_t qp_num() const noexcept override { return qp_num_; }
  QpState state() const noexcept override { return state_.load(std::memory_order_acquire); }
  const QpOpts& granted() const noexcept override { return granted_; }
  Result<void> post_send(const SendWr& wr) noexcept override;
  Result<void> post_recv(const RecvWr& wr) noexcept override;
  Result<void> flush() noexcept override;
  Result<void> move_to_error() noexcept override;

  // --- Used by the fabric and the CM, all [L] ---
  SimDevice& device() const noexcept { return device_; }
  SimCq& send_cq() const noexcept { return send_cq_; }
  void connect_to(SimQp* peer, const ConnectParams& own_params) noexcept;
  void enter_error() noexcept;
  // The responder side of a NAK: to error, and under the mlx5-like profiles the event that
  // reports it (no CQE can: no receive WQE was consumed). rxe raises no QP events.
  void fail_as_responder(AsyncEventType type) noexcept;
  // Called once per sim call before execution: one step of the QP's clock.
  void tick() noexcept;
  // Starts, executes and completes WQEs; true when anything changed.
  bool run(uint32_t budget) noexcept;
  bool has_work() const noexcept;
  // Before destruction: unlinks from the fabric and the peer, frees windows bound here.
  void detach() noexcept;
  void set_fault(uint32_t count, WcStatus status) noexcept {
    fault_count_ = count;
    fault_status_ = status;
  }

  ListNode active_node;  // [L] on Fabric::active while has_work()

 private:
  enum class Exec { done, blocked };
  SendWqe& wqe_at(uint64_t position) noexcept { return sq_[position & sq_mask_]; }
  const Sge* sq_sges_at(uint64_t position) const noexcept {
    return &sq_sges_[(position & sq_mask_) * granted_.max_send_sge];
  }
  uint8_t* inline_at(uint64_t position) noexcept {
    return sq_inline_.data() + (position & sq_mask_) * granted_.max_inline_data;
  }
  // Fence levels (sim.h): what a WQE waits for before it starts, strongest rule that applies.
  enum class Fence : uint8_t {
    none,
    prior_reads,     // IBTA fence (IBA 10.8.3.3), mlx5 INITIATOR_SMALL: prior RDMA READs complete
    prior_complete,  // IBTA local-invalidate fence (IBA 10.6.5.1): every prior WQE complete
    strong,          // mlx5 STRONG_ORDERING (umr_fence): ... and every key change visible
  };
  // The rules (profile, send_fence, the WQE's opcode and IBV_SEND_FENCE, whether the WQE
  // before it was a BIND / LOCAL_INV); fence_of looks the answer up in fence_table_, filled
  // from this at creation, since nothing else goes into it and the profile is fixed.
  static Fence fence_rule(const SimOpts& opts, WrOpcode opcode, bool fenced,
                          bool after_memory_management) noexcept;
  Fence fence_of(const SendWqe& wqe) const noexcept;
  bool may_start(const SendWqe& wqe, uint64_t position) const noexcept;
  uint64_t commit_lag() noexcept;  // drawn per BIND_MW / LOCAL_INV from the profile's distribution
  void hide_key_change(SendWqe& wqe, const KeySlot& slot) noexcept;  // the WQE at sq_exec_
  void land_key_change(const SendWqe& wqe) noexcept;  // the slot's visible state := committed
  // Those whose lag has passed. Called after every WQE started: inline, as nearly always
  // nothing waits (rxe, and any QP that posts no BIND_MW / LOCAL_INV).
  bool land_key_changes() noexcept { return !invisible_.empty() && land_pending_key_changes(); }
  bool land_pending_key_changes() noexcept;
  Exec execute(SendWqe& wqe, uint64_t position) noexcept;
  Exec execute_send(SendWqe& wqe, uint64_t position) noexcept;
  void execute_rdma(SendWqe& wqe, uint64_t position) noexcept;
  void execute_local_inv(SendWqe& wqe) noexcept;
  void execute_bind(SendWqe& wqe) noexcept;
  void fail(SendWqe& wqe, WcStatus status) noexcept;  // error completion + QP to error
  uint64_t completion_delay(const SendWqe& wqe) noexcept;
  bool complete_ready(bool force) noexcept;
  void complete(SendWqe& wqe) noexcept;
  bool flush_all() noexcept;
  void push_send_cqe(const SendWqe& wqe, WcStatus status) noexcept;
  // Local SGE check: an MR of this QP's PD (on `device`), inside it, with `access`.
  static bool check_sges(const SimDevice& device, const SimPd& pd, const Sge* sges, uint32_t count,
                         uint32_t access, uint64_t* total) noexcept;

  SimDevice& device_;
  Fabric& fabric_;
  const SimPd& pd_;
  SimCq& send_cq_;
  SimCq& recv_cq_;
  SimSrq* srq_;
  QpOpts granted_;
  const uint32_t qp_num_;
  std::atomic<QpState> state_{QpState::init};  // written [L], read anywhere

  // Send queue: [head, exec) executed and waiting to complete, [exec, db) rung in and not yet
  // started, [db, tail) posted but not rung in.
  std::vector<SendWqe> sq_;
  std::vector<Sge> sq_sges_;
  std::vector<uint8_t> sq_inline_;
  uint64_t sq_mask_ = 0;
  uint64_t sq_tail_ = 0;              // [O]
  uint64_t sq_db_ = 0;                // [L]
  uint64_t sq_exec_ = 0;              // [L]
  std::atomic<uint64_t> sq_head_{0};  // [L] written, read by the owner for busy

  RecvRing rq_;  // unused with an SRQ

  uint64_t step_ = 0;                     // [L] the QP's step clock (mlx5 lag, adversarial delays)
  uint32_t reads_in_flight_ = 0;          // [L] executed RDMA READs not yet completed
  bool after_memory_management_ = false;  // [L] the previous WQE started was a BIND / LOCAL_INV
  static constexpr size_t kWrOpcodeCount = static_cast<size_t>(WrOpcode::bind_mw) + 1;
  Fence fence_table_[2][2][kWrOpcodeCount] = {};  // [I] fence_rule [fenced][after BIND/INV][op]
  SimQp* peer_ = nullptr;                         // [L]
  uint8_t rnr_retry_count_ = 7;                   // [L] from this side's ConnectParams
  uint32_t fault_count_ = 0;                      // [L] fail_next_wrs(qp, ...)
  WcStatus fault_status_ = WcStatus::general_error;
  // [L] Positions of executed BIND_MW / LOCAL_INVs whose key change is not visible yet, in
  // post order (capacity: the send queue, reserved at creation).
  std::vector<uint64_t> invisible_;
  Rng commit_rng_{0};  // [L] mlx5_2017_rare: the slow-commit draws (seed and QP number)
};

// rdma_cm ids and channels (sim_cm.cpp).
class SimCmChannel final : public CmChannel {
 public:
  SimCmChannel(std::shared_ptr<Fabric> fabric, SimDevice& device, int event_fd) noexcept;
  ~SimCmChannel() override;
  Result<std::unique_ptr<CmId>> create_id() noexcept override;
  std::unique_ptr<CmId> adopt(CmId* id) noexcept override;
  bool poll_event(CmEvent* event) noexcept override;
  int event_fd() const noexcept override { return event_fd_; }

  Fabric& fabric() const noexcept { return *fabric_; }
  SimDevice& device() const noexcept { return device_; }
  void push(const CmEvent& event) noexcept;              // [L]
  void remove_events_about(const SimCmId* id) noexcept;  // [L]

  std::vector<std::unique_ptr<SimCmId>> unadopted;  // [L] connect_request ids not yet adopted

 private:
  std::shared_ptr<Fabric> fabric_;
  SimDevice& device_;
  const int event_fd_;
  std::deque<CmEvent> events_;  // [L]
  std::atomic<bool> has_events_{false};  // !events_.empty(), readable without the lock
};

class SimCmId final : public CmId {
 public:
  enum class State : uint8_t {
    idle,            // created
    resolving,       // resolve() of an unreachable address: waits for its timeout
    route_resolved,  // active: may create the QP and connect
    listening,
    connecting,        // active: REQ sent, waits for accept / reject / timeout
    request_received,  // passive: connect_request delivered, waits for accept / reject
    connected,
    disconnected,
    rejected,     // either side of a refused connection
    unreachable,  // active: resolve or connect timed out
    closed,       // being destroyed
  };

  SimCmId(SimCmChannel& channel, std::string local_name) noexcept;  // lock held
  ~SimCmId() override;
  Result<void> listen(const std::string& address, uint16_t port, int backlog) noexcept override;
  Result<void> resolve(const std::string& address, uint16_t port, int timeout_ms) noexcept override;
  Device* device() noexcept override;
  Result<QueuePair*> create_qp(ProtectionDomain& pd, const QpOpts& opts) noexcept override;
  QueuePair* qp() noexcept override { return qp_.get(); }
  Result<void> connect(const ConnectParams& params) noexcept override;
  Result<void> accept(const ConnectParams& params) noexcept override;
  Result<void> reject(const void* private_data, uint8_t length) noexcept override;
  Result<void> disconnect() noexcept override;
  Result<void> notify_established() noexcept override;
  std::string peer_address() const override;

  // [L]
  void close() noexcept;  // leaves the fabric: refuses, disconnects, forgets; idempotent
  void time_out() noexcept;
  void tear_down(bool count_on_this_side) noexcept;  // connected -> disconnected, both sides

  SimCmChannel& channel;
  SimDevice& dev;
  State state = State::idle;    // [L]
  std::string address;          // [L] listen address, or the address resolved
  uint16_t port = 0;            // [L]
  std::string local_name;       // [I] "device:ephemeral port", the peer's view of us
  std::string peer_name;        // [L]
  SimCmId* remote = nullptr;    // [L] the other end (connecting / request / connected)
  SimCmId* listener = nullptr;  // [L] passive: the listener the request came in on
  uint64_t deadline_ns = 0;     // [L] resolving / connecting
  ConnectParams params{};       // [L] what this side connected or accepted with

 private:
  std::unique_ptr<SimQp> qp_;
};

// The fabric: one lock over everything, the QPs with pending work, the CM registry.
class Fabric : public std::enable_shared_from_this<Fabric> {
 public:
  explicit Fabric(const SimOpts& opts);
  ~Fabric();

  // Host and target threads poll the same fabric all the time: a spin lock, not a mutex that
  // parks the loser in the kernel (see common/spin_lock.h).
  SpinLock mu;
  const SimOpts opts;
  const Clock& clock;
  Rng rng;                                          // [L]
  std::vector<std::unique_ptr<SimDevice>> devices;  // [L] append-only

  uint64_t now_ns() const noexcept { return clock.now_ns(); }
  uint64_t next_generation() noexcept { return ++generation_; }  // [L]
  uint32_t next_qp_num() noexcept { return next_qp_num_++; }     // [L]
  std::string make_local_name(const SimDevice& device);          // [L] "sim0:49152"
  bool is_mlx5_like() const noexcept { return opts.profile != SimProfile::rxe; }

  // Data path [L].
  void activate(SimQp& qp) noexcept {
    if (!qp.active_node.linked()) active_.push_back(qp);
    idle_.store(false, std::memory_order_release);
  }
  // No QP has pending work (read without the lock: a poll of an empty CQ on an idle fabric
  // returns at once instead of contending for the lock with the other side's thread).
  bool idle() const noexcept { return idle_.load(std::memory_order_acquire); }
  // Some CM id waits for a timeout (read without the lock, like idle()).
  bool cm_waiting() const noexcept { return cm_waiting_.load(std::memory_order_acquire); }
  void note_waiting() noexcept {  // [L] after every change of `waiting`
    cm_waiting_.store(!waiting.empty(), std::memory_order_release);
  }
  void deactivate(SimQp& qp) noexcept {
    if (qp.active_node.linked()) active_.remove(qp);
  }
  void progress() noexcept;  // the body of every sim call
  // Sim-wide fault injection: true (and status) when the next WQE to execute must fail.
  // Inline: asked once per WQE executed, and nearly always nothing is armed.
  bool take_fault(WcStatus* status) noexcept {
    if (fault_count_ == 0) return false;
    --fault_count_;
    *status = fault_status_;
    return true;
  }
  void set_fault(uint32_t count, WcStatus status) noexcept {
    fault_count_ = count;
    fault_status_ = status;
  }

  // CM [L].
  void cm_progress() noexcept;  // timeouts
  SimCmId* find_listener(const std::string& address, uint16_t port) const noexcept;
  RefuseMode refuse_mode(const std::string& address, uint16_t port) const noexcept;
  std::map<std::pair<std::string, uint16_t>, SimCmId*> listeners;
  std::map<std::pair<std::string, uint16_t>, RefuseMode> refusing;
  std::set<std::string> unreachable;
  std::set<SimCmId*> ids;      // every live id
  std::set<SimCmId*> waiting;  // ids with a deadline

 private:
  IntrusiveList<SimQp, &SimQp::active_node> active_;
  std::atomic<bool> idle_{true};  // written [L]: active_.empty()
  std::atomic<bool> cm_waiting_{false};  // written [L]: !waiting.empty()
  uint64_t generation_ = 0;
  uint32_t next_qp_num_ = 0x11;  // small numbers are special QPs on real HCAs
  uint32_t next_port_ = 49152;   // the IANA ephemeral range
  uint32_t fault_count_ = 0;
  WcStatus fault_status_ = WcStatus::general_error;
};

// eventfd helpers (never block: the fds are non-blocking).
int make_event_fd() noexcept;
void signal_event_fd(int fd) noexcept;
bool drain_event_fd(int fd) noexcept;  // true when it was signalled

}  // namespace nvmf::verbs::sim
