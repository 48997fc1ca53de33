// The rdma-core provider's classes and its pure conversion functions. Internal to
// src/verbs/ibverbs and its unit tests: everything above the verbs layer speaks verbs.h.
//
// Data path (post_*, flush, poll): no allocation, no lock, no exception. Each QP keeps a ring
// of preallocated ibv_send_wr / ibv_recv_wr slots (with their SGE storage) sized by the
// granted queue depth; a slot is used from post_*() until the WR completes, so the ring's
// fill level is the queue's busy accounting (see WrRing).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/intrusive_list.h"
#include "common/log.h"
#include "common/result.h"
#include "verbs/ibverbs/ibverbs.h"
#include "verbs/verbs.h"

NVMF_LOG_COMPONENT_DECLARE(ibverbs);

namespace nvmf::verbs::ibverbs {

// ---------------------------------------------------------------------------------------
// verbs.h promises that its values equal rdma-core's; hold it to that.

constexpr unsigned as_bits(unsigned value) { return value; }
static_assert(as_bits(kWrFenced) == as_bits(IBV_SEND_FENCE) &&
              as_bits(kWrSignaled) == as_bits(IBV_SEND_SIGNALED) &&
              as_bits(kWrSolicited) == as_bits(IBV_SEND_SOLICITED) &&
              as_bits(kWrInline) == as_bits(IBV_SEND_INLINE));
static_assert(as_bits(kAccessLocalWrite) == as_bits(IBV_ACCESS_LOCAL_WRITE) &&
              as_bits(kAccessRemoteWrite) == as_bits(IBV_ACCESS_REMOTE_WRITE) &&
              as_bits(kAccessRemoteRead) == as_bits(IBV_ACCESS_REMOTE_READ) &&
              as_bits(kAccessMwBind) == as_bits(IBV_ACCESS_MW_BIND));
static_assert(static_cast<int>(WcOpcode::send) == IBV_WC_SEND &&
              static_cast<int>(WcOpcode::rdma_write) == IBV_WC_RDMA_WRITE &&
              static_cast<int>(WcOpcode::rdma_read) == IBV_WC_RDMA_READ &&
              static_cast<int>(WcOpcode::local_inv) == IBV_WC_LOCAL_INV &&
              static_cast<int>(WcOpcode::bind_mw) == IBV_WC_BIND_MW &&
              static_cast<int>(WcOpcode::recv) == IBV_WC_RECV);
static_assert(static_cast<int>(WcStatus::local_length_error) == IBV_WC_LOC_LEN_ERR &&
              static_cast<int>(WcStatus::wr_flush_error) == IBV_WC_WR_FLUSH_ERR &&
              static_cast<int>(WcStatus::mw_bind_error) == IBV_WC_MW_BIND_ERR &&
              static_cast<int>(WcStatus::remote_access_error) == IBV_WC_REM_ACCESS_ERR &&
              static_cast<int>(WcStatus::rnr_retry_exceeded_error) == IBV_WC_RNR_RETRY_EXC_ERR &&
              static_cast<int>(WcStatus::general_error) == IBV_WC_GENERAL_ERR);
// Sge is copied into ibv_sge field by field, but the layouts match anyway.
static_assert(sizeof(Sge) == sizeof(ibv_sge));
static_assert(static_cast<int>(AsyncEventType::cq_error) == IBV_EVENT_CQ_ERR &&
              static_cast<int>(AsyncEventType::qp_fatal) == IBV_EVENT_QP_FATAL &&
              static_cast<int>(AsyncEventType::qp_access_error) == IBV_EVENT_QP_ACCESS_ERR &&
              static_cast<int>(AsyncEventType::device_fatal) == IBV_EVENT_DEVICE_FATAL &&
              static_cast<int>(AsyncEventType::port_error) == IBV_EVENT_PORT_ERR &&
              static_cast<int>(AsyncEventType::srq_error) == IBV_EVENT_SRQ_ERR &&
              static_cast<int>(AsyncEventType::qp_last_wqe_reached) ==
                  IBV_EVENT_QP_LAST_WQE_REACHED &&
              static_cast<int>(AsyncEventType::wq_fatal) == IBV_EVENT_WQ_FATAL &&
              kAsyncEventTypeCount == IBV_EVENT_WQ_FATAL + 1);

// Private-data limits of the IB CM messages as rdma_cm (RDMA_PS_TCP) exposes them: a REQ
// carries 92 bytes of which rdma_cm's own header takes 36; REP 196; REJ 148.
inline constexpr size_t kCmRequestPrivateDataMax = 56;
inline constexpr size_t kCmReplyPrivateDataMax = 196;
inline constexpr size_t kCmRejectPrivateDataMax = 148;
static_assert(kCmReplyPrivateDataMax == kCmPrivateDataMax);

// IB CM reject reason 8, "invalid service ID": nobody listens on that address and port.
inline constexpr int kCmRejectInvalidServiceId = 8;

// rdma_rxe's vendor_id (RXE_VENDOR_ID in the kernel): identifies soft-RoCE for WcQuirks.
inline constexpr uint32_t kRxeVendorId = 0xFFFFFF;

// ---------------------------------------------------------------------------------------
// Pure conversions (convert.cpp): no device needed, unit-tested with hand-made structs.

// Provider quirks that change how an ibv_wc reads.
struct WcQuirks {
  // rxe copies the kernel's IB_WC_WITH_INVALIDATE (bit 0x4) into wc_flags, where libibverbs
  // has IBV_WC_IP_CSUM_OK; IBV_WC_WITH_INV (0x8) stays clear (VM.md). When set, bit 0x4 on a
  // successful RECV also means "remotely invalidated". Not set for other devices, where 0x4
  // really is a checksum flag (mlx5 sets it on RoCEv2 receives).
  bool invalidate_flag_in_bit2 = false;
};
WcQuirks wc_quirks_for(const char* name, const ibv_device_attr& attr) noexcept;

WcStatus to_wc_status(int ibv_status) noexcept;  // unknown values -> general_error
// The completion as the stack sees it. remote_invalidated is set from IBV_WC_WITH_INV or,
// with the rxe quirk, bit 0x4, and only on successful RECVs; invalidated_rkey is filled
// when it is set. The caller still compares invalidated_rkey with the key it sent.
WorkCompletion to_work_completion(const ibv_wc& wc, WcQuirks quirks) noexcept;
// The completion opcode a send WR produces (for completions made in software).
WcOpcode wc_opcode_for(ibv_wr_opcode opcode) noexcept;
const char* ibv_wr_opcode_text(ibv_wr_opcode opcode) noexcept;  // for logs

struct SendLimits {
  uint32_t max_sge = 1;
  uint32_t max_inline_data = 0;
};
// What a BIND_MW needs besides the SendWr: the raw window, the key it holds before this
// bind (the key of the previous bind queued on it, see IbvMemoryWindow) and the raw MR.
struct BindTarget {
  ibv_mw* mw = nullptr;
  uint32_t current_rkey = 0;
  ibv_mr* mr = nullptr;
};
// Fills `out` (next = nullptr), copying the SGEs into `sges` (room for limits.max_sge).
// BIND_MW: num_sge = 0 and bind_mw.mw points at `shadow_mw`, a copy of the window with the
// key it will hold when this WR reaches the device: rxe and mlx5 read bind_mw.mw->rkey at
// ibv_post_send time, so two binds of one window in one doorbell need a key each.
// Errors: invalid_argument for too many SGEs, inline data over the limit, a bind without a
// window or region, or a bind key that is not the window's (use MemoryWindow::next_rkey()).
Result<void> to_ibv_send_wr(const SendWr& wr, const SendLimits& limits, const BindTarget& bind,
                            ibv_send_wr* out, ibv_sge* sges, ibv_mw* shadow_mw) noexcept;
Result<void> to_ibv_recv_wr(const RecvWr& wr, uint32_t max_sge, ibv_recv_wr* out,
                            ibv_sge* sges) noexcept;

DeviceCaps caps_from_attr(const char* name, const ibv_device_attr& attr);
// ibv_async_event -> AsyncEvent, read before the event is acknowledged (the QP, CQ or SRQ it
// names cannot be destroyed until then): the QP's number, the CQ's and SRQ's context (the
// wrapper the provider stored there at creation), the port number. false for an event type
// rdma-core added after this code (logged by the caller, then dropped).
bool to_async_event(const ibv_async_event& raw, AsyncEvent* out) noexcept;
QpState qp_state_from_ibv(ibv_qp_state state) noexcept;

// rdma_cm event -> what the stack sees; nullopt for events the provider handles itself
// (ADDR_RESOLVED starts route resolution; TIMEWAIT_EXIT, ADDR_CHANGE and multicast are
// dropped). REJECTED with reason 8 (no listener) reads as unreachable.
std::optional<CmEventType> cm_event_type_from(rdma_cm_event_type type, int status) noexcept;
// Numeric IPv4 or IPv6 address ("0.0.0.0" / "::" = any) and port -> sockaddr.
Result<void> parse_socket_address(const std::string& address, uint16_t port,
                                  sockaddr_storage* out) noexcept;
std::string format_socket_address(const sockaddr* address);  // "1.2.3.4:4420", "[::1]:4420"
// ConnectParams -> rdma_conn_param, with the RDMA READ depths clamped to the device's limits
// (0 = no limit known); `clamped` tells the caller to log the knob.
rdma_conn_param to_conn_param(const ConnectParams& params, uint32_t max_responder_resources,
                              uint32_t max_initiator_depth, bool* clamped) noexcept;

// ---------------------------------------------------------------------------------------
// The libibverbs calls the queue objects make, behind a table: production uses
// kRdmaCoreOps; unit tests run the ring, flush and accounting logic over hand-made objects
// with a fake table. Every int return is 0 or an errno (negative values are normalised).

struct RawOps {
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int (*post_srq_recv)(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int (*poll_cq)(ibv_cq* cq, int entries, ibv_wc* wc);  // count, or negative on failure
  int (*modify_qp_to_error)(ibv_qp* qp);
  int (*query_qp_state)(ibv_qp* qp, ibv_qp_state* state);
  void (*destroy_qp)(ibv_qp* qp, rdma_cm_id* id);  // rdma_destroy_qp when id, else ibv_destroy_qp
  int (*destroy_cq)(ibv_cq* cq);
  int (*destroy_srq)(ibv_srq* srq);
  int (*dereg_mr)(ibv_mr* mr);
  int (*dealloc_mw)(ibv_mw* mw);
};
extern const RawOps kRdmaCoreOps;

inline int normalise_errno(int rc) noexcept { return rc < 0 ? -rc : rc; }

// ---------------------------------------------------------------------------------------
// WrRing: preallocated work-request slots of one queue (SQ, RQ or SRQ).
//
// Monotonic 64-bit counters split the ring; slot = counter % capacity:
//   [head, device_end)         posted to the device, completion not yet accounted
//   [device_end, flushed_end)  never posted (QP in error): completed in software by the CQ,
//                              after the device range drains, so per-QP order holds
//   [flushed_end, tail)        queued by post_*(), waiting for flush()
// outstanding() = tail - head is what "busy" is measured against.
template <typename IbvWr>
class WrRing {
 public:
  WrRing() = default;
  WrRing(const WrRing&) = delete;
  WrRing& operator=(const WrRing&) = delete;

  // Setup path: allocates capacity slots with max_sge SGEs each. False when out of memory.
  bool init(uint32_t capacity, uint32_t max_sge) noexcept {
    capacity_ = capacity;
    max_sge_ = max_sge;
    slots_.reset(new (std::nothrow) IbvWr[capacity]());  // setup-path
    sges_.reset(new (std::nothrow) ibv_sge[size_t{capacity} * (max_sge == 0 ? 1 : max_sge)]());
    return capacity > 0 && slots_ != nullptr && sges_ != nullptr;
  }

  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t max_sge() const noexcept { return max_sge_; }
  uint64_t head() const noexcept { return head_; }
  uint64_t device_end() const noexcept { return device_end_; }
  uint64_t flushed_end() const noexcept { return flushed_end_; }
  uint64_t tail() const noexcept { return tail_; }
  uint64_t outstanding() const noexcept { return tail_ - head_; }
  uint64_t on_device() const noexcept { return device_end_ - head_; }
  uint64_t software_pending() const noexcept { return flushed_end_ - device_end_; }
  uint64_t queued() const noexcept { return tail_ - flushed_end_; }
  bool full() const noexcept { return outstanding() >= capacity_; }

  size_t slot_of(uint64_t counter) const noexcept { return counter % capacity_; }
  IbvWr& at(uint64_t counter) noexcept { return slots_[slot_of(counter)]; }
  const IbvWr& at(uint64_t counter) const noexcept { return slots_[slot_of(counter)]; }
  ibv_sge* sges_at(uint64_t counter) noexcept {
    return &sges_[slot_of(counter) * (max_sge_ == 0 ? 1 : max_sge_)];
  }

  void push() noexcept { ++tail_; }  // the tail slot was filled

  // Links the queued WRs into one chain in order; returns its first WR (nullptr if none).
  IbvWr* link_queued() noexcept {
    if (queued() == 0) return nullptr;
    for (uint64_t c = flushed_end_; c + 1 < tail_; ++c) at(c).next = &at(c + 1);
    at(tail_ - 1).next = nullptr;
    return &at(flushed_end_);
  }
  // The counter of a WR of the queued chain; tail() when `wr` is not one of them.
  uint64_t counter_of(const IbvWr* wr) const noexcept {
    if (wr == nullptr || wr < slots_.get() || wr >= slots_.get() + capacity_) return tail_;
    const uint64_t slot = static_cast<uint64_t>(wr - slots_.get());
    const uint64_t first = slot_of(flushed_end_);
    const uint64_t counter = flushed_end_ + (slot + capacity_ - first) % capacity_;
    return counter < tail_ ? counter : tail_;
  }
  // The queued WRs before `end` reached the device (only while nothing is software-flushed).
  void mark_posted(uint64_t end) noexcept { device_end_ = flushed_end_ = end; }
  // Every queued WR will be completed in software (the QP is in error).
  void mark_flushed_in_software() noexcept { flushed_end_ = tail_; }
  // Completions: the device finished everything up to `counter` (exclusive).
  void complete_until(uint64_t counter) noexcept { head_ = counter; }
  // The oldest software-flushed WR was reported (only when nothing is left on the device).
  void pop_software() noexcept { head_ = ++device_end_; }

 private:
  std::unique_ptr<IbvWr[]> slots_;
  std::unique_ptr<ibv_sge[]> sges_;
  uint32_t capacity_ = 0;
  uint32_t max_sge_ = 0;
  uint64_t head_ = 0;
  uint64_t device_end_ = 0;
  uint64_t flushed_end_ = 0;
  uint64_t tail_ = 0;
};

// ---------------------------------------------------------------------------------------
// Objects

class IbvQueuePair;
class IbvCompletionQueue;

class IbvDevice final : public Device {
 public:
  // Queries the device behind `context` (owned by librdmacm, which keeps it open).
  static Result<std::unique_ptr<IbvDevice>> create(ibv_context* context) noexcept;
  const DeviceCaps& caps() const noexcept override { return caps_; }
  Result<std::unique_ptr<ProtectionDomain>> allocate_pd() noexcept override;
  // ibv_get_async_event on the context's async fd (non-blocking since create()), copied and
  // acknowledged at once: destroying a QP, CQ or SRQ waits for the acks of its events, so an
  // unacknowledged event would block the owner's teardown; what the event names is copied
  // out before the ack (AsyncEvent says why its pointers are identities only).
  bool poll_async_event(AsyncEvent* event) noexcept override;
  int async_event_fd() const noexcept override { return async_ready_ ? context_->async_fd : -1; }

  ibv_context* context() const noexcept { return context_; }
  WcQuirks quirks() const noexcept { return quirks_; }
  uint32_t max_srq_sge() const noexcept { return max_srq_sge_; }

 private:
  IbvDevice() = default;
  ibv_context* context_ = nullptr;
  DeviceCaps caps_;
  WcQuirks quirks_;
  uint32_t max_srq_sge_ = 0;
  bool async_ready_ = false;  // the async fd is non-blocking: poll_async_event may read it
};

class IbvProtectionDomain final : public ProtectionDomain {
 public:
  IbvProtectionDomain(ibv_pd* pd, IbvDevice* device) noexcept : pd_(pd), device_(device) {}
  ~IbvProtectionDomain() override;
  Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t length,
                                                        uint32_t access) noexcept override;
  Result<std::unique_ptr<MemoryWindow>> allocate_window() noexcept override;
  Result<std::unique_ptr<CompletionQueue>> create_cq(const CqOpts& opts) noexcept override;
  Result<std::unique_ptr<SharedReceiveQueue>> create_srq(const SrqOpts& opts) noexcept override;

  ibv_pd* raw() const noexcept { return pd_; }
  IbvDevice& device() const noexcept { return *device_; }

 private:
  ibv_pd* pd_;
  IbvDevice* device_;
};

class IbvMemoryRegion final : public MemoryRegion {
 public:
  IbvMemoryRegion(const RawOps& ops, ibv_mr* mr, uint32_t access) noexcept
      : ops_(&ops), mr_(mr), access_(access) {}
  ~IbvMemoryRegion() override;
  void* addr() const noexcept override { return mr_->addr; }
  size_t length() const noexcept override { return mr_->length; }
  uint32_t lkey() const noexcept override { return mr_->lkey; }
  uint32_t rkey() const noexcept override { return mr_->rkey; }
  uint32_t access() const noexcept override { return access_; }
  ibv_mr* raw() const noexcept { return mr_; }

 private:
  const RawOps* ops_;
  ibv_mr* mr_;
  uint32_t access_;
};

// A type-2 window. rkey() is the key of the most recently *queued* bind (post_send), so that
// next_rkey() is right for a second bind queued before the first is flushed; the raw
// ibv_mw->rkey is set to it at the same time (rdma-core never updates it for type-2 binds,
// and the next bind fails with IBV_WC_MW_BIND_ERR if it is stale; VM.md). A bind that fails
// or is flushed leaves rkey() at the key it asked for while the device keeps the old one:
// after a QP error, deallocate the window rather than bind it again.
class IbvMemoryWindow final : public MemoryWindow {
 public:
  IbvMemoryWindow(const RawOps& ops, ibv_mw* mw) noexcept : ops_(&ops), mw_(mw), rkey_(mw->rkey) {}
  ~IbvMemoryWindow() override;
  uint32_t rkey() const noexcept override { return rkey_; }
  ibv_mw* raw() const noexcept { return mw_; }
  void set_queued_rkey(uint32_t rkey) noexcept { rkey_ = mw_->rkey = rkey; }

 private:
  const RawOps* ops_;
  ibv_mw* mw_;
  uint32_t rkey_;
};

// An SRQ: its ring counts WRs queued or posted and not yet consumed by a RECV completion
// (the CQ poll of any QP attached to it reports consumption).
class IbvSharedReceiveQueue final : public SharedReceiveQueue {
 public:
  static Result<std::unique_ptr<IbvSharedReceiveQueue>> create(const RawOps& ops, ibv_srq* srq,
                                                               uint32_t max_wr,
                                                               uint32_t max_sge) noexcept;
  ~IbvSharedReceiveQueue() override;
  Result<void> post_recv(const RecvWr& wr) noexcept override;
  // One ibv_post_srq_recv. If the provider rejects a WR, the ones before it are posted and it
  // and the rest stay queued; the Error names ibv_post_srq_recv (the log names the WR).
  Result<void> flush() noexcept override;
  uint32_t max_wr() const noexcept override { return ring_.capacity(); }

  ibv_srq* raw() const noexcept { return srq_; }
  uint64_t outstanding() const noexcept { return ring_.outstanding(); }
  void account_consumed() noexcept {  // one RECV completion of an attached QP
    if (ring_.on_device() > 0) ring_.complete_until(ring_.head() + 1);
  }

 private:
  IbvSharedReceiveQueue(const RawOps& ops, ibv_srq* srq) noexcept : ops_(&ops), srq_(srq) {}
  const RawOps* ops_;
  ibv_srq* srq_;
  WrRing<ibv_recv_wr> ring_;
};

// One side (send or receive) of a QP with WRs waiting for software completion: linked on
// the CQ of that side until they are reported.
struct PendingFlush {
  ListNode link;
  IbvQueuePair* qp = nullptr;
  bool receive_side = false;
};

class IbvCompletionQueue final : public CompletionQueue {
 public:
  // Takes ownership of `cq` and `channel` (nullable: no interrupt mode).
  IbvCompletionQueue(const RawOps& ops, ibv_cq* cq, ibv_comp_channel* channel,
                     WcQuirks quirks) noexcept
      : ops_(&ops), cq_(cq), channel_(channel), quirks_(quirks) {}
  ~IbvCompletionQueue() override;
  // Reaps device completions (ibv_poll_cq, in batches of kPollBatch), accounts each against
  // its QP, then reports WRs completed in software (flushed while the QP was in error).
  int poll(std::span<WorkCompletion> out) noexcept override;
  int event_fd() const noexcept override { return channel_ != nullptr ? channel_->fd : -1; }
  Result<void> arm() noexcept override;
  // busy when no event is waiting (the fd is non-blocking).
  Result<void> consume_event() noexcept override;
  uint32_t depth() const noexcept override { return static_cast<uint32_t>(cq_->cqe); }

  ibv_cq* raw() const noexcept { return cq_; }
  // Setup path: a QP whose completions arrive here (keyed by qp_num).
  Result<void> attach(IbvQueuePair* qp) noexcept;
  void detach(IbvQueuePair* qp) noexcept;
  void add_pending(PendingFlush& pending) noexcept {
    if (!pending.link.linked()) pending_.push_back(pending);
  }
  void remove_pending(PendingFlush& pending) noexcept {
    if (pending.link.linked()) pending_.remove(pending);
  }

  static constexpr int kPollBatch = 32;      // ibv_wc on the stack per ibv_poll_cq call
  static constexpr uint32_t kAckBatch = 64;  // CQ events acknowledged at once (a mutex each)

 private:
  size_t report_software(std::span<WorkCompletion> out) noexcept;

  const RawOps* ops_;
  ibv_cq* cq_;
  ibv_comp_channel* channel_;
  WcQuirks quirks_;
  uint32_t unacked_events_ = 0;
  bool poll_error_logged_ = false;
  std::unordered_map<uint32_t, IbvQueuePair*> qps_;
  IntrusiveList<PendingFlush, &PendingFlush::link> pending_;
};

// An RC QP. flush() makes at most one ibv_post_recv and one ibv_post_send.
//
// Busy accounting: outstanding = queued + posted and not known complete. A RECV frees its
// slot at its completion. Send WRs follow the standard selective-signaling rule: when a
// signaled WR completes, it and every earlier WR of the SQ are done (RC completes in order);
// so a caller that posts unsignaled WRs must signal at least one in every max_send_wr, or
// the queue stays busy. In error every outstanding WR completes (flushed, signaled or not).
// The CQ matches a completion to its slot by wr_id; wr_ids must therefore be unique among a
// QP's outstanding WRs (the stack's are context pointers), which also tells a send from a
// receive error when both share one CQ.
//
// Errors: once the QP is in error (move_to_error(), disconnect(), an error completion, or a
// WR rejected by ibv_post_*), flush() no longer rings the device: queued WRs complete in
// software with wr_flush_error through the CQ, after the WRs already on the device.
// A WR rejected by ibv_post_send/recv (bad_wr): the ones before it are on the device; the
// QP is moved to error; the rejected WR completes with local_qp_op_error (vendor_error =
// the errno) and every later one with wr_flush_error; flush() returns the errno. So every
// WR posted through post_*() completes exactly once, whatever happens.
class IbvQueuePair final : public QueuePair {
 public:
  // Takes ownership of `qp` (created on `id` by rdma_create_qp, or without id). `granted`
  // holds the capabilities the device reported. Setup path: allocates the rings and
  // attaches to the CQs.
  static Result<std::unique_ptr<IbvQueuePair>> create(const RawOps& ops, ibv_qp* qp, rdma_cm_id* id,
                                                      const QpOpts& granted,
                                                      IbvCompletionQueue* send_cq,
                                                      IbvCompletionQueue* recv_cq,
                                                      IbvSharedReceiveQueue* srq) noexcept;
  ~IbvQueuePair() override;

  uint32_t qp_num() const noexcept override { return qp_->qp_num; }
  // error when known to be in error; otherwise asks the device (ibv_query_qp: a system call).
  QpState state() const noexcept override;
  const QpOpts& granted() const noexcept override { return granted_; }
  Result<void> post_send(const SendWr& wr) noexcept override;
  Result<void> post_recv(const RecvWr& wr) noexcept override;
  Result<void> flush() noexcept override;
  Result<void> move_to_error() noexcept override;

  // Drain support (not in verbs.h): 0 on both means every WR has completed.
  uint64_t send_outstanding() const noexcept { return send_.outstanding(); }
  uint64_t recv_outstanding() const noexcept { return recv_.outstanding(); }
  bool in_error() const noexcept { return in_error_; }
  uint64_t doorbells() const noexcept { return doorbells_; }
  ibv_qp* raw() const noexcept { return qp_; }

  // CQ side (same thread): account one device completion reaped by `cq`.
  void account(const ibv_wc& wc, const IbvCompletionQueue* cq) noexcept;
  // Reports software-completed WRs of one side into `out`; 0 while WRs of that side are
  // still on the device. `done` is set when nothing is left to report.
  size_t report_software(bool receive_side, std::span<WorkCompletion> out, bool* done) noexcept;
  // The QP went to error outside move_to_error() (rdma_disconnect does it on IB/RoCE).
  void enter_error(bool modify_device) noexcept;

 private:
  IbvQueuePair(const RawOps& ops, ibv_qp* qp, rdma_cm_id* id, const QpOpts& granted) noexcept
      : ops_(&ops), qp_(qp), id_(id), granted_(granted) {}
  Result<void> flush_send() noexcept;
  Result<void> flush_recv() noexcept;
  void flush_queued_in_software() noexcept;
  void account_send(const ibv_wc& wc) noexcept;
  void account_recv() noexcept;
  bool error_is_receive(uint64_t wr_id) const noexcept;

  const RawOps* ops_;
  ibv_qp* qp_;
  rdma_cm_id* id_;
  QpOpts granted_;
  IbvCompletionQueue* send_cq_ = nullptr;
  IbvCompletionQueue* recv_cq_ = nullptr;
  IbvSharedReceiveQueue* srq_ = nullptr;
  WrRing<ibv_send_wr> send_;
  WrRing<ibv_recv_wr> recv_;
  std::unique_ptr<ibv_mw[]> bind_shadows_;  // one per send slot, see to_ibv_send_wr
  PendingFlush send_pending_;
  PendingFlush recv_pending_;
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t send_rejected_ = kNone;  // counter of the WR ibv_post_send rejected
  uint64_t recv_rejected_ = kNone;
  int send_rejected_errno_ = 0;
  int recv_rejected_errno_ = 0;
  bool in_error_ = false;
  uint64_t doorbells_ = 0;
};

// ---------------------------------------------------------------------------------------
// Connection management

class IbvCmChannel;

class IbvCmId final : public CmId {
 public:
  IbvCmId(IbvCmChannel* channel, IbverbsProvider* provider, rdma_cm_id* id) noexcept
      : channel_(channel), provider_(provider), id_(id) {}
  ~IbvCmId() override;
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

  rdma_cm_id* raw() const noexcept { return id_; }
  int resolve_timeout_ms() const noexcept { return resolve_timeout_ms_; }

 private:
  Result<rdma_conn_param> conn_param(const ConnectParams& params, size_t private_data_max,
                                     const char* message) noexcept;

  IbvCmChannel* channel_;
  IbverbsProvider* provider_;
  rdma_cm_id* id_;
  std::unique_ptr<IbvQueuePair> qp_;
  int resolve_timeout_ms_ = 2000;
};

class IbvCmChannel final : public CmChannel {
 public:
  IbvCmChannel(IbverbsProvider* provider, rdma_event_channel* channel) noexcept
      : provider_(provider), channel_(channel) {}
  ~IbvCmChannel() override;
  Result<std::unique_ptr<CmId>> create_id() noexcept override;
  std::unique_ptr<CmId> adopt(CmId* id) noexcept override;
  bool poll_event(CmEvent* event) noexcept override;
  int event_fd() const noexcept override { return channel_->fd; }

 private:
  // Fills `event` from `raw`; false when the event is not surfaced (handled here).
  bool translate(const rdma_cm_event& raw, CmEvent* event) noexcept;

  IbverbsProvider* provider_;
  rdma_event_channel* channel_;
  std::vector<std::unique_ptr<IbvCmId>> unadopted_;  // ids of connect_request events
};

}  // namespace nvmf::verbs::ibverbs
