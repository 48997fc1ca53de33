// Host and Controller: set-up, bring-up, discovery, keep-alive, async events, shutdown. All of
// it is control path: blocking calls poll their queue and the host's idle hook.
#include <algorithm>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "initiator/host_internal.h"
#include "verbs/ibverbs/ibverbs.h"

NVMF_LOG_COMPONENT(host);

namespace nvmf::host {

namespace {

using transport_rdma::DataDirection;
using transport_rdma::HostCommand;
using transport_rdma::HostQueue;
using transport_rdma::HostQueueState;

constexpr uint32_t kScratchBytes = 4096;
constexpr uint32_t kMaxAers = 4;                 // the kernel host keeps one; SPDK up to 4
constexpr uint32_t kShutdownTimeoutMs = 5000;    // kernel's shutdown_timeout default
constexpr uint32_t kDiscoveryLogRetries = 10;

std::string status_text(const spec::Status& status, bool fabrics) {
  char text[160];
  std::snprintf(text, sizeof(text), "%s (sct %xh sc %02xh%s)",
                spec::status_name(status, fabrics), status.sct, status.sc,
                status.dnr ? ", DNR" : "");
  return text;
}

// The field a Connect Invalid Parameters status points at (IATTR, IPO).
const char* connect_field_name(bool in_data, uint16_t offset) {
  if (in_data) {
    if (offset < 16) return "HOSTID";
    if (offset < 18) return "CNTLID";
    if (offset >= 256 && offset < 512) return "SUBNQN";
    if (offset >= 512 && offset < 768) return "HOSTNQN";
    return "Connect data";
  }
  if (offset == 42 || offset == 43) return "RECFMT";
  if (offset == 44 || offset == 45) return "QID";
  if (offset == 46 || offset == 47) return "SQSIZE";
  if (offset == 48) return "CATTR";
  if (offset >= 52 && offset < 56) return "KATO";
  return "Connect command";
}

std::string errc_text(const Error& error) {
  char text[160];
  return error_describe(error, text, sizeof(text));
}

}  // namespace

void set_message(std::string* message, const std::string& text) {
  if (message != nullptr) *message = text;
}

Result<void> wait_connected(Host::Impl& host, HostQueue& queue, const TransportId& trid,
                            std::string* message, Controller::Impl* keep_alive) {
  for (;;) {
    const HostQueueState state = queue.progress_connect();
    if (state == HostQueueState::connected) return {};
    if (state == HostQueueState::failed) {
      const transport_rdma::HostQueueFailure& failure = queue.failure();
      set_message(message, "cannot connect queue " + std::to_string(queue.qid()) + " to " +
                               trid.traddr + ":" + trid.trsvcid + ": " + failure.reason);
      return Unexpected(failure.code, failure.reason);
    }
    host.idle();
    if (keep_alive != nullptr) keep_alive->keep_alive_while_connecting();
  }
}

// ---------------------------------------------------------------------------------------
// Host

Host::Host(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Host::~Host() = default;

Result<std::unique_ptr<Host>> Host::create(const HostOpts& opts) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->clock = opts.clock != nullptr ? opts.clock : &impl->monotonic;
  if (opts.provider != nullptr) {
    impl->provider = opts.provider;
  } else {
    auto provider = verbs::ibverbs::IbverbsProvider::create();
    if (!provider) return Unexpected(provider.error());
    impl->owned_provider = std::move(*provider);
    impl->provider = impl->owned_provider.get();
  }
  auto map = memreg::MemoryMap::create();
  if (!map) return Unexpected(map.error());
  impl->map = std::move(*map);
  impl->domains = std::make_unique<transport_rdma::HostDomains>(*impl->map);
  return std::unique_ptr<Host>(new Host(std::move(impl)));  // setup-path
}

void* Host::dma_alloc(size_t bytes) { return impl_->map->allocate(bytes); }
void Host::dma_free(void* buffer) { impl_->map->free(buffer); }

namespace {

Result<std::unique_ptr<Controller::Impl>> start_controller(Host::Impl& host,
                                                           const TransportId& trid,
                                                           const ControllerOpts& opts,
                                                           bool discovery, std::string* message) {
  auto ctrl = std::make_unique<Controller::Impl>();
  ctrl->host = &host;
  ctrl->trid = trid;
  ctrl->opts = opts;
  ctrl->discovery = discovery;
  if (discovery) ctrl->trid.subnqn = kDiscoveryNqn;
  if (opts.hostnqn.empty() || opts.hostid == std::array<uint8_t, 16>{}) {
    HostIdentity identity = default_host_identity();
    ctrl->identity.hostnqn = opts.hostnqn.empty() ? identity.hostnqn : opts.hostnqn;
    ctrl->identity.hostid =
        opts.hostid == std::array<uint8_t, 16>{} ? identity.hostid : opts.hostid;
  } else {
    ctrl->identity.hostnqn = opts.hostnqn;
    ctrl->identity.hostid = opts.hostid;
  }
  if (opts.memreg == MemregPolicy::unsafe) {
    NVMF_WARNLOG(host, "memreg policy 'unsafe' reuses a memory window before its invalidation "
                       "is known to have landed (the 2017 nvme-rdma race): for reproduction only");
  }
  if (ctrl->identity.hostnqn.size() > spec::nqn_length_max) {
    set_message(message, "host NQN longer than 223 bytes");
    return Unexpected(Errc::invalid_argument, "host NQN too long");
  }
  if (ctrl->trid.subnqn.size() > spec::nqn_length_max) {
    set_message(message, "subsystem NQN longer than 223 bytes");
    return Unexpected(Errc::invalid_argument, "subsystem NQN too long");
  }
  ctrl->scratch = host.map->allocate(kScratchBytes);
  ctrl->aer_log = host.map->allocate(kScratchBytes);
  if (ctrl->scratch == nullptr || ctrl->aer_log == nullptr) {
    set_message(message, "cannot allocate DMA memory for admin commands");
    return Unexpected(Errc::no_memory, "admin buffers");
  }
  ctrl->admin_thread = std::this_thread::get_id();
  ctrl->bringing_up = true;
  auto made = ctrl->bring_up(message);
  ctrl->bringing_up = false;
  if (!made) return Unexpected(made.error());
  return ctrl;
}

}  // namespace

Result<std::unique_ptr<Controller>> Host::connect(const TransportId& trid,
                                                  const ControllerOpts& opts,
                                                  std::string* message) {
  auto ctrl = start_controller(*impl_, trid, opts, false, message);
  if (!ctrl) return Unexpected(ctrl.error());
  NVMF_NOTICELOG(host, "connected to %s at %s:%s (controller %u, %zu namespaces, %u I/O queues)",
                 trid.subnqn.c_str(), trid.traddr.c_str(), trid.trsvcid.c_str(),
                 (*ctrl)->data.cntlid, (*ctrl)->active.size(), (*ctrl)->data.io_queues_granted);
  return std::make_unique<Controller>(std::move(*ctrl));
}

Result<std::vector<DiscoveryEntry>> Host::discover(const TransportId& trid,
                                                   const ControllerOpts& opts,
                                                   std::string* message) {
  ControllerOpts discovery_opts = opts;
  discovery_opts.keep_alive_timeout_ms = 0;  // a short-lived discovery controller, as nvme-cli
  auto ctrl = start_controller(*impl_, trid, discovery_opts, true, message);
  if (!ctrl) return Unexpected(ctrl.error());
  auto entries = (*ctrl)->read_discovery_log(message);
  (*ctrl)->shutdown();
  return entries;
}

// ---------------------------------------------------------------------------------------
// Controller::Impl

Controller::Impl::~Impl() {
  shutdown();
  admin.reset();
  if (host != nullptr) {
    host->map->free(scratch);
    host->map->free(aer_log);
  }
}

namespace {

struct SyncWaiter {
  bool done = false;
  spec::Cqe cqe{};
};

void sync_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* waiter = static_cast<SyncWaiter*>(command.cb_ctx);
  waiter->cqe = cqe;
  waiter->done = true;
}

}  // namespace

Result<spec::Cqe> Controller::Impl::execute(spec::Sqe sqe, DataDirection direction, void* buffer,
                                            uint32_t length) {
  if (!admin || admin->state() != HostQueueState::connected) {
    return Unexpected(Errc::disconnected, "admin queue not connected");
  }
  HostCommand* command = admin->get_command();
  while (command == nullptr) {
    (void)admin->poll();
    if (admin->state() != HostQueueState::connected) {
      return Unexpected(Errc::disconnected, "admin queue disconnected");
    }
    host->idle();
    command = admin->get_command();
  }
  SyncWaiter waiter;
  command->sqe = sqe;
  command->callback = sync_done;
  command->status_fn = nullptr;
  command->cb_ctx = &waiter;
  iovec iov{buffer, length};
  auto submitted = admin->submit(*command, direction, &iov, direction == DataDirection::none ? 0 : 1);
  if (!submitted) return Unexpected(submitted.error());
  const uint64_t deadline = host->now_ns() + uint64_t{opts.admin_timeout_ms} * 1000 * 1000;
  while (!waiter.done) {
    (void)admin->poll();
    if (waiter.done) break;
    if (host->now_ns() >= deadline) {
      NVMF_ERRLOG(host, "%s: admin command %02xh timed out after %u ms; disconnecting",
                  trid.subnqn.c_str(), sqe.opcode, opts.admin_timeout_ms);
      admin->disconnect();  // aborts the command while `waiter` still lives
      // Outside a bring-up (whose caller handles its failure) the controller resets.
      if (!bringing_up && connected) {
        admin_lost("admin command timed out");
      } else {
        connected = false;
      }
      return Unexpected(Errc::timed_out, "admin command timed out");
    }
    host->idle();
  }
  return waiter.cqe;
}

Result<spec::Cqe> Controller::Impl::fabrics_connect(HostQueue& queue, void* connect_data,
                                                    uint16_t cntlid, std::string* message) {
  spec::ConnectData connect{};
  std::memcpy(connect.hostid, identity.hostid.data(), sizeof(connect.hostid));
  connect.cntlid = cntlid;
  spec::put_nul_padded(connect.subnqn, trid.subnqn);
  spec::put_nul_padded(connect.hostnqn, identity.hostnqn);
  std::memcpy(connect_data, &connect, sizeof(connect));

  const uint32_t kato = queue.qid() == 0 ? opts.keep_alive_timeout_ms : 0;
  const spec::Sqe sqe = spec::to_sqe(spec::make_connect_command(0, queue.qid(), queue.entries(), kato));

  HostCommand* command = queue.reserved_command();
  if (command == nullptr) return Unexpected(Errc::busy, "no command slot for Connect");
  SyncWaiter waiter;
  command->sqe = sqe;
  command->callback = sync_done;
  command->status_fn = nullptr;
  command->cb_ctx = &waiter;
  iovec iov{connect_data, sizeof(spec::ConnectData)};
  auto submitted = queue.submit(*command, DataDirection::host_to_controller, &iov, 1);
  if (!submitted) {
    set_message(message, "cannot send Connect: " + errc_text(submitted.error()));
    return Unexpected(submitted.error());
  }
  const uint64_t deadline = host->now_ns() + uint64_t{opts.connect_timeout_ms} * 1000 * 1000;
  while (!waiter.done) {
    (void)queue.poll();
    if (waiter.done) break;
    if (queue.state() != HostQueueState::connected) break;
    if (host->now_ns() >= deadline) {
      queue.disconnect();
      set_message(message, "Fabrics Connect of queue " + std::to_string(queue.qid()) + " to " +
                               trid.subnqn + " timed out");
      return Unexpected(Errc::timed_out, "Connect timed out");
    }
    host->idle();
    if (queue.qid() != 0) keep_alive_while_connecting();
  }
  if (!waiter.done) {
    set_message(message, "queue " + std::to_string(queue.qid()) +
                             " disconnected during Fabrics Connect");
    return Unexpected(Errc::disconnected, "disconnected during Connect");
  }
  const spec::Status status = waiter.cqe.decoded_status();
  if (!status.is_success()) {
    std::string text = "Fabrics Connect of queue " + std::to_string(queue.qid()) + " to " +
                       trid.subnqn + " as " + identity.hostnqn + " refused: " +
                       status_text(status, true);
    if (status.sct == spec::sct::command_specific &&
        status.sc == spec::sc_fabrics::connect_invalid_parameters) {
      const bool in_data = spec::connect_invalid_in_data(waiter.cqe);
      const uint16_t offset = spec::connect_invalid_offset(waiter.cqe);
      text += std::string(" (") + connect_field_name(in_data, offset) + ": " +
              (in_data ? "Connect data" : "command") + " byte " + std::to_string(offset) + ")";
    }
    set_message(message, text);
    NVMF_ERRLOG(host, "%s", text.c_str());
    const bool host_refused = status.sct == spec::sct::command_specific &&
                              status.sc == spec::sc_fabrics::connect_invalid_host;
    return Unexpected(host_refused ? Errc::permission_denied : Errc::connection_refused,
                      host_refused ? "Connect Invalid Host" : "Connect refused");
  }
  return waiter.cqe;
}

Result<uint64_t> Controller::Impl::property_get(uint32_t offset, std::string* message) {
  auto cqe = execute(spec::to_sqe(spec::make_property_get(0, offset)), DataDirection::none,
                     nullptr, 0);
  if (!cqe) {
    set_message(message, "Property Get failed: " + errc_text(cqe.error()));
    return Unexpected(cqe.error());
  }
  if (!cqe->decoded_status().is_success()) {
    set_message(message, "Property Get of offset " + std::to_string(offset) + " failed: " +
                             status_text(cqe->decoded_status(), true));
    return Unexpected(Errc::io_error, "Property Get failed");
  }
  return spec::property_get_value(*cqe);
}

Result<void> Controller::Impl::property_set(uint32_t offset, uint64_t value,
                                            std::string* message) {
  auto cqe = execute(spec::to_sqe(spec::make_property_set(0, offset, value)), DataDirection::none,
                     nullptr, 0);
  if (!cqe) {
    set_message(message, "Property Set failed: " + errc_text(cqe.error()));
    return Unexpected(cqe.error());
  }
  if (!cqe->decoded_status().is_success()) {
    set_message(message, "Property Set of offset " + std::to_string(offset) + " failed: " +
                             status_text(cqe->decoded_status(), true));
    return Unexpected(Errc::io_error, "Property Set failed");
  }
  return {};
}

Result<void> Controller::Impl::bring_up(std::string* message, bool resetting) {
  transport_rdma::HostQueueOpts queue_opts;
  queue_opts.address = trid.traddr;
  queue_opts.port = trid.port();
  queue_opts.qid = 0;
  queue_opts.entries = std::max<uint16_t>(opts.admin_queue_size, 2);
  queue_opts.cntlid = 0;
  queue_opts.connect_timeout_ms = opts.connect_timeout_ms;
  queue_opts.clock = host->clock;
  auto queue = HostQueue::create(*host->provider, *host->domains, queue_opts);
  if (!queue) {
    set_message(message, "cannot start connecting to " + trid.traddr + ":" + trid.trsvcid + ": " +
                             errc_text(queue.error()));
    return Unexpected(queue.error());
  }
  admin = std::move(*queue);
  auto up = wait_connected(*host, *admin, trid, message);
  if (!up) return up;

  auto connect_cqe = fabrics_connect(*admin, scratch, 0xFFFF, message);
  if (!connect_cqe) return Unexpected(connect_cqe.error());
  data.cntlid = spec::connect_response_cntlid(*connect_cqe);
  connected = true;

  auto cap = property_get(spec::property_offset::cap, message);
  if (!cap) return Unexpected(cap.error());
  data.cap = *cap;
  auto vs = property_get(spec::property_offset::vs, message);
  if (!vs) return Unexpected(vs.error());
  data.vs = static_cast<uint32_t>(*vs);

  spec::CcFields cc;
  cc.en = true;
  cc.iosqes = 6;  // 64-byte SQEs
  cc.iocqes = 4;  // 16-byte CQEs
  auto enabled = property_set(spec::property_offset::cc, spec::encode_cc(cc), message);
  if (!enabled) return enabled;
  const uint64_t ready_deadline =
      host->now_ns() + uint64_t{std::max<uint32_t>(spec::cap_timeout_ms(data.cap), 500)} * 1000 * 1000;
  for (;;) {
    auto csts = property_get(spec::property_offset::csts, message);
    if (!csts) return Unexpected(csts.error());
    if (spec::csts_cfs(static_cast<uint32_t>(*csts))) {
      set_message(message, "controller fatal status (CSTS.CFS) while enabling");
      return Unexpected(Errc::io_error, "CSTS.CFS");
    }
    if (spec::csts_rdy(static_cast<uint32_t>(*csts))) break;
    if (host->now_ns() >= ready_deadline) {
      set_message(message, "controller not ready within CAP.TO (" +
                               std::to_string(spec::cap_timeout_ms(data.cap)) + " ms)");
      return Unexpected(Errc::timed_out, "CSTS.RDY");
    }
    host->idle();
  }

  auto identify = execute(spec::make_identify(0, spec::cns::controller), DataDirection::controller_to_host,
                          scratch, spec::identify_data_size);
  if (!identify || !identify->decoded_status().is_success()) {
    set_message(message, identify ? "Identify Controller failed: " +
                                        status_text(identify->decoded_status(), false)
                                  : "Identify Controller failed: " + errc_text(identify.error()));
    return Unexpected(identify ? Errc::io_error : identify.error().code, "Identify Controller");
  }
  spec::IdentifyController id;
  std::memcpy(&id, scratch, sizeof(id));
  data.vid = id.vid;
  data.serial_number = std::string(spec::get_space_padded(id.sn));
  data.model_number = std::string(spec::get_space_padded(id.mn));
  data.firmware_revision = std::string(spec::get_space_padded(id.fr));
  data.subnqn = std::string(spec::get_nul_terminated(id.subnqn));
  const uint32_t page_bytes = 4096u << spec::cap_mpsmin(data.cap);
  data.max_transfer_bytes = id.mdts == 0 ? 0 : (id.mdts >= 20 ? 0 : page_bytes << id.mdts);
  data.in_capsule_data_bytes = id.ioccsz >= 4 ? id.ioccsz * 16 - 64 : 0;
  data.namespace_count = id.nn;
  data.aerl = id.aerl;
  data.acl = id.acl;
  data.io_queue_size = static_cast<uint16_t>(
      std::min<uint32_t>(opts.io_queue_size, spec::cap_mqes(data.cap) + 1));
  if (discovery) return {};

  const uint16_t asked = std::max<uint16_t>(opts.io_queue_count, 1);
  auto queues = execute(spec::make_set_features(0, spec::feature::number_of_queues,
                                                spec::encode_number_of_queues(asked, asked)),
                        DataDirection::none, nullptr, 0);
  if (!queues || !queues->decoded_status().is_success()) {
    set_message(message, queues ? "Set Features Number of Queues failed: " +
                                      status_text(queues->decoded_status(), false)
                                : "Set Features Number of Queues failed: " + errc_text(queues.error()));
    return Unexpected(queues ? Errc::io_error : queues.error().code, "Number of Queues");
  }
  const uint32_t granted = std::min(spec::number_of_queues_sq_count(queues->cdw0),
                                    spec::number_of_queues_cq_count(queues->cdw0));
  data.io_queues_granted = static_cast<uint16_t>(std::min<uint32_t>(asked, granted));
  if (!resetting) {
    registry->qid_used.assign(data.io_queues_granted, false);
  } else if (data.io_queues_granted < registry->qid_used.size()) {
    // The live qpairs keep their QIDs; those above the grant are refused at their Connect and
    // retry until the controller loss timeout.
    NVMF_WARNLOG(host, "%s: the reset controller grants %u I/O queues, %zu before",
                 trid.subnqn.c_str(), data.io_queues_granted, registry->qid_used.size());
  }

  auto namespaces_found = identify_namespaces(message);
  if (!namespaces_found) return namespaces_found;

  // Namespace attribute notices (the kernel host asks for them too); a target without the
  // feature still works.
  (void)execute(spec::make_set_features(0, spec::feature::async_event_configuration,
                                        spec::async_event_config_bit::namespace_attribute),
                DataDirection::none, nullptr, 0);
  const uint32_t aers = std::min<uint32_t>(uint32_t{data.aerl} + 1, kMaxAers);
  for (uint32_t i = 0; i < aers; ++i) submit_aer();
  if (opts.keep_alive_timeout_ms != 0) {
    next_keep_alive_ns = host->now_ns() + uint64_t{opts.keep_alive_timeout_ms} * 1000 * 1000 / 2;
  }
  publish_epoch(ControllerEpoch{epoch.generation, ControllerLink::live, data.cntlid});
  return {};
}

namespace {

bool same_namespace(const Namespace& a, const Namespace& b) {
  return a.id() == b.id() && a.block_size() == b.block_size() &&
         a.block_count() == b.block_count() && a.uuid() == b.uuid() && a.nguid() == b.nguid();
}

}  // namespace

Result<void> Controller::Impl::identify_namespaces(std::string* message) {
  auto list = execute(spec::make_identify(0, spec::cns::active_namespace_list, 0),
                      DataDirection::controller_to_host, scratch, spec::identify_data_size);
  if (!list || !list->decoded_status().is_success()) {
    set_message(message, "Identify active namespace list failed");
    return Unexpected(list ? Errc::io_error : list.error().code, "active namespace list");
  }
  std::vector<uint32_t> nsids;
  const auto* ids = static_cast<const uint32_t*>(scratch);
  for (uint32_t i = 0; i < spec::identify_data_size / 4 && ids[i] != 0; ++i) {
    nsids.push_back(ids[i]);
  }
  std::vector<uint32_t> found_active;
  std::vector<std::unique_ptr<Namespace>> found;
  for (uint32_t nsid : nsids) {
    auto ns_cqe = execute(spec::make_identify(0, spec::cns::namespace_data, nsid),
                          DataDirection::controller_to_host, scratch, spec::identify_data_size);
    if (!ns_cqe || !ns_cqe->decoded_status().is_success()) {
      set_message(message, "Identify Namespace " + std::to_string(nsid) + " failed");
      return Unexpected(ns_cqe ? Errc::io_error : ns_cqe.error().code, "Identify Namespace");
    }
    spec::IdentifyNamespace ns;
    std::memcpy(&ns, scratch, sizeof(ns));
    if (ns.nsze == 0) continue;  // allocated but inactive
    const uint64_t block_size = spec::namespace_block_size(ns);
    std::array<uint8_t, 16> nguid{};
    std::memcpy(nguid.data(), ns.nguid, nguid.size());
    std::array<uint8_t, 16> uuid{};
    auto descriptors = execute(spec::make_identify(0, spec::cns::namespace_id_descriptor_list, nsid),
                               DataDirection::controller_to_host, scratch, spec::identify_data_size);
    if (descriptors && descriptors->decoded_status().is_success()) {
      spec::NamespaceIdentifiers identifiers;
      if (spec::decode_ns_id_descriptor_list(static_cast<const uint8_t*>(scratch),
                                             spec::identify_data_size, &identifiers)) {
        if (identifiers.has_uuid) std::memcpy(uuid.data(), identifiers.uuid, uuid.size());
        if (identifiers.has_nguid) std::memcpy(nguid.data(), identifiers.nguid, nguid.size());
      }
    }
    found_active.push_back(nsid);
    found.push_back(std::make_unique<Namespace>(nsid, static_cast<uint32_t>(block_size), ns.nsze,
                                                uuid, nguid));
  }
  // Every read succeeded: the new lists replace the old. An unchanged namespace keeps its
  // object (callers hold Namespace pointers); the others are retired, never freed.
  for (auto& fresh : found) {
    for (auto& old : namespaces) {
      if (old && same_namespace(*old, *fresh)) {
        fresh = std::move(old);
        break;
      }
    }
  }
  for (auto& old : namespaces) {
    if (old) retired_namespaces.push_back(std::move(old));
  }
  active = std::move(found_active);
  namespaces = std::move(found);
  return {};
}

namespace {

void keep_alive_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* ctrl = static_cast<Controller::Impl*>(command.owner);
  ctrl->keep_alive_outstanding = false;
  const spec::Status status = cqe.decoded_status();
  if (!status.is_success() && status.sc != spec::sc_generic::aborted_sq_deletion) {
    NVMF_ERRLOG(host, "%s: Keep Alive failed: %s", ctrl->trid.subnqn.c_str(),
                spec::status_name(status));
  }
}

void aer_log_done(HostCommand& command, const spec::Cqe&) {
  auto* ctrl = static_cast<Controller::Impl*>(command.owner);
  ctrl->aer_log_busy = false;
}

void aer_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* ctrl = static_cast<Controller::Impl*>(command.owner);
  --ctrl->aers_outstanding;
  const spec::Status status = cqe.decoded_status();
  if (!status.is_success()) {
    // Aborted at disconnect, or the target's AER limit: do not resubmit.
    if (status.sc != spec::sc_generic::aborted_sq_deletion) {
      NVMF_WARNLOG(host, "%s: Asynchronous Event Request failed: %s", ctrl->trid.subnqn.c_str(),
                   spec::status_name(status));
    }
    return;
  }
  ++ctrl->stats.async_events;
  const uint8_t type = spec::async_event_type_of(cqe.cdw0);
  const uint8_t info = spec::async_event_info_of(cqe.cdw0);
  const uint8_t lid = spec::async_event_log_page_of(cqe.cdw0);
  NVMF_NOTICELOG(host, "%s: async event type %u info %02xh log page %02xh",
                 ctrl->trid.subnqn.c_str(), type, info, lid);
  if (type == spec::async_event_type::notice &&
      info == spec::async_event_notice::namespace_attribute_changed) {
    ctrl->rescan_pending = true;  // process_admin_completions() reads the lists again
  }
  if (ctrl->shutting_down) return;  // CC.SHN is out: the controller takes no new commands
  // Reading the log page the event names re-arms that event at the controller.
  if (lid != 0 && !ctrl->aer_log_busy && ctrl->admin) {
    HostCommand* read = ctrl->admin->get_command();
    if (read != nullptr) {
      read->sqe = spec::make_get_log_page(0, lid, kScratchBytes);
      read->callback = aer_log_done;
      read->owner = ctrl;
      iovec iov{ctrl->aer_log, kScratchBytes};
      if (ctrl->admin->submit(*read, DataDirection::controller_to_host, &iov, 1)) {
        ctrl->aer_log_busy = true;
      }
    }
  }
  ctrl->submit_aer();
}

}  // namespace

void Controller::Impl::submit_aer() noexcept {
  if (shutting_down || !admin || admin->state() != HostQueueState::connected) return;
  HostCommand* command = admin->get_command();
  if (command == nullptr) return;
  command->sqe = spec::make_sqe(spec::admin_opcode::async_event_request, 0);
  command->callback = aer_done;
  command->owner = this;
  if (admin->submit(*command, DataDirection::none, nullptr, 0)) ++aers_outstanding;
}

void Controller::Impl::submit_keep_alive() noexcept {
  HostCommand* command = admin->get_command();
  if (command == nullptr) return;  // try again at the next poll
  command->sqe = spec::make_sqe(spec::admin_opcode::keep_alive, 0);
  command->callback = keep_alive_done;
  command->owner = this;
  if (admin->submit(*command, DataDirection::none, nullptr, 0)) {
    keep_alive_outstanding = true;
    keep_alive_sent_ns = host->now_ns();
    ++stats.keep_alives_sent;
  }
}

Result<std::vector<DiscoveryEntry>> Controller::Impl::read_discovery_log(std::string* message) {
  for (uint32_t attempt = 0; attempt < kDiscoveryLogRetries; ++attempt) {
    auto header = execute(spec::make_get_log_page(0, spec::discovery_log_page_id,
                                                  sizeof(spec::DiscoveryLogPageHeader)),
                          DataDirection::controller_to_host, scratch,
                          sizeof(spec::DiscoveryLogPageHeader));
    if (!header || !header->decoded_status().is_success()) {
      set_message(message, header ? "Get Log Page (discovery) failed: " +
                                        status_text(header->decoded_status(), false)
                                  : "Get Log Page (discovery) failed: " + errc_text(header.error()));
      return Unexpected(header ? Errc::io_error : header.error().code, "discovery log");
    }
    spec::DiscoveryLogPageHeader first;
    std::memcpy(&first, scratch, sizeof(first));
    // A log of up to ~1000 records; a target claiming more is refused, not trusted.
    if (first.numrec > 1024) {
      set_message(message, "discovery log claims " + std::to_string(first.numrec) + " records");
      return Unexpected(Errc::io_error, "discovery log too large");
    }
    const uint64_t page_bytes = spec::discovery_log_page_size(first.numrec);
    void* page = host->map->allocate(page_bytes);
    if (page == nullptr) return Unexpected(Errc::no_memory, "discovery log buffer");
    std::vector<DiscoveryEntry> entries;
    bool ok = true;
    // Read the page in chunks of at most 64 KiB (well under any MDTS).
    for (uint64_t offset = 0; offset < page_bytes && ok;) {
      const uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(page_bytes - offset, 65536));
      auto part = execute(spec::make_get_log_page(0, spec::discovery_log_page_id, chunk, offset),
                          DataDirection::controller_to_host,
                          static_cast<uint8_t*>(page) + offset, chunk);
      ok = part && part->decoded_status().is_success();
      offset += chunk;
    }
    spec::DiscoveryLogPageHeader again;
    std::memcpy(&again, page, sizeof(again));
    if (ok && again.genctr == first.genctr && again.numrec == first.numrec) {
      const auto* records = reinterpret_cast<const spec::DiscoveryLogEntry*>(
          static_cast<const uint8_t*>(page) + sizeof(spec::DiscoveryLogPageHeader));
      for (uint64_t i = 0; i < again.numrec; ++i) {
        const spec::DiscoveryLogEntry& record = records[i];
        DiscoveryEntry entry;
        entry.trtype = record.trtype;
        entry.adrfam = record.adrfam;
        entry.subtype = record.subtype;
        entry.portid = record.portid;
        entry.cntlid = record.cntlid;
        entry.trsvcid = std::string(spec::get_nul_terminated(record.trsvcid));
        entry.traddr = std::string(spec::get_nul_terminated(record.traddr));
        entry.subnqn = std::string(spec::get_nul_terminated(record.subnqn));
        entries.push_back(std::move(entry));
      }
      host->map->free(page);
      return entries;
    }
    host->map->free(page);
    if (!ok) {
      set_message(message, "Get Log Page (discovery) failed while reading records");
      return Unexpected(Errc::io_error, "discovery log");
    }
    NVMF_INFOLOG(host, "discovery log changed while reading it (generation %llu -> %llu); again",
                 static_cast<unsigned long long>(first.genctr),
                 static_cast<unsigned long long>(again.genctr));
  }
  set_message(message, "discovery log kept changing while being read");
  return Unexpected(Errc::io_error, "discovery log unstable");
}

void Controller::Impl::shutdown() noexcept {
  shutting_down = true;
  if (reset == Reset::waiting) {
    reset = Reset::gave_up;
    publish_epoch(ControllerEpoch{epoch.generation, ControllerLink::lost, data.cntlid});
  }
  // I/O qpairs first: their outstanding callbacks run once, aborted.
  std::vector<IoQpair::Impl*> live;
  {
    std::lock_guard<std::mutex> lock(registry->mutex);
    live = registry->live;
  }
  for (IoQpair::Impl* qpair : live) {
    if (qpair->queue) qpair->queue->disconnect();
  }
  if (admin && admin->state() == HostQueueState::connected && connected) {
    std::string message;
    spec::CcFields cc;
    cc.en = true;
    cc.iosqes = 6;
    cc.iocqes = 4;
    cc.shn = spec::shutdown_notification::normal;
    if (property_set(spec::property_offset::cc, spec::encode_cc(cc), &message)) {
      const uint64_t deadline = host->now_ns() + uint64_t{kShutdownTimeoutMs} * 1000 * 1000;
      for (;;) {
        auto csts = property_get(spec::property_offset::csts, &message);
        if (!csts) break;
        if (spec::csts_shst(static_cast<uint32_t>(*csts)) == spec::shutdown_status::complete) break;
        if (host->now_ns() >= deadline) {
          NVMF_WARNLOG(host, "%s: shutdown not complete after %u ms", trid.subnqn.c_str(),
                       kShutdownTimeoutMs);
          break;
        }
        host->idle();
      }
    } else {
      NVMF_WARNLOG(host, "%s: shutdown notification failed: %s", trid.subnqn.c_str(),
                   message.c_str());
    }
  }
  if (admin) admin->disconnect();
  if (connected && !discovery) {
    NVMF_NOTICELOG(host, "disconnected from %s (controller %u)", trid.subnqn.c_str(), data.cntlid);
  }
  connected = false;
}

// ---------------------------------------------------------------------------------------
// Controller

Controller::Controller(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Controller::~Controller() = default;

const ControllerData& Controller::data() const noexcept { return impl_->data; }
const TransportId& Controller::trid() const noexcept { return impl_->trid; }
ControllerStats Controller::stats() const noexcept {
  std::lock_guard<std::mutex> lock(impl_->registry->mutex);  // io_qpairs_allocated
  ControllerStats stats = impl_->stats;
  stats.reconnects = impl_->registry->reconnects.load(std::memory_order_relaxed);
  return stats;
}
bool Controller::connected() const noexcept { return impl_->connected.load(); }
const std::vector<uint32_t>& Controller::active_namespaces() const noexcept {
  return impl_->active;
}
Namespace* Controller::ns(uint32_t nsid) noexcept {
  for (size_t i = 0; i < impl_->active.size(); ++i) {
    if (impl_->active[i] == nsid) return impl_->namespaces[i].get();
  }
  return nullptr;
}

int Controller::process_admin_completions() {
  Impl& ctrl = *impl_;
  send_requested_aborts(ctrl);  // I/O timeouts of the qpairs (abort.cpp)
  if (ctrl.registry->reset_requested.load(std::memory_order_acquire)) {
    ctrl.registry->reset_requested.store(false, std::memory_order_relaxed);
    if (ctrl.connected && ctrl.reset == Impl::Reset::none && !ctrl.shutting_down) {
      if (ctrl.admin) ctrl.admin->fail_connection("controller reset");
      ctrl.admin_lost("an I/O command timed out");
      return 0;
    }
  }
  if (ctrl.reset == Impl::Reset::waiting && !ctrl.reset_step()) return 0;
  if (!ctrl.admin || ctrl.admin->state() != HostQueueState::connected) {
    if (ctrl.connected) ctrl.admin_lost("admin queue lost");
    return 0;
  }
  const int handled = ctrl.service_admin_queue();
  if (ctrl.rescan_pending && !ctrl.shutting_down && ctrl.connected) ctrl.rescan_namespaces();
  return handled;
}

int Controller::Impl::service_admin_queue() noexcept {
  int handled = admin->poll();
  const uint64_t kato_ns = uint64_t{opts.keep_alive_timeout_ms} * 1000 * 1000;
  if (keep_alive_outstanding && host->now_ns() - keep_alive_sent_ns >= kato_ns) {
    // No answer within KATO (the kernel host's keep-alive request timeout): the target is gone
    // or stuck; fail the admin queue so that the controller resets (or its owner sees it lost).
    NVMF_ERRLOG(host, "%s: Keep Alive unanswered for %u ms (controller %u): admin queue failed",
                trid.subnqn.c_str(), opts.keep_alive_timeout_ms, data.cntlid);
    keep_alive_outstanding = false;
    admin->fail_connection("keep-alive timeout");
    admin_lost("keep-alive timeout");
    return handled;
  }
  if (opts.keep_alive_timeout_ms != 0 && !keep_alive_outstanding &&
      host->now_ns() >= next_keep_alive_ns) {
    next_keep_alive_ns = host->now_ns() + uint64_t{opts.keep_alive_timeout_ms} * 1000 * 1000 / 2;
    submit_keep_alive();
  }
  return handled;
}

void Controller::Impl::keep_alive_while_connecting() noexcept {
  if (std::this_thread::get_id() != admin_thread || !connected || !admin ||
      admin->state() != HostQueueState::connected) {
    return;
  }
  (void)service_admin_queue();
}

bool Controller::recovering() const noexcept { return impl_->reset == Impl::Reset::waiting; }

// ---------------------------------------------------------------------------------------
// Controller reset (ControllerOpts::controller_recovery) and namespace rescan

void Controller::Impl::publish_epoch(ControllerEpoch next) noexcept {
  epoch = next;
  registry->controller.store(next.pack(), std::memory_order_release);
}

void Controller::Impl::admin_lost(const char* why) noexcept {
  connected = false;
  if (admin) admin->disconnect();  // its commands (AERs, Keep Alive, Aborts) complete, aborted
  if (!opts.controller_recovery || discovery || shutting_down) {
    NVMF_ERRLOG(host, "%s: %s (controller %u)", trid.subnqn.c_str(), why, data.cntlid);
    return;
  }
  const uint64_t now = host->now_ns();
  reset = Reset::waiting;
  reset_attempts = 0;
  reset_deadline_ns = now + uint64_t{opts.ctrl_loss_timeout_ms} * 1000 * 1000;
  reset_retry_at_ns = now + uint64_t{opts.reconnect_delay_ms} * 1000 * 1000;
  // The I/O qpairs see the new generation at their next poll and reset their queues.
  publish_epoch(ControllerEpoch{epoch.generation + 1, ControllerLink::resetting, data.cntlid});
  NVMF_ERRLOG(host, "%s: %s (controller %u): resetting the controller in %.3g seconds",
              trid.subnqn.c_str(), why, data.cntlid, opts.reconnect_delay_ms / 1000.0);
}

bool Controller::Impl::reset_step() noexcept {
  const uint64_t now = host->now_ns();
  if (now < reset_retry_at_ns) return false;
  ++reset_attempts;
  const uint16_t old_cntlid = data.cntlid;
  std::string message;
  bringing_up = true;
  const bool up = static_cast<bool>(bring_up(&message, true));
  bringing_up = false;
  if (up) {
    reset = Reset::none;
    ++stats.resets;
    ++stats.namespace_rescans;
    NVMF_NOTICELOG(host, "%s: controller reset (attempt %u): controller %u, was %u; %zu "
                   "namespaces", trid.subnqn.c_str(), reset_attempts, data.cntlid, old_cntlid,
                   active.size());
    return true;
  }
  ++stats.reset_attempts_failed;
  connected = false;
  if (admin) admin->disconnect();
  data.cntlid = old_cntlid;  // until a bring-up completes, the controller is the old one
  if (host->now_ns() >= reset_deadline_ns) {
    reset = Reset::gave_up;
    publish_epoch(ControllerEpoch{epoch.generation, ControllerLink::lost, old_cntlid});
    NVMF_ERRLOG(host, "%s: controller reset failed (%s); controller loss timeout (%u ms) "
                "reached: giving up", trid.subnqn.c_str(), message.c_str(),
                opts.ctrl_loss_timeout_ms);
    return false;
  }
  reset_retry_at_ns = host->now_ns() + uint64_t{opts.reconnect_delay_ms} * 1000 * 1000;
  NVMF_ERRLOG(host, "%s: controller reset attempt %u failed: %s; again in %.3g seconds",
              trid.subnqn.c_str(), reset_attempts, message.c_str(),
              opts.reconnect_delay_ms / 1000.0);
  return false;
}

void Controller::Impl::rescan_namespaces() noexcept {
  rescan_pending = false;
  const size_t before = active.size();
  std::string message;
  auto rescanned = identify_namespaces(&message);
  if (!rescanned) {
    NVMF_ERRLOG(host, "%s: namespace rescan failed: %s", trid.subnqn.c_str(), message.c_str());
    return;
  }
  ++stats.namespace_rescans;
  NVMF_NOTICELOG(host, "%s: namespaces rescanned: %zu active, %zu before",
                 trid.subnqn.c_str(), active.size(), before);
}

Result<void> Controller::disconnect() {
  impl_->shutdown();
  return {};
}

}  // namespace nvmf::host
