// Controller lifecycle, Fabrics properties (CAP, VS, CC, CSTS) with the enable / ready /
// shutdown handshakes, the keep-alive timer and asynchronous event delivery. Admin commands
// are in admin.cpp.
#include "target/controller.h"

#include <cstring>

#include "common/log.h"
#include "spec/admin.h"
#include "spec/string_field.h"
#include "target/target.h"

NVMF_LOG_COMPONENT_DECLARE(target);

namespace nvmf::target {

namespace {
// CC.IOSQES / IOCQES an NVM controller requires: 64-byte SQEs, 16-byte CQEs (log2).
constexpr uint8_t kIoSqEntrySizeLog2 = 6;
constexpr uint8_t kIoCqEntrySizeLog2 = 4;
constexpr uint64_t kNanosecondsPerMillisecond = 1000 * 1000;
}  // namespace

const char* controller_state_name(ControllerState state) noexcept {
  switch (state) {
    case ControllerState::disabled:
      return "disabled";
    case ControllerState::ready:
      return "ready";
    case ControllerState::shutdown:
      return "shutdown";
    case ControllerState::failed:
      return "failed";
    case ControllerState::destroying:
      return "destroying";
  }
  return "unknown";
}

Controller::Controller(Target& target, Subsystem& subsystem, uint16_t cntlid, Qpair& admin_qpair,
                       const spec::ConnectData& data, uint32_t kato_ms)
    : target_(target),
      subsystem_(subsystem),
      cntlid_(cntlid),
      hostnqn_(spec::get_nul_terminated(data.hostnqn)),
      admin_reactor_(admin_qpair.reactor()),
      admin_group_(admin_qpair.group_),
      kato_ms_(kato_ms),
      keep_alive_timer_("nvmf keep-alive", &Controller::keep_alive_expired, this),
      admin_qpair_(&admin_qpair) {
  std::memcpy(hostid_, data.hostid, sizeof(hostid_));
  const TargetOpts& opts = target.opts();
  spec::CapFields cap;
  cap.mqes = opts.max_queue_depth - 1;  // 0's based
  cap.cqr = true;                       // required by NVMe-oF
  // Ready timeout in 500 ms units. We become ready within the Property Set itself; 1 is what
  // SPDK reports.
  cap.to = 1;
  cap.css = spec::cap_css_bit::nvm;
  cap.mpsmin = 0;  // 4 KiB pages, the unit of MDTS
  cap.mpsmax = 0;
  cap_ = spec::encode_cap(cap);
  // NVMe 1.3, as SPDK and the Linux target (NVMET_DEFAULT_VS) report: everything this core
  // implements is 1.3; claiming 1.4 or 2.0 would oblige features (e.g. the CSI descriptor,
  // I/O Command Set specific Identify) we do not have.
  vs_ = spec::make_version(1, 3, 0);
  // SPDK enables namespace attribute notices by default; discovery notices are opt-in.
  async_event_config_ =
      subsystem.is_discovery() ? 0 : spec::async_event_config_bit::namespace_attribute;
  const uint32_t io_queues_max = opts.max_qpairs_per_ctrlr - 1;
  io_queues_granted_ = subsystem.is_discovery() ? 0 : io_queues_max;
  num_queues_dw0_ =
      subsystem.is_discovery() ? 0 : spec::encode_number_of_queues(io_queues_max, io_queues_max);
  qpairs_.assign(subsystem.is_discovery() ? 1 : opts.max_qpairs_per_ctrlr, nullptr);  // setup-path
}

Controller::~Controller() { assert(!keep_alive_timer_.armed()); }

void Controller::set_state(ControllerState next) noexcept {
  using S = ControllerState;
  bool allowed = false;
  switch (state_) {
    case S::disabled:
      allowed =
          next == S::ready || next == S::failed || next == S::shutdown || next == S::destroying;
      break;
    case S::ready:
      allowed =
          next == S::disabled || next == S::shutdown || next == S::failed || next == S::destroying;
      break;
    case S::shutdown:
      allowed = next == S::disabled || next == S::failed || next == S::destroying;
      break;
    case S::failed:
      // A host may reset (CC.EN = 0) or shut down (CC.SHN) a failed controller; cc_write
      // completes the shutdown as for any other state (Linux nvmet does the same).
      allowed = next == S::disabled || next == S::shutdown || next == S::destroying;
      break;
    case S::destroying:
      allowed = false;
      break;
  }
  assert(allowed && "invalid controller state transition");
  (void)allowed;
  NVMF_DEBUGLOG(target, "controller %u: %s -> %s", cntlid_, controller_state_name(state_),
                controller_state_name(next));
  state_ = next;
  io_ready_.store(state_ == S::ready, std::memory_order_release);
}

void Controller::property_get(Request& req) noexcept {
  owner_.check();
  const auto command = spec::sqe_as<spec::PropertyGetCommand>(req.cmd);
  const uint32_t size = spec::property_attrib_bytes(command.attrib);
  const uint32_t width = spec::property_width_bytes(command.ofst);
  uint64_t value = 0;
  // Like Linux: the size must match the property (no 4-byte halves of CAP). NSSR is not
  // implemented (CAP.NSSRS = 0), so it is as unknown as any other offset.
  if (size == 0 || width == 0 || size != width || command.ofst == spec::property_offset::nssr) {
    return detail::complete_status(req, detail::generic_error(spec::sc_generic::invalid_field));
  }
  switch (command.ofst) {
    case spec::property_offset::cap:
      value = cap_;
      break;
    case spec::property_offset::vs:
      value = vs_;
      break;
    case spec::property_offset::cc:
      value = cc();
      break;
    case spec::property_offset::csts:
      value = csts();
      break;
    default:
      return detail::complete_status(req, detail::generic_error(spec::sc_generic::invalid_field));
  }
  spec::set_property_get_value(req.rsp, value);
  detail::complete_status(req, spec::status_success);
}

void Controller::property_set(Request& req) noexcept {
  owner_.check();
  const auto command = spec::sqe_as<spec::PropertySetCommand>(req.cmd);
  // Only CC is writable on Fabrics (CAP, VS, CSTS are read-only; NSSR is not implemented).
  if (command.ofst != spec::property_offset::cc ||
      spec::property_attrib_bytes(command.attrib) != 4) {
    return detail::complete_status(req, detail::generic_error(spec::sc_generic::invalid_field));
  }
  cc_write(static_cast<uint32_t>(command.value));
  detail::complete_status(req, spec::status_success);
}

void Controller::cc_write(uint32_t value) noexcept {
  const uint32_t old = cc();
  cc_.store(value, std::memory_order_release);
  if (state_ == ControllerState::destroying) return;

  const bool shutdown_requested = spec::cc_shn(value) != spec::shutdown_notification::none &&
                                  spec::cc_shn(old) == spec::shutdown_notification::none;
  if (shutdown_requested) {
    // Normal and abrupt shutdown are the same here: nothing is cached in the core. I/O queues
    // stop; CSTS.SHST says complete at once (Linux: clear, then SHST_CMPLT; RDY drops).
    NVMF_INFOLOG(target, "controller %u: shutdown (SHN %u)", cntlid_, spec::cc_shn(value));
    {
      std::lock_guard lock(target_.mutex_);
      request_disconnect_locked(false);
    }
    if (state_ != ControllerState::shutdown) set_state(ControllerState::shutdown);
    spec::CstsFields csts;
    csts.shst = spec::shutdown_status::complete;
    csts_.store(spec::encode_csts(csts), std::memory_order_release);
    return;
  }
  if (spec::cc_shn(value) == spec::shutdown_notification::none &&
      state_ == ControllerState::shutdown && !spec::cc_en(value)) {
    set_state(ControllerState::disabled);
    csts_.store(0, std::memory_order_release);
    return;
  }

  const bool was_enabled = spec::cc_en(old);
  const bool enable = spec::cc_en(value);
  if (!was_enabled && enable) {
    if (state_ != ControllerState::disabled) return;  // reset first (CC.EN = 0)
    // An NVM controller needs 64-byte SQEs and 16-byte CQEs (Linux sets CSTS.CFS otherwise;
    // discovery controllers have no I/O queues, so their entry sizes are not checked). The
    // page size must be the one CAP allows (MPSMIN = MPSMAX = 0), the command set NVM and
    // arbitration round robin.
    const bool entry_sizes_ok =
        subsystem_.is_discovery() || (spec::cc_iosqes(value) == kIoSqEntrySizeLog2 &&
                                      spec::cc_iocqes(value) == kIoCqEntrySizeLog2);
    const bool ok = entry_sizes_ok && spec::cc_mps(value) == 0 &&
                    spec::cc_css(value) == spec::command_set_select::nvm &&
                    spec::cc_ams(value) == 0;
    if (!ok) {
      NVMF_WARNLOG(
          target,
          "controller %u: enable refused (CC %#x: IOSQES %u IOCQES %u MPS %u CSS %u AMS %u)",
          cntlid_, value, spec::cc_iosqes(value), spec::cc_iocqes(value), spec::cc_mps(value),
          spec::cc_css(value), spec::cc_ams(value));
      spec::CstsFields csts;
      csts.cfs = true;
      csts_.store(spec::encode_csts(csts), std::memory_order_release);
      set_state(ControllerState::failed);
      return;
    }
    spec::CstsFields csts;
    csts.rdy = true;
    csts_.store(spec::encode_csts(csts), std::memory_order_release);
    set_state(ControllerState::ready);
    return;
  }
  if (was_enabled && !enable) {
    // Controller reset: I/O queues go (SPDK disconnects them), CSTS clears (CFS too), the
    // commands the controller holds are aborted.
    NVMF_INFOLOG(target, "controller %u: reset (CC.EN 1 -> 0)", cntlid_);
    {
      std::lock_guard lock(target_.mutex_);
      request_disconnect_locked(false);
    }
    abort_held_events(spec::generic_status(spec::sc_generic::aborted_sq_deletion));
    csts_.store(0, std::memory_order_release);
    if (state_ != ControllerState::disabled) set_state(ControllerState::disabled);
  }
}

void Controller::request_disconnect_locked(bool include_admin) noexcept {
  for (size_t qid = include_admin ? 0 : 1; qid < qpairs_.size(); ++qid) {
    Qpair* qpair = qpairs_[qid];
    if (qpair == nullptr) continue;
    if (!qpair->disconnect_requested_.exchange(true, std::memory_order_acq_rel)) {
      qpair->group_.raise_attention();
    }
  }
}

void Controller::arm_keep_alive() noexcept {
  owner_.check();
  if (kato_ms_ == 0 || state_ == ControllerState::destroying || state_ == ControllerState::failed) {
    admin_reactor_.cancel_timer(keep_alive_timer_);
    return;
  }
  // One-shot, re-armed by every Keep Alive: expiry is exactly KATO after the last one.
  admin_reactor_.start_timer(keep_alive_timer_, uint64_t{kato_ms_} * kNanosecondsPerMillisecond);
}

void Controller::keep_alive_expired(void* ctx) noexcept {
  auto* controller = static_cast<Controller*>(ctx);
  controller->owner_.check();
  NVMF_NOTICELOG(target, "%s: controller %u (host %s): keep-alive timeout (%u ms), disconnecting",
                 controller->subsystem_.nqn().c_str(), controller->cntlid_,
                 controller->hostnqn_.c_str(), controller->kato_ms_);
  if (controller->state_ == ControllerState::destroying) return;
  // CSTS.CFS tells a host that still reads properties why; then every queue goes.
  controller->csts_.fetch_or(spec::encode_csts(spec::CstsFields{.cfs = true}),
                             std::memory_order_acq_rel);
  if (controller->state_ != ControllerState::failed) controller->set_state(ControllerState::failed);
  std::lock_guard lock(controller->target_.mutex_);
  controller->request_disconnect_locked(true);
}

void Controller::abort_held_events(const spec::Status& status) noexcept {
  owner_.check();
  Request* held[kAsyncEventRequestsMax];
  const unsigned count = held_event_count_;
  for (unsigned i = 0; i < count; ++i) held[i] = held_events_[i];
  held_event_count_ = 0;
  for (unsigned i = 0; i < count; ++i) detail::complete_status(*held[i], status);
}

void Controller::namespace_changed_locked(uint32_t nsid) noexcept {
  constexpr uint32_t capacity = sizeof(changed_namespaces_) / sizeof(changed_namespaces_[0]);
  bool listed = false;
  for (uint32_t i = 0; i < changed_namespace_count_ && i < capacity; ++i) {
    if (changed_namespaces_[i] == nsid) listed = true;
  }
  if (!listed && changed_namespace_count_ <= capacity) {
    // One past capacity means "more changed than the list holds": the page then reports
    // FFFFFFFFh in its first entry.
    if (changed_namespace_count_ < capacity) changed_namespaces_[changed_namespace_count_] = nsid;
    ++changed_namespace_count_;
  }
  raise_event_locked(event_bit::namespace_attribute_changed);
}

void Controller::raise_event_locked(uint32_t event) noexcept {
  pending_events_ |= event;
  if (admin_qpair_ != nullptr) admin_group_.raise_attention();
}

uint32_t Controller::enabled_events_locked() const noexcept {
  uint32_t enabled = 0;
  if ((async_event_config_ & spec::async_event_config_bit::namespace_attribute) != 0) {
    enabled |= event_bit::namespace_attribute_changed;
  }
  if ((async_event_config_ & spec::async_event_config_bit::discovery_log_page_change) != 0) {
    enabled |= event_bit::discovery_log_changed;
  }
  return enabled;
}

void Controller::process_events() noexcept {
  owner_.check();
  Request* ready[kAsyncEventRequestsMax];
  unsigned ready_count = 0;
  {
    std::lock_guard lock(target_.mutex_);
    // Events the host disabled are dropped, not kept for later (SPDK does the same).
    pending_events_ &= enabled_events_locked();
    while (held_event_count_ > 0) {
      const uint32_t deliverable = pending_events_ & ~masked_events_;
      if (deliverable == 0) break;
      const uint32_t event = deliverable & (~deliverable + 1);  // lowest set bit
      pending_events_ &= ~event;
      // Masked until the host reads the event's log page (without RAE).
      masked_events_ |= event;
      Request* req = held_events_[0];  // the oldest held request
      for (unsigned i = 1; i < held_event_count_; ++i) held_events_[i - 1] = held_events_[i];
      --held_event_count_;
      if (event == event_bit::namespace_attribute_changed) {
        req->rsp.cdw0 = spec::encode_async_event(
            spec::async_event_type::notice, spec::async_event_notice::namespace_attribute_changed,
            spec::log_page::changed_namespace_list);
      } else {
        req->rsp.cdw0 = spec::encode_async_event(
            spec::async_event_type::notice, spec::async_event_notice::discovery_log_page_change,
            spec::log_page::discovery);
      }
      ready[ready_count++] = req;
    }
  }
  for (unsigned i = 0; i < ready_count; ++i)
    detail::complete_status(*ready[i], spec::status_success);
}

}  // namespace nvmf::target
