// The narrow verbs interface: what the stack uses of RDMA and nothing more. Two providers
// implement it: `ibverbs` (rdma-core: any RDMA NIC, soft-RoCE) and `sim` (an in-process HCA
// and fabric with hardware profiles). Only src/verbs/ibverbs* includes <infiniband/verbs.h>
// or <rdma/rdma_cma.h>; everything above speaks these types.
//
// Shape: rdma-core's, trimmed. Objects are created from their parent (Provider -> CmChannel
// -> CmId -> Device -> ProtectionDomain -> MR / MW / CQ / SRQ; CmId::create_qp) and must be
// destroyed children first (RAII in reverse order of creation does that).
//
// Threading: a QP, its CQs and SRQ belong to one thread (a reactor); post/flush/poll on them
// never lock, allocate or throw in the ibverbs provider. The CM channel belongs to one thread.
// Values of the enums below equal rdma-core's, so logs read the same as with ibv_* tools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace nvmf::verbs {

// ---------------------------------------------------------------------------------------
// Work requests and completions

// Completion status; numerically equal to enum ibv_wc_status.
enum class WcStatus : uint8_t {
  success = 0,
  local_length_error = 1,     // IBV_WC_LOC_LEN_ERR: a receive buffer was too small
  local_qp_op_error = 2,      // IBV_WC_LOC_QP_OP_ERR: e.g. LOCAL_INV of a key not bound here
  local_protection_error = 4, // IBV_WC_LOC_PROT_ERR: bad lkey or range in a local SGE
  wr_flush_error = 5,         // IBV_WC_WR_FLUSH_ERR: the QP is in error; WR not executed
  mw_bind_error = 6,          // IBV_WC_MW_BIND_ERR: "memory management operation error"
  bad_response_error = 7,     // IBV_WC_BAD_RESP_ERR
  local_access_error = 8,     // IBV_WC_LOC_ACCESS_ERR
  remote_invalid_request_error = 9,  // IBV_WC_REM_INV_REQ_ERR
  remote_access_error = 10,   // IBV_WC_REM_ACCESS_ERR: peer refused the rkey/range/access
  remote_operation_error = 11,  // IBV_WC_REM_OP_ERR
  retry_exceeded_error = 12,  // IBV_WC_RETRY_EXC_ERR: peer unreachable
  rnr_retry_exceeded_error = 13,  // IBV_WC_RNR_RETRY_EXC_ERR: no receive posted at the peer
  general_error = 21,         // IBV_WC_GENERAL_ERR
};
const char* wc_status_name(WcStatus status) noexcept;

// What completed; numerically equal to enum ibv_wc_opcode.
enum class WcOpcode : uint8_t {
  send = 0,        // SEND and SEND_WITH_INV
  rdma_write = 1,
  rdma_read = 2,
  local_inv = 6,   // IBV_WC_LOCAL_INV
  bind_mw = 5,     // IBV_WC_BIND_MW
  recv = 128,      // IBV_WC_RECV
};
const char* wc_opcode_name(WcOpcode opcode) noexcept;

struct WorkCompletion {
  uint64_t wr_id = 0;          // as posted; the stack stores a pointer to a small context here
  WcStatus status = WcStatus::success;
  WcOpcode opcode = WcOpcode::send;  // valid only when status == success (as in rdma-core)
  bool remote_invalidated = false;   // RECV of a SEND_WITH_INV: normalised across providers
                                     // (rxe sets bit 0x4 instead of IBV_WC_WITH_INV, see VM.md)
  uint32_t byte_len = 0;       // RECV: bytes received; RDMA READ: bytes read
  uint32_t qp_num = 0;
  uint32_t invalidated_rkey = 0;  // valid when remote_invalidated
  uint32_t vendor_error = 0;
};

// Send-queue work request opcodes (the subset the stack uses).
enum class WrOpcode : uint8_t {
  send,           // IBV_WR_SEND
  send_with_inv,  // IBV_WR_SEND_WITH_INV: invalidate `invalidate_rkey` at the peer
  rdma_write,     // IBV_WR_RDMA_WRITE
  rdma_read,      // IBV_WR_RDMA_READ
  local_inv,      // IBV_WR_LOCAL_INV of `invalidate_rkey` (a type-2 window bound on this QP)
  bind_mw,        // IBV_WR_BIND_MW: bind a type-2 window (see SendWr::bind)
};
const char* wr_opcode_name(WrOpcode opcode) noexcept;

// Send flags; values equal IBV_SEND_*. Plain constants (not an enum), so `cond ? kWrSignaled
// : 0` needs no cast.
inline constexpr uint32_t kWrFenced = 1u << 0;    // IBV_SEND_FENCE: wait for prior RDMA READs
                                                  // (and, on the sim's mlx5 profiles, for prior
                                                  // memory-management WRs to take effect)
inline constexpr uint32_t kWrSignaled = 1u << 1;  // IBV_SEND_SIGNALED: a completion on success
inline constexpr uint32_t kWrSolicited = 1u << 2;
inline constexpr uint32_t kWrInline = 1u << 3;    // IBV_SEND_INLINE: payload copied at post

// Memory access rights; values equal IBV_ACCESS_*.
inline constexpr uint32_t kAccessLocalWrite = 1u << 0;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;
inline constexpr uint32_t kAccessRemoteRead = 1u << 2;
inline constexpr uint32_t kAccessMwBind = 1u << 4;

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

class MemoryRegion;
class MemoryWindow;

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::send;
  uint32_t flags = 0;              // WrFlag bits
  const Sge* sg_list = nullptr;    // SEND / SEND_WITH_INV / RDMA: local buffers
  uint32_t num_sge = 0;
  uint64_t remote_addr = 0;        // RDMA READ / WRITE
  uint32_t rkey = 0;               // RDMA READ / WRITE
  uint32_t invalidate_rkey = 0;    // SEND_WITH_INV (peer's key), LOCAL_INV (own window's key)
  struct Bind {
    MemoryWindow* mw = nullptr;    // a type-2 window of this QP's PD
    const MemoryRegion* mr = nullptr;  // registered with kAccessMwBind
    uint64_t addr = 0;
    uint64_t length = 0;
    uint32_t access = 0;           // kAccessRemoteRead / kAccessRemoteWrite
    uint32_t rkey = 0;             // the window's new key: mw->next_rkey() (caller picks it so
                                   // it can go in the command before the bind completes)
  } bind;
};

// A signaled SEND of `num_sge` SGEs at `sg_list`; the poster sets wr_id (and may change
// opcode and flags, e.g. to SEND_WITH_INV).
inline SendWr signaled_send(const Sge* sg_list, uint32_t num_sge) noexcept {
  SendWr wr;
  wr.opcode = WrOpcode::send;
  wr.flags = kWrSignaled;
  wr.sg_list = sg_list;
  wr.num_sge = num_sge;
  return wr;
}

struct RecvWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
};

// ---------------------------------------------------------------------------------------
// Objects

struct DeviceCaps {
  std::string name;                 // "mlx5_0", "rxe0", "sim0"
  uint32_t max_qp_wr = 0;           // per queue
  uint32_t max_sge = 0;
  uint32_t max_cqe = 0;
  uint32_t max_srq_wr = 0;          // 0 = no SRQ support
  uint32_t max_qp_rd_atom = 0;      // RDMA READs this QP may have outstanding as responder
  uint32_t max_qp_init_rd_atom = 0; // ... as initiator
  uint64_t max_mr_size = 0;
  uint32_t max_mw = 0;
  bool memory_window_type2 = false;
  bool memory_management_extensions = false;  // LOCAL_INV / SEND_WITH_INV / BIND by WR
};

class QueuePair;

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual void* addr() const noexcept = 0;
  virtual size_t length() const noexcept = 0;
  virtual uint32_t lkey() const noexcept = 0;
  virtual uint32_t rkey() const noexcept = 0;
  virtual uint32_t access() const noexcept = 0;
};

// A type-2 memory window. Its rkey changes with every bind: the low 8 bits (the "key" part)
// advance, the high 24 bits (the index) stay. rkey() changes when the bind is posted
// (post_send), not when it executes; a bind that fails or is flushed leaves rkey() ahead of
// the device, so after a QP error deallocate the window instead of binding it again.
class MemoryWindow {
 public:
  virtual ~MemoryWindow() = default;
  // The key of the most recently posted bind (or the initial key before any bind).
  virtual uint32_t rkey() const noexcept = 0;
  // The key the next bind should use: rkey() with its low 8 bits incremented (ibv_inc_rkey).
  uint32_t next_rkey() const noexcept {
    uint32_t key = rkey();
    return (key & 0xFFFFFF00u) | ((key + 1) & 0xFFu);
  }
};

struct CqOpts {
  uint32_t depth = 4096;             // completions the CQ holds (SPDK's CQ size)
  bool with_event_fd = false;        // for interrupt mode: event_fd(), arm(), consume_event()
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Reaps up to out.size() completions. Returns how many (0 = none).
  virtual int poll(std::span<WorkCompletion> out) noexcept = 0;
  // Interrupt mode: arm(), then event_fd() becomes readable at the next completion; call
  // consume_event() before re-arming and polling (ibv_get_cq_event + ibv_ack_cq_events).
  virtual int event_fd() const noexcept = 0;  // -1 without with_event_fd
  virtual Result<void> arm() noexcept = 0;
  virtual Result<void> consume_event() noexcept = 0;
  virtual uint32_t depth() const noexcept = 0;  // granted
};

struct SrqOpts {
  uint32_t max_wr = 4096;  // SPDK's max_srq_depth
  uint32_t max_sge = 1;
};

class SharedReceiveQueue {
 public:
  virtual ~SharedReceiveQueue() = default;
  // Queues a receive; reaches the device at flush(). busy when max_wr are queued or posted.
  virtual Result<void> post_recv(const RecvWr& wr) noexcept = 0;
  virtual Result<void> flush() noexcept = 0;
  virtual uint32_t max_wr() const noexcept = 0;  // granted
};

struct QpOpts {
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;  // receives come from the SRQ when set
  uint32_t max_send_wr = 128;
  uint32_t max_recv_wr = 128;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
};

enum class QpState : uint8_t { reset, init, ready_to_receive, ready_to_send, error };
const char* qp_state_name(QpState state) noexcept;

// Completion rules every provider keeps (the sim and ibverbs alike):
// - Every posted WR completes exactly once through its CQ: successfully (signaled WRs only),
//   with an error, or flushed (wr_flush_error) once the QP is in error, whether signaled or
//   not. A flush() that fails does not lose WRs: they still complete, in order, as errors.
// - A successful signaled send completion also retires every earlier unsignaled WR of that
//   send queue (IBTA ordering). So post a signaled WR at least once per max_send_wr WRs, or the
//   send queue stays busy; and keep wr_ids unique among a QP's outstanding WRs.
class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qp_num() const noexcept = 0;
  virtual QpState state() const noexcept = 0;
  virtual const QpOpts& granted() const noexcept = 0;  // what the device gave, >= asked
  // Queue a work request; nothing reaches the device until flush() (one doorbell per poll).
  // Before the QP is connected (RTS), post_send answers bad_state.
  // busy: the queue holds max_send_wr (max_recv_wr) WRs not yet completed; invalid_argument:
  // too many SGEs, or a bind without a window. A QP in error accepts WRs and flushes them
  // with wr_flush_error, as hardware does.
  virtual Result<void> post_send(const SendWr& wr) noexcept = 0;
  virtual Result<void> post_recv(const RecvWr& wr) noexcept = 0;
  virtual Result<void> flush() noexcept = 0;
  // Moves the QP to the error state: every outstanding WR completes with wr_flush_error.
  virtual Result<void> move_to_error() noexcept = 0;
};

class ProtectionDomain {
 public:
  virtual ~ProtectionDomain() = default;
  virtual Result<std::unique_ptr<MemoryRegion>> register_memory(void* addr, size_t length,
                                                                uint32_t access) noexcept = 0;
  virtual Result<std::unique_ptr<MemoryWindow>> allocate_window() noexcept = 0;  // type 2
  virtual Result<std::unique_ptr<CompletionQueue>> create_cq(const CqOpts& opts) noexcept = 0;
  virtual Result<std::unique_ptr<SharedReceiveQueue>> create_srq(const SrqOpts& opts) noexcept = 0;
};

// Asynchronous events of a device: what no completion can report (a QP or CQ that failed
// outside a work request, a port going down, the whole device failing) and notices.
// Numerically equal to enum ibv_event_type. "QP" events name the QP by number, CQ and SRQ
// events name the object, port events the port; device_fatal names nothing.
enum class AsyncEventType : uint8_t {
  cq_error = 0,          // IBV_EVENT_CQ_ERR: the CQ overran or failed; it reports nothing more
  qp_fatal = 1,          // IBV_EVENT_QP_FATAL: an error no CQE could report; QP in error
  qp_request_error = 2,  // IBV_EVENT_QP_REQ_ERR: the responder saw an invalid request; QP in error
  qp_access_error = 3,   // IBV_EVENT_QP_ACCESS_ERR: the responder refused a remote access
                         // (rkey, range, right); QP in error
  comm_established = 4,  // IBV_EVENT_COMM_EST: a message arrived before the CM's RTU; pass it
                         // on with CmId::notify_established
  sq_drained = 5,        // IBV_EVENT_SQ_DRAINED
  path_migrated = 6,     // IBV_EVENT_PATH_MIG
  path_migration_error = 7,  // IBV_EVENT_PATH_MIG_ERR
  device_fatal = 8,          // IBV_EVENT_DEVICE_FATAL: the device is unusable until it is reset
  port_active = 9,           // IBV_EVENT_PORT_ACTIVE
  port_error = 10,           // IBV_EVENT_PORT_ERR: link down; connections over it will fail
  lid_change = 11,           // IBV_EVENT_LID_CHANGE
  pkey_change = 12,          // IBV_EVENT_PKEY_CHANGE
  sm_change = 13,            // IBV_EVENT_SM_CHANGE
  srq_error = 14,            // IBV_EVENT_SRQ_ERR: the SRQ failed; its QPs receive nothing more
  srq_limit_reached = 15,    // IBV_EVENT_SRQ_LIMIT_REACHED (only when a limit was armed)
  qp_last_wqe_reached = 16,  // IBV_EVENT_QP_LAST_WQE_REACHED: an SRQ QP in error consumed its last
  client_reregister = 17,    // IBV_EVENT_CLIENT_REREGISTER
  gid_change = 18,           // IBV_EVENT_GID_CHANGE
  wq_fatal = 19,             // IBV_EVENT_WQ_FATAL (work queues: the stack creates none)
};
inline constexpr size_t kAsyncEventTypeCount = 20;
// "QP_FATAL", "CQ_ERR", ...: rdma-core's names without the IBV_EVENT_ prefix.
const char* async_event_type_name(AsyncEventType type) noexcept;
// The kinds of element an event is about.
enum class AsyncEventSubject : uint8_t { qp, cq, srq, port, device, wq };
AsyncEventSubject async_event_subject(AsyncEventType type) noexcept;

// One event as the provider read it. `cq` and `srq` identify objects of this device: compare
// them with objects you hold, never dereference them (the object may be gone by the time the
// event is handled: a provider acknowledges an event as it reads it, see poll_async_event).
struct AsyncEvent {
  AsyncEventType type = AsyncEventType::device_fatal;
  uint32_t qp_num = 0;                      // subject qp
  const CompletionQueue* cq = nullptr;      // subject cq
  const SharedReceiveQueue* srq = nullptr;  // subject srq
  uint32_t port_num = 0;                    // subject port
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceCaps& caps() const noexcept = 0;
  virtual Result<std::unique_ptr<ProtectionDomain>> allocate_pd() noexcept = 0;
  // Non-blocking: the next asynchronous event of the device into *event, or false when none
  // waits. Events belong to the device, not to a caller: each is handed to one caller only,
  // so a program has one reader per device (the target's acceptor, the host's router). Any
  // thread; the reader serialises its own calls.
  virtual bool poll_async_event(AsyncEvent* event) noexcept = 0;
  // Readable while an event waits (for an epoll loop); -1 when the provider has none.
  virtual int async_event_fd() const noexcept = 0;
};

// ---------------------------------------------------------------------------------------
// Connection management (rdma_cm)

// Private data rides in CM REQ (56 B max), REP (196 B) and REJ (148 B) messages.
inline constexpr size_t kCmPrivateDataMax = 196;

struct ConnectParams {
  const void* private_data = nullptr;
  uint8_t private_data_length = 0;
  uint8_t responder_resources = 0;  // RDMA READs the peer may issue to us at once
  uint8_t initiator_depth = 0;      // RDMA READs we may issue at once
  uint8_t retry_count = 7;          // the kernel host's values
  uint8_t rnr_retry_count = 7;      // 7 = retry forever
};

enum class CmEventType : uint8_t {
  route_resolved,   // resolve() done: create the QP on this id, then connect()
  connect_request,  // passive side: a new CmId (CmEvent::id) wants to connect
  established,
  rejected,         // the peer rejected; private data carries its reason
  unreachable,      // address, route or connect timed out / no listener
  connect_error,
  disconnected,
  device_removal,
};
const char* cm_event_type_name(CmEventType type) noexcept;

class CmId;

struct CmEvent {
  CmEventType type = CmEventType::connect_error;
  CmId* id = nullptr;          // the id the event is about (for connect_request: the new one,
                               // owned by the caller from now on via CmChannel::adopt())
  CmId* listen_id = nullptr;   // connect_request: the listener it arrived on
  int status = 0;              // errors: a positive errno; rejected: the transport's reject
                               // reason (a REJECTED for "no listener" is reported as
                               // unreachable, status ECONNREFUSED)
  uint8_t private_data[kCmPrivateDataMax] = {};
  uint8_t private_data_length = 0;  // as reported by the provider (rdma_cm reports the CM
                                    // maximum, not what was sent: parse by layout, not length)
  // connect_request (and the active side's established): from the RECEIVER's point of view,
  // as ib_cm swaps them: responder_resources = RDMA READs the peer will issue to us,
  // initiator_depth = RDMA READs we may issue to the peer (0: the peer serves none).
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
};

class CmId {
 public:
  virtual ~CmId() = default;
  // Passive side: listen on address:port ("0.0.0.0" = any).
  virtual Result<void> listen(const std::string& address, uint16_t port, int backlog) noexcept = 0;
  // Active side: resolve address and route; route_resolved (or unreachable) follows.
  virtual Result<void> resolve(const std::string& address, uint16_t port, int timeout_ms) noexcept = 0;
  // The device this id is bound to (after route_resolved, or on a connect_request id).
  virtual Device* device() noexcept = 0;
  // Creates the id's RC QP. One per id; destroyed with the id.
  virtual Result<QueuePair*> create_qp(ProtectionDomain& pd, const QpOpts& opts) noexcept = 0;
  virtual QueuePair* qp() noexcept = 0;
  virtual Result<void> connect(const ConnectParams& params) noexcept = 0;
  virtual Result<void> accept(const ConnectParams& params) noexcept = 0;
  virtual Result<void> reject(const void* private_data, uint8_t length) noexcept = 0;
  virtual Result<void> disconnect() noexcept = 0;
  // Passive side, after accept(): tells the CM the connection is established because a
  // message already arrived on this id's QP (AsyncEventType::comm_established: the host's
  // first capsule overtook the CM's ready-to-use message, which may be lost), as
  // rdma_notify(id, IBV_EVENT_COMM_EST) does; without it the CM could still time the
  // connection out. A connection the CM knows is established (the RTU came first) is no error.
  // Errors: bad_state (nothing accepted on this id, or the connection is gone).
  virtual Result<void> notify_established() noexcept = 0;
  // "address:port" of the peer, for logs.
  virtual std::string peer_address() const = 0;
};

class CmChannel {
 public:
  virtual ~CmChannel() = default;
  virtual Result<std::unique_ptr<CmId>> create_id() noexcept = 0;
  // Takes ownership of the CmId that came with a connect_request event.
  virtual std::unique_ptr<CmId> adopt(CmId* id) noexcept = 0;
  // Non-blocking: false when no event is waiting. The event's memory is the caller's copy.
  // CM timeouts (a connect nobody answers) are noticed here: poll it periodically (e.g. from
  // a timer), not only when event_fd() is readable.
  virtual bool poll_event(CmEvent* event) noexcept = 0;
  virtual int event_fd() const noexcept = 0;  // readable when an event waits
};

// A provider: the entry point. Not thread-safe itself; create channels from one thread.
class Provider {
 public:
  virtual ~Provider() = default;
  virtual const char* name() const noexcept = 0;
  virtual std::vector<std::string> device_names() const = 0;
  virtual Result<std::unique_ptr<CmChannel>> create_cm_channel() noexcept = 0;
};

}  // namespace nvmf::verbs
