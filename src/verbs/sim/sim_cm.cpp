// The sim's rdma_cm: listeners by address:port, REQ / REP / REJ with private data, timeouts on
// the fabric clock, DREQ on disconnect. Events go to the channel of the id they are about and
// make its eventfd readable. Every call takes the fabric lock: the two ends of a connection
// usually live on different threads.
//
// Private-data lengths are reported as rdma_cm reports them on IB/RoCE: the CM message's
// maximum, not what was sent (56 on connect_request, 196 on the active side's established,
// 148 on rejected; 0 on the passive side's established and on a reject by the CM itself).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/util.h"
#include "verbs/sim/sim_internal.h"

namespace nvmf::verbs::sim {
namespace {

constexpr uint8_t kReqPrivateDataMax = 56;   // IB_CM_REQ_PRIVATE_DATA_SIZE
constexpr uint8_t kRepPrivateDataMax = 196;  // IB_CM_REP_PRIVATE_DATA_SIZE
constexpr uint8_t kRejPrivateDataMax = 148;  // IB_CM_REJ_PRIVATE_DATA_SIZE
// rdma_cm reports a REJ's reason as the event status; a consumer's reject is reason 28.
constexpr int kRejConsumerDefined = 28;  // IB_CM_REJ_CONSUMER_DEFINED
constexpr const char* kAnyAddress = "0.0.0.0";

CmEvent make_event(CmEventType type, SimCmId* id, int status = 0) noexcept {
  CmEvent event;
  event.type = type;
  event.id = id;
  event.status = status;
  return event;
}

void set_private_data(CmEvent& event, const void* data, uint8_t sent, uint8_t reported) noexcept {
  if (sent != 0 && data != nullptr) std::memcpy(event.private_data, data, sent);
  event.private_data_length = reported;
}

// The active side's connection attempt ends in a REJ (from the peer or from its CM).
void refuse_active(SimCmId& active, int status, const void* data, uint8_t sent,
                   uint8_t reported) noexcept {
  Fabric& fabric = active.channel.fabric();
  fabric.waiting.erase(&active);
  fabric.note_waiting();
  active.state = SimCmId::State::rejected;
  active.remote = nullptr;
  CmEvent event = make_event(CmEventType::rejected, &active, status);
  set_private_data(event, data, sent, reported);
  active.channel.push(event);
  ++active.dev.counters.rejects;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Channel

SimCmChannel::SimCmChannel(std::shared_ptr<Fabric> fabric, SimDevice& device, int event_fd) noexcept
    : fabric_(std::move(fabric)), device_(device), event_fd_(event_fd) {}

SimCmChannel::~SimCmChannel() {
  std::vector<std::unique_ptr<SimCmId>> doomed;
  {
    std::lock_guard lock(fabric_->mu);
    for (auto& id : unadopted) id->close();
    doomed.swap(unadopted);
    events_.clear();
  }
  doomed.clear();  // their destructors take the lock again
  if (event_fd_ >= 0) ::close(event_fd_);
}

Result<std::unique_ptr<CmId>> SimCmChannel::create_id() noexcept {
  std::lock_guard lock(fabric_->mu);
  auto id = std::make_unique<SimCmId>(*this, fabric_->make_local_name(device_));
  fabric_->ids.insert(id.get());
  return std::unique_ptr<CmId>(std::move(id));
}

std::unique_ptr<CmId> SimCmChannel::adopt(CmId* id) noexcept {
  std::lock_guard lock(fabric_->mu);
  for (auto it = unadopted.begin(); it != unadopted.end(); ++it) {
    if (it->get() == id) {
      std::unique_ptr<CmId> owned(it->release());
      unadopted.erase(it);
      return owned;
    }
  }
  return nullptr;
}

bool SimCmChannel::poll_event(CmEvent* event) noexcept {
  // Nothing queued and no CM timeout pending: no lock (a target's acceptor polls its channel on
  // every reactor iteration, and taking the fabric lock there halves a two-thread run). QP
  // work the fabric still has advances through the CQ and QP calls, which every user of a
  // connection makes; an event that work produces is queued then and seen at the next call.
  if (!has_events_.load(std::memory_order_acquire) && !fabric_->cm_waiting()) return false;
  std::lock_guard lock(fabric_->mu);
  fabric_->cm_progress();
  fabric_->progress();
  if (events_.empty()) return false;
  *event = events_.front();
  events_.pop_front();
  if (events_.empty()) {
    has_events_.store(false, std::memory_order_release);
    drain_event_fd(event_fd_);
  }
  return true;
}

void SimCmChannel::push(const CmEvent& event) noexcept {
  const bool was_empty = events_.empty();
  events_.push_back(event);  // CM path: may allocate
  has_events_.store(true, std::memory_order_release);
  if (was_empty) signal_event_fd(event_fd_);
}

void SimCmChannel::remove_events_about(const SimCmId* id) noexcept {
  for (auto it = events_.begin(); it != events_.end();) {
    if (it->id == id || it->listen_id == id) {
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
  if (events_.empty()) {
    has_events_.store(false, std::memory_order_release);
    drain_event_fd(event_fd_);
  }
}

// ---------------------------------------------------------------------------------------
// Fabric: listeners and timeouts

SimCmId* Fabric::find_listener(const std::string& address, uint16_t port) const noexcept {
  auto it = listeners.find({address, port});
  if (it == listeners.end()) it = listeners.find({kAnyAddress, port});
  return it == listeners.end() ? nullptr : it->second;
}

RefuseMode Fabric::refuse_mode(const std::string& address, uint16_t port) const noexcept {
  auto it = refusing.find({address, port});
  return it == refusing.end() ? RefuseMode::none : it->second;
}

void Fabric::cm_progress() noexcept {
  if (waiting.empty()) return;
  const uint64_t now = now_ns();
  std::vector<SimCmId*> expired;  // CM path: may allocate
  for (SimCmId* id : waiting) {
    if (id->deadline_ns <= now) expired.push_back(id);
  }
  for (SimCmId* id : expired) {
    waiting.erase(id);
    note_waiting();
    id->time_out();
  }
}

// ---------------------------------------------------------------------------------------
// Ids

SimCmId::SimCmId(SimCmChannel& owner, std::string name) noexcept
    : channel(owner), dev(owner.device()), local_name(std::move(name)) {}

std::string Fabric::make_local_name(const SimDevice& device) {
  char name[96];
  std::snprintf(name, sizeof(name), "%s:%u", device.caps().name.c_str(), next_port_++);
  return name;
}

SimCmId::~SimCmId() {
  std::lock_guard lock(channel.fabric().mu);
  close();
  if (qp_ != nullptr) qp_->detach();
  channel.fabric().ids.erase(this);
}

void SimCmId::close() noexcept {
  Fabric& fabric = channel.fabric();
  switch (state) {
    case State::listening:
      fabric.listeners.erase({address, port});
      for (SimCmId* id : fabric.ids) {
        if (id->listener != this) continue;
        id->listener = nullptr;
        // Requests still waiting for accept on a listener that goes away are refused.
        if (id->state == State::request_received && id->remote != nullptr &&
            id->remote->state == State::connecting) {
          refuse_active(*id->remote, ECONNREFUSED, nullptr, 0, 0);
          id->remote = nullptr;
          id->state = State::rejected;
          id->channel.remove_events_about(id);
        }
      }
      break;
    case State::resolving:
      fabric.waiting.erase(this);
      fabric.note_waiting();
      break;
    case State::connecting:
      fabric.waiting.erase(this);
      fabric.note_waiting();
      if (remote != nullptr) remote->remote = nullptr;
      break;
    case State::request_received:
      if (remote != nullptr && remote->state == State::connecting) {
        refuse_active(*remote, ECONNREFUSED, nullptr, 0, 0);
      }
      break;
    case State::connected:
      tear_down(true);
      break;
    default:
      break;
  }
  channel.remove_events_about(this);
  state = State::closed;
  remote = nullptr;
}

void SimCmId::time_out() noexcept {
  if (state != State::resolving && state != State::connecting) return;
  if (state == State::connecting && remote != nullptr) remote->remote = nullptr;
  remote = nullptr;
  state = State::unreachable;
  channel.push(make_event(CmEventType::unreachable, this, ETIMEDOUT));
  ++dev.counters.cm_timeouts;
}

void SimCmId::tear_down(bool count_on_this_side) noexcept {
  SimCmId* sides[2] = {this, remote};
  for (SimCmId* side : sides) {
    if (side == nullptr || side->state != State::connected) continue;
    side->state = State::disconnected;
    side->remote = nullptr;
    if (side->qp_ != nullptr) side->qp_->enter_error();
    side->channel.push(make_event(CmEventType::disconnected, side));
    if (side != this || count_on_this_side) ++side->dev.counters.disconnects;
  }
}

Result<void> SimCmId::listen(const std::string& listen_address, uint16_t listen_port,
                             int backlog) noexcept {
  (void)backlog;  // the sim queues every request
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state != State::idle) return Unexpected(Errc::bad_state, "listen: id already in use");
  if (listen_address.empty()) return Unexpected(Errc::invalid_argument, "listen: no address");
  for (const auto& [key, id] : fabric.listeners) {
    if (key.second == listen_port && (key.first == listen_address || key.first == kAnyAddress ||
                                      listen_address == kAnyAddress)) {
      return Unexpected(Errc::already_exists, "listen: address and port in use", EADDRINUSE);
    }
  }
  fabric.listeners[{listen_address, listen_port}] = this;
  address = listen_address;
  port = listen_port;
  state = State::listening;
  return {};
}

Result<void> SimCmId::resolve(const std::string& target_address, uint16_t target_port,
                              int timeout_ms) noexcept {
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state != State::idle) return Unexpected(Errc::bad_state, "resolve: id already in use");
  if (target_address.empty()) return Unexpected(Errc::invalid_argument, "resolve: no address");
  address = target_address;
  port = target_port;
  char name[300];
  std::snprintf(name, sizeof(name), "%s:%u", target_address.c_str(), target_port);
  peer_name = name;
  if (fabric.unreachable.count(target_address) != 0) {
    state = State::resolving;
    const uint64_t timeout_ns = static_cast<uint64_t>(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    deadline_ns = fabric.now_ns() + timeout_ns;
    fabric.waiting.insert(this);
    fabric.note_waiting();
    return {};
  }
  state = State::route_resolved;
  channel.push(make_event(CmEventType::route_resolved, this));
  return {};
}

Device* SimCmId::device() noexcept {
  std::lock_guard lock(channel.fabric().mu);
  switch (state) {
    case State::idle:
    case State::resolving:
    case State::unreachable:
      return nullptr;
    case State::listening:
      return address == kAnyAddress ? nullptr : &dev;
    default:
      return &dev;
  }
}

Result<QueuePair*> SimCmId::create_qp(ProtectionDomain& pd, const QpOpts& opts) noexcept {
  auto* sim_pd = dynamic_cast<SimPd*>(&pd);
  auto* send_cq = dynamic_cast<SimCq*>(opts.send_cq);
  auto* recv_cq = dynamic_cast<SimCq*>(opts.recv_cq);
  auto* srq = opts.srq != nullptr ? dynamic_cast<SimSrq*>(opts.srq) : nullptr;
  if (sim_pd == nullptr || &sim_pd->device() != &dev || send_cq == nullptr || recv_cq == nullptr ||
      &send_cq->device() != &dev || &recv_cq->device() != &dev ||
      (opts.srq != nullptr && (srq == nullptr || &srq->device() != &dev))) {
    return Unexpected(Errc::invalid_argument, "create_qp: PD, CQs and SRQ must be of this device");
  }
  const DeviceCaps& caps = dev.caps();
  const uint32_t inline_max = channel.fabric().opts.max_inline_data;
  if (opts.max_send_wr == 0 || opts.max_send_wr > caps.max_qp_wr ||
      opts.max_send_sge > caps.max_sge || opts.max_recv_sge > caps.max_sge ||
      opts.max_inline_data > inline_max ||
      (srq == nullptr && (opts.max_recv_wr == 0 || opts.max_recv_wr > caps.max_qp_wr))) {
    return Unexpected(Errc::invalid_argument, "create_qp: queue sizes above the device caps");
  }
  QpOpts granted = opts;
  granted.max_send_wr = static_cast<uint32_t>(round_up_power_of_two(opts.max_send_wr));
  granted.max_recv_wr =
      srq != nullptr ? 0 : static_cast<uint32_t>(round_up_power_of_two(opts.max_recv_wr));
  granted.max_send_sge = opts.max_send_sge == 0 ? 1 : opts.max_send_sge;
  granted.max_recv_sge = opts.max_recv_sge == 0 ? 1 : opts.max_recv_sge;

  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (qp_ != nullptr) return Unexpected(Errc::already_exists, "create_qp: the id has a QP");
  if (state != State::route_resolved && state != State::request_received) {
    return Unexpected(Errc::bad_state, "create_qp: resolve first (or use a connect_request id)");
  }
  qp_ =
      std::make_unique<SimQp>(dev, *sim_pd, *send_cq, *recv_cq, srq, granted, fabric.next_qp_num());
  return static_cast<QueuePair*>(qp_.get());
}

Result<void> SimCmId::connect(const ConnectParams& connect_params) noexcept {
  if (connect_params.private_data_length > kReqPrivateDataMax ||
      (connect_params.private_data_length != 0 && connect_params.private_data == nullptr)) {
    return Unexpected(Errc::invalid_argument, "connect: private data above 56 bytes");
  }
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state != State::route_resolved || qp_ == nullptr) {
    return Unexpected(Errc::bad_state, "connect: resolve and create the QP first");
  }
  ++dev.counters.connects;
  params = connect_params;
  params.private_data = nullptr;  // not kept beyond this call
  SimCmId* listen_id = fabric.find_listener(address, port);
  RefuseMode mode = fabric.refuse_mode(address, port);
  if (listen_id != nullptr && mode == RefuseMode::none) {
    mode = fabric.refuse_mode(listen_id->address, listen_id->port);
  }
  if (listen_id == nullptr || mode == RefuseMode::reject) {
    // No listener on address:port (or one told to refuse): the CM answers with a REJ.
    refuse_active(*this, ECONNREFUSED, nullptr, 0, 0);
    return {};
  }
  state = State::connecting;
  deadline_ns = fabric.now_ns() + fabric.opts.cm_connect_timeout_ms * 1000000;
  fabric.waiting.insert(this);
  fabric.note_waiting();
  if (mode == RefuseMode::no_answer) return {};  // the REQ is lost: time out

  // The REQ reaches the listener: a new id in the listener's channel, owned by it until adopt().
  auto passive = std::make_unique<SimCmId>(listen_id->channel,  // CM path: allocates
                                           fabric.make_local_name(listen_id->dev));
  fabric.ids.insert(passive.get());
  passive->state = State::request_received;
  passive->remote = this;
  passive->listener = listen_id;
  passive->address = listen_id->address;
  passive->port = listen_id->port;
  passive->peer_name = local_name;
  remote = passive.get();
  // Seen from the passive side, our initiator depth is its responder resources (ib_cm swaps
  // them in cm_format_req_event()).
  CmEvent event = make_event(CmEventType::connect_request, passive.get());
  event.listen_id = listen_id;
  set_private_data(event, connect_params.private_data, connect_params.private_data_length,
                   kReqPrivateDataMax);
  event.responder_resources = connect_params.initiator_depth;
  event.initiator_depth = connect_params.responder_resources;
  listen_id->channel.unadopted.push_back(std::move(passive));
  listen_id->channel.push(event);
  return {};
}

Result<void> SimCmId::accept(const ConnectParams& accept_params) noexcept {
  if (accept_params.private_data_length > kRepPrivateDataMax ||
      (accept_params.private_data_length != 0 && accept_params.private_data == nullptr)) {
    return Unexpected(Errc::invalid_argument, "accept: private data above 196 bytes");
  }
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state != State::request_received || qp_ == nullptr) {
    return Unexpected(Errc::bad_state, "accept: needs a connect_request id with a QP");
  }
  SimCmId* active = remote;
  if (active == nullptr || active->state != State::connecting || active->qp_ == nullptr) {
    state = State::rejected;
    remote = nullptr;
    return Unexpected(Errc::disconnected, "accept: the active side gave up (timeout or destroyed)");
  }
  fabric.waiting.erase(active);
  fabric.note_waiting();
  params = accept_params;
  params.private_data = nullptr;
  active->qp_->connect_to(qp_.get(), active->params);
  qp_->connect_to(active->qp_.get(), params);
  state = State::connected;
  active->state = State::connected;

  // The REP: seen from the active side, our initiator depth is its responder resources.
  CmEvent established = make_event(CmEventType::established, active);
  set_private_data(established, accept_params.private_data, accept_params.private_data_length,
                   kRepPrivateDataMax);
  established.responder_resources = accept_params.initiator_depth;
  established.initiator_depth = accept_params.responder_resources;
  active->channel.push(established);
  ++active->dev.counters.established;
  channel.push(make_event(CmEventType::established, this));  // RTU: no private data
  ++dev.counters.established;
  fabric.progress();
  return {};
}

Result<void> SimCmId::reject(const void* private_data, uint8_t length) noexcept {
  if (length > kRejPrivateDataMax || (length != 0 && private_data == nullptr)) {
    return Unexpected(Errc::invalid_argument, "reject: private data above 148 bytes");
  }
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state != State::request_received) {
    return Unexpected(Errc::bad_state, "reject: not a connect_request id");
  }
  if (remote != nullptr && remote->state == State::connecting) {
    refuse_active(*remote, kRejConsumerDefined, private_data, length, kRejPrivateDataMax);
  }
  remote = nullptr;
  state = State::rejected;
  return {};
}

Result<void> SimCmId::notify_established() noexcept {
  std::lock_guard lock(channel.fabric().mu);
  // The sim's RTU is never lost: accept() established both sides already, so this only counts.
  if (state != State::connected) {
    return Unexpected(Errc::bad_state, "notify_established: no established connection");
  }
  ++dev.counters.established_notifications;
  return {};
}

Result<void> SimCmId::disconnect() noexcept {
  Fabric& fabric = channel.fabric();
  std::lock_guard lock(fabric.mu);
  if (state == State::disconnected) return {};  // the peer was first: nothing left to do
  if (state != State::connected) return Unexpected(Errc::bad_state, "disconnect: not connected");
  tear_down(true);
  fabric.progress();
  return {};
}

std::string SimCmId::peer_address() const {
  std::lock_guard lock(channel.fabric().mu);
  return peer_name;
}

}  // namespace nvmf::verbs::sim
