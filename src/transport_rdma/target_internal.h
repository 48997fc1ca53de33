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
  uint32_t lkey = 0;
  RdmaQpair* qpair = nullptr;       // owner without SRQ; nullptr for SRQ buffers
  DeviceContext* device = nullptr;  // SRQ buffers: whose SRQ they go back to
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
  bool in_advance = false;     // advance() is on the stack for this request
  bool failed = false;         // a WR of it failed or was flushed: no data, no execute
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
  std::vector<uint8_t*> free_data_buffers;  // a stack, filled at creation
  bool send_with_invalidate = false;        // opts allow it and the device has MM extensions
  bool srq_dirty = false;
  // The CQ is shared by the SRQ's receives and every queue pair's sends (and receives without
  // an SRQ): each holds its worst case here, so the CQ can never overrun (a CQ overrun is a
  // fatal async event on real HCAs). A queue pair that would not fit is refused.
  uint32_t cq_capacity = 0;
  uint32_t cq_reserved = 0;
};

enum class RdmaQpairState : uint8_t {
  live,      // accepted: commands flow
  draining,  // disconnecting: QP in error, waits for WRs, requests and the core's qpair
  gone,      // released; the object is about to be freed
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

  // Messages from the acceptor (ctx = Connection*).
  static void on_new_connection(void* ctx) noexcept;
  static void on_disconnect_event(void* ctx) noexcept;

  // TransportOps for the target core.
  static void core_request_complete(void* ctx, target::Request& req) noexcept;
  static void core_qpair_disconnect(void* ctx, target::Qpair& qpair) noexcept;

 private:
  friend class RdmaQpair;
  static int poll_fn(void* ctx, unsigned budget) noexcept;
  int poll(unsigned budget) noexcept;

  void accept_connection(Connection& connection) noexcept;
  Result<DeviceContext*> device_context(verbs::Device& device) noexcept;
  Result<std::unique_ptr<RdmaQpair>> make_qpair(Connection& connection, DeviceContext& device);

  void handle_completion(const verbs::WorkCompletion& wc) noexcept;
  void handle_recv(const verbs::WorkCompletion& wc, RecvBuffer& buffer) noexcept;
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

  void begin_teardown(RdmaQpair& qpair, const char* why) noexcept;
  void drive_teardowns() noexcept;
  void finish_teardown(RdmaQpair& qpair) noexcept;
  // Hands `connection` to the acceptor (reactor 0) to free; with its ring full, keeps it for
  // the next poll instead of spinning (the acceptor may be the one waiting on this reactor).
  void release_to_acceptor(Connection& connection) noexcept;
  bool retry_releases() noexcept;

  RdmaTargetTransport& transport_;
  reactor::Reactor& reactor_;
  reactor::Poller poller_;
  std::unique_ptr<env::PosixMemoryBackend> memory_;
  std::vector<std::unique_ptr<DeviceContext>> devices_;
  std::vector<std::unique_ptr<RdmaQpair>> qpairs_;
  std::unordered_map<uint32_t, RdmaQpair*> by_qp_num_;  // filled at accept (setup path)
  IntrusiveList<RdmaRequest, &RdmaRequest::link> buffer_waiters_;
  IntrusiveList<RdmaQpair, &RdmaQpair::dirty_link> dirty_;
  std::vector<RdmaQpair*> draining_;
  std::vector<Connection*> pending_releases_;  // the acceptor's ring was full
  std::atomic<uint64_t> cq_full_refusals_{0};
};

}  // namespace nvmf::transport_rdma
