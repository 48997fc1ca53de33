#include "transport_rdma/target_transport.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "common/log.h"
#include "transport_rdma/target_internal.h"

NVMF_LOG_COMPONENT(rdma);

namespace nvmf::transport_rdma {

namespace {
// The NVMe/RDMA command capsule starts with the 64-byte SQE; in-capsule data follows it.
constexpr uint32_t kSqeBytes = sizeof(spec::Sqe);
constexpr uint32_t kCqeBytes = sizeof(spec::Cqe);
// Completions reaped per CQ poll (STYLE 4: a budget per poll, into a stack array).
constexpr unsigned kCompletionBatch = 32;
}  // namespace

const char* send_with_invalidate_name(SendWithInvalidate mode) noexcept {
  return mode == SendWithInvalidate::off ? "off" : "auto";
}

bool send_with_invalidate_parse(const char* text, SendWithInvalidate* mode) noexcept {
  if (std::strcmp(text, "auto") == 0) {
    *mode = SendWithInvalidate::automatic;
    return true;
  }
  if (std::strcmp(text, "off") == 0) {
    *mode = SendWithInvalidate::off;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Transport and acceptor

RdmaTargetTransport::RdmaTargetTransport(verbs::Provider& provider, target::Target& target,
                                         const std::vector<reactor::Reactor*>& reactors,
                                         const RdmaTargetOpts& opts)
    : provider_(provider),
      target_(target),
      opts_(opts),
      reactors_(reactors),
      acceptor_poller_("rdma_acceptor", &RdmaTargetTransport::acceptor_poll, this) {}

Result<std::unique_ptr<RdmaTargetTransport>> RdmaTargetTransport::create(
    verbs::Provider& provider, target::Target& target,
    const std::vector<reactor::Reactor*>& reactors, const RdmaTargetOpts& opts) {
  if (reactors.empty() || reactors[0] == nullptr) {
    NVMF_ERRLOG(rdma, "the RDMA transport needs at least one reactor");
    return Unexpected(Errc::invalid_argument, "reactors");
  }
  if (opts.io_unit_size < 512 || opts.max_io_size == 0 || opts.max_io_size % 512 != 0 ||
      (opts.max_io_size + opts.io_unit_size - 1) / opts.io_unit_size > target::kRequestIovMax) {
    NVMF_ERRLOG(rdma,
                "max_io_size %" PRIu32 " needs more than %u data buffers of io_unit_size %" PRIu32
                " (raise io_unit_size or lower max_io_size)",
                opts.max_io_size, target::kRequestIovMax, opts.io_unit_size);
    return Unexpected(Errc::invalid_argument, "io_unit_size");
  }
  if (opts.in_capsule_data_size % 16 != 0 || opts.in_capsule_data_size > 16384) {
    NVMF_ERRLOG(rdma, "in_capsule_data_size %" PRIu32 " must be a multiple of 16, at most 16384",
                opts.in_capsule_data_size);
    return Unexpected(Errc::invalid_argument, "in_capsule_data_size");
  }
  uint32_t buffers_per_command = (opts.max_io_size + opts.io_unit_size - 1) / opts.io_unit_size;
  if (opts.data_buffers_per_group < buffers_per_command) {
    NVMF_ERRLOG(rdma,
                "data_buffers_per_group %" PRIu32
                " cannot hold one command of max_io_size (%" PRIu32 " buffers)",
                opts.data_buffers_per_group, buffers_per_command);
    return Unexpected(Errc::invalid_argument, "data_buffers_per_group");
  }
  if (opts.use_srq && opts.srq_depth < 2) {
    NVMF_ERRLOG(rdma, "srq_depth %" PRIu32 " is below 2", opts.srq_depth);
    return Unexpected(Errc::invalid_argument, "srq_depth");
  }
  std::unique_ptr<RdmaTargetTransport> transport(
      new (std::nothrow) RdmaTargetTransport(provider, target, reactors, opts));  // setup-path
  if (!transport) return Unexpected(Errc::no_memory, "rdma transport");
  auto channel = provider.create_cm_channel();
  if (!channel) {
    char text[256];
    NVMF_ERRLOG(rdma, "cannot open an RDMA CM event channel: %s",
                error_describe(channel.error(), text, sizeof(text)));
    return Unexpected(channel.error());
  }
  transport->channel_ = std::move(*channel);
  for (reactor::Reactor* reactor : reactors) {
    transport->groups_.push_back(std::make_unique<RdmaPollGroup>(*transport, *reactor));
  }
  auto added =
      reactors[0]->add_poller(transport->acceptor_poller_, transport->channel_->event_fd());
  if (!added) return Unexpected(added.error());
  return transport;
}

RdmaTargetTransport::~RdmaTargetTransport() {
  if (acceptor_poller_.registered()) reactors_[0]->remove_poller(acceptor_poller_);
  // Verbs order: each connection's CM id takes its QP with it, and QPs must go before the CQs,
  // SRQs, MRs and PDs of the poll groups they were created on.
  connections_.clear();
  for (auto& group : groups_) group.reset();
  listeners_.clear();
  channel_.reset();
}

Result<void> RdmaTargetTransport::listen(const std::string& address, uint16_t port) {
  auto id = channel_->create_id();
  if (!id) return Unexpected(id.error());
  // Backlog 1024: many hosts connecting many queues at once (SPDK uses the same order).
  auto listening = (*id)->listen(address, port, 1024);
  if (!listening) {
    char text[256];
    NVMF_ERRLOG(rdma, "cannot listen on %s:%u: %s", address.c_str(), port,
                error_describe(listening.error(), text, sizeof(text)));
    return listening;
  }
  NVMF_NOTICELOG(rdma, "listening on %s port %u", address.c_str(), port);
  listeners_.push_back(Listener{address, port, std::move(*id)});
  return {};
}

Result<void> RdmaTargetTransport::stop_listening(const std::string& address, uint16_t port) {
  for (size_t i = 0; i < listeners_.size(); ++i) {
    if (listeners_[i].address != address || listeners_[i].port != port) continue;
    // Destroying the listening CM id is what stops it (rdma_destroy_id); the connections it
    // accepted have CM ids of their own.
    listeners_.erase(listeners_.begin() + static_cast<std::ptrdiff_t>(i));
    NVMF_NOTICELOG(rdma, "stopped listening on %s port %u", address.c_str(), port);
    return {};
  }
  return Unexpected(Errc::not_found, "not listening on that address and port");
}

bool RdmaTargetTransport::listening(const std::string& address, uint16_t port) const noexcept {
  for (const Listener& listener : listeners_) {
    if (listener.address == address && listener.port == port) return true;
  }
  return false;
}

size_t RdmaTargetTransport::connection_count() const noexcept { return connections_.size(); }

RdmaTargetTransport::Stats RdmaTargetTransport::stats() const noexcept {
  Stats stats = stats_;
  for (const auto& group : groups_) stats.cq_full_refusals += group->cq_full_refusals();
  return stats;
}

int RdmaTargetTransport::acceptor_poll(void* ctx, unsigned budget) noexcept {
  return static_cast<RdmaTargetTransport*>(ctx)->poll_cm_events(budget);
}

int RdmaTargetTransport::poll_cm_events(unsigned budget) noexcept {
  int handled = 0;
  verbs::CmEvent event;
  while (static_cast<unsigned>(handled) < budget && channel_->poll_event(&event)) {
    ++handled;
    if (event.type == verbs::CmEventType::connect_request) {
      on_connect_request(event);
      continue;
    }
    Connection* connection = nullptr;
    for (auto& candidate : connections_) {
      if (candidate->id.get() == event.id) {
        connection = candidate.get();
        break;
      }
    }
    if (connection == nullptr) continue;  // a listener's event or an id already released
    switch (event.type) {
      case verbs::CmEventType::established:
        NVMF_INFOLOG(rdma, "connection from %s established (QID %u, depth %u)",
                     connection->id->peer_address().c_str(), connection->decision.qid,
                     connection->decision.queue_depth);
        break;
      case verbs::CmEventType::disconnected:
      case verbs::CmEventType::connect_error:
      case verbs::CmEventType::unreachable:
      case verbs::CmEventType::rejected:
      case verbs::CmEventType::device_removal:
        forward_event(*connection, event.type);
        break;
      default:
        break;
    }
  }
  // Free connections the groups have let go of.
  for (size_t i = 0; i < connections_.size();) {
    if (connections_[i]->released &&
        connections_[i]->messages_in_flight.load(std::memory_order_acquire) == 0) {
      connections_[i] = std::move(connections_.back());
      connections_.pop_back();
      ++stats_.disconnects;
    } else {
      ++i;
    }
  }
  return handled;
}

void RdmaTargetTransport::on_connect_request(const verbs::CmEvent& event) noexcept {
  std::unique_ptr<verbs::CmId> id = channel_->adopt(event.id);
  if (!id) return;
  ConnectLimits limits = opts_.limits;
  if (verbs::Device* device = id->device()) {
    limits.device_max_qp_wr = device->caps().max_qp_wr;
    limits.device_max_qp_init_rd_atom = device->caps().max_qp_init_rd_atom;
  }
  // The event is in our point of view (verbs.h): initiator_depth is how many RDMA READs the
  // host will serve for us, its IRD.
  ConnectDecision decision = evaluate_connect_request(event.private_data, event.private_data_length,
                                                      event.initiator_depth, limits);
  if (decision.accept && shutting_down_) {
    decision.accept = false;
    decision.reject_status = spec::rdma_cm_reject::no_resources;
    decision.reason = "target is shutting down";
  }
  if (!decision.accept) {
    NVMF_WARNLOG(rdma, "rejecting connection from %s (QID %u): %s (%s)", id->peer_address().c_str(),
                 decision.qid, spec::rdma_cm_reject_name(decision.reject_status), decision.reason);
    spec::RdmaCmReject reject = make_reject(decision.reject_status);
    (void)id->reject(&reject, sizeof(reject));
    ++stats_.connects_rejected;
    return;
  }
  auto connection = std::make_unique<Connection>();  // setup-path
  connection->transport = this;
  connection->id = std::move(id);
  connection->decision = decision;
  // New queue pairs are spread over the reactors round-robin, admin queues included.
  connection->group = groups_[next_group_].get();
  next_group_ = (next_group_ + 1) % groups_.size();
  Connection* raw = connection.get();
  connections_.push_back(std::move(connection));
  if (!raw->group->reactor().send(&RdmaPollGroup::on_new_connection, raw)) {
    NVMF_ERRLOG(rdma, "reactor %s is too busy to take a connection", raw->group->reactor().name());
    spec::RdmaCmReject reject = make_reject(spec::rdma_cm_reject::no_resources);
    (void)raw->id->reject(&reject, sizeof(reject));
    raw->released = true;
    ++stats_.connects_rejected;
    return;
  }
  ++stats_.connects_accepted;
}

void RdmaTargetTransport::forward_event(Connection& connection, verbs::CmEventType type) noexcept {
  if (connection.released) return;
  connection.pending_event.store(type, std::memory_order_relaxed);
  connection.messages_in_flight.fetch_add(1, std::memory_order_relaxed);
  // A full ring is not fatal: the QP errors out as well, so the group notices through its
  // completions even if this message cannot be sent.
  if (!connection.group->reactor().send(&RdmaPollGroup::on_disconnect_event, &connection)) {
    connection.messages_in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
}

void RdmaTargetTransport::release_connection(void* ctx) noexcept {
  static_cast<Connection*>(ctx)->released = true;
}

void RdmaTargetTransport::begin_shutdown() noexcept {
  shutting_down_ = true;
  for (auto& connection : connections_) {
    if (!connection->released) forward_event(*connection, verbs::CmEventType::disconnected);
  }
}

bool RdmaTargetTransport::drained() const noexcept {
  for (const auto& connection : connections_) {
    if (!connection->released) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Poll group: connection setup

RdmaQpair::RdmaQpair(RdmaPollGroup& owner, Connection& conn, DeviceContext& dev)
    : group(owner), connection(conn), device(dev) {}

RdmaQpair::~RdmaQpair() {
  free_requests.clear();
  send_waiters.clear();
  // Torn down (every WR retired) or never connected (make_qpair failed part way).
  device.cq_reserved -= cq_reserved;
}

RdmaPollGroup::RdmaPollGroup(RdmaTargetTransport& transport, reactor::Reactor& reactor)
    : transport_(transport),
      reactor_(reactor),
      poller_("rdma_poll_group", &RdmaPollGroup::poll_fn, this) {}

RdmaPollGroup::~RdmaPollGroup() {
  if (poller_.registered()) reactor_.remove_poller(poller_);
  buffer_waiters_.clear();
  dirty_.clear();
  qpairs_.clear();
  // devices_ goes next; DeviceContext's member order frees MRs before their regions and the
  // SRQ and CQ before the PD.
}

Result<DeviceContext*> RdmaPollGroup::device_context(verbs::Device& device) noexcept {
  for (auto& context : devices_) {
    if (context->device == &device) return context.get();
  }
  const RdmaTargetOpts& opts = transport_.opts();
  if (!memory_) {
    auto memory = env::PosixMemoryBackend::create(env::PosixMemoryOpts{});
    if (!memory) return Unexpected(memory.error());
    memory_ = std::move(*memory);
  }
  auto context = std::make_unique<DeviceContext>();  // setup-path
  context->device = &device;
  auto pd = device.allocate_pd();
  if (!pd) return Unexpected(pd.error());
  context->pd = std::move(*pd);
  verbs::CqOpts cq_opts;
  const uint32_t max_cqe = device.caps().max_cqe;
  cq_opts.depth = max_cqe != 0 ? std::min(opts.cq_depth, max_cqe) : opts.cq_depth;
  cq_opts.with_event_fd = reactor_.mode() != reactor::Mode::poll;
  auto cq = context->pd->create_cq(cq_opts);
  if (!cq) return Unexpected(cq.error());
  context->cq = std::move(*cq);
  context->cq_capacity = context->cq->depth();

  // Data buffers: one region, registered once, carved into io units.
  const size_t data_bytes = size_t{opts.data_buffers_per_group} * opts.io_unit_size;
  env::MemoryBackend& buffer_memory =
      opts.buffer_memory != nullptr ? *opts.buffer_memory : *memory_;
  auto data = buffer_memory.allocate(data_bytes, 4096);
  if (!data) return Unexpected(data.error());
  context->data_region = std::move(*data);
  auto data_mr = context->pd->register_memory(context->data_region.addr(), data_bytes,
                                              verbs::kAccessLocalWrite);
  if (!data_mr) return Unexpected(data_mr.error());
  context->data_mr = std::move(*data_mr);
  context->free_data_buffers.reserve(opts.data_buffers_per_group);
  for (uint32_t i = opts.data_buffers_per_group; i > 0; --i) {
    context->free_data_buffers.push_back(static_cast<uint8_t*>(context->data_region.addr()) +
                                         size_t{i - 1} * opts.io_unit_size);
  }

  const uint32_t recv_bytes = kSqeBytes + opts.in_capsule_data_size;
  if (opts.use_srq && device.caps().max_srq_wr > 0) {
    verbs::SrqOpts srq_opts;
    srq_opts.max_wr = std::min(opts.srq_depth, device.caps().max_srq_wr);
    auto srq = context->pd->create_srq(srq_opts);
    if (!srq) return Unexpected(srq.error());
    context->srq = std::move(*srq);
    const uint32_t count = context->srq->max_wr();
    if (count >= context->cq_capacity) {
      NVMF_ERRLOG(rdma,
                  "cq_depth %" PRIu32 " (device %s: %" PRIu32
                  " entries) leaves no room "
                  "beside the SRQ's %" PRIu32 " receives: raise cq_depth or lower srq_depth",
                  opts.cq_depth, device.caps().name.c_str(), context->cq_capacity, count);
      return Unexpected(Errc::invalid_argument, "cq_depth");
    }
    context->cq_reserved = count;  // every posted receive may complete at once
    auto region = buffer_memory.allocate(size_t{count} * recv_bytes, 4096);
    if (!region) return Unexpected(region.error());
    context->recv_region = std::move(*region);
    auto mr = context->pd->register_memory(context->recv_region.addr(), size_t{count} * recv_bytes,
                                           verbs::kAccessLocalWrite);
    if (!mr) return Unexpected(mr.error());
    context->recv_mr = std::move(*mr);
    context->srq_buffers.reset(new RecvBuffer[count]);  // setup-path
    context->srq_buffer_count = count;
    for (uint32_t i = 0; i < count; ++i) {
      RecvBuffer& buffer = context->srq_buffers[i];
      buffer.data = static_cast<uint8_t*>(context->recv_region.addr()) + size_t{i} * recv_bytes;
      buffer.lkey = context->recv_mr->lkey();
      buffer.device = context.get();
      repost_recv(buffer);
    }
    context->srq_dirty = false;
    auto flushed = context->srq->flush();
    if (!flushed) return Unexpected(flushed.error());
  } else if (opts.use_srq) {
    NVMF_NOTICELOG(rdma, "device %s has no shared receive queue: receives per connection",
                   device.caps().name.c_str());
  }
  context->send_with_invalidate = opts.send_with_invalidate == SendWithInvalidate::automatic &&
                                  device.caps().memory_management_extensions;
  if (!poller_.registered()) {
    auto added = reactor_.add_poller(poller_, context->cq->event_fd());
    if (!added) return Unexpected(added.error());
    if (context->cq->event_fd() >= 0) (void)context->cq->arm();
  }
  devices_.push_back(std::move(context));
  return devices_.back().get();
}

Result<std::unique_ptr<RdmaQpair>> RdmaPollGroup::make_qpair(Connection& connection,
                                                             DeviceContext& device) {
  const RdmaTargetOpts& opts = transport_.opts();
  auto qpair = std::make_unique<RdmaQpair>(*this, connection, device);  // setup-path
  const uint16_t depth = connection.decision.queue_depth;
  qpair->depth = depth;

  // Send queue: 2 WRs per command on average (one data WR, one response), plus room for one
  // command that uses every descriptor, so any command can always be posted eventually.
  verbs::QpOpts qp_opts;
  qp_opts.send_cq = device.cq.get();
  qp_opts.recv_cq = device.cq.get();
  qp_opts.srq = device.srq.get();
  qp_opts.max_send_wr = uint32_t{depth} * 2 + kWrsPerRequestMax;
  qp_opts.max_recv_wr = device.srq ? 1 : depth;
  qp_opts.max_send_sge = target::kRequestIovMax;
  qp_opts.max_recv_sge = 1;
  const uint32_t device_max_wr = device.device->caps().max_qp_wr;
  if (device_max_wr != 0 && qp_opts.max_send_wr > device_max_wr) {
    qp_opts.max_send_wr = device_max_wr;
  }
  if (qp_opts.max_send_wr < kWrsPerRequestMax + 1) {
    NVMF_ERRLOG(rdma, "device max_qp_wr %" PRIu32 " is too small for one command", device_max_wr);
    return Unexpected(Errc::no_memory, "max_qp_wr");
  }
  const uint32_t device_max_sge = device.device->caps().max_sge;
  if (device_max_sge != 0 && device_max_sge < qp_opts.max_send_sge) {
    qp_opts.max_send_sge = device_max_sge;
  }
  const uint32_t cq_needed = qp_opts.max_send_wr + (device.srq ? 0 : depth);
  if (device.cq_reserved + cq_needed > device.cq_capacity) {
    cq_full_refusals_.fetch_add(1, std::memory_order_relaxed);
    NVMF_ERRLOG(rdma,
                "completion queue full: %" PRIu32 " of %" PRIu32
                " entries reserved, a "
                "queue of depth %u needs %" PRIu32
                " more (raise cq_depth, or fewer or shallower "
                "queues)",
                device.cq_reserved, device.cq_capacity, depth, cq_needed);
    return Unexpected(Errc::no_memory, "completion queue full");
  }
  auto qp = connection.id->create_qp(*device.pd, qp_opts);
  if (!qp) return Unexpected(qp.error());
  qpair->qp = *qp;
  qpair->send_queue_size = qpair->qp->granted().max_send_wr;
  // The device may grant more than asked: reserve what it can really put on the CQ.
  qpair->cq_reserved =
      std::max(qp_opts.max_send_wr, qpair->send_queue_size) + (device.srq ? 0 : uint32_t{depth});
  device.cq_reserved += qpair->cq_reserved;

  // Twice the queue depth of requests: the host frees a command slot when it has the
  // response and its own SEND completion, which can be before this side has reaped the
  // response SEND's completion. So up to `depth` commands can be new while up to `depth`
  // answered ones still wait for their completions here (SPDK parks such capsules instead);
  // only a host beyond that has really overrun its queue.
  const uint32_t request_count = uint32_t{depth} * 2;
  // Responses: one registered 16-byte slot per request.
  auto responses = memory_->allocate(size_t{request_count} * kCqeBytes, 4096);
  if (!responses) return Unexpected(responses.error());
  qpair->response_region = std::move(*responses);
  auto response_mr = device.pd->register_memory(qpair->response_region.addr(),
                                                size_t{request_count} * kCqeBytes, 0);
  if (!response_mr) return Unexpected(response_mr.error());
  qpair->response_mr = std::move(*response_mr);

  qpair->requests.reset(new RdmaRequest[request_count]);  // setup-path
  for (uint32_t i = 0; i < request_count; ++i) {
    RdmaRequest& req = qpair->requests[i];
    req.qpair = qpair.get();
    req.core.transport_ctx = &req;
    req.response = static_cast<spec::Cqe*>(qpair->response_region.addr()) + i;
    for (auto& ctx : req.wr_ctx) ctx = WrContext{WrKind::send_side, &req};
    qpair->free_requests.push_back(req);
  }

  if (!device.srq) {
    const uint32_t recv_bytes = kSqeBytes + opts.in_capsule_data_size;
    env::MemoryBackend& buffer_memory =
        opts.buffer_memory != nullptr ? *opts.buffer_memory : *memory_;
    auto region = buffer_memory.allocate(size_t{depth} * recv_bytes, 4096);
    if (!region) return Unexpected(region.error());
    qpair->recv_region = std::move(*region);
    auto mr = device.pd->register_memory(qpair->recv_region.addr(), size_t{depth} * recv_bytes,
                                         verbs::kAccessLocalWrite);
    if (!mr) return Unexpected(mr.error());
    qpair->recv_mr = std::move(*mr);
    qpair->recv_buffers.reset(new RecvBuffer[depth]);  // setup-path
    for (uint16_t i = 0; i < depth; ++i) {
      RecvBuffer& buffer = qpair->recv_buffers[i];
      buffer.data = static_cast<uint8_t*>(qpair->recv_region.addr()) + size_t{i} * recv_bytes;
      buffer.lkey = qpair->recv_mr->lkey();
      buffer.qpair = qpair.get();
      repost_recv(buffer);
    }
  }
  return qpair;
}

void RdmaPollGroup::on_new_connection(void* ctx) noexcept {
  auto* connection = static_cast<Connection*>(ctx);
  connection->group->accept_connection(*connection);
}

void RdmaPollGroup::accept_connection(Connection& connection) noexcept {
  auto refuse = [&](const char* why, const Error& error) {
    char text[256];
    NVMF_ERRLOG(rdma, "cannot set up a queue for %s: %s: %s", connection.id->peer_address().c_str(),
                why, error_describe(error, text, sizeof(text)));
    spec::RdmaCmReject reject = make_reject(spec::rdma_cm_reject::no_resources);
    (void)connection.id->reject(&reject, sizeof(reject));
    release_to_acceptor(connection);
  };
  verbs::Device* device = connection.id->device();
  if (device == nullptr) return refuse("no device", Error(Errc::not_found, "device"));
  auto context = device_context(*device);
  if (!context) return refuse("device resources", context.error());
  auto made = make_qpair(connection, **context);
  if (!made) return refuse("queue pair", made.error());
  std::unique_ptr<RdmaQpair> qpair = std::move(*made);
  if (qpair->dirty) {
    // Its receives are flushed right below, before the accept; keep it off the dirty list
    // until it is one of ours, so a failed accept leaves nothing behind.
    dirty_.remove(*qpair);
    qpair->dirty = false;
  }

  target::TransportOps ops;
  ops.request_complete = &RdmaPollGroup::core_request_complete;
  ops.qpair_disconnect = &RdmaPollGroup::core_qpair_disconnect;
  ops.ctx = qpair.get();
  auto core = transport_.target().create_qpair(reactor_, ops, qpair->depth);
  if (!core) return refuse("target queue", core.error());
  qpair->core = *core;

  spec::RdmaCmAccept accept = make_accept(connection.decision);
  verbs::ConnectParams params;
  params.private_data = &accept;
  params.private_data_length = sizeof(accept);
  // The host never reads from us: no responder resources (SPDK does the same). We read the
  // host's data with up to the negotiated depth.
  params.responder_resources = 0;
  params.initiator_depth = connection.decision.read_depth;
  auto flushed = qpair->qp->flush();  // the receives posted above
  auto accepted = flushed ? connection.id->accept(params) : flushed;
  if (!accepted) {
    (void)transport_.target().destroy_qpair(*qpair->core);
    return refuse("accept", accepted.error());
  }
  connection.qpair = qpair.get();
  by_qp_num_[qpair->qp->qp_num()] = qpair.get();
  qpairs_.push_back(std::move(qpair));
}

void RdmaPollGroup::on_disconnect_event(void* ctx) noexcept {
  auto* connection = static_cast<Connection*>(ctx);
  if (connection->qpair != nullptr) {
    connection->group->begin_teardown(
        *connection->qpair,
        verbs::cm_event_type_name(connection->pending_event.load(std::memory_order_relaxed)));
  }
  // Last touch: after this the acceptor may free the connection.
  connection->messages_in_flight.fetch_sub(1, std::memory_order_release);
}

void RdmaPollGroup::core_qpair_disconnect(void* ctx, target::Qpair&) noexcept {
  auto* qpair = static_cast<RdmaQpair*>(ctx);
  qpair->group.begin_teardown(*qpair, "the target core closed the queue");
}

// ---------------------------------------------------------------------------------------
// Poll group: data path

int RdmaPollGroup::poll_fn(void* ctx, unsigned budget) noexcept {
  return static_cast<RdmaPollGroup*>(ctx)->poll(budget);
}

int RdmaPollGroup::poll(unsigned budget) noexcept {
  int work = 0;
  verbs::WorkCompletion completions[kCompletionBatch];
  const unsigned batch = budget < kCompletionBatch ? budget : kCompletionBatch;
  for (auto& device : devices_) {
    const bool interrupts = device->cq->event_fd() >= 0;
    if (interrupts) (void)device->cq->consume_event();
    int count = device->cq->poll(std::span(completions, batch));
    for (int i = 0; i < count; ++i) handle_completion(completions[i]);
    work += count;
    if (interrupts) {
      // Arm, then poll once more: a completion that landed between the poll and the arm
      // raises no event, and the reactor would sleep with it in the CQ.
      (void)device->cq->arm();
      count = device->cq->poll(std::span(completions, batch));
      for (int i = 0; i < count; ++i) handle_completion(completions[i]);
      work += count;
    }
  }
  // Commands that waited for data buffers, oldest first, while buffers last.
  while (!buffer_waiters_.empty()) {
    RdmaRequest& req = buffer_waiters_.front();
    if (!take_buffers(req)) break;
    buffer_waiters_.remove(req);
    req.state = req.core.xfer == target::XferDirection::host_to_controller
                    ? RdmaRequestState::ready_to_read
                    : RdmaRequestState::ready_to_execute;
    advance(req);
    ++work;
  }
  for (auto& qpair : qpairs_) {
    while (!qpair->send_waiters.empty()) {
      RdmaRequest& req = qpair->send_waiters.front();
      const bool posted =
          req.state == RdmaRequestState::ready_to_read ? post_reads(req) : post_response(req);
      if (!posted) break;
      qpair->send_waiters.remove(req);
      advance(req);
      ++work;
    }
  }
  flush_dirty();
  if (!draining_.empty()) drive_teardowns();
  if (!pending_releases_.empty() && retry_releases()) ++work;
  return work;
}

void RdmaPollGroup::handle_completion(const verbs::WorkCompletion& wc) noexcept {
  auto* ctx = reinterpret_cast<WrContext*>(wc.wr_id);
  if (ctx->kind == WrKind::recv) {
    handle_recv(wc, *static_cast<RecvBuffer*>(ctx->owner));
    return;
  }
  retire_wr(*static_cast<RdmaRequest*>(ctx->owner), *ctx, wc);
}

void RdmaPollGroup::handle_recv(const verbs::WorkCompletion& wc, RecvBuffer& buffer) noexcept {
  RdmaQpair* qpair = buffer.qpair;
  if (qpair != nullptr) {
    --qpair->recvs_posted;
  } else {
    auto found = by_qp_num_.find(wc.qp_num);
    qpair = found == by_qp_num_.end() ? nullptr : found->second;
  }
  if (wc.status != verbs::WcStatus::success) {
    // A flushed receive of a queue in error: SRQ buffers go back to the SRQ, a connection's
    // own buffers are done with. Anything but a flush is an error worth closing for.
    if (buffer.qpair == nullptr) repost_recv(buffer);
    if (qpair != nullptr && wc.status != verbs::WcStatus::wr_flush_error) {
      begin_teardown(*qpair, verbs::wc_status_name(wc.status));
    }
    return;
  }
  if (qpair == nullptr || qpair->state != RdmaQpairState::live) {
    if (buffer.qpair == nullptr) repost_recv(buffer);  // a late capsule: drop it
    return;
  }
  RdmaRequest* req = qpair->free_requests.pop_front();
  if (req == nullptr) {
    // More commands than twice the negotiated depth: the host overran its queue.
    NVMF_ERRLOG(rdma, "host %s overran its queue (depth %u): disconnecting",
                qpair->connection.id->peer_address().c_str(), qpair->depth);
    repost_recv(buffer);
    begin_teardown(*qpair, "queue overrun");
    return;
  }
  ++qpair->requests_in_use;
  req->recv = &buffer;
  req->recv_length = wc.byte_len;
  req->failed = false;
  req->state = RdmaRequestState::received;
  advance(*req);
}

void RdmaPollGroup::retire_wr(RdmaRequest& req, const WrContext& ctx,
                              const verbs::WorkCompletion& wc) noexcept {
  RdmaQpair& qpair = *req.qpair;
  // The request's signaled WR: the response SEND, or the last RDMA READ.
  const bool signaled_wr =
      (req.state == RdmaRequestState::responding && &ctx == &req.wr_ctx[kWrsPerRequestMax - 1]) ||
      (req.state == RdmaRequestState::reading && req.sgl.keyed_count > 0 &&
       &ctx == &req.wr_ctx[req.sgl.keyed_count - 1]);
  if (wc.status != verbs::WcStatus::success) {
    req.failed = true;
    if (wc.status != verbs::WcStatus::wr_flush_error) {
      NVMF_ERRLOG(rdma, "QP %u: %s of a command failed: %s (vendor error 0x%x)", wc.qp_num,
                  req.state == RdmaRequestState::reading ? "RDMA READ" : "send",
                  verbs::wc_status_name(wc.status), wc.vendor_error);
      begin_teardown(qpair, verbs::wc_status_name(wc.status));
    }
  }
  if (wc.status == verbs::WcStatus::success || signaled_wr) {
    // A signaled success retires this request's earlier unsignaled WRs too (IBTA ordering).
    // In error, completions still come in order: an earlier unsignaled WR that is not back
    // by the time the signaled one is (flushed) executed without a completion and never
    // will have one (a data WRITE done before the QP failed), so it retires here too.
    qpair.send_queue_used -= req.send_queue_slots;
    req.send_queue_slots = 0;
    req.wrs_outstanding = 0;
  } else {
    // In error every WR not executed yet completes on its own.
    if (req.wrs_outstanding > 0) --req.wrs_outstanding;
    if (req.send_queue_slots > 0) {
      --req.send_queue_slots;
      --qpair.send_queue_used;
    }
    if (req.wrs_outstanding > 0) return;
  }
  if (req.state == RdmaRequestState::reading) {
    req.state = req.failed ? RdmaRequestState::completed : RdmaRequestState::ready_to_execute;
  } else if (req.state == RdmaRequestState::responding) {
    req.state = RdmaRequestState::completed;
  }
  advance(req);
}

void RdmaPollGroup::core_request_complete(void* ctx, target::Request& core) noexcept {
  (void)ctx;
  auto* req = static_cast<RdmaRequest*>(core.transport_ctx);
  req->state = RdmaRequestState::ready_to_respond;
  if (!req->in_advance) req->qpair->group.advance(*req);
}

void RdmaPollGroup::advance(RdmaRequest& req) noexcept {
  if (req.in_advance) return;
  req.in_advance = true;
  RdmaQpair& qpair = *req.qpair;
  const RdmaTargetOpts& opts = transport_.opts();
  RdmaRequestState previous;
  do {
    previous = req.state;
    switch (req.state) {
      case RdmaRequestState::free:
        break;

      case RdmaRequestState::received: {
        if (req.recv_length < kSqeBytes) {
          // Not even an SQE: nothing to answer to. Drop the capsule and the connection.
          NVMF_ERRLOG(rdma, "capsule of %" PRIu32 " bytes is shorter than an SQE", req.recv_length);
          begin_teardown(qpair, "short capsule");
          req.failed = true;
          req.state = RdmaRequestState::completed;
          break;
        }
        std::memcpy(&req.core.cmd, req.recv->data, kSqeBytes);
        req.core.qpair = qpair.core;
        req.core.xfer = target::xfer_direction(req.core.cmd);
        req.core.iovcnt = 0;
        req.core.length = 0;
        req.core.rsp = spec::Cqe{};
        req.buffer_count = 0;
        SglLimits limits;
        limits.max_io_size = opts.max_io_size;
        limits.in_capsule_data_size = opts.in_capsule_data_size;
        // MSDBD as Identify Controller advertises it: a longer list is Data SGL Length Invalid.
        limits.max_keyed_descriptors = transport_.target().opts().max_sgl_descriptors;
        const spec::Status parsed = parse_command_sgl(
            req.core.cmd, static_cast<uint8_t>(req.core.xfer), req.recv->data + kSqeBytes,
            req.recv_length - kSqeBytes, limits, &req.sgl);
        if (!parsed.is_success()) {
          // Answered without running: the core consumes the SQ entry and fills CID/SQID/SQHD,
          // coming back through core_request_complete (ready_to_respond) at once.
          req.state = RdmaRequestState::executing;
          target::refuse(req.core, parsed);
          break;
        }
        req.core.length = req.sgl.total_length;
        if (req.sgl.kind == ParsedSgl::Kind::in_capsule) {
          req.core.iov[0].iov_base = req.recv->data + kSqeBytes + req.sgl.in_capsule_offset;
          req.core.iov[0].iov_len = req.sgl.total_length;
          req.core.iovcnt = 1;
          req.state = RdmaRequestState::ready_to_execute;
        } else if (req.sgl.kind == ParsedSgl::Kind::keyed) {
          req.state = RdmaRequestState::need_buffer;
        } else {
          req.state = RdmaRequestState::ready_to_execute;
        }
        break;
      }

      case RdmaRequestState::need_buffer:
        if (!buffer_waiters_.empty() || !take_buffers(req)) {
          // FIFO: a command never overtakes one that waited longer for buffers.
          if (!req.link.linked()) buffer_waiters_.push_back(req);
          break;
        }
        req.state = req.core.xfer == target::XferDirection::host_to_controller
                        ? RdmaRequestState::ready_to_read
                        : RdmaRequestState::ready_to_execute;
        break;

      case RdmaRequestState::ready_to_read:
        if (!qpair.send_waiters.empty() || !post_reads(req)) {
          if (!req.link.linked()) qpair.send_waiters.push_back(req);
        }
        break;

      case RdmaRequestState::reading:
        break;  // waits for the last READ's completion (retire_wr)

      case RdmaRequestState::ready_to_execute:
        if (qpair.state != RdmaQpairState::live || qpair.core == nullptr) {
          req.state = RdmaRequestState::completed;  // the queue is going away: do not run it
          break;
        }
        req.state = RdmaRequestState::executing;
        transport_.target().execute(req.core);  // may come back through core_request_complete
        break;

      case RdmaRequestState::executing:
        break;  // waits for core_request_complete

      case RdmaRequestState::ready_to_respond:
        if (!qpair.send_waiters.empty() || !post_response(req)) {
          if (!req.link.linked()) qpair.send_waiters.push_back(req);
        }
        break;

      case RdmaRequestState::responding:
        break;  // waits for the SEND's completion (retire_wr)

      case RdmaRequestState::completed:
        release(req);
        break;
    }
  } while (req.state != previous);
  req.in_advance = false;
}

bool RdmaPollGroup::take_buffers(RdmaRequest& req) noexcept {
  DeviceContext& device = req.qpair->device;
  const uint32_t unit = transport_.opts().io_unit_size;
  const uint32_t needed = (req.sgl.total_length + unit - 1) / unit;
  if (device.free_data_buffers.size() < needed) return false;
  uint32_t left = req.sgl.total_length;
  for (uint32_t i = 0; i < needed; ++i) {
    uint8_t* buffer = device.free_data_buffers.back();
    device.free_data_buffers.pop_back();
    req.buffers[i] = buffer;
    req.core.iov[i].iov_base = buffer;
    req.core.iov[i].iov_len = left < unit ? left : unit;
    left -= static_cast<uint32_t>(req.core.iov[i].iov_len);
  }
  req.buffer_count = needed;
  req.core.iovcnt = needed;
  return true;
}

uint32_t RdmaPollGroup::build_sges(const RdmaRequest& req, uint32_t offset, uint32_t length,
                                   verbs::Sge* sges) const noexcept {
  const uint32_t unit = transport_.opts().io_unit_size;
  const uint32_t lkey = req.qpair->device.data_mr->lkey();
  uint32_t count = 0;
  while (length > 0) {
    const uint32_t index = offset / unit;
    const uint32_t within = offset % unit;
    const uint32_t take = std::min(length, unit - within);
    sges[count++] = verbs::Sge{reinterpret_cast<uint64_t>(req.buffers[index] + within), take, lkey};
    offset += take;
    length -= take;
  }
  return count;
}

void RdmaPollGroup::post_data_wrs(RdmaRequest& req, verbs::WrOpcode opcode,
                                  bool signal_last) noexcept {
  RdmaQpair& qpair = *req.qpair;
  const WrKind kind = opcode == verbs::WrOpcode::rdma_read ? WrKind::rdma_read : WrKind::send_side;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < req.sgl.keyed_count; ++i) {
    const KeyedBlock& block = req.sgl.keyed[i];
    verbs::Sge sges[target::kRequestIovMax];
    verbs::SendWr wr;
    req.wr_ctx[i].kind = kind;
    wr.wr_id = reinterpret_cast<uint64_t>(&req.wr_ctx[i]);
    wr.opcode = opcode;
    // One signaled WR retires the unsignaled ones before it (the last READ, or the response
    // SEND after the WRITEs).
    wr.flags = signal_last && i + 1 == req.sgl.keyed_count ? verbs::kWrSignaled : 0u;
    wr.sg_list = sges;
    wr.num_sge = build_sges(req, offset, block.length, sges);
    wr.remote_addr = block.address;
    wr.rkey = block.key;
    offset += block.length;
    // Room was checked by the caller, so a post only fails on a QP already in error; such WRs
    // still complete (flushed) through the CQ and retire like the others.
    (void)qpair.qp->post_send(wr);
  }
}

bool RdmaPollGroup::post_reads(RdmaRequest& req) noexcept {
  RdmaQpair& qpair = *req.qpair;
  const uint32_t needed = req.sgl.keyed_count;
  if (qpair.send_queue_used + needed > qpair.send_queue_size) return false;
  post_data_wrs(req, verbs::WrOpcode::rdma_read, true);
  account_posted(req, needed, RdmaRequestState::reading);
  return true;
}

bool RdmaPollGroup::post_response(RdmaRequest& req) noexcept {
  RdmaQpair& qpair = *req.qpair;
  const bool send_data = req.core.xfer == target::XferDirection::controller_to_host &&
                         req.sgl.kind == ParsedSgl::Kind::keyed &&
                         req.core.rsp.decoded_status().is_success() && !req.failed;
  const uint32_t needed = (send_data ? req.sgl.keyed_count : 0) + 1;
  if (qpair.send_queue_used + needed > qpair.send_queue_size) return false;
  if (send_data) post_data_wrs(req, verbs::WrOpcode::rdma_write, false);
  std::memcpy(req.response, &req.core.rsp, kCqeBytes);
  verbs::Sge sge{reinterpret_cast<uint64_t>(req.response), kCqeBytes, qpair.response_mr->lkey()};
  verbs::SendWr wr;
  WrContext& ctx = req.wr_ctx[kWrsPerRequestMax - 1];
  ctx.kind = WrKind::send_side;
  wr.wr_id = reinterpret_cast<uint64_t>(&ctx);
  wr.flags = verbs::kWrSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  // The response goes only after every data WRITE of the command was posted on this QP.
  if (req.sgl.invalidate_key && qpair.device.send_with_invalidate) {
    wr.opcode = verbs::WrOpcode::send_with_inv;
    wr.invalidate_rkey = req.sgl.invalidate_rkey;
  } else {
    wr.opcode = verbs::WrOpcode::send;
  }
  (void)qpair.qp->post_send(wr);
  account_posted(req, needed, RdmaRequestState::responding);
  return true;
}

void RdmaPollGroup::account_posted(RdmaRequest& req, uint32_t wrs, RdmaRequestState next) noexcept {
  req.wrs_outstanding = wrs;
  req.send_queue_slots = wrs;
  req.qpair->send_queue_used += wrs;
  req.state = next;
  mark_dirty(*req.qpair);
}

void RdmaPollGroup::release(RdmaRequest& req) noexcept {
  RdmaQpair& qpair = *req.qpair;
  DeviceContext& device = qpair.device;
  for (uint32_t i = 0; i < req.buffer_count; ++i)
    device.free_data_buffers.push_back(req.buffers[i]);
  req.buffer_count = 0;
  req.core.iovcnt = 0;
  if (req.recv != nullptr) {
    repost_recv(*req.recv);
    req.recv = nullptr;
  }
  if (req.link.linked()) {
    // Only possible for a request that never got its turn (queue torn down).
    if (req.state == RdmaRequestState::need_buffer) buffer_waiters_.remove(req);
  }
  req.state = RdmaRequestState::free;
  req.sgl = ParsedSgl{};
  --qpair.requests_in_use;
  qpair.free_requests.push_back(req);
}

void RdmaPollGroup::repost_recv(RecvBuffer& buffer) noexcept {
  const uint32_t bytes = kSqeBytes + transport_.opts().in_capsule_data_size;
  verbs::Sge sge{reinterpret_cast<uint64_t>(buffer.data), bytes, buffer.lkey};
  verbs::RecvWr wr{reinterpret_cast<uint64_t>(&buffer.ctx), &sge, 1};
  if (buffer.qpair == nullptr) {
    // An SRQ buffer: back to the shared queue, whatever happens to the connection it served.
    (void)buffer.device->srq->post_recv(wr);
    buffer.device->srq_dirty = true;
    return;
  }
  RdmaQpair& qpair = *buffer.qpair;
  if (qpair.state != RdmaQpairState::live) return;  // its QP is in error: nothing to receive
  if (qpair.qp->post_recv(wr)) ++qpair.recvs_posted;
  mark_dirty(qpair);
}

void RdmaPollGroup::mark_dirty(RdmaQpair& qpair) noexcept {
  if (!qpair.dirty) {
    qpair.dirty = true;
    dirty_.push_back(qpair);
  }
}

void RdmaPollGroup::flush_dirty() noexcept {
  // One doorbell per QP per poll (STYLE 4).
  while (RdmaQpair* qpair = dirty_.pop_front()) {
    qpair->dirty = false;
    (void)qpair->qp->flush();
  }
  for (auto& device : devices_) {
    if (device->srq_dirty) {
      device->srq_dirty = false;
      (void)device->srq->flush();
    }
  }
}

// ---------------------------------------------------------------------------------------
// Poll group: teardown

void RdmaPollGroup::begin_teardown(RdmaQpair& qpair, const char* why) noexcept {
  if (qpair.state != RdmaQpairState::live) return;
  NVMF_NOTICELOG(rdma, "closing queue %u of %s: %s", qpair.core ? qpair.core->qid() : 0,
                 qpair.connection.id->peer_address().c_str(), why);
  qpair.state = RdmaQpairState::draining;
  (void)qpair.connection.id->disconnect();
  (void)qpair.qp->move_to_error();
  draining_.push_back(&qpair);
}

void RdmaPollGroup::drive_teardowns() noexcept {
  for (size_t i = 0; i < draining_.size();) {
    RdmaQpair& qpair = *draining_[i];
    // Requests parked inside the transport: nothing will wake them on a dead queue.
    while (RdmaRequest* req = qpair.send_waiters.pop_front()) {
      req->failed = true;
      req->state = RdmaRequestState::completed;
      advance(*req);
    }
    for (auto it = buffer_waiters_.begin(); it != buffer_waiters_.end();) {
      RdmaRequest& req = *it;
      ++it;
      if (req.qpair == &qpair) {
        buffer_waiters_.remove(req);
        req.state = RdmaRequestState::completed;
        advance(req);
      }
    }
    if (qpair.core != nullptr) {
      // The core answers what it holds (AERs) through core_request_complete; those
      // responses are flushed by the QP in error and retire like any other.
      if (transport_.target().destroy_qpair(*qpair.core)) qpair.core = nullptr;
    }
    const bool done = qpair.core == nullptr && qpair.requests_in_use == 0 &&
                      qpair.send_queue_used == 0 && qpair.recvs_posted == 0;
    if (!done) {
      ++i;
      continue;
    }
    draining_[i] = draining_.back();
    draining_.pop_back();
    finish_teardown(qpair);
  }
}

void RdmaPollGroup::finish_teardown(RdmaQpair& qpair) noexcept {
  qpair.state = RdmaQpairState::gone;
  if (qpair.dirty) dirty_.remove(qpair);
  by_qp_num_.erase(qpair.qp->qp_num());
  Connection& connection = qpair.connection;
  connection.qpair = nullptr;
  for (size_t i = 0; i < qpairs_.size(); ++i) {
    if (qpairs_[i].get() == &qpair) {
      qpairs_[i] = std::move(qpairs_.back());
      qpairs_.pop_back();
      break;
    }
  }
  release_to_acceptor(connection);
}

void RdmaPollGroup::release_to_acceptor(Connection& connection) noexcept {
  if (&reactor_ == transport_.reactors_[0]) {
    connection.released = true;  // this reactor is the acceptor: no message needed
    return;
  }
  if (!transport_.reactors_[0]->send(&RdmaTargetTransport::release_connection, &connection)) {
    // Teardown, not the I/O path: the vector grows only while the acceptor's ring is full.
    pending_releases_.push_back(&connection);
  }
}

bool RdmaPollGroup::retry_releases() noexcept {
  size_t kept = 0;
  for (Connection* connection : pending_releases_) {
    if (!transport_.reactors_[0]->send(&RdmaTargetTransport::release_connection, connection)) {
      pending_releases_[kept++] = connection;
    }
  }
  const bool any_sent = kept < pending_releases_.size();
  pending_releases_.resize(kept);
  return any_sent;
}

const char* rdma_request_state_name(RdmaRequestState state) noexcept {
  switch (state) {
    case RdmaRequestState::free:
      return "free";
    case RdmaRequestState::received:
      return "received";
    case RdmaRequestState::need_buffer:
      return "need_buffer";
    case RdmaRequestState::ready_to_read:
      return "ready_to_read";
    case RdmaRequestState::reading:
      return "reading";
    case RdmaRequestState::ready_to_execute:
      return "ready_to_execute";
    case RdmaRequestState::executing:
      return "executing";
    case RdmaRequestState::ready_to_respond:
      return "ready_to_respond";
    case RdmaRequestState::responding:
      return "responding";
    case RdmaRequestState::completed:
      return "completed";
  }
  return "?";
}

}  // namespace nvmf::transport_rdma
