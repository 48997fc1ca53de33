// Provider, CM channel and CmId over librdmacm. Setup path (the CM thread): allocation is
// allowed, exceptions are not (every entry point is noexcept, so allocations are nothrow).
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "verbs/ibverbs/ibverbs_internal.h"

namespace nvmf::verbs::ibverbs {

namespace {

// rdma_cm's own first step, opening /dev/infiniband/rdma_cm, fails without the rdma_ucm
// module or without any RDMA device; say so in the log rather than just "No such device".
constexpr const char* kRdmaCmHint =
    "needs /dev/infiniband/rdma_cm: load rdma_ucm and an RDMA driver (e.g. `rdma link add "
    "rxe0 type rxe netdev eth0` for soft-RoCE)";

}  // namespace

// ---------------------------------------------------------------------------------------
// Provider

Result<std::unique_ptr<IbverbsProvider>> IbverbsProvider::create() {
  std::unique_ptr<IbverbsProvider> provider(new (std::nothrow) IbverbsProvider());  // setup-path
  if (provider == nullptr) return Unexpected(Errc::no_memory, "ibverbs provider");
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) {
    // ENOSYS: no kernel RDMA support at all. Not an error for the provider itself.
    NVMF_INFOLOG(ibverbs, "no RDMA devices: ibv_get_device_list failed: %s", strerror(errno));
  } else {
    NVMF_INFOLOG(ibverbs, "%d RDMA device(s)", count);
    ibv_free_device_list(list);
  }
  return provider;
}

IbverbsProvider::~IbverbsProvider() = default;

std::vector<std::string> IbverbsProvider::device_names() const {
  std::vector<std::string> names;
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) return names;
  for (int i = 0; i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return names;
}

IbvDevice* IbverbsProvider::device_for(ibv_context* context) noexcept {
  if (context == nullptr) return nullptr;
  for (const auto& device : devices_) {
    if (device->context() == context) return device.get();
  }
  auto created = IbvDevice::create(context);
  if (!created) return nullptr;
  try {
    devices_.push_back(std::move(*created));  // setup-path
  } catch (...) {
    return nullptr;
  }
  return devices_.back().get();
}

Result<std::unique_ptr<CmChannel>> IbverbsProvider::create_cm_channel() noexcept {
  errno = 0;
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) {
    const int os_errno = errno != 0 ? errno : ENODEV;
    NVMF_ERRLOG(ibverbs, "rdma_create_event_channel failed: %s (%s)", strerror(os_errno),
                kRdmaCmHint);
    return Unexpected(make_system_error(os_errno, "rdma_create_event_channel"));
  }
  // poll_event() must not block: the CM thread polls the fd.
  const int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    const int os_errno = errno;
    rdma_destroy_event_channel(channel);
    return Unexpected(make_system_error(os_errno, "fcntl(O_NONBLOCK) on the CM channel"));
  }
  std::unique_ptr<CmChannel> wrapper(new (std::nothrow) IbvCmChannel(this, channel));  // setup-path
  if (wrapper == nullptr) {
    rdma_destroy_event_channel(channel);
    return Unexpected(Errc::no_memory, "CM channel wrapper");
  }
  return wrapper;
}

// ---------------------------------------------------------------------------------------
// Channel

IbvCmChannel::~IbvCmChannel() {
  unadopted_.clear();  // their ids must go before the channel
  rdma_destroy_event_channel(channel_);
}

Result<std::unique_ptr<CmId>> IbvCmChannel::create_id() noexcept {
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_create_id failed: %s", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_create_id"));
  }
  auto* wrapper = new (std::nothrow) IbvCmId(this, provider_, id);  // setup-path
  if (wrapper == nullptr) {
    rdma_destroy_id(id);
    return Unexpected(Errc::no_memory, "CmId wrapper");
  }
  id->context = wrapper;
  return std::unique_ptr<CmId>(wrapper);
}

std::unique_ptr<CmId> IbvCmChannel::adopt(CmId* id) noexcept {
  auto found = std::find_if(unadopted_.begin(), unadopted_.end(),
                            [id](const std::unique_ptr<IbvCmId>& own) { return own.get() == id; });
  if (found == unadopted_.end()) {
    NVMF_ERRLOG(ibverbs, "adopt: the CmId is not one of this channel's connect requests");
    return nullptr;
  }
  std::unique_ptr<CmId> adopted = std::move(*found);
  unadopted_.erase(found);
  return adopted;
}

bool IbvCmChannel::poll_event(CmEvent* event) noexcept {
  for (;;) {
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(channel_, &raw) != 0) {
      const int os_errno = errno;
      if (os_errno != EAGAIN)
        NVMF_WARNLOG(ibverbs, "rdma_get_cm_event failed: %s", strerror(os_errno));
      return false;
    }
    // Everything the caller needs (private data included) is copied out before the ack,
    // which frees the event; acking at once keeps rdma_destroy_id from blocking.
    const rdma_cm_event_type type = raw->event;
    rdma_cm_id* new_id = type == RDMA_CM_EVENT_CONNECT_REQUEST ? raw->id : nullptr;
    const bool surfaced = translate(*raw, event);
    rdma_ack_cm_event(raw);
    if (surfaced) return true;
    if (new_id != nullptr && new_id->context == nullptr) {
      rdma_destroy_id(new_id);  // a request we could not take (logged by translate)
    }
  }
}

bool IbvCmChannel::translate(const rdma_cm_event& raw, CmEvent* event) noexcept {
  auto* id = raw.id != nullptr ? static_cast<IbvCmId*>(raw.id->context) : nullptr;
  std::optional<CmEventType> type = cm_event_type_from(raw.event, raw.status);
  int status = normalise_errno(raw.status);
  if (raw.event == RDMA_CM_EVENT_ADDR_RESOLVED) {
    // The stack asked for address and route in one step: take the second one here.
    const int timeout_ms = id != nullptr ? id->resolve_timeout_ms() : 2000;
    if (rdma_resolve_route(raw.id, timeout_ms) == 0) return false;
    status = errno;
    NVMF_WARNLOG(ibverbs, "rdma_resolve_route failed: %s", strerror(status));
    type = CmEventType::unreachable;
  }
  if (!type) {
    NVMF_DEBUGLOG(ibverbs, "dropped rdma_cm event %s (status %d)", rdma_event_str(raw.event),
                  raw.status);
    return false;
  }
  *event = CmEvent{};
  event->type = *type;
  event->status = status;
  event->id = id;
  if (raw.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    raw.id->context = nullptr;  // it inherited the listener's; ours follows
    event->listen_id =
        raw.listen_id != nullptr ? static_cast<IbvCmId*>(raw.listen_id->context) : nullptr;
    std::unique_ptr<IbvCmId> incoming(new (std::nothrow)
                                          IbvCmId(this, provider_, raw.id));  // setup-path
    IbvCmId* incoming_id = incoming.get();
    bool kept = false;
    if (incoming != nullptr) {
      try {
        unadopted_.push_back(std::move(incoming));  // setup-path; unchanged if it throws
        kept = true;
      } catch (...) {
      }
    }
    if (!kept) {
      // The wrapper (if any) is deleted without touching the id: its context is not it.
      NVMF_ERRLOG(ibverbs, "out of memory taking a connect request: rejected");
      rdma_reject(raw.id, nullptr, 0);
      return false;  // poll_event destroys the id after the ack
    }
    raw.id->context = incoming_id;
    event->id = incoming_id;
  }
  if (raw.param.conn.private_data != nullptr && raw.param.conn.private_data_len > 0) {
    // rdma_cm reports the CM message's maximum length, not what the peer sent (VM.md).
    const size_t length = std::min<size_t>(raw.param.conn.private_data_len, kCmPrivateDataMax);
    memcpy(event->private_data, raw.param.conn.private_data, length);
    event->private_data_length = static_cast<uint8_t>(length);
  }
  event->responder_resources = raw.param.conn.responder_resources;
  event->initiator_depth = raw.param.conn.initiator_depth;
  NVMF_DEBUGLOG(ibverbs, "rdma_cm event %s (status %d) -> %s", rdma_event_str(raw.event),
                raw.status, cm_event_type_name(event->type));
  return true;
}

// ---------------------------------------------------------------------------------------
// CmId

IbvCmId::~IbvCmId() {
  qp_.reset();  // rdma_destroy_qp before rdma_destroy_id
  if (id_ != nullptr && id_->context == this) {
    if (rdma_destroy_id(id_) != 0) {
      NVMF_ERRLOG(ibverbs, "rdma_destroy_id failed: %s", strerror(errno));
    }
  }
}

Result<void> IbvCmId::listen(const std::string& address, uint16_t port, int backlog) noexcept {
  sockaddr_storage storage;
  Result<void> parsed = parse_socket_address(address, port, &storage);
  if (!parsed) {
    NVMF_ERRLOG(ibverbs, "listen: '%s' is not a numeric IPv4/IPv6 address", address.c_str());
    return parsed;
  }
  if (rdma_bind_addr(id_, reinterpret_cast<sockaddr*>(&storage)) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(
        ibverbs, "rdma_bind_addr(%s:%u) failed: %s%s", address.c_str(), port, strerror(os_errno),
        os_errno == EADDRNOTAVAIL || os_errno == ENODEV ? " (no RDMA device has this address)"
                                                        : "");
    return Unexpected(make_system_error(os_errno, "rdma_bind_addr"));
  }
  if (rdma_listen(id_, backlog) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_listen(%s:%u) failed: %s", address.c_str(), port,
                strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_listen"));
  }
  return {};
}

Result<void> IbvCmId::resolve(const std::string& address, uint16_t port, int timeout_ms) noexcept {
  sockaddr_storage storage;
  Result<void> parsed = parse_socket_address(address, port, &storage);
  if (!parsed) {
    NVMF_ERRLOG(ibverbs, "resolve: '%s' is not a numeric IPv4/IPv6 address", address.c_str());
    return parsed;
  }
  resolve_timeout_ms_ = timeout_ms;
  if (rdma_resolve_addr(id_, nullptr, reinterpret_cast<sockaddr*>(&storage), timeout_ms) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_resolve_addr(%s:%u) failed: %s", address.c_str(), port,
                strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_resolve_addr"));
  }
  return {};
}

Device* IbvCmId::device() noexcept { return provider_->device_for(id_->verbs); }

namespace {

bool check_limit(const char* device, const char* knob, uint32_t value, uint32_t limit,
                 const char* limit_name) {
  if (value <= limit) return true;
  NVMF_ERRLOG(ibverbs, "%s: %s %u exceeds the device's %s %u", device, knob, value, limit_name,
              limit);
  return false;
}

}  // namespace

Result<QueuePair*> IbvCmId::create_qp(ProtectionDomain& pd_base, const QpOpts& opts) noexcept {
  if (qp_ != nullptr) return Unexpected(Errc::already_exists, "the CmId already has a QP");
  if (id_->verbs == nullptr) {
    return Unexpected(Errc::bad_state, "create_qp before route_resolved or connect_request");
  }
  auto& pd = static_cast<IbvProtectionDomain&>(pd_base);
  if (pd.raw()->context != id_->verbs) {
    return Unexpected(Errc::invalid_argument, "the PD belongs to another device than the CmId");
  }
  if (opts.send_cq == nullptr || opts.recv_cq == nullptr) {
    return Unexpected(Errc::invalid_argument, "QpOpts::send_cq and recv_cq are required");
  }
  const DeviceCaps& caps = pd.device().caps();
  const char* name = caps.name.c_str();
  const bool with_srq = opts.srq != nullptr;
  if (opts.max_send_wr == 0 || (!with_srq && opts.max_recv_wr == 0)) {
    return Unexpected(Errc::invalid_argument, "QpOpts::max_send_wr / max_recv_wr must be > 0");
  }
  if (!check_limit(name, "QpOpts::max_send_wr", opts.max_send_wr, caps.max_qp_wr, "max_qp_wr")) {
    return Unexpected(Errc::invalid_argument, "QpOpts::max_send_wr exceeds the device's max_qp_wr");
  }
  if (!with_srq &&
      !check_limit(name, "QpOpts::max_recv_wr", opts.max_recv_wr, caps.max_qp_wr, "max_qp_wr")) {
    return Unexpected(Errc::invalid_argument, "QpOpts::max_recv_wr exceeds the device's max_qp_wr");
  }
  if (!check_limit(name, "QpOpts::max_send_sge", opts.max_send_sge, caps.max_sge, "max_sge") ||
      (!with_srq &&
       !check_limit(name, "QpOpts::max_recv_sge", opts.max_recv_sge, caps.max_sge, "max_sge"))) {
    return Unexpected(Errc::invalid_argument, "QpOpts SGE count exceeds the device's max_sge");
  }
  auto* send_cq = static_cast<IbvCompletionQueue*>(opts.send_cq);
  auto* recv_cq = static_cast<IbvCompletionQueue*>(opts.recv_cq);
  auto* srq = static_cast<IbvSharedReceiveQueue*>(opts.srq);

  ibv_qp_init_attr init_attr{};
  init_attr.send_cq = send_cq->raw();
  init_attr.recv_cq = recv_cq->raw();
  init_attr.srq = with_srq ? srq->raw() : nullptr;
  init_attr.cap.max_send_wr = opts.max_send_wr;
  init_attr.cap.max_recv_wr = with_srq ? 0 : opts.max_recv_wr;
  init_attr.cap.max_send_sge = opts.max_send_sge;
  init_attr.cap.max_recv_sge = with_srq ? 0 : opts.max_recv_sge;
  init_attr.cap.max_inline_data = opts.max_inline_data;
  init_attr.qp_type = IBV_QPT_RC;
  init_attr.sq_sig_all = 0;  // selective signaling: each WR says (kWrSignaled)
  if (rdma_create_qp(id_, pd.raw(), &init_attr) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs,
                "%s: rdma_create_qp(send %u x %u SGE, recv %u x %u SGE, inline %u) failed: %s "
                "(lower QpOpts; max_inline_data has no device attribute, try 0)",
                name, opts.max_send_wr, opts.max_send_sge, opts.max_recv_wr, opts.max_recv_sge,
                opts.max_inline_data, strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_create_qp"));
  }
  ibv_qp* raw_qp = id_->qp;

  // Read back what the device granted (it may round up; it must not give less).
  ibv_qp_attr attr{};
  ibv_qp_init_attr granted_attr{};
  const int rc = normalise_errno(ibv_query_qp(raw_qp, &attr, IBV_QP_CAP, &granted_attr));
  if (rc != 0) {
    NVMF_ERRLOG(ibverbs, "%s: ibv_query_qp failed: %s", name, strerror(rc));
    rdma_destroy_qp(id_);
    return Unexpected(make_system_error(rc, "ibv_query_qp"));
  }
  QpOpts granted = opts;
  granted.max_send_wr = granted_attr.cap.max_send_wr;
  granted.max_send_sge = granted_attr.cap.max_send_sge;
  granted.max_inline_data = granted_attr.cap.max_inline_data;
  granted.max_recv_wr = with_srq ? 0 : granted_attr.cap.max_recv_wr;
  granted.max_recv_sge = with_srq ? 0 : granted_attr.cap.max_recv_sge;
  if (granted.max_send_wr < opts.max_send_wr || granted.max_send_sge < opts.max_send_sge ||
      granted.max_inline_data < opts.max_inline_data ||
      (!with_srq &&
       (granted.max_recv_wr < opts.max_recv_wr || granted.max_recv_sge < opts.max_recv_sge))) {
    NVMF_ERRLOG(ibverbs,
                "%s: QP granted send %u x %u, recv %u x %u, inline %u: less than QpOpts asked "
                "(send %u x %u, recv %u x %u, inline %u)",
                name, granted.max_send_wr, granted.max_send_sge, granted.max_recv_wr,
                granted.max_recv_sge, granted.max_inline_data, opts.max_send_wr, opts.max_send_sge,
                opts.max_recv_wr, opts.max_recv_sge, opts.max_inline_data);
    rdma_destroy_qp(id_);
    return Unexpected(Errc::no_memory, "QP granted less than QpOpts asked");
  }
  auto pair = IbvQueuePair::create(kRdmaCoreOps, raw_qp, id_, granted, send_cq, recv_cq, srq);
  if (!pair) return Unexpected(pair.error());  // the pair destroyed the QP
  qp_ = std::move(*pair);
  return static_cast<QueuePair*>(qp_.get());
}

Result<rdma_conn_param> IbvCmId::conn_param(const ConnectParams& params, size_t private_data_max,
                                            const char* message) noexcept {
  if (params.private_data_length > private_data_max) {
    NVMF_ERRLOG(ibverbs, "%s: %u bytes of private data exceed the CM's %zu", message,
                params.private_data_length, private_data_max);
    return Unexpected(Errc::invalid_argument, "private data exceeds the CM message's maximum");
  }
  if (params.private_data_length > 0 && params.private_data == nullptr) {
    return Unexpected(Errc::invalid_argument, "private_data_length > 0 without private_data");
  }
  uint32_t max_responder = 0;
  uint32_t max_initiator = 0;
  if (IbvDevice* device = provider_->device_for(id_->verbs); device != nullptr) {
    max_responder = device->caps().max_qp_rd_atom;
    max_initiator = device->caps().max_qp_init_rd_atom;
  }
  bool clamped = false;
  rdma_conn_param param = to_conn_param(params, max_responder, max_initiator, &clamped);
  if (clamped) {
    NVMF_WARNLOG(ibverbs,
                 "%s: ConnectParams responder_resources %u / initiator_depth %u lowered to the "
                 "device's max_qp_rd_atom %u / max_qp_init_rd_atom %u",
                 message, params.responder_resources, params.initiator_depth,
                 param.responder_resources, param.initiator_depth);
  }
  return param;
}

Result<void> IbvCmId::connect(const ConnectParams& params) noexcept {
  if (qp_ == nullptr) return Unexpected(Errc::bad_state, "connect before create_qp");
  auto param = conn_param(params, kCmRequestPrivateDataMax, "connect");
  if (!param) return Unexpected(param.error());
  if (rdma_connect(id_, &*param) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_connect failed: %s", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_connect"));
  }
  return {};
}

Result<void> IbvCmId::accept(const ConnectParams& params) noexcept {
  if (qp_ == nullptr) return Unexpected(Errc::bad_state, "accept before create_qp");
  auto param = conn_param(params, kCmReplyPrivateDataMax, "accept");
  if (!param) return Unexpected(param.error());
  if (rdma_accept(id_, &*param) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_accept failed: %s", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_accept"));
  }
  return {};
}

Result<void> IbvCmId::reject(const void* private_data, uint8_t length) noexcept {
  if (length > kCmRejectPrivateDataMax) {
    NVMF_ERRLOG(ibverbs, "reject: %u bytes of private data exceed the CM's %zu", length,
                kCmRejectPrivateDataMax);
    return Unexpected(Errc::invalid_argument, "private data exceeds the CM REJ maximum (148)");
  }
  if (rdma_reject(id_, length > 0 ? private_data : nullptr, length) != 0) {
    const int os_errno = errno;
    NVMF_ERRLOG(ibverbs, "rdma_reject failed: %s", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_reject"));
  }
  return {};
}

Result<void> IbvCmId::disconnect() noexcept {
  const int rc = rdma_disconnect(id_);
  const int os_errno = errno;
  // librdmacm moves the QP to error on IB/RoCE (SQD on iWARP); make it error everywhere so
  // every outstanding WR flushes, and stop ringing the device for it.
  if (qp_ != nullptr) qp_->enter_error(true);
  if (rc != 0) {
    NVMF_WARNLOG(ibverbs, "rdma_disconnect failed: %s", strerror(os_errno));
    return Unexpected(make_system_error(os_errno, "rdma_disconnect"));
  }
  return {};
}

Result<void> IbvCmId::notify_established() noexcept {
  if (rdma_notify(id_, IBV_EVENT_COMM_EST) == 0) return {};
  const int os_errno = errno;
  // ib_cm answers EISCONN when the RTU was first: established already, as we wanted.
  if (os_errno == EISCONN) return {};
  NVMF_WARNLOG(ibverbs, "rdma_notify(COMM_EST) failed: %s", strerror(os_errno));
  return Unexpected(Errc::bad_state, "rdma_notify(COMM_EST)", os_errno);
}

std::string IbvCmId::peer_address() const { return format_socket_address(rdma_get_peer_addr(id_)); }

}  // namespace nvmf::verbs::ibverbs
