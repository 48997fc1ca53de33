#include "transport_rdma/target_transport.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "transport_rdma/completion_batch.h"
#include "transport_rdma/target_internal.h"

NVMF_LOG_COMPONENT(rdma);

namespace nvmf::transport_rdma {

namespace {
// The NVMe/RDMA command capsule starts with the 64-byte SQE; in-capsule data follows it.
constexpr uint32_t kSqeBytes = sizeof(spec::Sqe);
constexpr uint32_t kCqeBytes = sizeof(spec::Cqe);
// Completions reaped per CQ poll (STYLE 4: a budget per poll, into a stack array).
constexpr unsigned kCompletionBatch = 32;

// decoded_status().is_success() read straight from the CQE's status field: SC (bits 8:1) and
// SCT (bits 11:9) both zero. Decoding every part of the field costs more, once per response.
constexpr uint16_t kStatusCodeAndTypeMask = 0x0FFE;
constexpr bool succeeded(const spec::Cqe& cqe) noexcept {
  return (cqe.status & kStatusCodeAndTypeMask) == 0;
}
constexpr spec::Cqe cqe_with_status(uint16_t status) noexcept { return {0, 0, 0, 0, 0, status}; }
static_assert(succeeded(cqe_with_status(0)) && succeeded(cqe_with_status(1u << 15)) &&  // DNR alone
              !succeeded(cqe_with_status(1u << 1)) && !succeeded(cqe_with_status(1u << 9)));
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
      acceptor_poller_("rdma_acceptor", &RdmaTargetTransport::acceptor_poll, this),
      housekeeping_poller_("rdma_acceptor_housekeeping", &RdmaTargetTransport::housekeeping_poll,
                           this) {}

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
  transport->async_wakeup_due_.assign(transport->groups_.size(), false);
  auto added = reactors[0]->add_poller(transport->acceptor_poller_,
                                       transport->channel_->event_fd(),
                                       transport->acceptor_poll_period_ns());
  if (!added) return Unexpected(added.error());
  added = reactors[0]->add_poller(transport->housekeeping_poller_);
  if (!added) return Unexpected(added.error());
  // SPDK's "RDMA Transport Init" line: what an operator tuned, as the transport took it.
  char receives[96];
  if (opts.use_srq) {
    snprintf(receives, sizeof(receives),
             "a shared receive queue of %" PRIu32 " per reactor and device", opts.srq_depth);
  } else {
    snprintf(receives, sizeof(receives), "per connection (no_srq)");
  }
  NVMF_NOTICELOG(rdma,
                 "transport: %zu reactor(s), in_capsule_data_size %" PRIu32
                 ", max_io_size %" PRIu32 ", io_unit_size %" PRIu32 ", receives %s",
                 reactors.size(), opts.in_capsule_data_size, opts.max_io_size,
                 opts.io_unit_size, receives);
  return transport;
}

RdmaTargetTransport::~RdmaTargetTransport() {
  if (acceptor_poller_.registered()) reactors_[0]->remove_poller(acceptor_poller_);
  if (housekeeping_poller_.registered()) reactors_[0]->remove_poller(housekeeping_poller_);
  for (auto& watched : watched_) {
    if (watched->poller.registered()) reactors_[0]->remove_poller(watched->poller);
  }
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
  if (verbs::Device* device = (*id)->device()) {
    if (device_failed(device)) {
      NVMF_ERRLOG(rdma,
                  "not listening on %s:%u: device %s had a fatal error (reset it, then "
                  "restart nvmf_tgt)",
                  address.c_str(), port, device->caps().name.c_str());
      return Unexpected(Errc::bad_state, "the device behind the address had a fatal error");
    }
    auto watched = watch_device(*device);
    if (!watched) return watched;
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

size_t RdmaTargetTransport::io_queue_count(size_t index) const noexcept {
  return index < groups_.size() ? io_queues_on(*groups_[index]) : 0;
}

RdmaTargetTransport::Stats RdmaTargetTransport::stats() const noexcept {
  Stats stats = stats_;
  for (const auto& group : groups_) {
    stats.cq_full_refusals += group->cq_full_refusals();
    stats.buffer_waits += group->buffer_waits();
    stats.send_queue_waits += group->send_queue_waits();
    stats.established_notifications += group->established_notifications();
  }
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
  return handled;
}

int RdmaTargetTransport::housekeeping_poll(void* ctx, unsigned) noexcept {
  auto* transport = static_cast<RdmaTargetTransport*>(ctx);
  int work = 0;
  if (transport->released_not_freed_ != 0) work += transport->free_released_connections();
  if (transport->any_async_wakeup_due_) transport->wake_groups_for_async_events();
  return work;
}

int RdmaTargetTransport::free_released_connections() noexcept {
  int freed = 0;
  for (size_t i = 0; i < connections_.size();) {
    if (connections_[i]->released &&
        connections_[i]->messages_in_flight.load(std::memory_order_acquire) == 0) {
      connections_[i] = std::move(connections_.back());
      connections_.pop_back();
      ++stats_.disconnects;
      --released_not_freed_;
      ++freed;
    } else {
      ++i;
    }
  }
  return freed;
}

void RdmaTargetTransport::mark_released(Connection& connection) noexcept {
  if (connection.released) return;
  connection.released = true;
  ++released_not_freed_;
}

void RdmaTargetTransport::on_connect_request(const verbs::CmEvent& event) noexcept {
  std::unique_ptr<verbs::CmId> id = channel_->adopt(event.id);
  if (!id) return;
  ConnectLimits limits = opts_.limits;
  verbs::Device* device = id->device();
  if (device != nullptr) {
    limits.device_max_qp_wr = device->caps().max_qp_wr;
    limits.device_max_qp_init_rd_atom = device->caps().max_qp_init_rd_atom;
    if (!watch_device(*device)) device = nullptr;  // logged; the connection is refused below
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
  if (decision.accept && (device == nullptr || device_failed(device))) {
    decision.accept = false;
    decision.reject_status = spec::rdma_cm_reject::no_resources;
    decision.reason = device == nullptr ? "no usable RDMA device" : "the device had a fatal error";
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
  connection->group = pick_group(decision.qid);
  Connection* raw = connection.get();
  connections_.push_back(std::move(connection));
  if (!raw->group->reactor().send(&RdmaPollGroup::on_new_connection, raw)) {
    NVMF_ERRLOG(rdma, "reactor %s is too busy to take a connection", raw->group->reactor().name());
    spec::RdmaCmReject reject = make_reject(spec::rdma_cm_reject::no_resources);
    (void)raw->id->reject(&reject, sizeof(reject));
    mark_released(*raw);
    ++stats_.connects_rejected;
    return;
  }
  ++stats_.connects_accepted;
}

// I/O queue QID q goes to group (q - 1) mod groups. Hosts number their I/O queues after their
// CPUs (Linux's nvme-rdma maps CPU i's hardware queue to QID i + 1), so a host with as many
// queues as there are reactors gets one per reactor, and with the reactors pinned in CPU order
// (--cpumask) a host on the same machine has each I/O served on the CPU that submitted it, as
// nvmet serves it in the receiving CPU's softirq. Crossed over (round-robin with the admin
// queue first), every I/O went from CPU to CPU twice: with pinned reactors fio got 0.56-0.59 of
// the IOPS in two of three rounds (docs/performance.md, the VM probe). Many single-queue hosts
// would all land on group 0, so a queue whose group already serves two I/O queues more than
// the least loaded group goes there. Admin queues go round-robin.
RdmaPollGroup* RdmaTargetTransport::pick_group(uint16_t qid) noexcept {
  if (qid == 0) {
    RdmaPollGroup* group = groups_[next_admin_group_].get();
    next_admin_group_ = (next_admin_group_ + 1) % groups_.size();
    return group;
  }
  RdmaPollGroup* preferred = groups_[(qid - 1u) % groups_.size()].get();
  RdmaPollGroup* least = preferred;
  const size_t preferred_queues = io_queues_on(*preferred);
  size_t least_queues = preferred_queues;
  for (const auto& group : groups_) {
    if (group.get() == preferred) continue;  // counted above
    const size_t queues = io_queues_on(*group);
    if (queues < least_queues) {
      least = group.get();
      least_queues = queues;
    }
  }
  return preferred_queues >= least_queues + 2 ? least : preferred;
}

size_t RdmaTargetTransport::io_queues_on(const RdmaPollGroup& group) const noexcept {
  size_t queues = 0;
  for (const auto& connection : connections_) {
    if (connection->group == &group && connection->decision.qid != 0 && !connection->released)
      ++queues;
  }
  return queues;
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
  auto* connection = static_cast<Connection*>(ctx);
  connection->transport->mark_released(*connection);
}

void RdmaTargetTransport::begin_shutdown() noexcept {
  shutting_down_ = true;
  abandon_stuck_commands_.store(true, std::memory_order_release);
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
// Device async events (acceptor)

Result<void> RdmaTargetTransport::watch_device(verbs::Device& device) noexcept {
  for (const auto& watched : watched_) {
    if (&watched->device == &device) return {};
  }
  auto watched = std::make_unique<WatchedDevice>(*this, device);  // setup-path
  auto added = reactors_[0]->add_poller(watched->poller, device.async_event_fd(),
                                        acceptor_poll_period_ns());
  if (!added) {
    NVMF_ERRLOG(rdma, "device %s: cannot watch its async events", device.caps().name.c_str());
    return added;
  }
  watched_.push_back(std::move(watched));  // setup-path
  return {};
}

bool RdmaTargetTransport::device_failed(const verbs::Device* device) const noexcept {
  for (const auto& watched : watched_) {
    if (&watched->device == device) return watched->fatal;
  }
  return false;
}

int RdmaTargetTransport::async_event_poll(void* ctx, unsigned budget) noexcept {
  auto& watched = *static_cast<WatchedDevice*>(ctx);
  return watched.transport.poll_async_events(watched, budget);
}

int RdmaTargetTransport::poll_async_events(WatchedDevice& watched, unsigned budget) noexcept {
  int handled = 0;
  verbs::AsyncEvent event;
  while (static_cast<unsigned>(handled) < budget && !watched.fatal &&
         watched.device.poll_async_event(&event)) {
    ++handled;
    ++stats_.async_events[static_cast<size_t>(event.type)];
    handle_async_event(watched, event);
  }
  return handled;
}

void RdmaTargetTransport::handle_async_event(WatchedDevice& watched,
                                             const verbs::AsyncEvent& event) noexcept {
  const char* device_name = watched.device.caps().name.c_str();
  const char* name = verbs::async_event_type_name(event.type);
  switch (event.type) {
    case verbs::AsyncEventType::qp_fatal:
    case verbs::AsyncEventType::qp_request_error:
    case verbs::AsyncEventType::qp_access_error:
    case verbs::AsyncEventType::cq_error:
    case verbs::AsyncEventType::srq_error:
    case verbs::AsyncEventType::comm_established:
      // The group that owns the QP, CQ or SRQ closes what it breaks and logs the line; for
      // COMM_EST it tells the CM on the QP's id (the group is the id's user since accept).
      broadcast_async_event(watched.device, event);
      return;
    case verbs::AsyncEventType::device_fatal:
      fail_device(watched);
      return;
    case verbs::AsyncEventType::port_error:
      NVMF_WARNLOG(rdma,
                   "device %s: %s on port %u: connections over it will fail and hosts "
                   "reconnect once the link is back",
                   device_name, name, event.port_num);
      return;
    case verbs::AsyncEventType::port_active:
      NVMF_NOTICELOG(rdma, "device %s: %s on port %u", device_name, name, event.port_num);
      return;
    case verbs::AsyncEventType::wq_fatal:
      NVMF_WARNLOG(rdma, "device %s: %s (the transport creates no work queues)", device_name, name);
      return;
    default:
      // Notices (LAST_WQE_REACHED, SQ_DRAINED, path, LID, P_Key, SM, GID changes).
      NVMF_DEBUGLOG(rdma, "device %s: %s (QP %u, port %u)", device_name, name, event.qp_num,
                    event.port_num);
      return;
  }
}

void RdmaTargetTransport::fail_device(WatchedDevice& watched) noexcept {
  watched.fatal = true;
  // A dead device's event fd says nothing more; the poller may remove itself while it runs.
  reactors_[0]->remove_poller(watched.poller);
  size_t closed_listeners = 0;
  for (size_t i = 0; i < listeners_.size();) {
    if (listeners_[i].id->device() == &watched.device) {
      listeners_.erase(listeners_.begin() + static_cast<std::ptrdiff_t>(i));
      ++closed_listeners;
    } else {
      ++i;
    }
  }
  size_t connections = 0;
  for (const auto& connection : connections_) {
    if (!connection->released && connection->id->device() == &watched.device) ++connections;
  }
  NVMF_ERRLOG(rdma,
              "device %s: DEVICE_FATAL: closing its %zu connections and %zu listeners, refusing "
              "new connections on it; the device must be reset (see dmesg, reload its driver), "
              "then restart nvmf_tgt",
              watched.device.caps().name.c_str(), connections, closed_listeners);
  verbs::AsyncEvent event;
  event.type = verbs::AsyncEventType::device_fatal;
  broadcast_async_event(watched.device, event);
}

void RdmaTargetTransport::broadcast_async_event(verbs::Device& device,
                                                const verbs::AsyncEvent& event) noexcept {
  const DeviceAsyncEvent item{&device, event};
  for (size_t i = 0; i < groups_.size(); ++i) {
    RdmaPollGroup& group = *groups_[i];
    if (&group.reactor() == reactors_[0]) {
      group.handle_async_event(item);
      continue;
    }
    if (!group.queue_async_event(item)) {
      NVMF_ERRLOG(rdma, "reactor %s has %zu async events waiting: %s of device %s dropped",
                  group.reactor().name(), kAsyncEventRingSize,
                  verbs::async_event_type_name(event.type), device.caps().name.c_str());
      continue;
    }
    async_wakeup_due_[i] = true;
    any_async_wakeup_due_ = true;
  }
  wake_groups_for_async_events();
}

void RdmaTargetTransport::wake_groups_for_async_events() noexcept {
  // A group whose message ring is full gets its message at a later acceptor poll; its events
  // wait in its own ring meanwhile.
  any_async_wakeup_due_ = false;
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (!async_wakeup_due_[i]) continue;
    if (groups_[i]->reactor().send(&RdmaPollGroup::on_async_events, groups_[i].get())) {
      async_wakeup_due_[i] = false;
    } else {
      any_async_wakeup_due_ = true;
    }
  }
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
      poller_("rdma_poll_group", &RdmaPollGroup::poll_fn, this, &RdmaPollGroup::arm_fn) {}

RdmaPollGroup::~RdmaPollGroup() {
  if (poller_.registered()) reactor_.remove_poller(poller_);
  if (wake_fd_ >= 0) close(wake_fd_);
  buffer_waiters_.clear();
  dirty_.clear();
  qpairs_.clear();
  // Orphans left here mean a bdev still holds their requests: release the reactors first
  // (Target::release_reactor closes the channels, which gives every request back).
  assert(orphans_.empty() && "the transport went before Target::release_reactor");
  orphans_.clear();
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
  context->data_lkey = context->data_mr->lkey();
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
      buffer.place(static_cast<uint8_t*>(context->recv_region.addr()) + size_t{i} * recv_bytes,
                   recv_bytes, context->recv_mr->lkey());
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
  // Every device's CQ wakes the reactor in interrupt mode, through wake_fd_; arm_fn() arms it
  // before the reactor next sleeps.
  if (context->cq->event_fd() >= 0) {
    auto watched = watch_cq(*context->cq);
    if (!watched) return Unexpected(watched.error());
  }
  if (!poller_.registered()) {
    auto added = reactor_.add_poller(poller_, wake_fd_);
    if (!added) {
      if (context->cq->event_fd() >= 0) unwatch_cq(*context->cq);
      return Unexpected(added.error());
    }
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
  qpair->request_count = request_count;
  // Responses: one registered 16-byte slot per request.
  auto responses = memory_->allocate(size_t{request_count} * kCqeBytes, 4096);
  if (!responses) return Unexpected(responses.error());
  qpair->response_region = std::move(*responses);
  auto response_mr = device.pd->register_memory(qpair->response_region.addr(),
                                                size_t{request_count} * kCqeBytes, 0);
  if (!response_mr) return Unexpected(response_mr.error());
  qpair->response_mr = std::move(*response_mr);
  qpair->response_lkey = qpair->response_mr->lkey();

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
      buffer.place(static_cast<uint8_t*>(qpair->recv_region.addr()) + size_t{i} * recv_bytes,
                   recv_bytes, qpair->recv_mr->lkey());
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
  ops.request_released = &RdmaPollGroup::core_request_released;
  ops.abort_request = &RdmaPollGroup::core_abort_request;
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
  last_found_ = nullptr;  // it may have named the queue pair this QP number had before
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

void RdmaPollGroup::core_request_released(void* ctx, target::Request& core) noexcept {
  auto& qpair = *static_cast<RdmaQpair*>(ctx);
  auto* req = static_cast<RdmaRequest*>(core.transport_ctx);
  // Its bdev is done with the buffers; there is no one to answer.
  req->failed = true;
  req->state = RdmaRequestState::completed;
  qpair.group.advance(*req);
  if (qpair.state == RdmaQpairState::gone && qpair.requests_in_use == 0) {
    qpair.group.free_orphan(qpair);
  }
}

target::TransportAbort RdmaPollGroup::core_abort_request(void* ctx, target::Qpair&,
                                                         uint16_t cid) noexcept {
  auto& qpair = *static_cast<RdmaQpair*>(ctx);
  return qpair.group.abort_waiting_command(qpair, cid);
}

target::TransportAbort RdmaPollGroup::abort_waiting_command(RdmaQpair& qpair,
                                                            uint16_t cid) noexcept {
  // A linear walk: Aborts are rare, and the slots are few (2 x depth).
  for (uint32_t i = 0; i < qpair.request_count; ++i) {
    RdmaRequest& req = qpair.requests[i];
    if (req.core.cmd.cid != cid) continue;
    switch (req.state) {
      case RdmaRequestState::need_buffer:
      case RdmaRequestState::ready_to_read:
        if (!req.link.linked()) continue;  // only waiting ones; advance() moves the others on
        if (req.state == RdmaRequestState::need_buffer) {
          buffer_waiters_.remove(req);
        } else {
          qpair.send_waiters.remove(req);
        }
        req.state = RdmaRequestState::executing;
        // Comes back through core_request_complete: its data buffers go with its release.
        target::refuse(req.core, spec::generic_status(spec::sc_generic::abort_requested));
        return target::TransportAbort::aborted;
      case RdmaRequestState::reading:
        // Posted READs cannot be recalled; the host's buffer must stay ours until they end.
        if (req.failed) continue;
        req.abort_after_read = true;
        return target::TransportAbort::after_transfer;
      default:
        // Free, inside the core, or answered already (the host may reuse a CID as soon as it
        // has the response, before this side has reaped that response's SEND).
        continue;
    }
  }
  return target::TransportAbort::not_found;
}

void RdmaPollGroup::count_owned(std::atomic<uint64_t>& counter) noexcept {
  // One writer (this thread): a relaxed load and store, no locked instruction.
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------
// Poll group: data path
//
// The functions each command goes through are defined `inline` (this file is their only user):
// the compiler then folds them into poll() and advance(), and a command pays a few calls
// instead of a dozen (tools/bench/callgrind-per-io.sh counts the difference).

int RdmaPollGroup::poll_fn(void* ctx, unsigned budget) noexcept {
  return static_cast<RdmaPollGroup*>(ctx)->poll(budget);
}

int RdmaPollGroup::poll(unsigned budget) noexcept {
  int work = 0;
  CompletionBatch<kCompletionBatch> batch;
  verbs::WorkCompletion* const completions = batch.data();
  const unsigned batch_size = budget < kCompletionBatch ? budget : kCompletionBatch;
  for (auto& device : devices_) {
    const int count = device->cq->poll(std::span(completions, batch_size));
    for (int i = 0; i < count; ++i) handle_completion(completions[i]);
    work += count;
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

inline void RdmaPollGroup::handle_completion(const verbs::WorkCompletion& wc) noexcept {
  auto* ctx = reinterpret_cast<WrContext*>(wc.wr_id);
  if (ctx->kind == WrKind::recv) {
    handle_recv(wc, *static_cast<RecvBuffer*>(ctx->owner));
    return;
  }
  retire_wr(*static_cast<RdmaRequest*>(ctx->owner), *ctx, wc);
}

inline void RdmaPollGroup::handle_recv(const verbs::WorkCompletion& wc,
                                       RecvBuffer& buffer) noexcept {
  RdmaQpair* qpair = buffer.qpair;
  if (qpair != nullptr) {
    --qpair->recvs_posted;
  } else {
    qpair = qpair_by_num(wc.qp_num);
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
  req->abort_after_read = false;
  req->state = RdmaRequestState::received;
  advance(*req);
}

inline RdmaQpair* RdmaPollGroup::qpair_by_num(uint32_t qp_num) noexcept {
  if (last_found_ != nullptr && last_found_qp_num_ == qp_num) return last_found_;
  auto found = by_qp_num_.find(qp_num);
  if (found == by_qp_num_.end()) return nullptr;
  last_found_ = found->second;
  last_found_qp_num_ = qp_num;
  return last_found_;
}

inline void RdmaPollGroup::retire_wr(RdmaRequest& req, const WrContext& ctx,
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
        const RdmaTargetOpts& opts = transport_.opts();
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
          if (!req.link.linked()) {
            buffer_waiters_.push_back(req);
            count_owned(buffer_waits_);
          }
          break;
        }
        req.state = req.core.xfer == target::XferDirection::host_to_controller
                        ? RdmaRequestState::ready_to_read
                        : RdmaRequestState::ready_to_execute;
        break;

      case RdmaRequestState::ready_to_read:
        if (!qpair.send_waiters.empty() || !post_reads(req)) {
          if (!req.link.linked()) {
            qpair.send_waiters.push_back(req);
            count_owned(send_queue_waits_);
          }
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
        if (req.abort_after_read) {
          target::refuse_aborted(req.core);  // comes back through core_request_complete
          break;
        }
        transport_.target().execute(req.core);  // may come back through core_request_complete
        break;

      case RdmaRequestState::executing:
        break;  // waits for core_request_complete

      case RdmaRequestState::ready_to_respond:
        if (!qpair.send_waiters.empty() || !post_response(req)) {
          if (!req.link.linked()) {
            qpair.send_waiters.push_back(req);
            count_owned(send_queue_waits_);
          }
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
  const uint32_t lkey = req.qpair->device.data_lkey;
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

inline void RdmaPollGroup::post_data_wrs(RdmaRequest& req, verbs::WrOpcode opcode,
                                         bool signal_last) noexcept {
  RdmaQpair& qpair = *req.qpair;
  const WrKind kind = opcode == verbs::WrOpcode::rdma_read ? WrKind::rdma_read : WrKind::send_side;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < req.sgl.keyed_count; ++i) {
    const KeyedBlock& block = req.sgl.keyed[i];
    verbs::Sge* sges = data_sges_;
    verbs::SendWr& wr = data_wr_;
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

inline bool RdmaPollGroup::post_response(RdmaRequest& req) noexcept {
  RdmaQpair& qpair = *req.qpair;
  const bool send_data = req.core.xfer == target::XferDirection::controller_to_host &&
                         req.sgl.kind == ParsedSgl::Kind::keyed && succeeded(req.core.rsp) &&
                         !req.failed;
  const uint32_t needed = (send_data ? req.sgl.keyed_count : 0) + 1;
  if (qpair.send_queue_used + needed > qpair.send_queue_size) return false;
  // The capsule is done with (its in-capsule data went to the bdev, which has answered): its
  // receive goes back before the response, as SPDK and nvmet do. A host may send its next
  // command the moment it sees this response; held until the SEND completed, the receive
  // could be missing then (an RNR NAK and a wait on a queue whose receives are as many as its
  // depth), and SRQ buffers would stay out of the queue for longer.
  if (req.recv != nullptr) {
    repost_recv(*req.recv);
    req.recv = nullptr;
  }
  if (send_data) post_data_wrs(req, verbs::WrOpcode::rdma_write, false);
  std::memcpy(req.response, &req.core.rsp, kCqeBytes);
  response_sge_ =
      verbs::Sge{reinterpret_cast<uint64_t>(req.response), kCqeBytes, qpair.response_lkey};
  verbs::SendWr& wr = response_wr_;
  WrContext& ctx = req.wr_ctx[kWrsPerRequestMax - 1];
  ctx.kind = WrKind::send_side;
  wr.wr_id = reinterpret_cast<uint64_t>(&ctx);
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

inline void RdmaPollGroup::release(RdmaRequest& req) noexcept {
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
  req.state = RdmaRequestState::free;  // req.sgl is left as it is: the next parse resets it
  --qpair.requests_in_use;
  qpair.free_requests.push_back(req);
}

inline void RdmaPollGroup::repost_recv(RecvBuffer& buffer) noexcept {
  if (buffer.qpair == nullptr) {
    // An SRQ buffer: back to the shared queue, whatever happens to the connection it served.
    (void)buffer.device->srq->post_recv(buffer.wr);
    buffer.device->srq_dirty = true;
    return;
  }
  RdmaQpair& qpair = *buffer.qpair;
  if (qpair.state != RdmaQpairState::live) return;  // its QP is in error: nothing to receive
  if (qpair.qp->post_recv(buffer.wr)) ++qpair.recvs_posted;
  mark_dirty(qpair);
}

void RdmaPollGroup::mark_dirty(RdmaQpair& qpair) noexcept {
  if (!qpair.dirty) {
    qpair.dirty = true;
    dirty_.push_back(qpair);
  }
}

void RdmaPollGroup::flush_dirty() noexcept {
  // One doorbell per queue per poll (STYLE 4). Receives first, as each QP's flush() does:
  // they must be there before the responses that let hosts send their next commands.
  for (auto& device : devices_) {
    if (device->srq_dirty) {
      device->srq_dirty = false;
      (void)device->srq->flush();
    }
  }
  while (RdmaQpair* qpair = dirty_.pop_front()) {
    qpair->dirty = false;
    (void)qpair->qp->flush();
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

void RdmaPollGroup::on_async_events(void* ctx) noexcept {
  auto* group = static_cast<RdmaPollGroup*>(ctx);
  DeviceAsyncEvent item;
  while (group->async_events_.try_pop(&item)) group->handle_async_event(item);
}

void RdmaPollGroup::handle_async_event(const DeviceAsyncEvent& item) noexcept {
  const verbs::AsyncEvent& event = item.event;
  const char* name = verbs::async_event_type_name(event.type);
  switch (event.type) {
    case verbs::AsyncEventType::qp_fatal:
    case verbs::AsyncEventType::qp_request_error:
    case verbs::AsyncEventType::qp_access_error: {
      RdmaQpair* found = qpair_of(item);
      if (found == nullptr) return;
      RdmaQpair& qpair = *found;
      const target::Controller* controller =
          qpair.core != nullptr ? qpair.core->controller() : nullptr;
      char why[160];
      std::snprintf(why, sizeof(why), "%s async event on device %s, QP %u (controller %u)", name,
                    item.device->caps().name.c_str(), event.qp_num,
                    controller != nullptr ? controller->cntlid() : 0xFFFFu);
      begin_teardown(qpair, why);
      return;
    }
    case verbs::AsyncEventType::cq_error:
    case verbs::AsyncEventType::srq_error:
    case verbs::AsyncEventType::device_fatal:
      for (size_t i = 0; i < devices_.size();) {
        DeviceContext& context = *devices_[i];
        const bool hit =
            context.device == item.device &&
            (event.type == verbs::AsyncEventType::device_fatal ||
             (event.type == verbs::AsyncEventType::cq_error && context.cq.get() == event.cq) ||
             (event.type == verbs::AsyncEventType::srq_error && context.srq &&
              context.srq.get() == event.srq));
        if (!hit) {
          ++i;
          continue;
        }
        // The acceptor logged a device fatal error once for every group.
        retire_device_context(context, name, event.type != verbs::AsyncEventType::device_fatal);
      }
      return;
    case verbs::AsyncEventType::comm_established:
      notify_established(item);
      return;
    default:
      return;  // the acceptor handles the rest
  }
}

RdmaQpair* RdmaPollGroup::qpair_of(const DeviceAsyncEvent& item) const noexcept {
  auto found = by_qp_num_.find(item.event.qp_num);
  // Another group's QP, or one already gone.
  if (found == by_qp_num_.end() || found->second->device.device != item.device) return nullptr;
  return found->second;
}

void RdmaPollGroup::notify_established(const DeviceAsyncEvent& item) noexcept {
  RdmaQpair* qpair = qpair_of(item);
  // A queue pair being torn down has no connection left to establish.
  if (qpair == nullptr || qpair->state != RdmaQpairState::live) return;
  auto notified = qpair->connection.id->notify_established();
  if (!notified) {
    char text[160];
    NVMF_WARNLOG(rdma, "device %s, QP %u: COMM_EST, but the CM could not be told: %s",
                 item.device->caps().name.c_str(), item.event.qp_num,
                 error_describe(notified.error(), text, sizeof(text)));
    return;
  }
  count_owned(established_notifications_);
}

void RdmaPollGroup::arm_fn(void* ctx) noexcept {
  auto* group = static_cast<RdmaPollGroup*>(ctx);
  for (auto& device : group->devices_) {
    if (device->cq->event_fd() < 0) continue;
    // The event of the previous arm, if it came, would keep wake_fd_ readable: the reactor
    // would never sleep. None came: busy, and nothing is read.
    (void)device->cq->consume_event();
    (void)device->cq->arm();
  }
}

Result<void> RdmaPollGroup::watch_cq(const verbs::CompletionQueue& cq) noexcept {
  if (wake_fd_ < 0) {
    wake_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (wake_fd_ < 0) return Unexpected(make_system_error(errno, "epoll_create1"));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  if (epoll_ctl(wake_fd_, EPOLL_CTL_ADD, cq.event_fd(), &event) != 0) {
    return Unexpected(make_system_error(errno, "epoll_ctl CQ event fd"));
  }
  return {};
}

void RdmaPollGroup::unwatch_cq(const verbs::CompletionQueue& cq) noexcept {
  if (wake_fd_ < 0 || cq.event_fd() < 0) return;
  (void)epoll_ctl(wake_fd_, EPOLL_CTL_DEL, cq.event_fd(), nullptr);
}

void RdmaPollGroup::retire_device_context(DeviceContext& context, const char* why,
                                          bool log_line) noexcept {
  context.failed = true;
  char reason[128];
  std::snprintf(reason, sizeof(reason), "%s async event on device %s", why,
                context.device->caps().name.c_str());
  size_t closed = 0;
  for (auto& qpair : qpairs_) {
    if (&qpair->device != &context || qpair->state != RdmaQpairState::live) continue;
    begin_teardown(*qpair, reason);
    ++closed;
  }
  if (log_line) {
    NVMF_ERRLOG(rdma,
                "device %s: %s: the completion and receive queues of reactor %s are unusable: "
                "closed its %zu queue pairs; new connections get new ones",
                context.device->caps().name.c_str(), why, reactor_.name(), closed);
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].get() != &context) continue;
    retired_devices_.push_back(std::move(devices_[i]));  // setup-path: a rare failure
    devices_.erase(devices_.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  }
  // The failed CQ must not wake the reactor again.
  unwatch_cq(*context.cq);
}

void RdmaPollGroup::forget_outstanding_wrs(RdmaQpair& qpair) noexcept {
  // Its CQ reports nothing more, so the WRs of requests reading or responding never come
  // back. The QP is in error: the HCA runs none of them. Their data buffers and receive
  // buffers belong to the failed context, which no queue pair uses again.
  for (uint32_t i = 0; i < qpair.request_count; ++i) {
    RdmaRequest& req = qpair.requests[i];
    if (req.state != RdmaRequestState::reading && req.state != RdmaRequestState::responding) {
      continue;
    }
    req.failed = true;
    qpair.send_queue_used -= req.send_queue_slots;
    req.send_queue_slots = 0;
    req.wrs_outstanding = 0;
    req.state = RdmaRequestState::completed;
    advance(req);
  }
  qpair.recvs_posted = 0;
}

void RdmaPollGroup::drive_teardowns() noexcept {
  for (size_t i = 0; i < draining_.size();) {
    RdmaQpair& qpair = *draining_[i];
    if (qpair.device.failed) forget_outstanding_wrs(qpair);
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
      // responses are flushed by the QP in error and retire like any other. Commands stuck
      // in a bdev stop holding the teardown up after TargetOpts::teardown_timeout_ms (at once
      // when the target shuts down): the core keeps them, lent, and request_released gives
      // each one back.
      const target::StuckCommands stuck =
          transport_.abandon_stuck_commands_.load(std::memory_order_acquire)
              ? target::StuckCommands::abandon
              : target::StuckCommands::wait;
      if (transport_.target().destroy_qpair(*qpair.core, stuck)) qpair.core = nullptr;
    }
    // Every WR is back, and the requests still in use, if any, are the ones lent to the core.
    const bool done = qpair.core == nullptr && qpair.send_queue_used == 0 &&
                      qpair.recvs_posted == 0 && only_lent_requests_left(qpair);
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
  last_found_ = nullptr;
  Connection& connection = qpair.connection;
  connection.qpair = nullptr;
  for (size_t i = 0; i < qpairs_.size(); ++i) {
    if (qpairs_[i].get() == &qpair) {
      if (qpair.requests_in_use > 0) {
        // Lent to a bdev: keep the requests and their buffers, give back the CQ room now.
        qpair.device.cq_reserved -= qpair.cq_reserved;
        qpair.cq_reserved = 0;
        orphans_.push_back(std::move(qpairs_[i]));  // setup-path: teardown, rare
      }
      qpairs_[i] = std::move(qpairs_.back());
      qpairs_.pop_back();
      break;
    }
  }
  release_to_acceptor(connection);  // takes the QP with the CM id: the orphan never uses it
  if (!orphans_.empty() && orphans_.back().get() == &qpair) qpair.qp = nullptr;
}

bool RdmaPollGroup::only_lent_requests_left(const RdmaQpair& qpair) const noexcept {
  if (qpair.requests_in_use == 0) return true;
  // Teardown only: a walk of the slots. A request answered during the teardown may still wait
  // for send-queue room; only those inside the core (lent to a bdev) may outlive the QP.
  for (uint32_t i = 0; i < qpair.request_count; ++i) {
    const RdmaRequestState state = qpair.requests[i].state;
    if (state != RdmaRequestState::free && state != RdmaRequestState::executing) return false;
  }
  return true;
}

void RdmaPollGroup::free_orphan(RdmaQpair& qpair) noexcept {
  for (size_t i = 0; i < orphans_.size(); ++i) {
    if (orphans_[i].get() != &qpair) continue;
    orphans_[i] = std::move(orphans_.back());
    orphans_.pop_back();
    return;
  }
}

void RdmaPollGroup::release_to_acceptor(Connection& connection) noexcept {
  if (&reactor_ == transport_.reactors_[0]) {
    transport_.mark_released(connection);  // this reactor is the acceptor: no message needed
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
