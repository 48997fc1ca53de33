#include "transport_rdma/host_queue.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "spec/fabrics.h"
#include "spec/rdma_cm.h"
#include "spec/status.h"
#include "transport_rdma/completion_batch.h"
#include "transport_rdma/host_wr_id.h"

NVMF_LOG_COMPONENT(rdma_host);

namespace nvmf::transport_rdma {

namespace {

// A capsule holds the SQE and, for several iovecs, a Last Segment list of keyed descriptors.
constexpr uint32_t kMaxIovecs = kHostMaxIovecs;
constexpr uint32_t kCapsuleStride = sizeof(spec::Sqe) + kMaxIovecs * spec::sgl_descriptor_size;
// SGEs of one SEND: the SQE plus the caller's buffers for in-capsule data.
constexpr uint32_t kMaxSendSges = 1 + kMaxIovecs;
constexpr uint32_t kNoCid = 0xFFFF;
using namespace host_wr;  // the wr_id layout (host_wr_id.h)
// Check the CM channel (a disconnect from the target) once per this many polls: on rdma-core
// it costs a system call.
constexpr uint32_t kCmPollInterval = 256;
constexpr uint32_t kCqBatch = 32;
// How long disconnect() waits for the HCA to hand back every WR after moving the QP to error.
constexpr uint64_t kDrainTimeoutNs = 5ull * 1000 * 1000 * 1000;

spec::Cqe make_aborted_cqe(const HostCommand& command, uint16_t sqid,
                           const spec::Status& status = spec::generic_status(
                               spec::sc_generic::aborted_sq_deletion)) {
  spec::Cqe cqe{};
  cqe.cid = command.cid;
  cqe.sqid = sqid;
  cqe.set_status(status);
  return cqe;
}

// A send-queue WR the QP took, into the stats (HostQueueStats: what a key policy costs). By
// its wr_id kind, which names its opcode (a bind BIND_MW, a LOCAL_INV LOCAL_INV, the capsule and
// the drain SEND) and is a constant where post_send_wr() is inlined, unlike wr.opcode.
void count_posted(uint64_t kind, const verbs::SendWr& wr, HostQueueStats* stats) noexcept {
  switch (kind) {
    case kKindBind:
      ++stats->binds_posted;
      break;
    case kKindLocalInv:
      ++stats->local_invalidates_posted;
      break;
    default:  // kKindCapsule, kKindDrain: the host posts no RDMA READ / WRITE, nor SEND_WITH_INV
      ++stats->sends_posted;
      break;
  }
  if ((wr.flags & verbs::kWrSignaled) != 0) ++stats->signaled_posted;
  if ((wr.flags & verbs::kWrFenced) != 0) ++stats->fenced_posted;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// HostDomains

HostDomains::~HostDomains() {
  for (Entry& entry : entries_) map_.detach(entry.index);
}

Result<HostDomains::Domain> HostDomains::get(verbs::Device& device) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& entry : entries_) {
    if (entry.device == &device) return Domain{entry.pd.get(), entry.index};
  }
  auto pd = device.allocate_pd();
  if (!pd) return Unexpected(pd.error());
  auto index = map_.attach(**pd);
  if (!index) return Unexpected(index.error());
  Entry entry;
  entry.device = &device;
  entry.pd = std::move(*pd);
  entry.index = *index;
  entries_.push_back(std::move(entry));  // setup-path
  return Domain{entries_.back().pd.get(), entries_.back().index};
}

const char* host_queue_state_name(HostQueueState state) noexcept {
  switch (state) {
    case HostQueueState::resolving: return "resolving";
    case HostQueueState::connecting: return "connecting";
    case HostQueueState::connected: return "connected";
    case HostQueueState::failed: return "failed";
    case HostQueueState::disconnected: return "disconnected";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------
// HostQueue

struct HostQueue::Resources {
  std::unique_ptr<verbs::CmChannel> channel;
  std::unique_ptr<verbs::CmId> id;
  HostDomains::Domain domain;
  std::unique_ptr<verbs::CompletionQueue> cq;
  verbs::QueuePair* qp = nullptr;
  uint32_t max_send_sges = 1;
  verbs::DeviceCaps caps;  // the device's, kept for key policies built after the route goes
  std::unique_ptr<memreg::KeyPolicy> keys;
  // The policy a switch replaced, while the HCA may still hold WRs naming its windows.
  std::unique_ptr<memreg::KeyPolicy> retired_keys;
  std::vector<HostCommand> commands;  // index = CID
  uint8_t* capsules = nullptr;        // commands.size() x kCapsuleStride, from the memory map
  uint32_t capsule_lkey = 0;
  spec::Cqe* responses = nullptr;     // commands.size() receive buffers
  uint32_t response_lkey = 0;
  // The receive of each response buffer (index = buffer), built once: post_receive() posts it
  // again after every response.
  std::vector<verbs::Sge> response_sges;
  std::vector<verbs::RecvWr> response_wrs;
  memreg::MemoryMap* map = nullptr;
  // The SGEs of the capsule SEND post_command() builds, reused: an Sge array declared per
  // command zeroes all 17 entries (272 bytes) where most commands fill one. The provider copies
  // them when the WR is posted.
  verbs::Sge send_sges[kMaxSendSges];
  // The capsule SEND itself, reused for the same reason (a SendWr is 80 bytes): only its
  // wr_id and num_sge change from command to command.
  verbs::SendWr capsule_wr = verbs::signaled_send(send_sges, 1);
  // The chunk of the last data buffer translated (memory_map.h): I/O buffers mostly come
  // from one chunk.
  memreg::KeyCache data_keys;

  void drop_connection() {
    id.reset();  // the QP goes with its id, before the CQ
    cq.reset();
    channel.reset();
    qp = nullptr;
  }
  ~Resources() {
    drop_connection();
    retired_keys.reset();
    keys.reset();
    if (map != nullptr) {
      map->free(capsules);
      map->free(responses);
    }
  }
};

HostQueue::HostQueue(verbs::Provider& provider, HostDomains& domains, const HostQueueOpts& opts)
    : provider_(provider),
      domains_(domains),
      opts_(opts),
      clock_(opts.clock != nullptr ? opts.clock : &monotonic_),
      res_(std::make_unique<Resources>()) {}  // setup-path

HostQueue::~HostQueue() {
  disconnect();
  unwatch(&watched_cq_fd_);
  unwatch(&watched_cm_fd_);
  domains_.async_events().remove(async_watch_);
  while (free_.pop() != nullptr) {
  }
}

const memreg::KeyPolicy* HostQueue::key_policy() const noexcept { return res_->keys.get(); }

Result<std::unique_ptr<HostQueue>> HostQueue::create(verbs::Provider& provider,
                                                     HostDomains& domains,
                                                     const HostQueueOpts& opts) noexcept {
  if (opts.entries < 2) return Unexpected(Errc::invalid_argument, "queue needs 2 entries or more");
  std::unique_ptr<HostQueue> queue(new HostQueue(provider, domains, opts));  // setup-path
  auto started = queue->start();
  if (!started) return Unexpected(started.error());
  return queue;
}

Result<void> HostQueue::start() noexcept {
  auto channel = provider_.create_cm_channel();
  if (!channel) return Unexpected(channel.error());
  res_->channel = std::move(*channel);
  auto watched = watch(res_->channel->event_fd(), kWakeConnection, &watched_cm_fd_);
  if (!watched) return watched;
  auto id = res_->channel->create_id();
  if (!id) return Unexpected(id.error());
  res_->id = std::move(*id);
  deadline_ns_ = clock_->now_ns() + uint64_t{opts_.connect_timeout_ms} * 1000 * 1000;
  // rdma_cm on the 6.1 kernel reports a resolved address only when this timeout expires if
  // the peer needed ARP (seen in the VM tier), so it must be well inside the connect deadline:
  // 2 s, rping's value, leaves the rest of it for the route and the connect.
  const int timeout_ms = static_cast<int>(std::min<uint32_t>(opts_.connect_timeout_ms, 2000));
  auto resolved = res_->id->resolve(opts_.address, opts_.port, timeout_ms);
  if (!resolved) return Unexpected(resolved.error());
  state_ = HostQueueState::resolving;
  return {};
}

Result<void> HostQueue::create_buffers() noexcept {
  verbs::Device* device = res_->id->device();
  if (device == nullptr) return Unexpected(Errc::bad_state, "no RDMA device behind the route");
  auto domain = domains_.get(*device);
  if (!domain) return Unexpected(domain.error());
  res_->domain = *domain;
  memreg::MemoryMap& map = domains_.map();
  res_->map = &map;

  const uint32_t entries = opts_.entries;
  res_->commands.resize(entries);  // setup-path
  for (uint32_t i = 0; i < entries; ++i) res_->commands[i].cid = static_cast<uint16_t>(i);
  res_->capsules = static_cast<uint8_t*>(map.allocate(size_t{entries} * kCapsuleStride));
  res_->responses = static_cast<spec::Cqe*>(map.allocate(size_t{entries} * sizeof(spec::Cqe)));
  if (res_->capsules == nullptr || res_->responses == nullptr) {
    return Unexpected(Errc::no_memory, "capsule and response buffers");
  }
  memreg::Keys keys;
  if (!map.translate(res_->domain.index, res_->capsules, size_t{entries} * kCapsuleStride, &keys)) {
    return Unexpected(Errc::bad_state, "capsule buffers not registered");
  }
  res_->capsule_lkey = keys.lkey;
  if (!map.translate(res_->domain.index, res_->responses, size_t{entries} * sizeof(spec::Cqe),
                     &keys)) {
    return Unexpected(Errc::bad_state, "response buffers not registered");
  }
  res_->response_lkey = keys.lkey;
  res_->response_sges.resize(entries);  // setup-path
  res_->response_wrs.resize(entries);   // setup-path
  for (uint32_t i = 0; i < entries; ++i) {
    res_->response_sges[i] = verbs::Sge{reinterpret_cast<uint64_t>(&res_->responses[i]),
                                        sizeof(spec::Cqe), res_->response_lkey};
    res_->response_wrs[i] =
        verbs::RecvWr{make_wr_id(kKindRecv, 0, 0, i), &res_->response_sges[i], 1};
  }

  res_->caps = device->caps();  // setup-path: copies the device name
  memreg::KeyPolicyOpts key_opts;
  key_opts.kind = opts_.key_policy;
  key_opts.depth = entries;
  auto policy = memreg::KeyPolicy::create(*res_->domain.pd, res_->caps, key_opts);
  if (!policy) return Unexpected(policy.error());
  res_->keys = std::move(*policy);
  return {};
}

Result<void> HostQueue::create_qp() noexcept {
  verbs::Device* device = res_->id->device();
  if (device == nullptr) return Unexpected(Errc::bad_state, "no RDMA device behind the route");
  const uint32_t entries = opts_.entries;
  const verbs::DeviceCaps& caps = device->caps();
  // Per command: the SEND, a BIND_MW before it and a LOCAL_INV after its response (window
  // policies): three send WRs; an unsignaled LOCAL_INV is retired by the next signaled SEND.
  verbs::CqOpts cq_opts;
  cq_opts.depth = std::min<uint32_t>(entries * 4, caps.max_cqe != 0 ? caps.max_cqe : entries * 4);
  cq_opts.with_event_fd = opts_.wake_epoll_fd >= 0;
  auto cq = res_->domain.pd->create_cq(cq_opts);
  if (!cq) return Unexpected(cq.error());
  res_->cq = std::move(*cq);
  cq_armed_ = false;
  auto watched = watch(res_->cq->event_fd(), kWakeCompletion, &watched_cq_fd_);
  if (!watched) return watched;

  verbs::QpOpts qp_opts;
  qp_opts.send_cq = res_->cq.get();
  qp_opts.recv_cq = res_->cq.get();
  qp_opts.max_send_wr = entries * 3;
  qp_opts.max_recv_wr = entries;
  qp_opts.max_send_sge = std::max<uint32_t>(1, std::min(caps.max_sge, kMaxSendSges));
  qp_opts.max_recv_sge = 1;
  auto qp = res_->id->create_qp(*res_->domain.pd, qp_opts);
  if (!qp) return Unexpected(qp.error());
  res_->qp = *qp;
  res_->max_send_sges = res_->qp->granted().max_send_sge;
  domains_.async_events().add(async_watch_, *device, res_->qp->qp_num(), *res_->cq);
  send_posted_ = 0;
  send_retired_ = 0;
  recv_wrs_posted_ = 0;

  for (uint32_t i = 0; i < entries; ++i) post_receive(i);
  auto flushed = res_->qp->flush();
  if (!flushed) return Unexpected(flushed.error());
  doorbell_due_ = false;
  return {};
}

// Inline, as finish(): once per response, from handle_response().
inline void HostQueue::post_receive(uint32_t index) noexcept {
  if (res_->qp->post_recv(res_->response_wrs[index])) {
    ++recv_wrs_posted_;
    doorbell_due_ = true;
  } else {
    enter_error("cannot post a receive");
  }
}

// Inline: the capsule SEND of every command goes through here (post_command()).
inline Result<void> HostQueue::post_send_wr(verbs::SendWr& wr, uint8_t kind, uint32_t window,
                                            uint32_t cid) noexcept {
  wr.wr_id = make_wr_id(kind, send_posted_, window, cid);
  auto posted = res_->qp->post_send(wr);
  if (!posted) return posted;
  send_posted_ = (send_posted_ + 1) & kSeqMask;
  doorbell_due_ = true;
  count_posted(kind, wr, &stats_);
  return {};
}

void HostQueue::fail(Errc code, const char* reason, uint16_t reject_status) noexcept {
  failure_.code = code;
  failure_.reason = reason;
  failure_.reject_status = reject_status;
  state_ = HostQueueState::failed;
  NVMF_INFOLOG(rdma_host, "queue %u to %s:%u: %s", opts_.qid, opts_.address.c_str(), opts_.port,
               reason);
}

HostQueueState HostQueue::progress_connect() noexcept {
  if (state_ != HostQueueState::resolving && state_ != HostQueueState::connecting) return state_;
  verbs::CmEvent event;
  while (res_->channel->poll_event(&event)) {
    handle_cm_event(event);
    if (state_ != HostQueueState::resolving && state_ != HostQueueState::connecting) break;
  }
  if ((state_ == HostQueueState::resolving || state_ == HostQueueState::connecting) &&
      clock_->now_ns() >= deadline_ns_) {
    fail(Errc::timed_out, "connect timed out");
  }
  return state_;
}

void HostQueue::handle_cm_event(const verbs::CmEvent& event) noexcept {
  switch (event.type) {
    case verbs::CmEventType::route_resolved: {
      if (state_ != HostQueueState::resolving) return;
      if (!res_->keys) {
        auto made = create_buffers();
        if (!made) {
          fail(made.error().code, made.error().detail);
          return;
        }
      }
      auto made = create_qp();
      if (!made) {
        fail(made.error().code, made.error().detail);
        return;
      }
      const spec::RdmaCmRequest request = spec::make_rdma_cm_request(
          opts_.qid, opts_.entries, static_cast<uint16_t>(opts_.entries - 1), opts_.cntlid);
      verbs::ConnectParams params;
      params.private_data = &request;
      params.private_data_length = sizeof(request);
      // The target RDMA READs write data from us; we issue no READs (the kernel host's values).
      params.responder_resources = static_cast<uint8_t>(
          std::min<uint32_t>(res_->id->device()->caps().max_qp_rd_atom, 255));
      params.initiator_depth = 0;
      auto connected = res_->id->connect(params);
      if (!connected) {
        fail(connected.error().code, "rdma_connect failed");
        return;
      }
      state_ = HostQueueState::connecting;
      return;
    }
    case verbs::CmEventType::established: {
      if (state_ != HostQueueState::connecting) return;
      spec::RdmaCmAccept accept{};
      std::memcpy(&accept, event.private_data, sizeof(accept));
      uint16_t granted = opts_.entries;
      if (accept.recfmt == spec::rdma_cm_recfmt && accept.crqsize >= 2) {
        granted = std::min(granted, accept.crqsize);
      }
      if (ever_connected_) {
        // Commands waiting for a resend keep their slots: the queue may not shrink.
        if (granted < entries_) {
          fail(Errc::no_memory, "the target granted a smaller queue on reconnect");
          (void)res_->id->disconnect();
          return;
        }
      } else {
        entries_ = granted;
        depth_ = entries_ - 1u;
        for (uint32_t i = depth_; i-- > 0;) {
          res_->commands[i].state = HostCommand::State::free;
          free_.push(res_->commands[i]);
        }
        ever_connected_ = true;
      }
      in_error_ = false;
      error_reason_ = "";
      state_ = HostQueueState::connected;
      cm_poll_countdown_ = kCmPollInterval;
      NVMF_DEBUGLOG(rdma_host, "queue %u connected to %s:%u, %u entries", opts_.qid,
                    opts_.address.c_str(), opts_.port, entries_);
      return;
    }
    case verbs::CmEventType::rejected: {
      if (state_ != HostQueueState::connecting) return;
      spec::RdmaCmReject reject{};
      std::memcpy(&reject, event.private_data, sizeof(reject));
      if (reject.recfmt == spec::rdma_cm_recfmt && reject.sts != 0) {
        fail(Errc::connection_refused, spec::rdma_cm_reject_name(reject.sts), reject.sts);
      } else {
        fail(Errc::connection_refused, "connection rejected");
      }
      return;
    }
    case verbs::CmEventType::unreachable:
      if (state_ == HostQueueState::resolving || state_ == HostQueueState::connecting) {
        if (event.status == ETIMEDOUT) {
          fail(Errc::timed_out, "target unreachable (timed out)");
        } else {
          fail(Errc::connection_refused, "target unreachable (no listener)");
        }
      }
      return;
    case verbs::CmEventType::connect_error:
      if (state_ == HostQueueState::resolving || state_ == HostQueueState::connecting) {
        fail(Errc::io_error, "connect error");
      }
      return;
    case verbs::CmEventType::disconnected:
    case verbs::CmEventType::device_removal:
      if (state_ == HostQueueState::connected) {
        enter_error(event.type == verbs::CmEventType::disconnected ? "target disconnected"
                                                                   : "device removed");
      } else if (state_ == HostQueueState::connecting) {
        fail(Errc::disconnected, "disconnected while connecting");
      }
      return;
    case verbs::CmEventType::connect_request:
      return;  // a host does not listen
  }
}

HostCommand* HostQueue::reserved_command() noexcept {
  if (!ever_connected_ || reserved_in_use_) return nullptr;
  reserved_in_use_ = true;
  HostCommand& command = res_->commands[depth_];
  command.state = HostCommand::State::taken;
  return &command;
}

void HostQueue::put_command(HostCommand& command) noexcept {
  command.state = HostCommand::State::free;
  command.window = memreg::kNoWindow;
  if (command.cid == depth_) {
    reserved_in_use_ = false;
  } else {
    free_.push(command);
  }
}

Result<void> HostQueue::post_command(HostCommand& command) noexcept {
  // res_ loaded once: the compiler would load it again after each store through a pointer.
  Resources& res = *res_;
  const uint32_t index = command.cid;
  uint8_t* capsule = res.capsules + size_t{index} * kCapsuleStride;
  spec::Sqe& sqe = command.sqe;
  sqe.cid = command.cid;
  sqe.set_psdt(spec::psdt::sgl_mptr_contiguous);
  command.window = memreg::kNoWindow;

  verbs::Sge* sges = res.send_sges;
  sges[0] = verbs::Sge{reinterpret_cast<uint64_t>(capsule), sizeof(spec::Sqe), res.capsule_lkey};
  uint32_t sge_count = 1;

  const iovec* iov = command.iov;
  const int iovcnt = command.iovcnt;
  // The data's size decides only whether a write goes in the capsule.
  uint64_t total = 0;
  if (command.direction == DataDirection::host_to_controller) {
    for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  }
  const uint32_t domain = res.domain.index;
  const memreg::MemoryMap& map = *res.map;
  memreg::KeyPolicy& keys = *res.keys;
  bool in_capsule = false;
  uint32_t window = memreg::kNoWindow;  // the window a per-I/O key policy bound for this command

  if (command.direction == DataDirection::none) {
    // No data: a keyed descriptor of length 0, as the Linux host sends.
    sqe.sgl1 = spec::make_keyed_data_block(0, 0, 0, false);
  } else if (command.direction == DataDirection::host_to_controller && total <= in_capsule_limit_ &&
             static_cast<uint32_t>(iovcnt) + 1 <= res.max_send_sges) {
    // In-capsule data gathered straight from the caller's buffers.
    for (int i = 0; i < iovcnt; ++i) {
      memreg::Keys chunk_keys;
      if (!map.translate(domain, iov[i].iov_base, iov[i].iov_len, &chunk_keys, &res.data_keys)) {
        return Unexpected(Errc::invalid_argument, "buffer not from the DMA allocator");
      }
      sges[sge_count++] = verbs::Sge{reinterpret_cast<uint64_t>(iov[i].iov_base),
                                     static_cast<uint32_t>(iov[i].iov_len), chunk_keys.lkey};
    }
    sqe.sgl1 = spec::make_in_capsule_data_block(0, static_cast<uint32_t>(total));
    in_capsule = true;
  } else if (keys.per_io_keys()) {
    // One window per I/O: one contiguous buffer.
    if (iovcnt != 1 || iov[0].iov_len > spec::sgl_keyed_length_max) {
      return Unexpected(Errc::invalid_argument, "one iovec per I/O under a per-I/O key policy");
    }
    const verbs::MemoryRegion* mr = map.region_of(domain, iov[0].iov_base);
    memreg::Keys chunk_keys;
    if (mr == nullptr ||
        !map.translate(domain, iov[0].iov_base, iov[0].iov_len, &chunk_keys, &res.data_keys)) {
      return Unexpected(Errc::invalid_argument, "buffer not from the DMA allocator");
    }
    const uint32_t access = command.direction == DataDirection::controller_to_host
                                ? verbs::kAccessRemoteWrite
                                : verbs::kAccessRemoteRead;
    auto granted = keys.grant(*mr, reinterpret_cast<uint64_t>(iov[0].iov_base),
                              static_cast<uint32_t>(iov[0].iov_len), access);
    if (!granted) return Unexpected(granted.error());
    sqe.sgl1 = spec::make_keyed_data_block(reinterpret_cast<uint64_t>(iov[0].iov_base),
                                           static_cast<uint32_t>(iov[0].iov_len), granted->rkey,
                                           granted->invalidate);
    if (granted->has_bind) {
      // The bind goes first on the same send queue: the HCA orders it before the SEND that
      // carries its key.
      auto bound = post_send_wr(granted->bind, kKindBind, granted->window, command.cid);
      if (!bound) {
        res.keys->on_abandoned(granted->window);
        return bound;
      }
      command.window = granted->window;
    }
    window = granted->window;
  } else {
    // The MR's keys: one descriptor in the SQE, or a Last Segment list of them written straight
    // into the capsule, after the SQE.
    const auto describe = [&](const iovec& buffer, spec::SglDescriptor* descriptor) {
      memreg::Keys chunk_keys;
      if (buffer.iov_len > spec::sgl_keyed_length_max ||
          !map.translate(domain, buffer.iov_base, buffer.iov_len, &chunk_keys, &res.data_keys)) {
        return false;
      }
      *descriptor = spec::make_keyed_data_block(reinterpret_cast<uint64_t>(buffer.iov_base),
                                                static_cast<uint32_t>(buffer.iov_len),
                                                chunk_keys.rkey, false);
      return true;
    };
    if (iovcnt == 1) {  // most I/Os: no loop to set up
      if (!describe(iov[0], &sqe.sgl1)) {
        return Unexpected(Errc::invalid_argument, "buffer not from the DMA allocator");
      }
    } else {
      auto* list = reinterpret_cast<spec::SglDescriptor*>(capsule + sizeof(spec::Sqe));
      for (int i = 0; i < iovcnt; ++i) {
        if (!describe(iov[i], &list[i])) {
          return Unexpected(Errc::invalid_argument, "buffer not from the DMA allocator");
        }
      }
      const uint32_t list_bytes = static_cast<uint32_t>(iovcnt) * spec::sgl_descriptor_size;
      sqe.sgl1 = spec::make_last_segment(0, list_bytes);
      sges[0].length += list_bytes;
    }
  }
  std::memcpy(capsule, &sqe, sizeof(spec::Sqe));

  verbs::SendWr& wr = res.capsule_wr;
  wr.num_sge = sge_count;
  auto posted = post_send_wr(wr, kKindCapsule, window, command.cid);
  if (!posted) {
    // The bind (if any) is queued: the QP must go, the window with it.
    enter_error("cannot post a command");
    return Unexpected(posted.error());
  }
  if (in_capsule) ++stats_.in_capsule_writes;
  command.state = HostCommand::State::posted;
  command.response_arrived = false;
  command.send_completed = false;
  command.wait_local_inv = false;
  return {};
}

inline void HostQueue::finish(HostCommand& command, uint32_t* callbacks) noexcept {
  // The slot is free before the callback runs, so the callback may reuse it at once (a
  // benchmark that resubmits from its callback never sees a false busy).
  const spec::Cqe cqe = command.cqe;
  --outstanding_;
  put_command(command);
  ++*callbacks;
  if (command.callback != nullptr) {
    command.callback(command, cqe);
  } else if (command.status_fn != nullptr) {
    command.status_fn(command.cb_ctx, cqe.decoded_status());
  }
}

void HostQueue::maybe_finish(HostCommand& command, uint32_t* callbacks) noexcept {
  if (command.state == HostCommand::State::posted && command.response_arrived &&
      command.send_completed && !command.wait_local_inv) {
    finish(command, callbacks);
  }
}

void HostQueue::handle_response(const verbs::WorkCompletion& wc, uint32_t* callbacks) noexcept {
  --recv_wrs_posted_;
  const uint32_t index = wr_cid(wc.wr_id);
  if (wc.status != verbs::WcStatus::success) {
    if (wc.status != verbs::WcStatus::wr_flush_error) {
      NVMF_ERRLOG(rdma_host, "queue %u: receive failed: %s", opts_.qid,
                  verbs::wc_status_name(wc.status));
      enter_error("receive failed");
    }
    return;
  }
  const spec::Cqe cqe = res_->responses[index];
  if (!in_error_) post_receive(index);
  if (wc.byte_len < sizeof(spec::Cqe)) {
    NVMF_ERRLOG(rdma_host, "queue %u: response of %u bytes (a CQE is 16)", opts_.qid, wc.byte_len);
    enter_error("short response");
    return;
  }
  if (cqe.cid >= entries_ || res_->commands[cqe.cid].state != HostCommand::State::posted ||
      res_->commands[cqe.cid].response_arrived) {
    NVMF_ERRLOG(rdma_host, "queue %u: response for CID %u, which is not outstanding", opts_.qid,
                cqe.cid);
    enter_error("response for a command not outstanding");
    return;
  }
  HostCommand& command = res_->commands[cqe.cid];
  if (command.window != memreg::kNoWindow) {
    const uint32_t window = command.window;
    memreg::KeyPolicy::AfterResponse after =
        res_->keys->on_response(window, wc.remote_invalidated, wc.invalidated_rkey);
    if (after.protocol_error) {
      NVMF_ERRLOG(rdma_host, "queue %u: CID %u: the target invalidated rkey 0x%x, not ours",
                  opts_.qid, cqe.cid, wc.invalidated_rkey);
      enter_error("remote invalidation of the wrong key");
      return;
    }
    command.window = memreg::kNoWindow;  // the policy decides its fate from here
    if (after.post_local_inv) {
      const uint32_t waiting_cid = after.wait_for_local_inv ? command.cid : kNoCid;
      if (!post_send_wr(after.local_inv, kKindLocalInv, window, waiting_cid)) {
        enter_error("cannot post a local invalidate");
        return;
      }
    }
    command.wait_local_inv = after.wait_for_local_inv;
  } else if (wc.remote_invalidated) {
    NVMF_ERRLOG(rdma_host, "queue %u: CID %u: remote invalidation of rkey 0x%x, none requested",
                opts_.qid, cqe.cid, wc.invalidated_rkey);
    enter_error("remote invalidation not requested");
    return;
  }
  command.cqe = cqe;
  command.response_arrived = true;
  maybe_finish(command, callbacks);
}

void HostQueue::handle_completion(const verbs::WorkCompletion& wc, uint32_t* callbacks) noexcept {
  const uint64_t kind = wr_kind(wc.wr_id);
  if (kind == kKindRecv) {
    handle_response(wc, callbacks);
    return;
  }
  send_retired_ = (wr_seq(wc.wr_id) + 1) & kSeqMask;
  const uint32_t cid = wr_cid(wc.wr_id);
  const uint32_t window = wr_window(wc.wr_id);
  const bool ok = wc.status == verbs::WcStatus::success;
  if (!ok && wc.status != verbs::WcStatus::wr_flush_error) {
    if (kind == kKindBind) {
      ++stats_.bind_errors;
      // The kernel host's words for the same event in 2017.
      NVMF_ERRLOG(rdma_host, "queue %u: MEMREG for CID %u failed with status %s (%u)", opts_.qid,
                  cid, verbs::wc_status_name(wc.status), static_cast<unsigned>(wc.status));
      enter_error("memory registration failed");
    } else {
      NVMF_ERRLOG(rdma_host, "queue %u: %s for CID %u failed: %s (vendor error %u)", opts_.qid,
                  kind == kKindLocalInv ? "LOCAL_INV" : "SEND", cid,
                  verbs::wc_status_name(wc.status), wc.vendor_error);
      enter_error(kind == kKindLocalInv ? "local invalidate failed" : "send failed");
    }
  }
  if (kind == kKindLocalInv) {
    memreg::KeyPolicy& keys = key_policy_of(wr_seq(wc.wr_id));
    if (ok) {
      keys.on_local_inv_done(window);
    } else {
      keys.on_abandoned(window);
    }
    if (cid != kNoCid && cid < res_->commands.size()) {
      HostCommand& command = res_->commands[cid];
      if (command.state == HostCommand::State::posted && command.wait_local_inv) {
        // Flushed: the invalidation is unknown, but the response stands (the data is in).
        command.wait_local_inv = false;
        maybe_finish(command, callbacks);
      }
    }
    return;
  }
  // entries_, not commands.size(): the same bound for every CID posted (the drain's kNoCid
  // fails both), without working out the vector's size per completion.
  if (kind != kKindCapsule || cid >= entries_) return;
  HostCommand& command = res_->commands[cid];
  if (command.state != HostCommand::State::posted) return;
  command.send_completed = true;
  // A response may have arrived before the SEND's completion reported a flush: the target
  // did execute the command, so its answer stands.
  maybe_finish(command, callbacks);
}

void HostQueue::take_async_error() noexcept {
  const HostAsyncWatch::Failure failure = async_watch_.take();
  // A lost CQ (or device) returns no WR: waiting for the drain would wait forever. The QP is
  // in error, so the HCA runs none of them, and a reconnect destroys it before any buffer or
  // window of it is used again.
  completions_lost_ = completions_lost_ || failure.completions_lost;
  enter_error(failure.reason);  // the log line; nothing new if the QP already failed
}

void HostQueue::enter_error(const char* why, bool requested) noexcept {
  if (in_error_) return;
  in_error_ = true;
  error_reason_ = why;
  if (state_ == HostQueueState::connected && requested) {
    NVMF_INFOLOG(rdma_host, "queue %u to %s:%u: %s; %u commands outstanding", opts_.qid,
                 opts_.address.c_str(), opts_.port, why, outstanding_);
  } else if (state_ == HostQueueState::connected) {
    ++stats_.qp_errors;
    NVMF_ERRLOG(rdma_host, "queue %u to %s:%u: %s; %u commands outstanding", opts_.qid,
                opts_.address.c_str(), opts_.port, why, outstanding_);
  }
  if (res_->qp != nullptr) {
    (void)res_->qp->move_to_error();
    // The drain WR (the kernel's ib_drain_sq): a signaled WR posted after the error completes
    // last, flushed, so once it is back every earlier WR is accounted for, unsignaled ones
    // that executed without a completion (a trailing LOCAL_INV) included.
    verbs::SendWr drain;
    drain.opcode = verbs::WrOpcode::send;
    drain.flags = verbs::kWrSignaled;
    if (post_send_wr(drain, kKindDrain, kWindowMask, kNoCid)) (void)res_->qp->flush();
  }
  if (res_->id != nullptr) (void)res_->id->disconnect();
}

void HostQueue::abort_outstanding(uint32_t* callbacks, bool pending_only,
                                  const spec::Status& status) noexcept {
  for (HostCommand& command : res_->commands) {
    const bool pending = command.state == HostCommand::State::pending_retry;
    if (!pending && (pending_only || command.state != HostCommand::State::posted)) continue;
    if (pending) --pending_retry_;
    if (command.window != memreg::kNoWindow) res_->keys->on_abandoned(command.window);
    command.window = memreg::kNoWindow;
    command.state = HostCommand::State::posted;
    if (!command.response_arrived) command.cqe = make_aborted_cqe(command, opts_.qid, status);
    finish(command, callbacks);
  }
}

void HostQueue::settle_after_error(uint32_t* callbacks) noexcept {
  // Every WR is back from the HCA: no buffer or window is in use any more.
  for (HostCommand& command : res_->commands) {
    if (command.state != HostCommand::State::posted) continue;
    if (command.window != memreg::kNoWindow) {
      res_->keys->on_abandoned(command.window);
      command.window = memreg::kNoWindow;
    }
    if (command.response_arrived) {
      // The target answered: its status stands whatever happened to the SEND's or the
      // LOCAL_INV's completion afterwards.
      command.wait_local_inv = false;
      finish(command, callbacks);
    } else if (opts_.keep_commands_on_error && command.cid != depth_ && !stopping_) {
      command.state = HostCommand::State::pending_retry;
      ++pending_retry_;
    } else {
      command.cqe = make_aborted_cqe(command, opts_.qid);
      finish(command, callbacks);
    }
  }
  res_->retired_keys.reset();  // setup-path (deallocates windows): no WR names them any more
  state_ = HostQueueState::disconnected;
}

int HostQueue::poll(uint32_t max_completions) noexcept {
  if (state_ != HostQueueState::connected) return 0;
  if (doorbell_due_) {
    doorbell_due_ = false;
    ++stats_.doorbells;
    if (!res_->qp->flush()) enter_error("doorbell failed");
  }
  if (--cm_poll_countdown_ == 0) {
    cm_poll_countdown_ = kCmPollInterval;
    verbs::CmEvent event;
    while (res_->channel->poll_event(&event)) handle_cm_event(event);
    (void)domains_.async_events().poll();  // for every queue of the host (host_async_events.h)
  }
  if (async_watch_.pending()) take_async_error();
  uint32_t callbacks = 0;
  CompletionBatch<kCqBatch> batch;
  verbs::WorkCompletion* const wcs = batch.data();
  for (;;) {
    uint32_t want = kCqBatch;
    if (max_completions != 0) {
      if (callbacks >= max_completions) break;
      want = std::min(want, max_completions - callbacks);
    }
    const int reaped = res_->cq->poll(std::span(wcs, want));
    stats_.cqes_reaped += static_cast<uint64_t>(std::max(reaped, 0));
    for (int i = 0; i < reaped; ++i) handle_completion(wcs[i], &callbacks);
    if (static_cast<uint32_t>(reaped) < want) break;
  }
  if (res_->retired_keys) release_retired_key_policy();
  if (key_switch_ != KeySwitchState::none && !in_error_) advance_key_switch();
  if (doorbell_due_ && !in_error_) {
    doorbell_due_ = false;
    ++stats_.doorbells;
    if (!res_->qp->flush()) enter_error("doorbell failed");
  }
  if (in_error_ &&
      (completions_lost_ || (send_retired_ == send_posted_ && recv_wrs_posted_ == 0))) {
    settle_after_error(&callbacks);
  }
  return static_cast<int>(callbacks);
}

// ---------------------------------------------------------------------------------------
// Event mode

Result<void> HostQueue::watch(int fd, uint64_t tag, int* watched) noexcept {
  if (opts_.wake_epoll_fd < 0) return {};
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = tag;
  if (fd < 0 || epoll_ctl(opts_.wake_epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    const int os_errno = fd < 0 ? EBADF : errno;
    NVMF_ERRLOG(rdma_host, "queue %u: cannot add its %s fd to the owner's epoll set: %s",
                opts_.qid, tag == kWakeCompletion ? "CQ" : "CM channel", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "epoll_ctl: the queue's event fd"));
  }
  *watched = fd;
  return {};
}

void HostQueue::unwatch(int* fd) noexcept {
  if (*fd >= 0) (void)epoll_ctl(opts_.wake_epoll_fd, EPOLL_CTL_DEL, *fd, nullptr);
  *fd = -1;
}

Result<bool> HostQueue::arm_completions() noexcept {
  if (watched_cq_fd_ < 0 || cq_armed_) return false;
  auto armed = res_->cq->arm();
  if (!armed) return Unexpected(armed.error());
  cq_armed_ = true;
  return true;
}

void HostQueue::consume_completion_event() noexcept {
  if (watched_cq_fd_ < 0) return;
  (void)res_->cq->consume_event();  // busy: no event was waiting (taken already)
  cq_armed_ = false;
}

void HostQueue::poll_connection_events() noexcept {
  if (state_ == HostQueueState::resolving || state_ == HostQueueState::connecting) {
    (void)progress_connect();
    return;
  }
  // Drained in every state, so that an event nobody waits for does not keep the fd readable.
  verbs::CmEvent event;
  while (res_->channel && res_->channel->poll_event(&event)) handle_cm_event(event);
  cm_poll_countdown_ = kCmPollInterval;
  (void)domains_.async_events().poll();  // for every queue of the host (host_async_events.h)
}

void HostQueue::disconnect() noexcept {
  stopping_ = true;
  key_switch_ = KeySwitchState::none;  // a switch asked for is dropped with the queue
  if (state_ == HostQueueState::resolving || state_ == HostQueueState::connecting) {
    fail(Errc::disconnected, "disconnected while connecting");
  }
  if (state_ == HostQueueState::connected) {
    enter_error("disconnect requested", true);
    const uint64_t deadline = monotonic_.now_ns() + kDrainTimeoutNs;
    while (state_ == HostQueueState::connected) {
      (void)poll();
      if (state_ == HostQueueState::connected && monotonic_.now_ns() >= deadline) {
        NVMF_WARNLOG(rdma_host, "queue %u: the HCA did not return %u send and %u receive WRs",
                     opts_.qid, (send_posted_ - send_retired_) & kSeqMask, recv_wrs_posted_);
        state_ = HostQueueState::disconnected;
      }
    }
  }
  // Whatever is left (pending_retry commands, or posted ones the HCA never returned).
  uint32_t callbacks = 0;
  abort_outstanding(&callbacks);
}

void HostQueue::abort_pending() noexcept { fail_pending(kAbortedSqDeletion); }

void HostQueue::fail_pending(const spec::Status& status) noexcept {
  if (pending_retry_ == 0) return;
  uint32_t callbacks = 0;
  abort_outstanding(&callbacks, true, status);
}

HostCommand& HostQueue::command_at(uint32_t cid) noexcept {
  assert(cid < res_->commands.size());
  return res_->commands[cid];
}

Result<void> HostQueue::reconnect(uint16_t cntlid) noexcept {
  if (stopping_) return Unexpected(Errc::bad_state, "queue disconnected by its owner");
  if (state_ != HostQueueState::disconnected && state_ != HostQueueState::failed) {
    return Unexpected(Errc::bad_state, "reconnect: the queue is not down");
  }
  if (!ever_connected_) return Unexpected(Errc::bad_state, "reconnect: never connected");
  domains_.async_events().remove(async_watch_);  // events of the old QP are moot
  completions_lost_ = false;
  unwatch(&watched_cq_fd_);  // their fds close with them; start() and create_qp() add the new
  unwatch(&watched_cm_fd_);
  res_->drop_connection();
  // Every WR is back: a switch asked for meanwhile needs no drain, the new QP starts with it.
  const bool switched = key_switch_ != KeySwitchState::none && replace_key_policy();
  key_switch_ = KeySwitchState::none;
  if (!switched) {
    auto reset = res_->keys->reset();
    if (!reset) return Unexpected(reset.error());
  }
  opts_.cntlid = cntlid;
  in_error_ = false;
  doorbell_due_ = false;
  failure_ = HostQueueFailure{};
  if (reserved_in_use_) {
    // A Connect that was in flight when the QP failed ended with it.
    reserved_in_use_ = false;
    res_->commands[depth_].state = HostCommand::State::free;
  }
  return start();
}

uint32_t HostQueue::resubmit_pending() noexcept {
  if (state_ != HostQueueState::connected || in_error_) return 0;
  uint32_t sent = 0;
  uint32_t callbacks = 0;
  for (HostCommand& command : res_->commands) {
    if (command.state != HostCommand::State::pending_retry) continue;
    --pending_retry_;
    command.state = HostCommand::State::taken;
    auto posted = post_command(command);
    if (posted) {
      ++sent;
      ++stats_.resubmitted;
      continue;
    }
    command.state = HostCommand::State::posted;
    command.cqe = make_aborted_cqe(command, opts_.qid);
    finish(command, &callbacks);
  }
  return sent;
}

// ---------------------------------------------------------------------------------------
// Key policy switch

bool HostQueue::supports_key_policy(memreg::KeyPolicyKind kind) const noexcept {
  return memreg::KeyPolicy::supported(kind, res_->caps);
}

Result<void> HostQueue::request_key_policy(memreg::KeyPolicyKind kind) noexcept {
  if (stopping_) return Unexpected(Errc::bad_state, "queue disconnected by its owner");
  if (!supports_key_policy(kind)) {
    NVMF_ERRLOG(rdma_host, "queue %u: %s cannot do memreg policy %s (no type-2 memory windows)",
                opts_.qid, res_->caps.name.c_str(), memreg::key_policy_name(kind));
    return Unexpected(Errc::not_supported, "key policy: no type-2 memory windows");
  }
  if (kind == opts_.key_policy) {
    key_switch_ = KeySwitchState::none;  // nothing to do, or a pending switch called off
    return {};
  }
  key_switch_to_ = kind;
  if (key_switch_ == KeySwitchState::none) key_switch_ = KeySwitchState::draining;
  return {};
}

void HostQueue::advance_key_switch() noexcept {
  for (;;) {
    switch (key_switch_) {
      case KeySwitchState::none:
        return;
      case KeySwitchState::draining:
        // A sagi I/O is outstanding until its LOCAL_INV completed; a deferred window is in use
        // until its LOCAL_INV completed, after its I/O.
        if (outstanding_ != 0 || res_->keys->windows_in_use() != 0) return;
        key_switch_ = KeySwitchState::switching;
        break;
      case KeySwitchState::switching:
        (void)replace_key_policy();  // built or not, the queue resumes
        key_switch_ = KeySwitchState::none;
        break;
    }
  }
}

bool HostQueue::replace_key_policy() noexcept {
  // Setup path (inside poll() on a live queue): allocates the new pool, nothing is in flight.
  memreg::KeyPolicyOpts key_opts;
  key_opts.kind = key_switch_to_;
  key_opts.depth = opts_.entries;
  auto made = memreg::KeyPolicy::create(*res_->domain.pd, res_->caps, key_opts);
  if (!made) {
    ++stats_.key_policy_switch_failures;
    NVMF_ERRLOG(rdma_host, "queue %u: memreg policy switch %s -> %s failed (%s): staying on %s",
                opts_.qid, memreg::key_policy_name(opts_.key_policy),
                memreg::key_policy_name(key_switch_to_), errc_name(made.error().code),
                memreg::key_policy_name(opts_.key_policy));
    return false;
  }
  NVMF_INFOLOG(rdma_host, "queue %u: memreg policy %s -> %s", opts_.qid,
               memreg::key_policy_name(opts_.key_policy), memreg::key_policy_name(key_switch_to_));
  retire_key_policy(std::move(res_->keys));
  res_->keys = std::move(*made);
  opts_.key_policy = key_switch_to_;
  ++stats_.key_policy_switches;
  return true;
}

void HostQueue::retire_key_policy(std::unique_ptr<memreg::KeyPolicy> old) noexcept {
  // Unsignaled LOCAL_INVs (unsafe, max) after the last SEND stay unretired until the next
  // signaled completion: until then the HCA may still execute them, on old's windows.
  if (send_retired_ == send_posted_) return;  // old goes now
  if (res_->retired_keys) {
    // Still waiting for an older policy's WRs: `old` posted nothing since (any SEND of its
    // would have retired them), so it can go now.
    assert(send_posted_ == retired_keys_seq_);
    return;
  }
  res_->retired_keys = std::move(old);
  retired_keys_seq_ = send_posted_;
}

void HostQueue::release_retired_key_policy() noexcept {
  if (retired_before(retired_keys_seq_)) res_->retired_keys.reset();  // setup-path: dealloc
}

memreg::KeyPolicy& HostQueue::key_policy_of(uint32_t seq) noexcept {
  if (res_->retired_keys) {
    // WRs posted since the switch have sequences in [retired_keys_seq_, send_posted_).
    const uint32_t since_switch = (seq - retired_keys_seq_) & kSeqMask;
    if (since_switch >= ((send_posted_ - retired_keys_seq_) & kSeqMask)) {
      return *res_->retired_keys;
    }
  }
  return *res_->keys;
}

bool HostQueue::retired_before(uint32_t seq) const noexcept {
  // Unretired WRs are the newest ones; the send queue never holds 2^24 of them.
  const uint32_t unretired = (send_posted_ - send_retired_) & kSeqMask;
  return unretired <= ((send_posted_ - seq) & kSeqMask);
}

}  // namespace nvmf::transport_rdma
