// Fabrics commands: Connect (dynamic controller model), Property Get/Set dispatch, Disconnect.
// Checks and statuses follow SPDK (lib/nvmf/ctrlr.c nvmf_ctrlr_cmd_connect, _nvmf_ctrlr_connect,
// nvmf_ctrlr_add_io_qpair) and Linux (drivers/nvme/target/fabrics-cmd.c); where they differ
// the comment says which one we follow.
#include <cstddef>
#include <cstring>

#include "common/log.h"
#include "spec/string_field.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);

namespace nvmf::target {

namespace {

using spec::ConnectCommand;
using spec::ConnectData;

constexpr uint16_t kIpoQid = offsetof(ConnectCommand, qid);
constexpr uint16_t kIpoSqsize = offsetof(ConnectCommand, sqsize);
constexpr uint16_t kIpoCntlid = offsetof(ConnectData, cntlid);
constexpr uint16_t kIpoSubnqn = offsetof(ConnectData, subnqn);
constexpr uint16_t kIpoHostnqn = offsetof(ConnectData, hostnqn);

spec::Status invalid_parameters() noexcept {
  return detail::status_error(spec::sct::command_specific,
                              spec::sc_fabrics::connect_invalid_parameters);
}

// Connect Invalid Parameters pointing at a field of the SQE.
spec::Status invalid_in_command(Request& req, uint16_t offset) noexcept {
  req.rsp.cdw0 = spec::connect_invalid_parameter_dw0(false, offset);
  return invalid_parameters();
}
// ... or of the 1024-byte Connect data.
spec::Status invalid_in_data(Request& req, uint16_t offset) noexcept {
  req.rsp.cdw0 = spec::connect_invalid_parameter_dw0(true, offset);
  return invalid_parameters();
}

// KATO as the controller will run it: 0 stays "disabled" on an I/O controller (a discovery
// controller gets the transport's fixed activity timeout instead), anything else is rounded
// up to the KAS granularity (SPDK rounds the same way).
uint32_t effective_kato_ms(const TargetOpts& opts, uint32_t kato_ms, bool discovery) noexcept {
  if (kato_ms == 0) return discovery ? opts.discovery_keep_alive_timeout_ms : 0;
  const uint64_t unit = opts.keep_alive_granularity_ms;
  const uint64_t rounded = (uint64_t{kato_ms} + unit - 1) / unit * unit;
  return rounded > UINT32_MAX ? UINT32_MAX / unit * unit : static_cast<uint32_t>(rounded);
}

}  // namespace

void Target::execute_fabrics(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  const uint8_t fctype = spec::sqe_fctype(req.cmd);
  if (!qpair.connected()) {
    if (fctype == spec::fctype::connect) return connect(req);
    NVMF_DEBUGLOG(target, "fabrics command %s before Connect", spec::fctype_name(fctype));
    return detail::complete_status(req,
                                   detail::generic_error(spec::sc_generic::command_sequence_error));
  }
  switch (fctype) {
    case spec::fctype::connect:
      // A second Connect on a connected queue. Linux answers Controller Busy, SPDK Invalid
      // Opcode; the base spec's wording ("a command the controller is not in a state to
      // process") is Command Sequence Error, which we send.
      return detail::complete_status(
          req, detail::generic_error(spec::sc_generic::command_sequence_error));
    case spec::fctype::property_get:
    case spec::fctype::property_set:
      if (!qpair.is_admin()) {
        // Properties belong to the admin queue (SPDK and Linux: Invalid Opcode elsewhere).
        return detail::complete_status(req,
                                       detail::generic_error(spec::sc_generic::invalid_opcode));
      }
      if (fctype == spec::fctype::property_get) return qpair.controller_->property_get(req);
      return qpair.controller_->property_set(req);
    case spec::fctype::disconnect:
      return disconnect_command(req);
    default:
      return detail::complete_status(req, detail::generic_error(spec::sc_generic::invalid_opcode));
  }
}

void Target::disconnect_command(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  if (qpair.is_admin()) {
    // Disconnect deletes an I/O queue; the admin queue goes with the association (Base 2.0:
    // Invalid Queue Type, Linux NVME_SC_DISCONNECT_INVALID_QTYPE).
    return detail::complete_status(req, detail::status_error(spec::sct::command_specific,
                                                             spec::sc_fabrics::invalid_queue_type));
  }
  // Answer first, then ask the transport to tear the queue down at the next poll.
  {
    std::lock_guard lock(mutex_);
    qpair.disconnect_requested_.store(true, std::memory_order_release);
    qpair.group_.raise_attention();
  }
  detail::complete_status(req, spec::status_success);
}

void Target::connect(Request& req) noexcept {
  const ConnectCommand command = spec::sqe_as<ConnectCommand>(req.cmd);
  spec::Status status = spec::status_success;
  // Linux checks RECFMT first: without a known format the rest means nothing.
  if (command.recfmt != spec::connect_recfmt) {
    NVMF_WARNLOG(target, "Connect with unsupported RECFMT %u", command.recfmt);
    return detail::complete_status(
        req,
        detail::status_error(spec::sct::command_specific, spec::sc_fabrics::incompatible_format));
  }
  if (req.length < spec::connect_data_size) {
    NVMF_WARNLOG(target, "Connect data of %u bytes, need %u", req.length, spec::connect_data_size);
    return detail::complete_status(
        req, detail::generic_error(spec::sc_generic::data_sgl_length_invalid));
  }
  ConnectData data;
  detail::copy_from_request(req, 0, &data, sizeof(data));
  if (!spec::is_nul_terminated(data.subnqn)) {
    return detail::complete_status(req, invalid_in_data(req, kIpoSubnqn));
  }
  const std::string_view subnqn = spec::get_nul_terminated(data.subnqn);
  // An empty host NQN (spdk_nvme_perf sends one unless told otherwise) is allowed where any
  // host is, as SPDK's and the kernel's targets allow it; host_allowed() decides below.
  const bool hostnqn_empty = spec::is_nul_terminated(data.hostnqn) && data.hostnqn[0] == '\0';
  if (!hostnqn_empty && (!spec::is_nul_terminated(data.hostnqn) ||
                         !spec::nqn_valid(spec::get_nul_terminated(data.hostnqn)))) {
    NVMF_WARNLOG(target, "Connect to %.*s with an invalid host NQN",
                 static_cast<int>(subnqn.size()), subnqn.data());
    return detail::complete_status(req, invalid_in_data(req, kIpoHostnqn));
  }
  const std::string_view hostnqn = spec::get_nul_terminated(data.hostnqn);
  if (hostnqn_empty) {
    NVMF_WARNLOG(target, "Connect to %.*s with an empty host NQN: allowed only where any host is",
                 static_cast<int>(subnqn.size()), subnqn.data());
  }

  uint16_t cntlid = 0;
  {
    std::lock_guard lock(mutex_);
    Subsystem* subsystem = find_subsystem_locked(subnqn);
    if (subsystem == nullptr) {
      NVMF_WARNLOG(target, "Connect to unknown subsystem %.*s", static_cast<int>(subnqn.size()),
                   subnqn.data());
      status = invalid_in_data(req, kIpoSubnqn);
    } else if (hostnqn_empty && !subsystem->allow_any_host()) {
      NVMF_WARNLOG(target, "subsystem %s: Connect with an empty host NQN refused: the subsystem "
                           "does not allow any host",
                   subsystem->nqn().c_str());
      status =
          detail::status_error(spec::sct::command_specific, spec::sc_fabrics::connect_invalid_host);
    } else if (!subsystem->host_allowed(hostnqn)) {
      NVMF_WARNLOG(target, "subsystem %s does not allow host %.*s", subsystem->nqn().c_str(),
                   static_cast<int>(hostnqn.size()), hostnqn.data());
      status =
          detail::status_error(spec::sct::command_specific, spec::sc_fabrics::connect_invalid_host);
    } else {
      // SQSIZE is 0's based: at least 1 (a queue of 2 entries, as SPDK and Linux require) and
      // at most the depth this target supports for the queue's kind.
      const uint32_t entries = uint32_t{command.sqsize} + 1;
      const uint32_t limit = command.qid == 0 ? opts_.max_admin_queue_depth : opts_.max_queue_depth;
      if (command.sqsize == 0 || entries > limit) {
        NVMF_WARNLOG(target, "Connect QID %u with SQSIZE %u (allowed 1..%u)", command.qid,
                     command.sqsize, limit - 1);
        status = invalid_in_command(req, kIpoSqsize);
      } else if (command.qid == 0) {
        status = connect_admin(req, *subsystem, data);
      } else {
        status = connect_io(req, *subsystem, data);
      }
      if (status.is_success()) cntlid = req.qpair->controller_->cntlid();
    }
  }
  if (status.is_success()) {
    Qpair& qpair = *req.qpair;
    if (qpair.is_admin()) {
      qpair.controller_->arm_keep_alive();
    } else {
      // Open this reactor's channels to the subsystem's namespaces now (setup path, outside
      // the lock: it takes the mutex itself), not on the first I/O. Subsystems are never
      // freed while the target lives, and this queue keeps its controller alive.
      qpair.group_.prepare_subsystem(qpair.controller_->subsystem());
    }
    qpair.sq_size_ = uint32_t{command.sqsize} + 1;
    qpair.sq_flow_control_disabled_ =
        (command.cattr & spec::connect_cattr::disable_sq_flow_control) != 0;
    req.rsp.cdw0 = spec::connect_success_dw0(cntlid);
  }
  detail::complete_status(req, status);
}

spec::Status Target::connect_admin(Request& req, Subsystem& subsystem, const ConnectData& data) {
  const ConnectCommand command = spec::sqe_as<ConnectCommand>(req.cmd);
  if (data.cntlid != spec::cntlid_dynamic) {
    // Only the dynamic model (SPDK and Linux alike).
    NVMF_WARNLOG(target, "admin Connect for CNTLID %#x; only the dynamic model (FFFFh) exists",
                 data.cntlid);
    return invalid_in_data(req, kIpoCntlid);
  }
  const uint16_t cntlid = subsystem.allocate_cntlid();
  if (cntlid == 0) {
    return detail::status_error(spec::sct::command_specific, spec::sc_fabrics::controller_busy);
  }
  Qpair& qpair = *req.qpair;
  const uint32_t kato = effective_kato_ms(opts_, command.kato, subsystem.is_discovery());
  auto controller =
      std::make_unique<Controller>(*this, subsystem, cntlid, qpair, data, kato);  // setup-path
  Controller* raw = controller.get();
  controllers_.push_back(std::move(controller));  // setup-path
  subsystem.controllers_.push_back(raw);          // setup-path
  raw->qpairs_[0] = &qpair;
  raw->attached_ = 1;
  qpair.controller_ = raw;
  qpair.qid_ = 0;
  qpair.set_state(QpairState::connected);
  NVMF_INFOLOG(target, "%s: controller %u for host %s (KATO %u ms)", subsystem.nqn().c_str(),
               cntlid, raw->hostnqn_.c_str(), kato);
  return spec::status_success;
}

spec::Status Target::connect_io(Request& req, Subsystem& subsystem, const ConnectData& data) {
  const ConnectCommand command = spec::sqe_as<ConnectCommand>(req.cmd);
  if (subsystem.is_discovery()) {
    // A discovery controller has no I/O queues (SPDK: invalid QID).
    return invalid_in_command(req, kIpoQid);
  }
  Controller* controller = subsystem.find_controller(data.cntlid);
  if (controller == nullptr || controller->admin_qpair_ == nullptr) {
    NVMF_WARNLOG(target, "I/O Connect to unknown controller %u of %s", data.cntlid,
                 subsystem.nqn().c_str());
    return invalid_in_data(req, kIpoCntlid);
  }
  // The queue must come from the host that made the controller (Linux nvmet_ctrl_find_get
  // checks the host NQN and answers with IPO at CNTLID; we check the host ID too).
  if (controller->hostnqn() != spec::get_nul_terminated(data.hostnqn) ||
      std::memcmp(controller->hostid(), data.hostid, sizeof(data.hostid)) != 0) {
    NVMF_WARNLOG(target, "I/O Connect to controller %u from a different host", data.cntlid);
    return invalid_in_data(req, kIpoCntlid);
  }
  if (!controller->io_ready()) {
    // SPDK: "I/O connect before ctrlr was enabled" -> invalid parameter at QID.
    return invalid_in_command(req, kIpoQid);
  }
  const uint16_t qid = command.qid;
  if (qid > controller->io_queues_granted_ || controller->qpairs_[qid] != nullptr) {
    NVMF_WARNLOG(
        target, "I/O Connect for QID %u: %s", qid,
        qid > controller->io_queues_granted_ ? "above the granted queues" : "already connected");
    return invalid_in_command(req, kIpoQid);
  }
  Qpair& qpair = *req.qpair;
  controller->qpairs_[qid] = &qpair;
  ++controller->attached_;
  qpair.controller_ = controller;
  qpair.qid_ = qid;
  qpair.set_state(QpairState::connected);
  return spec::status_success;
}

}  // namespace nvmf::target
