// The WQE engine of the sim: start -> execute -> complete per send-queue WQE
// (memreg-2017-race.md section 4).
//
// - Start: strictly in post order, gated by the fence rules of the profile (may_start).
// - Execute: the checks and side effects (data copied, keys changed, receive consumed at the
//   peer). Each executed WQE is one step of the QP's step clock; every sim call adds one more
//   step while the QP has WQEs waiting to complete.
// - Key changes: a BIND_MW or LOCAL_INV commits its key change at execute (remote accesses
//   see it at once), but a later BIND_MW's FREE check sees it only `lag` steps later, the
//   WR's commit lag drawn from the profile's distribution (commit_lag()), signaled or not.
// - Complete: in post order, once the QP's step clock reaches the WQE's complete_at_step,
//   which for a BIND_MW / LOCAL_INV is never before its key change is visible.
// - Fences (fence_of): the strongest rule that applies to the WQE holds its start back.
// - Error: the failing WQE completes with its status after everything executed before it,
//   everything after it (and the receive queue, unless it is an SRQ) is flushed.
#include <cstring>

#include "common/util.h"
#include "verbs/sim/sim_internal.h"

namespace nvmf::verbs::sim {
namespace {

constexpr uint8_t kRnrRetryInfinite = 7;  // IBTA: an RNR retry count of 7 means "forever"

WcOpcode wc_opcode_of(WrOpcode opcode) noexcept {
  switch (opcode) {
    case WrOpcode::send:
    case WrOpcode::send_with_inv:
      return WcOpcode::send;
    case WrOpcode::rdma_write:
      return WcOpcode::rdma_write;
    case WrOpcode::rdma_read:
      return WcOpcode::rdma_read;
    case WrOpcode::local_inv:
      return WcOpcode::local_inv;
    case WrOpcode::bind_mw:
      return WcOpcode::bind_mw;
  }
  return WcOpcode::send;
}

bool is_memory_management(WrOpcode opcode) noexcept {
  return opcode == WrOpcode::local_inv || opcode == WrOpcode::bind_mw;
}

// Statuses that come from the responder (a NAK): the responder's QP goes to error too.
bool is_remote_status(WcStatus status) noexcept {
  return status == WcStatus::remote_access_error ||
         status == WcStatus::remote_invalid_request_error ||
         status == WcStatus::remote_operation_error;
}

// The async event a responder raises for the NAK it sent (no receive WQE reports it).
AsyncEventType responder_event_of(WcStatus status) noexcept {
  switch (status) {
    case WcStatus::remote_access_error:
      return AsyncEventType::qp_access_error;
    case WcStatus::remote_invalid_request_error:
      return AsyncEventType::qp_request_error;
    default:  // remote_operation_error: the responder's own failure
      return AsyncEventType::qp_fatal;
  }
}

// Copies `length` bytes from a gather list (or a flat buffer when `flat` is set) to a scatter
// list. The SGEs were checked, so addresses are this process's memory.
void copy_sges(const Sge* dst, uint32_t dst_count, const Sge* src, uint32_t src_count,
               const uint8_t* flat, uint64_t length) noexcept {
  // The usual case (a capsule or a response: one SGE each side, each holding the whole
  // payload) in one move; the loop below would do the same single move, at 70 instructions.
  if (length > 0 && dst_count > 0 && dst[0].length >= length &&
      (flat != nullptr || (src_count > 0 && src[0].length >= length))) {
    const uint8_t* from = flat != nullptr ? flat : reinterpret_cast<const uint8_t*>(src[0].addr);
    std::memmove(reinterpret_cast<uint8_t*>(dst[0].addr), from, length);
    return;
  }
  uint32_t di = 0, si = 0;
  uint64_t d_off = 0, s_off = 0;
  while (length > 0) {
    while (di < dst_count && d_off == dst[di].length) {
      ++di;
      d_off = 0;
    }
    if (flat == nullptr) {
      while (si < src_count && s_off == src[si].length) {
        ++si;
        s_off = 0;
      }
    }
    if (di == dst_count || (flat == nullptr && si == src_count)) return;
    uint64_t chunk = dst[di].length - d_off;
    const uint8_t* from = nullptr;
    if (flat != nullptr) {
      from = flat + s_off;
    } else {
      chunk = chunk < src[si].length - s_off ? chunk : src[si].length - s_off;
      from = reinterpret_cast<const uint8_t*>(src[si].addr) + s_off;
    }
    chunk = chunk < length ? chunk : length;
    std::memmove(reinterpret_cast<uint8_t*>(dst[di].addr) + d_off, from, chunk);
    d_off += chunk;
    s_off += chunk;
    length -= chunk;
  }
}

// Copies between one flat remote range and a local SGE list.
void copy_to_flat(uint8_t* dst, const Sge* src, uint32_t count, const uint8_t* flat,
                  uint64_t length) noexcept {
  if (flat != nullptr) {
    std::memmove(dst, flat, length);
    return;
  }
  for (uint32_t i = 0; i < count && length > 0; ++i) {
    const uint64_t chunk = src[i].length < length ? src[i].length : length;
    std::memmove(dst, reinterpret_cast<const uint8_t*>(src[i].addr), chunk);
    dst += chunk;
    length -= chunk;
  }
}

void copy_from_flat(const Sge* dst, uint32_t count, const uint8_t* src, uint64_t length) noexcept {
  for (uint32_t i = 0; i < count && length > 0; ++i) {
    const uint64_t chunk = dst[i].length < length ? dst[i].length : length;
    std::memmove(reinterpret_cast<uint8_t*>(dst[i].addr), src, chunk);
    src += chunk;
    length -= chunk;
  }
}

}  // namespace

SimQp::SimQp(SimDevice& device, const SimPd& pd, SimCq& send_cq, SimCq& recv_cq, SimSrq* srq,
             const QpOpts& granted, uint32_t qp_num)
    : device_(device),
      fabric_(device.fabric()),
      pd_(pd),
      send_cq_(send_cq),
      recv_cq_(recv_cq),
      srq_(srq),
      granted_(granted),
      qp_num_(qp_num) {
  sq_.resize(granted_.max_send_wr);
  sq_mask_ = granted_.max_send_wr - 1;
  sq_sges_.resize(static_cast<size_t>(granted_.max_send_wr) * granted_.max_send_sge);
  sq_inline_.resize(static_cast<size_t>(granted_.max_send_wr) * granted_.max_inline_data);
  if (srq_ == nullptr) rq_.init(granted_.max_recv_wr, granted_.max_recv_sge);
  invisible_.reserve(granted_.max_send_wr);  // at most every WQE of the send queue
  for (int fenced = 0; fenced < 2; ++fenced) {
    for (int after = 0; after < 2; ++after) {
      for (size_t opcode = 0; opcode < kWrOpcodeCount; ++opcode) {
        fence_table_[fenced][after][opcode] = fence_rule(
            device.fabric().opts, static_cast<WrOpcode>(opcode), fenced != 0, after != 0);
      }
    }
  }
  // Its own stream per QP: the draws of one QP do not depend on how the others interleave.
  commit_rng_ = Rng(device.fabric().opts.seed ^ (uint64_t{qp_num} * 0xD1B54A32D192ED03ull));
}

// ---------------------------------------------------------------------------------------
// Owner-thread calls

Result<void> SimQp::post_send(const SendWr& wr) noexcept {
  const QpState current = state();
  if (current != QpState::ready_to_send && current != QpState::error) {
    return Unexpected(Errc::bad_state, "post_send: QP not connected");
  }
  if (wr.num_sge > granted_.max_send_sge || (wr.num_sge != 0 && wr.sg_list == nullptr)) {
    return Unexpected(Errc::invalid_argument, "post_send: too many SGEs");
  }
  if (sq_tail_ - sq_head_.load(std::memory_order_acquire) >= granted_.max_send_wr) {
    return Unexpected(Errc::busy, "post_send: send queue full");
  }
  SendWqe& wqe = wqe_at(sq_tail_);
  // Field by field, not `wqe = SendWqe{}`: the bind fields are read only by a BIND_MW, which
  // sets them below, so a slot's old ones need no zeroing on every SEND and RDMA WR.
  wqe.num_sge = 0;
  wqe.inline_length = 0;
  wqe.status = WcStatus::success;
  wqe.byte_len = 0;
  wqe.complete_at_step = 0;
  wqe.rnr_waiting = false;
  wqe.rnr_retries = 0;
  wqe.rnr_next_ns = 0;
  wqe.pending_visibility = false;
  wqe.mm_index = 0;
  wqe.mm_generation = 0;
  wqe.visible_at_step = 0;
  wqe.wr_id = wr.wr_id;
  wqe.opcode = wr.opcode;
  wqe.flags = wr.flags;
  wqe.remote_addr = wr.remote_addr;
  wqe.rkey = wr.rkey;
  wqe.invalidate_rkey = wr.invalidate_rkey;
  const bool carries_data = wr.opcode == WrOpcode::send || wr.opcode == WrOpcode::send_with_inv ||
                            wr.opcode == WrOpcode::rdma_write;
  if (wr.opcode == WrOpcode::bind_mw) {
    auto* mw = dynamic_cast<SimMw*>(wr.bind.mw);
    if (mw == nullptr || &mw->device() != &device_ || wr.bind.mr == nullptr) {
      return Unexpected(Errc::invalid_argument, "post_send: bind without a window of this device");
    }
    // Index and generation are immutable: no lock needed to read them.
    wqe.bind_mw_index = mw->slot.index;
    wqe.bind_mw_generation = mw->slot.generation;
    wqe.bind_mr_lkey = wr.bind.mr->lkey();
    wqe.bind_addr = wr.bind.addr;
    wqe.bind_length = wr.bind.length;
    wqe.bind_access = wr.bind.access;
    wqe.bind_rkey = wr.bind.rkey;
    mw->posted_rkey_ = wr.bind.rkey;  // MemoryWindow::rkey(): the most recently posted bind
  } else if ((wr.flags & kWrInline) != 0 && carries_data) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (total > granted_.max_inline_data) {
      return Unexpected(Errc::invalid_argument, "post_send: inline payload above max_inline_data");
    }
    // IBV_SEND_INLINE: the payload is copied now and the lkeys are not checked.
    uint8_t* area = inline_at(sq_tail_);
    for (uint32_t i = 0; i < wr.num_sge; ++i) {
      std::memcpy(area, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      area += wr.sg_list[i].length;
    }
    wqe.inline_length = static_cast<uint32_t>(total);
  } else {
    wqe.num_sge = wr.num_sge;
    copy_posted_sges(&sq_sges_[(sq_tail_ & sq_mask_) * granted_.max_send_sge], wr.sg_list,
                     wr.num_sge);
  }
  ++sq_tail_;
  return {};
}

Result<void> SimQp::post_recv(const RecvWr& wr) noexcept {
  if (srq_ != nullptr) return Unexpected(Errc::invalid_argument, "post_recv: QP uses an SRQ");
  return rq_.post(wr);
}

Result<void> SimQp::flush() noexcept {
  std::lock_guard lock(fabric_.mu);
  bool rung = false;
  if (sq_db_ != sq_tail_) {
    // The counter of each opcode, indexed by its value: a load instead of a switch per WR.
    static constexpr uint64_t SimCounters::*kCounterOf[kWrOpcodeCount] = {
        &SimCounters::send,      &SimCounters::send_with_inv, &SimCounters::rdma_write,
        &SimCounters::rdma_read, &SimCounters::local_inv,     &SimCounters::bind_mw,
    };
    static_assert(static_cast<size_t>(WrOpcode::send) == 0 &&
                  static_cast<size_t>(WrOpcode::send_with_inv) == 1 &&
                  static_cast<size_t>(WrOpcode::rdma_write) == 2 &&
                  static_cast<size_t>(WrOpcode::rdma_read) == 3 &&
                  static_cast<size_t>(WrOpcode::local_inv) == 4 &&
                  static_cast<size_t>(WrOpcode::bind_mw) == 5);
    SimCounters& counters = device_.counters;
    for (uint64_t position = sq_db_; position != sq_tail_; ++position) {
      const auto opcode = static_cast<size_t>(wqe_at(position).opcode);
      if (opcode < kWrOpcodeCount) ++(counters.*kCounterOf[opcode]);  // unknown: not counted
    }
    sq_db_ = sq_tail_;
    rung = true;
  }
  if (srq_ == nullptr && rq_.db != rq_.tail) {
    device_.counters.recv += rq_.tail - rq_.db;
    rq_.db = rq_.tail;
    rung = true;
  }
  if (rung) {
    ++device_.counters.doorbells;
    fabric_.activate(*this);
  }
  fabric_.progress();
  return {};
}

Result<void> SimQp::move_to_error() noexcept {
  std::lock_guard lock(fabric_.mu);
  enter_error();
  fabric_.progress();
  return {};
}

// ---------------------------------------------------------------------------------------
// Fabric-side calls (lock held)

void SimQp::connect_to(SimQp* peer, const ConnectParams& own_params) noexcept {
  peer_ = peer;
  rnr_retry_count_ = own_params.rnr_retry_count > kRnrRetryInfinite ? kRnrRetryInfinite
                                                                    : own_params.rnr_retry_count;
  if (state() != QpState::error) state_.store(QpState::ready_to_send, std::memory_order_release);
}

void SimQp::enter_error() noexcept {
  if (state() == QpState::error) return;
  state_.store(QpState::error, std::memory_order_release);
  ++device_.counters.qp_errors;
  fabric_.activate(*this);
}

void SimQp::fail_as_responder(AsyncEventType type) noexcept {
  if (state() == QpState::error) return;  // already failed: nothing new to report
  enter_error();
  // mlx5 reports a responder error as an affiliated event (WQ_ACCESS_ERROR / WQ_INVAL_REQ_ERROR
  // / WQ_CATAS_ERROR); rxe moves the QP to error silently.
  if (!fabric_.is_mlx5_like()) return;
  AsyncEvent event;
  event.type = type;
  event.qp_num = qp_num_;
  device_.raise(event);
}

void SimQp::detach() noexcept {
  fabric_.deactivate(*this);
  if (peer_ != nullptr && peer_->peer_ == this) peer_->peer_ = nullptr;
  peer_ = nullptr;
  // Windows bound to a destroyed QP can never be reached again (access to a type-2 window
  // must arrive on its QP): free them so the owner can bind them on its next connection.
  for (KeySlot* slot : device_.slots()) {
    if (slot != nullptr && slot->kind == KeySlot::Kind::mw && slot->bound_qp == this) {
      slot->valid = false;
      slot->visible_valid = false;
      slot->bound_qp = nullptr;
      slot->parent_mr = nullptr;
    }
  }
}

bool SimQp::has_work() const noexcept {
  const uint64_t head = sq_head_.load(std::memory_order_relaxed);
  if (sq_exec_ != sq_db_ || head != sq_exec_) return true;
  return state() == QpState::error && srq_ == nullptr &&
         rq_.head.load(std::memory_order_relaxed) != rq_.db;
}

void SimQp::tick() noexcept {
  if (sq_head_.load(std::memory_order_relaxed) != sq_exec_) ++step_;
}

bool SimQp::run(uint32_t budget) noexcept {
  if (state() == QpState::error) return flush_all();
  bool changed = land_key_changes();
  changed |= complete_ready(false);
  while (sq_exec_ != sq_db_ && budget > 0) {
    SendWqe& wqe = wqe_at(sq_exec_);
    if (!may_start(wqe, sq_exec_)) break;
    if (execute(wqe, sq_exec_) == Exec::blocked) break;
    after_memory_management_ = is_memory_management(wqe.opcode);
    if (wqe.opcode == WrOpcode::rdma_read && wqe.status == WcStatus::success) ++reads_in_flight_;
    ++sq_exec_;
    ++step_;
    --budget;
    changed = true;
    if (state() == QpState::error) return flush_all() || changed;
    land_key_changes();
    complete_ready(false);
  }
  return changed;
}

SimQp::Fence SimQp::fence_rule(const SimOpts& opts, WrOpcode opcode, bool fenced,
                               bool after_memory_management) noexcept {
  Fence fence = Fence::none;
  auto at_least = [&fence](Fence level) {
    if (static_cast<uint8_t>(level) > static_cast<uint8_t>(fence)) fence = level;
  };
  if (fenced) {
    // IBV_SEND_FENCE: the IBTA fence, or (the mlx5 profiles unless told otherwise) strong.
    at_least(sim_send_fence(opts) == SendFence::key_updates ? Fence::strong : Fence::prior_reads);
  }
  switch (opts.profile) {
    case SimProfile::rxe:
      // rxe 6.0+ gives every LOCAL_INV the local-invalidate fence ("make mandatory").
      if (opcode == WrOpcode::local_inv) at_least(Fence::prior_complete);
      break;
    case SimProfile::mlx5_fenced:
      if (opcode == WrOpcode::bind_mw) at_least(Fence::strong);  // umr_fence on every bind
      [[fallthrough]];
    case SimProfile::mlx5_2017:
    case SimProfile::mlx5_2017_rare:
    case SimProfile::adversarial:
      // mlx5 next_fence = INITIATOR_SMALL on the WQE after a BIND / LOCAL_INV.
      if (after_memory_management) at_least(Fence::prior_reads);
      break;
  }
  return fence;
}

SimQp::Fence SimQp::fence_of(const SendWqe& wqe) const noexcept {
  const bool fenced = (wqe.flags & kWrFenced) != 0;
  const auto opcode = static_cast<uint8_t>(wqe.opcode);
  if (opcode >= kWrOpcodeCount) {  // post_send does not check the opcode: no table entry
    return fence_rule(fabric_.opts, wqe.opcode, fenced, after_memory_management_);
  }
  return fence_table_[fenced][after_memory_management_][opcode];
}

bool SimQp::may_start(const SendWqe& wqe, uint64_t position) const noexcept {
  const bool all_prior_complete = sq_head_.load(std::memory_order_relaxed) == position;
  switch (fence_of(wqe)) {
    case Fence::none:
      return true;
    case Fence::prior_reads:
      return reads_in_flight_ == 0;
    case Fence::prior_complete:
      return all_prior_complete;
    case Fence::strong:
      // A WQE completes only once its key change is visible, so the second condition holds
      // whenever the first does; it states the rule, not an extra wait.
      return all_prior_complete && invisible_.empty();
  }
  return true;
}

uint64_t SimQp::commit_lag() noexcept {
  const SimOpts& opts = fabric_.opts;
  const uint64_t lag = opts.mkey_commit_lag_steps;
  switch (opts.profile) {
    case SimProfile::rxe:
      return 0;  // in order and at once
    case SimProfile::mlx5_2017:
    case SimProfile::mlx5_fenced:
      return lag;  // certain: the canonical trace fails every time
    case SimProfile::mlx5_2017_rare:
      return commit_rng_.below(opts.mkey_commit_slow_one_in) == 0 ? lag : 0;
    case SimProfile::adversarial:
      return fabric_.rng.below(lag + 1);
  }
  return 0;
}

uint64_t SimQp::completion_delay(const SendWqe& wqe) noexcept {
  if (wqe.status != WcStatus::success) return 0;
  uint64_t delay = 0;
  if (fabric_.opts.profile == SimProfile::adversarial) {
    delay = fabric_.rng.below(uint64_t{fabric_.opts.adversarial_completion_delay_steps} + 1);
  }
  if (wqe.pending_visibility) {
    // Its completion is reported only once its key change is visible, signaled or not.
    const uint64_t lag = wqe.visible_at_step - step_;
    delay = lag > delay ? lag : delay;
  }
  return delay;
}

void SimQp::hide_key_change(SendWqe& wqe, const KeySlot& slot) noexcept {
  wqe.mm_index = slot.index;
  wqe.mm_generation = slot.generation;
  const uint64_t lag = commit_lag();
  wqe.visible_at_step = step_ + lag;
  if (lag == 0) {
    land_key_change(wqe);  // visible before the next WQE starts
    return;
  }
  wqe.pending_visibility = true;
  invisible_.push_back(sq_exec_);  // reserved at creation: never grows past the send queue
}

void SimQp::land_key_change(const SendWqe& wqe) noexcept {
  KeySlot* slot = device_.slot_by_generation(wqe.mm_index, wqe.mm_generation);
  if (slot == nullptr) return;
  // The committed state as it is now: a remote invalidation may have overtaken a pending bind.
  slot->visible_valid = slot->valid;
  if (!slot->valid) {
    slot->bound_qp = nullptr;
    slot->parent_mr = nullptr;
  }
}

bool SimQp::land_pending_key_changes() noexcept {
  size_t kept = 0;
  bool any = false;
  for (const uint64_t position : invisible_) {
    SendWqe& wqe = wqe_at(position);
    if (wqe.visible_at_step <= step_) {
      land_key_change(wqe);
      wqe.pending_visibility = false;
      any = true;
    } else {
      invisible_[kept++] = position;
    }
  }
  invisible_.resize(kept);  // shrinks: no allocation
  return any;
}

void SimQp::fail(SendWqe& wqe, WcStatus status) noexcept {
  wqe.status = status;
  wqe.complete_at_step = step_;
  enter_error();
}

SimQp::Exec SimQp::execute(SendWqe& wqe, uint64_t position) noexcept {
  WcStatus injected = WcStatus::success;
  bool inject = false;
  if (fault_count_ > 0) {
    --fault_count_;
    injected = fault_status_;
    inject = true;
  } else {
    inject = fabric_.take_fault(&injected);
  }
  if (inject) {
    ++device_.counters.injected_faults;
    if (is_remote_status(injected) && peer_ != nullptr) {
      peer_->fail_as_responder(responder_event_of(injected));
    }
    fail(wqe, injected);
    return Exec::done;
  }

  switch (wqe.opcode) {
    case WrOpcode::send:
    case WrOpcode::send_with_inv: {
      const Exec result = execute_send(wqe, position);
      if (result == Exec::blocked) return result;
      break;
    }
    case WrOpcode::rdma_write:
    case WrOpcode::rdma_read:
      execute_rdma(wqe, position);
      break;
    case WrOpcode::local_inv:
      execute_local_inv(wqe);
      break;
    case WrOpcode::bind_mw:
      execute_bind(wqe);
      break;
  }
  if (wqe.status == WcStatus::success) wqe.complete_at_step = step_ + completion_delay(wqe);
  return Exec::done;
}

// Inlined into its three callers: a call per SGE list (five per 4 KiB read I/O) cost more in
// register saves than the checks themselves.
[[gnu::always_inline]] inline bool SimQp::check_sges(const SimDevice& device, const SimPd& pd,
                                                     const Sge* sges, uint32_t count,
                                                     uint32_t access, uint64_t* total) noexcept {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const Sge& sge = sges[i];
    if (sge.length == 0) continue;  // nothing is accessed
    const KeySlot* slot = device.slot_by_key(sge.lkey);
    if (slot == nullptr || slot->kind != KeySlot::Kind::mr || slot->key8 != (sge.lkey & 0xFFu) ||
        !slot->valid || slot->pd != &pd || (slot->access & access) != access ||
        sge.addr < slot->addr || !range_within(sge.addr - slot->addr, sge.length, slot->length)) {
      return false;
    }
    sum += sge.length;
  }
  *total = sum;
  return true;
}

SimQp::Exec SimQp::execute_send(SendWqe& wqe, uint64_t position) noexcept {
  SimQp* peer = peer_;
  if (peer == nullptr || peer->state() != QpState::ready_to_send) {
    // Nobody acknowledges: the requester retries retry_count times, then gives up.
    fail(wqe, WcStatus::retry_exceeded_error);
    return Exec::done;
  }
  const bool is_inline = (wqe.flags & kWrInline) != 0;
  uint64_t length = wqe.inline_length;
  if (!is_inline && !check_sges(device_, pd_, sq_sges_at(position), wqe.num_sge, 0, &length)) {
    fail(wqe, WcStatus::local_protection_error);
    return Exec::done;
  }

  RecvRing& ring = peer->srq_ != nullptr ? peer->srq_->ring : peer->rq_;
  const uint64_t recv_position = ring.head.load(std::memory_order_relaxed);
  if (recv_position == ring.db) {
    // No receive posted: RNR NAK. 7 retries forever; otherwise retry every rnr_timer_ns.
    if (rnr_retry_count_ == kRnrRetryInfinite) {
      if (!wqe.rnr_waiting) ++peer->device_.counters.rnr_naks;
      wqe.rnr_waiting = true;
      return Exec::blocked;
    }
    const uint64_t now = fabric_.now_ns();
    if (wqe.rnr_waiting && now < wqe.rnr_next_ns) return Exec::blocked;
    ++peer->device_.counters.rnr_naks;
    if (wqe.rnr_waiting) ++wqe.rnr_retries;
    wqe.rnr_waiting = true;
    if (wqe.rnr_retries >= rnr_retry_count_) {
      fail(wqe, WcStatus::rnr_retry_exceeded_error);
      return Exec::done;
    }
    wqe.rnr_next_ns = now + fabric_.opts.rnr_timer_ns;
    return Exec::blocked;
  }

  const RecvWqe& recv = ring.wqes[recv_position & ring.mask];
  const Sge* recv_sges = ring.sge_of(recv_position);
  WorkCompletion recv_wc;
  recv_wc.wr_id = recv.wr_id;
  recv_wc.opcode = WcOpcode::recv;
  recv_wc.qp_num = peer->qp_num_;
  auto consume_recv = [&](WcStatus status) {
    recv_wc.status = status;
    ring.head.store(recv_position + 1, std::memory_order_release);
    peer->recv_cq_.push(recv_wc);
  };

  KeySlot* invalidated = nullptr;
  if (wqe.opcode == WrOpcode::send_with_inv) {
    KeySlot* slot = peer->device_.slot_by_key(wqe.invalidate_rkey);
    if (slot == nullptr || slot->kind != KeySlot::Kind::mw ||
        slot->key8 != (wqe.invalidate_rkey & 0xFFu) || !slot->valid || slot->bound_qp != peer) {
      if (fabric_.opts.profile == SimProfile::rxe) {
        // rxe (rxe-feasibility.md F4): the receiver fails, the sender sees success.
        consume_recv(WcStatus::remote_invalid_request_error);
        peer->enter_error();
        wqe.byte_len = 0;
        return Exec::done;
      }
      peer->fail_as_responder(AsyncEventType::qp_request_error);
      fail(wqe, WcStatus::remote_invalid_request_error);
      return Exec::done;
    }
    invalidated = slot;
  }

  uint64_t capacity = 0;
  if (!check_sges(peer->device_, peer->pd_, recv_sges, recv.num_sge, kAccessLocalWrite,
                  &capacity)) {
    // The responder's own receive buffer is bad: its RECV fails, the requester gets a NAK.
    consume_recv(WcStatus::local_protection_error);
    peer->enter_error();
    fail(wqe, WcStatus::remote_operation_error);
    return Exec::done;
  }
  if (capacity < length) {
    consume_recv(WcStatus::local_length_error);
    peer->enter_error();
    fail(wqe, WcStatus::remote_invalid_request_error);
    return Exec::done;
  }

  copy_sges(recv_sges, recv.num_sge, sq_sges_at(position), wqe.num_sge,
            is_inline ? inline_at(position) : nullptr, length);
  if (invalidated != nullptr) {
    // IBTA o9-5.2.1: invalidate, then complete the receive; visible at once.
    invalidated->valid = false;
    invalidated->visible_valid = false;
    invalidated->bound_qp = nullptr;
    invalidated->parent_mr = nullptr;
    recv_wc.remote_invalidated = true;
    recv_wc.invalidated_rkey = wqe.invalidate_rkey;
  }
  recv_wc.byte_len = static_cast<uint32_t>(length);
  device_.counters.bytes_moved += length;
  consume_recv(WcStatus::success);
  return Exec::done;
}

void SimQp::execute_rdma(SendWqe& wqe, uint64_t position) noexcept {
  SimQp* peer = peer_;
  if (peer == nullptr || peer->state() != QpState::ready_to_send) {
    fail(wqe, WcStatus::retry_exceeded_error);
    return;
  }
  const bool is_read = wqe.opcode == WrOpcode::rdma_read;
  const bool is_inline = !is_read && (wqe.flags & kWrInline) != 0;
  uint64_t length = wqe.inline_length;
  if (!is_inline && !check_sges(device_, pd_, sq_sges_at(position), wqe.num_sge,
                                is_read ? uint32_t{kAccessLocalWrite} : 0u, &length)) {
    fail(wqe, WcStatus::local_protection_error);
    return;
  }
  // Responder checks: a valid key of the peer's PD; a window must be bound to the peer QP;
  // the access right; the whole range inside the MR or window (stricter than rxe, VM.md G4).
  const KeySlot* slot = peer->device_.slot_by_key(wqe.rkey);
  const uint32_t needed = is_read ? kAccessRemoteRead : kAccessRemoteWrite;
  if (slot == nullptr || slot->key8 != (wqe.rkey & 0xFFu) || !slot->valid ||
      slot->pd != &peer->pd_ || (slot->kind == KeySlot::Kind::mw && slot->bound_qp != peer) ||
      (slot->access & needed) != needed || wqe.remote_addr < slot->addr ||
      !range_within(wqe.remote_addr - slot->addr, length, slot->length)) {
    // Both sides go to error; the responder sees only flushes (VM.md, rxe G5).
    ++peer->device_.counters.remote_access_errors;
    peer->fail_as_responder(AsyncEventType::qp_access_error);
    fail(wqe, WcStatus::remote_access_error);
    return;
  }
  if (is_read) wqe.byte_len = static_cast<uint32_t>(length);
  if (peer->device_.skips_payload(wqe.remote_addr, length)) {
    device_.counters.bytes_skipped += length;
    return;
  }
  auto* remote = reinterpret_cast<uint8_t*>(wqe.remote_addr);
  if (is_read) {
    copy_from_flat(sq_sges_at(position), wqe.num_sge, remote, length);
  } else {
    copy_to_flat(remote, sq_sges_at(position), wqe.num_sge,
                 is_inline ? inline_at(position) : nullptr, length);
  }
  device_.counters.bytes_moved += length;
}

void SimQp::execute_local_inv(SendWqe& wqe) noexcept {
  KeySlot* slot = device_.slot_by_key(wqe.invalidate_rkey);
  // The committed key: the window as the latest bind or invalidation on this QP left it, seen
  // or not by a bind's FREE check yet.
  if (slot == nullptr || slot->kind != KeySlot::Kind::mw ||
      slot->key8 != (wqe.invalidate_rkey & 0xFFu) || !slot->valid || slot->bound_qp != this) {
    fail(wqe, WcStatus::local_qp_op_error);  // as rxe_do_local_ops()
    return;
  }
  slot->valid = false;          // committed at once: remote accesses fail from here on
  hide_key_change(wqe, *slot);  // later binds see it after its commit lag
}

void SimQp::execute_bind(SendWqe& wqe) noexcept {
  KeySlot* mw = device_.slot_by_generation(wqe.bind_mw_index, wqe.bind_mw_generation);
  const KeySlot* mr = device_.slot_by_key(wqe.bind_mr_lkey);
  constexpr uint32_t kRemote = kAccessRemoteRead | kAccessRemoteWrite;
  const bool ok =
      mw != nullptr && mw->pd == &pd_ && !mw->visible_valid &&  // type 2: must be FREE
      (wqe.bind_rkey >> 8) == mw->index &&                      // only the key byte changes
      mr != nullptr && mr->kind == KeySlot::Kind::mr && mr->key8 == (wqe.bind_mr_lkey & 0xFFu) &&
      mr->valid && mr->pd == &pd_ && (mr->access & kAccessMwBind) != 0 &&
      (wqe.bind_access & ~kRemote) == 0 &&
      ((wqe.bind_access & kAccessRemoteWrite) == 0 || (mr->access & kAccessLocalWrite) != 0) &&
      wqe.bind_addr >= mr->addr &&
      range_within(wqe.bind_addr - mr->addr, wqe.bind_length, mr->length);
  if (!ok) {
    fail(wqe, WcStatus::mw_bind_error);
    return;
  }
  mw->key8 = static_cast<uint8_t>(wqe.bind_rkey & 0xFFu);
  mw->valid = true;  // committed: the SEND behind it may carry the key (ibv_bind_mw.3)
  mw->addr = wqe.bind_addr;
  mw->length = wqe.bind_length;
  mw->access = wqe.bind_access;
  mw->bound_qp = this;
  mw->parent_mr = mr;
  hide_key_change(wqe, *mw);  // later binds see it VALID after its commit lag
}

bool SimQp::complete_ready(bool force) noexcept {
  bool any = false;
  uint64_t head = sq_head_.load(std::memory_order_relaxed);
  while (head != sq_exec_) {
    SendWqe& wqe = wqe_at(head);
    if (!force && wqe.complete_at_step > step_) break;
    complete(wqe);
    sq_head_.store(++head, std::memory_order_release);
    any = true;
  }
  return any;
}

void SimQp::complete(SendWqe& wqe) noexcept {
  if (wqe.pending_visibility) {
    // Only when forced (flush after an error): normally the lag has passed and it landed.
    // Completions are in post order, so it is the oldest of the invisible ones.
    land_key_change(wqe);
    wqe.pending_visibility = false;
    if (!invisible_.empty()) invisible_.erase(invisible_.begin());
  }
  if (wqe.opcode == WrOpcode::rdma_read && wqe.status == WcStatus::success) --reads_in_flight_;
  if (wqe.status != WcStatus::success || (wqe.flags & kWrSignaled) != 0) {
    push_send_cqe(wqe, wqe.status);
  }
}

void SimQp::push_send_cqe(const SendWqe& wqe, WcStatus status) noexcept {
  WorkCompletion wc;
  wc.wr_id = wqe.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode_of(wqe.opcode);
  wc.byte_len = status == WcStatus::success ? wqe.byte_len : 0;
  wc.qp_num = qp_num_;
  send_cq_.push(wc);
}

bool SimQp::flush_all() noexcept {
  bool any = complete_ready(true);  // what executed before the error completes first
  while (sq_exec_ != sq_db_) {
    push_send_cqe(wqe_at(sq_exec_), WcStatus::wr_flush_error);  // even unsignaled ones
    ++sq_exec_;
    any = true;
  }
  sq_head_.store(sq_exec_, std::memory_order_release);
  reads_in_flight_ = 0;
  if (srq_ == nullptr) {
    uint64_t head = rq_.head.load(std::memory_order_relaxed);
    while (head != rq_.db) {
      WorkCompletion wc;
      wc.wr_id = rq_.wqes[head & rq_.mask].wr_id;
      wc.status = WcStatus::wr_flush_error;
      wc.opcode = WcOpcode::recv;
      wc.qp_num = qp_num_;
      recv_cq_.push(wc);
      rq_.head.store(++head, std::memory_order_release);
      any = true;
    }
  }
  return any;
}

}  // namespace nvmf::verbs::sim
