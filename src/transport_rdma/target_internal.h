// Internals of the RDMA target transport, shared by its .cpp files and white-box tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/intrusive_list.h"
#include "env/memory.h"
#include "env/posix_memory.h"
#include "env/ring.h"
#include "transport_rdma/sgl_parse.h"
#include "transport_rdma/target_transport.h"

namespace nvmf::transport_rdma {

class RdmaQpair;
struct RdmaRequest;

// What a work request's wr_id points at (STYLE 6: the completion knows what completed).
enum class WrKind : uint8_t { recv, rdma_read, send_side };
struct WrContext {
  WrKind kind;
  void* owner;  // RecvBuffer* or RdmaRequest*
};

// One receive buffer: the 64-byte command capsule plus in-capsule data.
struct DeviceContext;

struct RecvBuffer {
  WrContext ctx{WrKind::recv, this};
  uint8_t* data = nullptr;
  RdmaQpair* qpair = nullptr;       // owner without SRQ; nullptr for SRQ buffers
  DeviceContext* device = nullptr;  // SRQ buffers: whose SRQ they go back to
  // The receive that hands the buffer to the HCA, built once: it is posted again after every
  // command (repost_recv()), and never changes.
  verbs::Sge sge;
  verbs::RecvWr wr;

  // Setup path: the buffer is `bytes` at `memory` (registered with `lkey`).
  void place(uint8_t* memory, uint32_t bytes, uint32_t lkey) noexcept {
    data = memory;
    sge = verbs::Sge{reinterpret_cast<uint64_t>(memory), bytes, lkey};
    wr = verbs::RecvWr{reinterpret_cast<uint64_t>(&ctx), &sge, 1};
  }
};

// Request lifecycle (STYLE 3). Each state names what it waits for; advance() moves it on.
enum class RdmaRequestState : uint8_t {
  free,              // on its queue pair's free list
  received,          // a capsule arrived: parse the SQE and its SGL
  need_buffer,       // keyed data: waits for data buffers of the poll group
  ready_to_read,     // host->controller data: waits for room in the send queue for READs
  reading,           // RDMA READs of the host's data posted: waits for the last one
  ready_to_execute,  // data (if any) is here: hand it to the target core
  executing,         // inside the target core: waits for request_complete
  ready_to_respond,  // the core answered: waits for room in the send queue
  responding,        // data WRITEs and the response SEND posted: waits for the SEND
  completed,         // every WR retired: release buffers, repost the receive, free
};
const char* rdma_request_state_name(RdmaRequestState state) noexcept;

// A command uses at most 16 READs or 16 WRITEs + 1 SEND.
inline constexpr uint32_t kWrsPerRequestMax = kKeyedDescriptorsMax + 1;

struct RdmaRequest {
  target::Request core;  // core.transport_ctx points back here
  RdmaQpair* qpair = nullptr;
  RdmaRequestState state = RdmaRequestState::free;
  bool in_advance = false;  // advance() is on the stack for this request
  bool failed = false;      // a WR of it failed or was flushed: no data, no execute
  // An Abort came while its RDMA READs were posted: once they end, it is answered Command
  // Abort Requested (target::refuse_aborted) instead of executed.
  bool abort_after_read = false;
  RecvBuffer* recv = nullptr;  // the capsule; kept until completion (in-capsule data)
  uint32_t recv_length = 0;
  ParsedSgl sgl;
  uint32_t buffer_count = 0;  // data buffers taken from the group
  uint8_t* buffers[target::kRequestIovMax] = {};
  uint32_t wrs_outstanding = 0;   // posted WRs not yet retired
  uint32_t send_queue_slots = 0;  // of the QP's send queue, held until retirement
  spec::Cqe* response = nullptr;  // registered 16-byte slot
  WrContext wr_ctx[kWrsPerRequestMax];
  ListNode link;  // free list, buffer wait list or send wait list
};

// Per poll group and device: protection domain, CQ, SRQ, receive and data buffers.
struct DeviceContext {
  verbs::Device* device = nullptr;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::unique_ptr<verbs::SharedReceiveQueue> srq;
  env::DmaRegion recv_region;
  std::unique_ptr<verbs::MemoryRegion> recv_mr;
  std::unique_ptr<RecvBuffer[]> srq_buffers;  // never moved: wr_ids point into it
  uint32_t srq_buffer_count = 0;
  env::DmaRegion data_region;
  std::unique_ptr<verbs::MemoryRegion> data_mr;
  uint32_t data_lkey = 0;                   // data_mr's, read per data WR without a virtual call
  std::vector<uint8_t*> free_data_buffers;  // a stack, filled at creation
  bool send_with_invalidate = false;        // opts allow it and the device has MM extensions
  bool srq_dirty = false;
  // The CQ is shared by the SRQ's receives and every queue pair's sends (and receives without
  // an SRQ): each holds its worst case here, so the CQ can never overrun (a CQ overrun is a
  // fatal async event on real HCAs). A queue pair that would not fit is refused.
  uint32_t cq_capacity = 0;
  uint32_t cq_reserved = 0;
  // Its CQ or SRQ (or the device) failed (an async event): no completion comes from it any
  // more, and no new queue pair goes on it. Kept (RdmaPollGroup::retired_devices_) until the
  // group goes, because its QPs are destroyed later, by the acceptor.
  bool failed = false;
};

// An async event of `device`, from the acceptor to a poll group.
struct DeviceAsyncEvent {
  verbs::Device* device = nullptr;
  verbs::AsyncEvent event;
};

// Events waiting for one poll group: a burst far beyond what devices raise (one per QP that
// fails, a few per port or device event); more are dropped and logged.
inline constexpr size_t kAsyncEventRingSize = 256;
// A device the acceptor reads async events from (every device a listener or connection uses).
struct WatchedDevice {
  WatchedDevice(RdmaTargetTransport& owner, verbs::Device& watched) noexcept
      : transport(owner),
        device(watched),
        poller("rdma_async_events", &RdmaTargetTransport::async_event_poll, this) {}
  RdmaTargetTransport& transport;
  verbs::Device& device;
  // On the acceptor's reactor, with the device's async event fd, timed like the CM channel's
  // (RdmaTargetOpts::acceptor_poll_period_us): rdma-core pays a system call per read, and the
  // events are rare and never urgent to the microsecond.
  reactor::Poller poller;
  bool fatal = false;      // DEVICE_FATAL seen: nothing on it is used again
};

enum class RdmaQpairState : uint8_t {
  live,      // accepted: commands flow
  draining,  // disconnecting: QP in error, waits for WRs, requests and the core's qpair
  gone,      // released; the object is about to be freed, or (an orphan) waits for the
             // requests the core lent to a bdev: its QP, CM id and connection are gone
};

class RdmaQpair {
 public:
  RdmaQpair(RdmaPollGroup& group, Connection& connection, DeviceContext& device);
  ~RdmaQpair();

  RdmaPollGroup& group;
  Connection& connection;
  DeviceContext& device;
  verbs::QueuePair* qp = nullptr;
  target::Qpair* core = nullptr;
  RdmaQpairState state = RdmaQpairState::live;
  uint16_t depth = 0;
  uint32_t request_count = 0;  // of `requests`
  uint32_t send_queue_size = 0;
  uint32_t cq_reserved = 0;  // this queue pair's share of DeviceContext::cq_reserved
  uint32_t send_queue_used = 0;
  uint32_t recvs_posted = 0;  // without SRQ
  uint32_t requests_in_use = 0;
  bool dirty = false;
  bool teardown_logged = false;
  std::unique_ptr<RdmaRequest[]> requests;  // never moved: wr_ids and lists point into it
  IntrusiveList<RdmaRequest, &RdmaRequest::link> free_requests;
  IntrusiveList<RdmaRequest, &RdmaRequest::link> send_waiters;
  env::DmaRegion response_region;
  std::unique_ptr<verbs::MemoryRegion> response_mr;
  uint32_t response_lkey = 0;  // response_mr's, read per response without a virtual call
  std::unique_ptr<RecvBuffer[]> recv_buffers;  // without SRQ
  env::DmaRegion recv_region;
  std::unique_ptr<verbs::MemoryRegion> recv_mr;
  ListNode dirty_link;
};

// The acceptor's record of one connection. The CM id (and its QP) live here until the poll
// group is done with them.
struct Connection {
  RdmaTargetTransport* transport = nullptr;
  RdmaPollGroup* group = nullptr;
  std::unique_ptr<verbs::CmId> id;
  ConnectDecision decision;
  RdmaQpair* qpair = nullptr;  // the group's; touched only on the group's thread
  bool released = false;       // acceptor: the group let go
  // A forwarded CM event in flight to the group (one slot: only disconnects matter).
  std::atomic<verbs::CmEventType> pending_event{verbs::CmEventType::established};
  // Forwarded events not yet run by the group: the acceptor frees a released connection only
  // when this is 0, so no queued message points at freed memory.
  std::atomic<uint32_t> messages_in_flight{0};
};

class RdmaPollGroup {
 public:
  RdmaPollGroup(RdmaTargetTransport& transport, reactor::Reactor& reactor);
  ~RdmaPollGroup();

  reactor::Reactor& reactor() const noexcept { return reactor_; }
  size_t qpair_count() const noexcept { return qpairs_.size(); }
  // Connections refused because the CQ had no room for them (any thread).
  uint64_t cq_full_refusals() const noexcept {
    return cq_full_refusals_.load(std::memory_order_relaxed);
  }
  // Commands that waited for data buffers, and for room in their send queue (any thread).
  uint64_t buffer_waits() const noexcept { return buffer_waits_.load(std::memory_order_relaxed); }
  uint64_t send_queue_waits() const noexcept {
    return send_queue_waits_.load(std::memory_order_relaxed);
  }
  // COMM_EST events passed on to the CM (any thread).
  uint64_t established_notifications() const noexcept {
    return established_notifications_.load(std::memory_order_relaxed);
  }

  // Messages from the acceptor (ctx = Connection*).
  static void on_new_connection(void* ctx) noexcept;
  static void on_disconnect_event(void* ctx) noexcept;
  // Async events from the acceptor: queue_async_event (acceptor thread; false when the ring
  // is full), then the message on_async_events (ctx = this group) runs what was queued.
  bool queue_async_event(const DeviceAsyncEvent& event) noexcept {
    return async_events_.try_push(event);
  }
  static void on_async_events(void* ctx) noexcept;
  // Owner thread: closes what the event breaks (QP, CQ or SRQ error, device fatal), tells
  // the CM of a QP's early message (COMM_EST).
  void handle_async_event(const DeviceAsyncEvent& event) noexcept;

  // TransportOps for the target core.
  static void core_request_complete(void* ctx, target::Request& req) noexcept;
  static void core_qpair_disconnect(void* ctx, target::Qpair& qpair) noexcept;
  static void core_request_released(void* ctx, target::Request& req) noexcept;
  static target::TransportAbort core_abort_request(void* ctx, target::Qpair& qpair,
                                                   uint16_t cid) noexcept;

 private:
  friend class RdmaQpair;
  static int poll_fn(void* ctx, unsigned budget) noexcept;
  int poll(unsigned budget) noexcept;
  // The reactor is about to sleep (interrupt or adaptive mode): each CQ's event of its last
  // arm is consumed and the CQ armed again.
  static void arm_fn(void* ctx) noexcept;

  void accept_connection(Connection& connection) noexcept;
  Result<DeviceContext*> device_context(verbs::Device& device) noexcept;
  Result<std::unique_ptr<RdmaQpair>> make_qpair(Connection& connection, DeviceContext& device);

  void handle_completion(const verbs::WorkCompletion& wc) noexcept;
  void handle_recv(const verbs::WorkCompletion& wc, RecvBuffer& buffer) noexcept;
  // The live queue pair of QP number `qp_num` (an SRQ receive names only that), or nullptr.
  RdmaQpair* qpair_by_num(uint32_t qp_num) noexcept;
  void retire_wr(RdmaRequest& req, const WrContext& ctx, const verbs::WorkCompletion& wc) noexcept;

  void advance(RdmaRequest& req) noexcept;
  bool take_buffers(RdmaRequest& req) noexcept;
  // Both return false when the send queue has no room; the request then waits on the
  // queue pair's send_waiters and is retried after completions free slots.
  bool post_reads(RdmaRequest& req) noexcept;
  // After posting `wrs` send-queue WRs for req: they hold send-queue slots until retired, the
  // request waits in `next`, and the QP needs a doorbell.
  void account_posted(RdmaRequest& req, uint32_t wrs, RdmaRequestState next) noexcept;
  // One RDMA READ or WRITE per keyed descriptor, over the request's data buffers.
  void post_data_wrs(RdmaRequest& req, verbs::WrOpcode opcode, bool signal_last) noexcept;
  bool post_response(RdmaRequest& req) noexcept;
  void release(RdmaRequest& req) noexcept;
  void repost_recv(RecvBuffer& buffer) noexcept;
  void mark_dirty(RdmaQpair& qpair) noexcept;
  void flush_dirty() noexcept;
  // Builds SGEs over the request's data buffers for [offset, offset + length).
  uint32_t build_sges(const RdmaRequest& req, uint32_t offset, uint32_t length,
                      verbs::Sge* sges) const noexcept;

  // An Abort of command `cid`: answers it now if it waits here for buffers or send-queue
  // room, or marks it to be answered when its RDMA READs end.
  target::TransportAbort abort_waiting_command(RdmaQpair& qpair, uint16_t cid) noexcept;
  // Adds one to a counter only this group's thread writes (others read it).
  void count_owned(std::atomic<uint64_t>& counter) noexcept;

  // The queue pair a QP event names, when it is this group's (every group hears every event).
  RdmaQpair* qpair_of(const DeviceAsyncEvent& item) const noexcept;
  void notify_established(const DeviceAsyncEvent& item) noexcept;

  void begin_teardown(RdmaQpair& qpair, const char* why) noexcept;
  // A CQ, SRQ or device error: every queue pair on `context` is closed, and the context is
  // kept aside (failed) so that later connections get a new one. `log_line`: say so (a
  // device fatal error is logged once by the acceptor instead).
  void retire_device_context(DeviceContext& context, const char* why, bool log_line) noexcept;
  // Adds (or removes) a CQ's event fd to (from) wake_fd_, made on first use.
  Result<void> watch_cq(const verbs::CompletionQueue& cq) noexcept;
  void unwatch_cq(const verbs::CompletionQueue& cq) noexcept;
  // A queue pair on a failed context: its WRs will never complete; retire them by hand.
  void forget_outstanding_wrs(RdmaQpair& qpair) noexcept;
  void drive_teardowns() noexcept;
  void finish_teardown(RdmaQpair& qpair) noexcept;
  // A torn-down queue pair whose requests the core still lends to a bdev: kept (without its
  // QP, CM id and CQ room) until request_released has given back the last one.
  void free_orphan(RdmaQpair& qpair) noexcept;
  bool only_lent_requests_left(const RdmaQpair& qpair) const noexcept;
  // Hands `connection` to the acceptor (reactor 0) to free; with its ring full, keeps it for
  // the next poll instead of spinning (the acceptor may be the one waiting on this reactor).
  void release_to_acceptor(Connection& connection) noexcept;
  bool retry_releases() noexcept;

  RdmaTargetTransport& transport_;
  reactor::Reactor& reactor_;
  reactor::Poller poller_;
  std::unique_ptr<env::PosixMemoryBackend> memory_;
  std::vector<std::unique_ptr<DeviceContext>> devices_;
  std::vector<std::unique_ptr<DeviceContext>> retired_devices_;  // failed; see DeviceContext
  // Interrupt and adaptive mode: an epoll fd holding every live device's CQ event fd, which
  // the reactor watches for this group's poller (it takes one fd per poller); -1 in poll mode.
  int wake_fd_ = -1;
  env::MpscRing<DeviceAsyncEvent> async_events_{kAsyncEventRingSize};
  std::vector<std::unique_ptr<RdmaQpair>> qpairs_;
  std::vector<std::unique_ptr<RdmaQpair>> orphans_;     // see free_orphan
  std::unordered_map<uint32_t, RdmaQpair*> by_qp_num_;  // filled at accept (setup path)
  // by_qp_num_'s last answer (nullptr: none; reset when the map changes): consecutive SRQ
  // receives mostly come from one queue pair, and a hash lookup per command costs more than
  // the rest of handle_recv.
  RdmaQpair* last_found_ = nullptr;
  uint32_t last_found_qp_num_ = 0;
  IntrusiveList<RdmaRequest, &RdmaRequest::link> buffer_waiters_;
  IntrusiveList<RdmaQpair, &RdmaQpair::dirty_link> dirty_;
  std::vector<RdmaQpair*> draining_;
  std::vector<Connection*> pending_releases_;  // the acceptor's ring was full
  std::atomic<uint64_t> cq_full_refusals_{0};
  std::atomic<uint64_t> buffer_waits_{0};      // written by the owner thread only
  std::atomic<uint64_t> send_queue_waits_{0};  // written by the owner thread only
  std::atomic<uint64_t> established_notifications_{0};  // written by the owner thread only
  // The work requests this group posts per command, reused: a verbs::SendWr (80 bytes) or an
  // Sge array (16 entries, where a 4 KiB I/O fills one) declared per WR is zeroed each time,
  // which costs more than the fields set. The provider copies a WR and its SGEs when it is
  // posted, and only this thread builds them. Each is written by one function, which sets
  // every field its opcodes read.
  verbs::SendWr data_wr_;  // post_data_wrs(): RDMA READ / WRITE
  verbs::Sge data_sges_[target::kRequestIovMax];
  verbs::Sge response_sge_;
  // post_response(): SEND / SEND_WITH_INV of the response CQE.
  verbs::SendWr response_wr_ = verbs::signaled_send(&response_sge_, 1);
};

}  // namespace nvmf::transport_rdma
