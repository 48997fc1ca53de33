// The data path: QP (post / flush / accounting), CQ (poll, interrupt mode), SRQ, and the
// teardown of MR and MW. No allocation, lock or exception after create().
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <new>

#include "verbs/ibverbs/ibverbs_internal.h"

NVMF_LOG_COMPONENT(ibverbs);

namespace nvmf::verbs::ibverbs {

// ---------------------------------------------------------------------------------------
// The real libibverbs calls

namespace {

int rdma_core_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  return normalise_errno(ibv_post_send(qp, wr, bad_wr));
}
int rdma_core_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return normalise_errno(ibv_post_recv(qp, wr, bad_wr));
}
int rdma_core_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  return normalise_errno(ibv_post_srq_recv(srq, wr, bad_wr));
}
int rdma_core_poll_cq(ibv_cq* cq, int entries, ibv_wc* wc) { return ibv_poll_cq(cq, entries, wc); }
int rdma_core_modify_qp_to_error(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return normalise_errno(ibv_modify_qp(qp, &attr, IBV_QP_STATE));
}
int rdma_core_query_qp_state(ibv_qp* qp, ibv_qp_state* state) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init_attr{};
  const int rc = normalise_errno(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init_attr));
  if (rc == 0) *state = attr.qp_state;
  return rc;
}
void rdma_core_destroy_qp(ibv_qp* qp, rdma_cm_id* id) {
  if (id != nullptr) {
    rdma_destroy_qp(id);  // ibv_destroy_qp + id->qp = NULL; returns nothing
    return;
  }
  const int rc = ibv_destroy_qp(qp);
  if (rc != 0) NVMF_ERRLOG(ibverbs, "ibv_destroy_qp failed: %s", strerror(normalise_errno(rc)));
}
int rdma_core_destroy_cq(ibv_cq* cq) { return normalise_errno(ibv_destroy_cq(cq)); }
int rdma_core_destroy_srq(ibv_srq* srq) { return normalise_errno(ibv_destroy_srq(srq)); }
int rdma_core_dereg_mr(ibv_mr* mr) { return normalise_errno(ibv_dereg_mr(mr)); }
int rdma_core_dealloc_mw(ibv_mw* mw) { return normalise_errno(ibv_dealloc_mw(mw)); }

}  // namespace

const RawOps kRdmaCoreOps = {
    rdma_core_post_send,  rdma_core_post_recv,          rdma_core_post_srq_recv,
    rdma_core_poll_cq,    rdma_core_modify_qp_to_error, rdma_core_query_qp_state,
    rdma_core_destroy_qp, rdma_core_destroy_cq,         rdma_core_destroy_srq,
    rdma_core_dereg_mr,   rdma_core_dealloc_mw,
};

// ---------------------------------------------------------------------------------------
// MR, MW

IbvMemoryRegion::~IbvMemoryRegion() {
  const int rc = ops_->dereg_mr(mr_);
  if (rc != 0) {
    // EBUSY: a memory window is still bound to it (rxe refuses then).
    NVMF_ERRLOG(ibverbs, "ibv_dereg_mr (lkey 0x%x) failed: %s", mr_->lkey, strerror(rc));
  }
}

IbvMemoryWindow::~IbvMemoryWindow() {
  const int rc = ops_->dealloc_mw(mw_);
  if (rc != 0) NVMF_ERRLOG(ibverbs, "ibv_dealloc_mw (rkey 0x%x) failed: %s", rkey_, strerror(rc));
}

// ---------------------------------------------------------------------------------------
// SRQ

Result<std::unique_ptr<IbvSharedReceiveQueue>> IbvSharedReceiveQueue::create(
    const RawOps& ops, ibv_srq* srq, uint32_t max_wr, uint32_t max_sge) noexcept {
  std::unique_ptr<IbvSharedReceiveQueue> queue(new (std::nothrow)
                                                   IbvSharedReceiveQueue(ops, srq));  // setup-path
  if (queue == nullptr) {
    ops.destroy_srq(srq);
    return Unexpected(Errc::no_memory, "SRQ wrapper");
  }
  if (!queue->ring_.init(max_wr, max_sge)) {
    NVMF_ERRLOG(ibverbs, "SRQ: no memory for %u receive slots of %u SGEs (SrqOpts::max_wr)", max_wr,
                max_sge);
    return Unexpected(Errc::no_memory, "SRQ receive slots");
  }
  return queue;
}

IbvSharedReceiveQueue::~IbvSharedReceiveQueue() {
  const int rc = ops_->destroy_srq(srq_);
  if (rc != 0) NVMF_ERRLOG(ibverbs, "ibv_destroy_srq failed: %s", strerror(rc));
}

Result<void> IbvSharedReceiveQueue::post_recv(const RecvWr& wr) noexcept {
  if (ring_.full()) return Unexpected(Errc::busy, "SRQ full: max_wr receives outstanding");
  const uint64_t counter = ring_.tail();
  Result<void> converted =
      to_ibv_recv_wr(wr, ring_.max_sge(), &ring_.at(counter), ring_.sges_at(counter));
  if (!converted) return converted;
  ring_.push();
  return {};
}

Result<void> IbvSharedReceiveQueue::flush() noexcept {
  ibv_recv_wr* chain = ring_.link_queued();
  if (chain == nullptr) return {};
  ibv_recv_wr* bad = nullptr;
  const int rc = ops_->post_srq_recv(srq_, chain, &bad);
  if (rc == 0) {
    ring_.mark_posted(ring_.tail());
    return {};
  }
  // The WRs before `bad` are on the device; `bad` and the rest stay queued for the next
  // flush(). A bad_wr outside the chain (no provider does that) reads as "none posted".
  const uint64_t rejected = ring_.counter_of(bad);
  const uint64_t first = ring_.flushed_end();
  const uint64_t stuck = rejected == ring_.tail() ? first : rejected;
  NVMF_ERRLOG(ibverbs,
              "ibv_post_srq_recv rejected receive %" PRIu64 " of %" PRIu64 " (wr_id 0x%" PRIx64
              "): %s; it and the %" PRIu64 " after it stay queued",
              stuck - first + 1, ring_.queued(), ring_.at(stuck).wr_id, strerror(rc),
              ring_.tail() - stuck - 1);
  ring_.mark_posted(stuck);
  return Unexpected(make_system_error(rc, "ibv_post_srq_recv"));
}

// ---------------------------------------------------------------------------------------
// CQ

IbvCompletionQueue::~IbvCompletionQueue() {
  if (!qps_.empty()) {
    NVMF_ERRLOG(ibverbs, "CQ destroyed while %zu QP(s) still use it: destroy QPs first",
                qps_.size());
  }
  pending_.clear();
  if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
  const int rc = ops_->destroy_cq(cq_);
  if (rc != 0) NVMF_ERRLOG(ibverbs, "ibv_destroy_cq failed: %s", strerror(rc));
  if (channel_ != nullptr) {
    const int channel_rc = normalise_errno(ibv_destroy_comp_channel(channel_));
    if (channel_rc != 0) {
      NVMF_ERRLOG(ibverbs, "ibv_destroy_comp_channel failed: %s", strerror(channel_rc));
    }
  }
}

Result<void> IbvCompletionQueue::attach(IbvQueuePair* qp) noexcept {
  try {
    qps_[qp->qp_num()] = qp;  // setup-path
  } catch (...) {
    return Unexpected(Errc::no_memory, "CQ QP table");
  }
  return {};
}

void IbvCompletionQueue::detach(IbvQueuePair* qp) noexcept {
  auto found = qps_.find(qp->qp_num());
  if (found != qps_.end() && found->second == qp) qps_.erase(found);
}

int IbvCompletionQueue::poll(std::span<WorkCompletion> out) noexcept {
  size_t count = 0;
  while (count < out.size()) {
    ibv_wc wcs[kPollBatch];
    const int want = static_cast<int>(std::min<size_t>(kPollBatch, out.size() - count));
    const int got = ops_->poll_cq(cq_, want, wcs);
    if (got < 0) {
      if (!poll_error_logged_) {
        NVMF_ERRLOG(ibverbs, "ibv_poll_cq failed: %d (logged once per CQ)", got);
        poll_error_logged_ = true;
      }
      break;
    }
    for (int i = 0; i < got; ++i) {
      out[count++] = to_work_completion(wcs[i], quirks_);
      auto found = qps_.find(wcs[i].qp_num);
      if (found != qps_.end()) found->second->account(wcs[i], this);
    }
    if (got < want) break;
  }
  if (count < out.size() && !pending_.empty()) count += report_software(out.subspan(count));
  return static_cast<int>(count);
}

size_t IbvCompletionQueue::report_software(std::span<WorkCompletion> out) noexcept {
  size_t count = 0;
  PendingFlush* pending = pending_.empty() ? nullptr : &pending_.front();
  while (pending != nullptr && count < out.size()) {
    PendingFlush* next = pending_.next_of(*pending);
    bool done = false;
    count += pending->qp->report_software(pending->receive_side, out.subspan(count), &done);
    if (done) pending_.remove(*pending);
    pending = next;
  }
  return count;
}

Result<void> IbvCompletionQueue::arm() noexcept {
  if (channel_ == nullptr) {
    return Unexpected(Errc::bad_state, "CQ created without CqOpts::with_event_fd");
  }
  const int rc = normalise_errno(ibv_req_notify_cq(cq_, 0));
  if (rc != 0) return Unexpected(make_system_error(rc, "ibv_req_notify_cq"));
  return {};
}

Result<void> IbvCompletionQueue::consume_event() noexcept {
  if (channel_ == nullptr) {
    return Unexpected(Errc::bad_state, "CQ created without CqOpts::with_event_fd");
  }
  ibv_cq* event_cq = nullptr;
  void* event_context = nullptr;
  if (ibv_get_cq_event(channel_, &event_cq, &event_context) != 0) {
    const int os_errno = errno;
    if (os_errno == EAGAIN) return Unexpected(Errc::busy, "no CQ event waiting");
    return Unexpected(make_system_error(os_errno, "ibv_get_cq_event"));
  }
  // Acknowledging takes a mutex in libibverbs: do it in batches; the destructor acks the rest
  // (ibv_destroy_cq waits for every event to be acknowledged).
  if (++unacked_events_ >= kAckBatch) {
    ibv_ack_cq_events(cq_, unacked_events_);
    unacked_events_ = 0;
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// QP

Result<std::unique_ptr<IbvQueuePair>> IbvQueuePair::create(const RawOps& ops, ibv_qp* qp,
                                                           rdma_cm_id* id, const QpOpts& granted,
                                                           IbvCompletionQueue* send_cq,
                                                           IbvCompletionQueue* recv_cq,
                                                           IbvSharedReceiveQueue* srq) noexcept {
  std::unique_ptr<IbvQueuePair> pair(new (std::nothrow)
                                         IbvQueuePair(ops, qp, id, granted));  // setup-path
  if (pair == nullptr) {
    ops.destroy_qp(qp, id);
    return Unexpected(Errc::no_memory, "QP wrapper");
  }
  pair->send_pending_.qp = pair.get();
  pair->recv_pending_.qp = pair.get();
  pair->recv_pending_.receive_side = true;
  pair->srq_ = srq;
  const uint32_t send_depth = granted.max_send_wr;
  if (!pair->send_.init(send_depth, granted.max_send_sge)) {
    NVMF_ERRLOG(ibverbs, "QP %u: no memory for %u send slots (QpOpts::max_send_wr)", qp->qp_num,
                send_depth);
    return Unexpected(Errc::no_memory, "QP send slots");
  }
  pair->bind_shadows_.reset(new (std::nothrow) ibv_mw[send_depth]());  // setup-path
  if (pair->bind_shadows_ == nullptr) return Unexpected(Errc::no_memory, "QP bind slots");
  if (srq == nullptr && !pair->recv_.init(granted.max_recv_wr, granted.max_recv_sge)) {
    NVMF_ERRLOG(ibverbs, "QP %u: no memory for %u receive slots (QpOpts::max_recv_wr)", qp->qp_num,
                granted.max_recv_wr);
    return Unexpected(Errc::no_memory, "QP receive slots");
  }
  Result<void> attached = send_cq->attach(pair.get());
  if (!attached) return Unexpected(attached.error());
  pair->send_cq_ = send_cq;
  if (recv_cq != send_cq) {
    attached = recv_cq->attach(pair.get());
    if (!attached) return Unexpected(attached.error());
  }
  pair->recv_cq_ = recv_cq;
  return pair;
}

IbvQueuePair::~IbvQueuePair() {
  if (send_cq_ != nullptr) {
    send_cq_->remove_pending(send_pending_);
    send_cq_->detach(this);
  }
  if (recv_cq_ != nullptr) {
    recv_cq_->remove_pending(recv_pending_);
    recv_cq_->detach(this);
  }
  ops_->destroy_qp(qp_, id_);
}

QpState IbvQueuePair::state() const noexcept {
  if (in_error_) return QpState::error;
  ibv_qp_state raw_state = IBV_QPS_ERR;
  const int rc = ops_->query_qp_state(qp_, &raw_state);
  if (rc != 0) {
    NVMF_WARNLOG(ibverbs, "QP %u: ibv_query_qp failed: %s", qp_->qp_num, strerror(rc));
    return QpState::error;
  }
  return qp_state_from_ibv(raw_state);
}

Result<void> IbvQueuePair::post_send(const SendWr& wr) noexcept {
  if (send_.full()) return Unexpected(Errc::busy, "send queue full: max_send_wr outstanding");
  BindTarget bind;
  IbvMemoryWindow* window = nullptr;
  if (wr.opcode == WrOpcode::bind_mw) {
    if (wr.bind.mw == nullptr || wr.bind.mr == nullptr) {
      return Unexpected(Errc::invalid_argument, "BIND_MW without a window or a region");
    }
    // Objects of another provider here are a programmer error (providers do not mix).
    window = static_cast<IbvMemoryWindow*>(wr.bind.mw);
    const auto* region = static_cast<const IbvMemoryRegion*>(wr.bind.mr);
    if (window->raw()->pd != qp_->pd || region->raw()->pd != qp_->pd) {
      return Unexpected(Errc::invalid_argument, "BIND_MW window or region of another PD");
    }
    bind.mw = window->raw();
    bind.current_rkey = window->rkey();
    bind.mr = region->raw();
  }
  const uint64_t counter = send_.tail();
  const SendLimits limits{granted_.max_send_sge, granted_.max_inline_data};
  Result<void> converted =
      to_ibv_send_wr(wr, limits, bind, &send_.at(counter), send_.sges_at(counter),
                     &bind_shadows_[send_.slot_of(counter)]);
  if (!converted) return converted;
  if (window != nullptr) window->set_queued_rkey(wr.bind.rkey);
  send_.push();
  return {};
}

Result<void> IbvQueuePair::post_recv(const RecvWr& wr) noexcept {
  if (srq_ != nullptr) {
    return Unexpected(Errc::invalid_argument, "QP receives from an SRQ: post to the SRQ");
  }
  if (recv_.full()) return Unexpected(Errc::busy, "receive queue full: max_recv_wr outstanding");
  const uint64_t counter = recv_.tail();
  Result<void> converted =
      to_ibv_recv_wr(wr, recv_.max_sge(), &recv_.at(counter), recv_.sges_at(counter));
  if (!converted) return converted;
  recv_.push();
  return {};
}

Result<void> IbvQueuePair::flush() noexcept {
  // Receives first: they must be ready before sends provoke the peer's answers.
  Result<void> recv_result = flush_recv();
  Result<void> send_result = flush_send();
  return recv_result ? send_result : recv_result;
}

Result<void> IbvQueuePair::flush_recv() noexcept {
  if (recv_.queued() == 0) return {};
  if (in_error_) {
    flush_queued_in_software();
    return {};
  }
  ibv_recv_wr* bad = nullptr;
  const int rc = ops_->post_recv(qp_, recv_.link_queued(), &bad);
  ++doorbells_;
  if (rc == 0) {
    recv_.mark_posted(recv_.tail());
    return {};
  }
  const uint64_t first = recv_.flushed_end();
  uint64_t rejected = recv_.counter_of(bad);
  if (rejected == recv_.tail()) rejected = first;  // bad_wr outside the chain: none posted
  NVMF_ERRLOG(ibverbs,
              "QP %u: ibv_post_recv rejected receive %" PRIu64 " of %" PRIu64 " (wr_id 0x%" PRIx64
              "): %s; moving the QP to error, the rest are flushed",
              qp_->qp_num, rejected - first + 1, recv_.queued(), recv_.at(rejected).wr_id,
              strerror(rc));
  recv_.mark_posted(rejected);
  recv_rejected_ = rejected;
  recv_rejected_errno_ = rc;
  enter_error(true);
  return Unexpected(make_system_error(rc, "ibv_post_recv"));
}

Result<void> IbvQueuePair::flush_send() noexcept {
  if (send_.queued() == 0) return {};
  if (in_error_) {
    flush_queued_in_software();
    return {};
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ops_->post_send(qp_, send_.link_queued(), &bad);
  ++doorbells_;
  if (rc == 0) {
    send_.mark_posted(send_.tail());
    return {};
  }
  const uint64_t first = send_.flushed_end();
  uint64_t rejected = send_.counter_of(bad);
  if (rejected == send_.tail()) rejected = first;  // bad_wr outside the chain: none posted
  const ibv_send_wr& rejected_wr = send_.at(rejected);
  NVMF_ERRLOG(ibverbs,
              "QP %u: ibv_post_send rejected WR %" PRIu64 " of %" PRIu64 " (%s, wr_id 0x%" PRIx64
              ", %d SGEs, flags 0x%x): %s; moving the QP to error, the rest are flushed",
              qp_->qp_num, rejected - first + 1, send_.queued(),
              ibv_wr_opcode_text(rejected_wr.opcode), rejected_wr.wr_id, rejected_wr.num_sge,
              rejected_wr.send_flags, strerror(rc));
  send_.mark_posted(rejected);
  send_rejected_ = rejected;
  send_rejected_errno_ = rc;
  enter_error(true);
  return Unexpected(make_system_error(rc, "ibv_post_send"));
}

Result<void> IbvQueuePair::move_to_error() noexcept {
  const bool was_in_error = in_error_;
  in_error_ = true;
  const int rc = ops_->modify_qp_to_error(qp_);
  flush_queued_in_software();
  if (rc != 0) {
    NVMF_ERRLOG(ibverbs, "QP %u: ibv_modify_qp to IBV_QPS_ERR failed: %s%s", qp_->qp_num,
                strerror(rc), was_in_error ? " (already in error)" : "");
    return Unexpected(make_system_error(rc, "ibv_modify_qp(IBV_QPS_ERR)"));
  }
  return {};
}

void IbvQueuePair::enter_error(bool modify_device) noexcept {
  if (!in_error_) {
    in_error_ = true;
    if (modify_device) {
      const int rc = ops_->modify_qp_to_error(qp_);
      if (rc != 0) {
        NVMF_ERRLOG(ibverbs, "QP %u: ibv_modify_qp to IBV_QPS_ERR failed: %s", qp_->qp_num,
                    strerror(rc));
      }
    }
  }
  flush_queued_in_software();
}

void IbvQueuePair::flush_queued_in_software() noexcept {
  if (send_.queued() > 0) {
    send_.mark_flushed_in_software();
    send_cq_->add_pending(send_pending_);
  }
  if (srq_ == nullptr && recv_.queued() > 0) {
    recv_.mark_flushed_in_software();
    recv_cq_->add_pending(recv_pending_);
  }
}

void IbvQueuePair::account(const ibv_wc& wc, const IbvCompletionQueue* cq) noexcept {
  bool receive_side = false;
  if (wc.status == IBV_WC_SUCCESS) {
    receive_side = (wc.opcode & IBV_WC_RECV) != 0;  // opcode is valid on success only
  } else {
    in_error_ = true;  // any error completion of an RC QP leaves it in error
    receive_side = send_cq_ != recv_cq_ ? cq == recv_cq_ : error_is_receive(wc.wr_id);
  }
  if (receive_side) {
    account_recv();
  } else {
    account_send(wc);
  }
}

bool IbvQueuePair::error_is_receive(uint64_t wr_id) const noexcept {
  // Receives complete in order: an error for a receive names the oldest one on the device.
  if (srq_ == nullptr && recv_.on_device() > 0 && recv_.at(recv_.head()).wr_id == wr_id) {
    return true;
  }
  for (uint64_t c = send_.head(); c < send_.device_end(); ++c) {
    if (send_.at(c).wr_id == wr_id) return false;
  }
  // Not an outstanding send: a receive from the SRQ, or (unique wr_ids broken) whichever
  // side has something on the device.
  return srq_ != nullptr || send_.on_device() == 0;
}

void IbvQueuePair::account_send(const ibv_wc& wc) noexcept {
  // A success names a signaled WR; every unsignaled WR before it is done too. An error names
  // the first WR that failed (signaled or not; the WRs before it succeeded) or a flushed one.
  const bool success = wc.status == IBV_WC_SUCCESS;
  for (uint64_t c = send_.head(); c < send_.device_end(); ++c) {
    const ibv_send_wr& wr = send_.at(c);
    const bool can_complete = !success || (wr.send_flags & IBV_SEND_SIGNALED) != 0;
    if (can_complete && wr.wr_id == wc.wr_id) {
      send_.complete_until(c + 1);
      return;
    }
  }
  // No match (duplicate or foreign wr_id): free the oldest so the count cannot stick.
  if (send_.on_device() > 0) send_.complete_until(send_.head() + 1);
}

void IbvQueuePair::account_recv() noexcept {
  if (srq_ != nullptr) {
    srq_->account_consumed();
  } else if (recv_.on_device() > 0) {
    recv_.complete_until(recv_.head() + 1);
  }
}

size_t IbvQueuePair::report_software(bool receive_side, std::span<WorkCompletion> out,
                                     bool* done) noexcept {
  size_t count = 0;
  if (receive_side) {
    *done = recv_.software_pending() == 0;
    if (recv_.on_device() > 0) return 0;  // keep per-QP order: device WRs complete first
    while (count < out.size() && recv_.software_pending() > 0) {
      const uint64_t counter = recv_.head();
      WorkCompletion& wc = out[count++];
      wc = WorkCompletion{};
      wc.wr_id = recv_.at(counter).wr_id;
      wc.opcode = WcOpcode::recv;
      wc.qp_num = qp_->qp_num;
      wc.status =
          counter == recv_rejected_ ? WcStatus::local_qp_op_error : WcStatus::wr_flush_error;
      wc.vendor_error = counter == recv_rejected_ ? static_cast<uint32_t>(recv_rejected_errno_) : 0;
      recv_.pop_software();
    }
    *done = recv_.software_pending() == 0;
    return count;
  }
  *done = send_.software_pending() == 0;
  if (send_.on_device() > 0) return 0;
  while (count < out.size() && send_.software_pending() > 0) {
    const uint64_t counter = send_.head();
    const ibv_send_wr& wr = send_.at(counter);
    WorkCompletion& wc = out[count++];
    wc = WorkCompletion{};
    wc.wr_id = wr.wr_id;
    wc.opcode = wc_opcode_for(wr.opcode);
    wc.qp_num = qp_->qp_num;
    wc.status = counter == send_rejected_ ? WcStatus::local_qp_op_error : WcStatus::wr_flush_error;
    wc.vendor_error = counter == send_rejected_ ? static_cast<uint32_t>(send_rejected_errno_) : 0;
    send_.pop_software();
  }
  *done = send_.software_pending() == 0;
  return count;
}

}  // namespace nvmf::verbs::ibverbs
