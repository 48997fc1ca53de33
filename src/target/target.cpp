#include "target/target.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "spec/string_field.h"

NVMF_LOG_COMPONENT(target);

namespace nvmf::target {

// ---------------------------------------------------------------------------------------------
// request.h

XferDirection xfer_direction(const spec::Sqe& cmd) noexcept {
  // Fabrics commands take the direction from FCTYPE's low bits (Connect 01h: host to
  // controller, Property Get 04h: none) because their opcode 7Fh would say "bidirectional".
  const uint8_t code = cmd.opcode == spec::fabrics_opcode ? spec::sqe_fctype(cmd) : cmd.opcode;
  return static_cast<XferDirection>(spec::opcode_data_transfer(code));
}

const char* request_state_name(RequestState state) noexcept {
  switch (state) {
    case RequestState::free:
      return "free";
    case RequestState::executing:
      return "executing";
    case RequestState::need_bdev:
      return "need_bdev";
    case RequestState::bdev_submitted:
      return "bdev_submitted";
    case RequestState::bdev_done:
      return "bdev_done";
    case RequestState::held_event:
      return "held_event";
    case RequestState::cross_reactor:
      return "cross_reactor";
    case RequestState::complete:
      return "complete";
  }
  return "unknown";
}

void execute(Request& req) noexcept { req.qpair->target().execute(req); }

void refuse(Request& req, const spec::Status& status) noexcept {
  Qpair& qpair = *req.qpair;
  qpair.owner_.check();
  assert(req.state == RequestState::free && "request executed twice");
  req.state = RequestState::executing;
  req.rsp = spec::Cqe{};
  qpair.advance_sq_head();
  ++qpair.outstanding_;
  detail::complete_status(req, status);
}

void refuse_aborted(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  const uint16_t cid = req.cmd.cid;
  // The command's answer goes first, so no host sees the Abort's "aborted" before it.
  refuse(req, spec::generic_status(spec::sc_generic::abort_requested));
  std::lock_guard lock(qpair.target_.mutex_);
  auto& inbox = qpair.abort_inbox_;
  for (Request* abort = inbox.empty() ? nullptr : &inbox.front(); abort != nullptr;) {
    Request* next = inbox.next_of(*abort);
    if (abort->abort_after_transfer && static_cast<uint16_t>(abort->abort_target >> 16) == cid) {
      inbox.remove(*abort);
      abort->abort_after_transfer = false;
      abort->rsp.cdw0 = 0;  // aborted
      abort->qpair->group_.answer_abort_locked(*abort);
    }
    abort = next;
  }
}

Qpair::Qpair(Target& target, PollGroup& group, reactor::Reactor& reactor, const TransportOps& ops,
             uint32_t queue_depth) noexcept
    : target_(target), group_(group), reactor_(reactor), ops_(ops), sq_size_(queue_depth) {}

Qpair::~Qpair() {
  assert(waiting_for_bdev_ == 0 && abort_inbox_.empty());
  assert(!group_link_.linked());
}

void Qpair::set_state(QpairState next) noexcept {
  const bool allowed = (state_ == QpairState::idle && next == QpairState::connected) ||
                       (state_ == QpairState::idle && next == QpairState::destroying) ||
                       (state_ == QpairState::connected && next == QpairState::destroying) ||
                       (state_ == QpairState::destroying && next == QpairState::abandoned);
  assert(allowed && "invalid queue pair state transition");
  (void)allowed;
  state_ = next;
}

// ---------------------------------------------------------------------------------------------
// detail helpers

namespace detail {

namespace {
// Visits the request buffer's bytes [offset, offset + size) segment by segment, never past the
// iovecs: copy(segment_pointer, position_in_flat_data, chunk). Returns the bytes visited.
template <typename Copy>
size_t walk_request(const Request& req, uint64_t offset, size_t size, Copy&& copy) noexcept {
  size_t copied = 0;
  for (unsigned i = 0; i < req.iovcnt && copied < size; ++i) {
    const iovec& segment = req.iov[i];
    if (offset >= segment.iov_len) {
      offset -= segment.iov_len;
      continue;
    }
    const size_t chunk = std::min<size_t>(segment.iov_len - offset, size - copied);
    copy(static_cast<uint8_t*>(segment.iov_base) + offset, copied, chunk);
    copied += chunk;
    offset = 0;
  }
  return copied;
}
}  // namespace

size_t copy_to_request(Request& req, uint64_t offset, const void* data, size_t size) noexcept {
  const auto* source = static_cast<const uint8_t*>(data);
  return walk_request(req, offset, size, [source](uint8_t* segment, size_t at, size_t chunk) {
    std::memcpy(segment, source + at, chunk);
  });
}

size_t copy_from_request(const Request& req, uint64_t offset, void* data, size_t size) noexcept {
  auto* target = static_cast<uint8_t*>(data);
  return walk_request(req, offset, size, [target](uint8_t* segment, size_t at, size_t chunk) {
    std::memcpy(target + at, segment, chunk);
  });
}

void zero_request(Request& req) noexcept {
  for (unsigned i = 0; i < req.iovcnt; ++i) std::memset(req.iov[i].iov_base, 0, req.iov[i].iov_len);
}

// finish() is in io.cpp: the I/O path calls it once per command, and inlines it there.

void complete_status(Request& req, const spec::Status& status) noexcept {
  req.rsp.set_status(status);
  finish(req);
}

void complete_abort(Request& abort, const spec::Status& status) noexcept {
  assert(abort.qpair->aborts_in_flight_ > 0);
  --abort.qpair->aborts_in_flight_;
  complete_status(abort, status);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Target

namespace {

bool printable_ascii(std::string_view text) noexcept {
  for (const char c : text) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

// Identify SN is 20 bytes, MN 40: both space-padded ASCII.
constexpr size_t kSerialNumberMax = 20;
constexpr size_t kModelNumberMax = 40;
// TRADDR is a 256-byte and TRSVCID a 32-byte NUL-padded field of a discovery log entry.
constexpr size_t kTraddrMax = 255;
constexpr size_t kTrsvcidMax = 31;

}  // namespace

Target::Target(const TargetOpts& opts) : opts_(opts) {
  SubsystemOpts discovery;
  discovery.nqn = std::string(spec::discovery_nqn);
  discovery.allow_any_host = true;
  discovery.serial_number = "";
  discovery.model_number = "";
  subsystems_.push_back(std::make_unique<Subsystem>(0, discovery, true, 0));  // setup-path
}

Result<std::unique_ptr<Target>> Target::create(const TargetOpts& opts) noexcept {
  if (auto valid = opts.validate(); !valid) {
    NVMF_ERRLOG(target, "invalid target options: %s", valid.error().detail);
    return Unexpected(valid.error());
  }
  return std::unique_ptr<Target>(new Target(opts));  // setup-path
}

Target::~Target() {
  assert(controllers_.empty() && "destroy every queue pair before the target");
  groups_.clear();
}

Subsystem* Target::find_subsystem_locked(std::string_view nqn) const noexcept {
  for (const auto& subsystem : subsystems_) {
    if (!subsystem->removed_ && subsystem->nqn() == nqn) return subsystem.get();
  }
  return nullptr;
}

void Target::bump_discovery_generation_locked() noexcept {
  discovery_generation_.fetch_add(1, std::memory_order_acq_rel);
  // Discovery controllers that asked for it get a Discovery Log Page Change notice.
  for (Controller* controller : subsystems_[0]->controllers_) {
    controller->raise_event_locked(event_bit::discovery_log_changed);
  }
}

Result<void> Target::add_subsystem(const SubsystemOpts& opts) {
  if (!spec::subsystem_name_acceptable(opts.nqn)) {
    NVMF_ERRLOG(target, "add_subsystem: \"%s\" is not a valid NQN", opts.nqn.c_str());
    return Unexpected(Errc::invalid_argument, "nqn");
  }
  if (!spec::nqn_valid(opts.nqn)) {
    NVMF_WARNLOG(target,
                 "subsystem \"%s\" does not have the NQN form nqn.yyyy-mm.domain:name; "
                 "accepted, as the Linux target accepts it",
                 opts.nqn.c_str());
  }
  if (opts.serial_number.size() > kSerialNumberMax || !printable_ascii(opts.serial_number)) {
    return Unexpected(Errc::invalid_argument, "serial_number: at most 20 printable ASCII bytes");
  }
  if (opts.model_number.size() > kModelNumberMax || !printable_ascii(opts.model_number)) {
    return Unexpected(Errc::invalid_argument, "model_number: at most 40 printable ASCII bytes");
  }
  const uint32_t max_namespaces =
      opts.max_namespaces == 0 ? opts_.max_namespaces_default : opts.max_namespaces;
  if (max_namespaces > 1024) {  // the Active Namespace ID list holds 1024 entries
    return Unexpected(Errc::invalid_argument, "max_namespaces must be within [1, 1024]");
  }
  for (const std::string& host : opts.hosts) {
    if (!spec::nqn_valid(host)) return Unexpected(Errc::invalid_argument, "hosts: invalid NQN");
  }
  std::lock_guard lock(mutex_);
  if (opts.nqn == spec::discovery_nqn || find_subsystem_locked(opts.nqn) != nullptr) {
    return Unexpected(Errc::already_exists, "nqn");
  }
  const auto id = static_cast<uint32_t>(subsystems_.size());
  subsystems_.push_back(
      std::make_unique<Subsystem>(id, opts, false, max_namespaces));  // setup-path
  bump_discovery_generation_locked();
  NVMF_INFOLOG(target, "subsystem %s added (%u namespaces max)", opts.nqn.c_str(), max_namespaces);
  return {};
}

Result<void> Target::remove_subsystem(std::string_view nqn, ConnectedControllers connected) {
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr) return Unexpected(Errc::not_found, "subsystem");
  if (subsystem->is_discovery()) return Unexpected(Errc::permission_denied, "discovery subsystem");
  if (!subsystem->controllers_.empty() && connected == ConnectedControllers::refuse) {
    return Unexpected(Errc::busy, "controllers connected");
  }
  if (!subsystem->controllers_.empty()) {
    NVMF_NOTICELOG(target, "%s: removed with %zu controllers connected: disconnecting them",
                   subsystem->nqn().c_str(), subsystem->controllers_.size());
    // Every queue, the admin queue included: the association ends, and the controller goes
    // when its last queue pair is destroyed (destroy_qpair).
    for (Controller* controller : subsystem->controllers_) {
      controller->request_disconnect_locked(true);
    }
  }
  subsystem->removed_ = true;
  for (auto& ns : subsystem->namespaces_) {
    if (ns) subsystem->retired_namespaces_.push_back(std::move(ns));  // setup-path
  }
  subsystem->ns_generation_.fetch_add(1, std::memory_order_acq_rel);
  bump_discovery_generation_locked();
  for (auto& group : groups_) group->raise_attention();
  return {};
}

Result<void> Target::add_host(std::string_view nqn, std::string_view hostnqn) {
  if (!spec::nqn_valid(hostnqn)) return Unexpected(Errc::invalid_argument, "host NQN");
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr || subsystem->is_discovery()) {
    return Unexpected(Errc::not_found, "subsystem");
  }
  for (const std::string& host : subsystem->hosts_) {
    if (host == hostnqn) return Unexpected(Errc::already_exists, "host");
  }
  subsystem->hosts_.emplace_back(hostnqn);  // setup-path
  bump_discovery_generation_locked();
  return {};
}

Result<void> Target::remove_host(std::string_view nqn, std::string_view hostnqn) {
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr || subsystem->is_discovery()) {
    return Unexpected(Errc::not_found, "subsystem");
  }
  auto& hosts = subsystem->hosts_;
  const auto it = std::find(hosts.begin(), hosts.end(), hostnqn);
  if (it == hosts.end()) return Unexpected(Errc::not_found, "host");
  hosts.erase(it);
  bump_discovery_generation_locked();
  return {};
}

Result<void> Target::set_allow_any_host(std::string_view nqn, bool allow) {
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr || subsystem->is_discovery()) {
    return Unexpected(Errc::not_found, "subsystem");
  }
  if (subsystem->allow_any_host_ != allow) {
    subsystem->allow_any_host_ = allow;
    bump_discovery_generation_locked();
  }
  return {};
}

Result<uint32_t> Target::add_namespace(std::string_view nqn, const NamespaceOpts& opts) {
  if (opts.bdev == nullptr) return Unexpected(Errc::invalid_argument, "bdev");
  // Its I/O would bypass the delay or error bdev built on it (Bdev::claim).
  if (opts.bdev->claimed_by() != nullptr) {
    return Unexpected(Errc::busy, "bdev is the base of another bdev");
  }
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr || subsystem->is_discovery()) {
    return Unexpected(Errc::not_found, "subsystem");
  }
  uint32_t nsid = opts.nsid;
  if (nsid == 0) {
    for (uint32_t candidate = 1; candidate <= subsystem->max_namespaces(); ++candidate) {
      if (subsystem->find_namespace(candidate) == nullptr) {
        nsid = candidate;
        break;
      }
    }
    if (nsid == 0) return Unexpected(Errc::out_of_range, "no free NSID");
  } else if (nsid > subsystem->max_namespaces()) {
    return Unexpected(Errc::invalid_argument, "nsid above max_namespaces");
  } else if (subsystem->find_namespace(nsid) != nullptr) {
    return Unexpected(Errc::already_exists, "nsid");
  }
  NamespaceOpts placed = opts;
  placed.nsid = nsid;
  subsystem->namespaces_[nsid - 1] = std::make_unique<Namespace>(placed);  // setup-path
  subsystem->ns_generation_.fetch_add(1, std::memory_order_acq_rel);
  for (Controller* controller : subsystem->controllers_) controller->namespace_changed_locked(nsid);
  NVMF_INFOLOG(target, "%.*s: namespace %u on bdev %s", static_cast<int>(nqn.size()), nqn.data(),
               nsid, opts.bdev->name().c_str());
  return nsid;
}

Result<void> Target::remove_namespace(std::string_view nqn, uint32_t nsid) {
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr || subsystem->is_discovery()) {
    return Unexpected(Errc::not_found, "subsystem");
  }
  if (subsystem->find_namespace(nsid) == nullptr) return Unexpected(Errc::not_found, "nsid");
  remove_namespace_locked(*subsystem, nsid);
  return {};
}

size_t Target::remove_namespaces_of(const bdev::Bdev& bdev) {
  std::lock_guard lock(mutex_);
  size_t removed = 0;
  for (auto& subsystem : subsystems_) {
    if (!subsystem || subsystem->is_discovery()) continue;
    for (const auto& ns : subsystem->namespaces_) {
      if (!ns || &ns->bdev() != &bdev) continue;
      NVMF_WARNLOG(target, "%s: namespace %u removed: bdev '%s' is gone", subsystem->nqn().c_str(),
                   ns->nsid(), bdev.name().c_str());
      remove_namespace_locked(*subsystem, ns->nsid());
      ++removed;
    }
  }
  return removed;
}

void Target::remove_namespace_locked(Subsystem& subsystem, uint32_t nsid) {
  subsystem.retired_namespaces_.push_back(
      std::move(subsystem.namespaces_[nsid - 1]));  // setup-path
  subsystem.ns_generation_.fetch_add(1, std::memory_order_acq_rel);
  for (Controller* controller : subsystem.controllers_) controller->namespace_changed_locked(nsid);
  // Poll groups drop their channels to the namespace promptly, so its bdev can be removed.
  for (auto& group : groups_) group->raise_attention();
}

Result<void> Target::add_listener(std::string_view nqn, const ListenerAddress& address) {
  if (address.traddr.empty() || address.traddr.size() > kTraddrMax || address.trsvcid.empty() ||
      address.trsvcid.size() > kTrsvcidMax) {
    return Unexpected(Errc::invalid_argument, "traddr or trsvcid empty or too long");
  }
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr) return Unexpected(Errc::not_found, "subsystem");
  auto& listeners = subsystem->listeners_;
  if (std::find(listeners.begin(), listeners.end(), address) != listeners.end()) {
    return Unexpected(Errc::already_exists, "listener");
  }
  listeners.push_back(address);  // setup-path
  if (std::find(ports_.begin(), ports_.end(), address) == ports_.end()) {
    ports_.push_back(address);  // setup-path
  }
  bump_discovery_generation_locked();
  return {};
}

Result<void> Target::remove_listener(std::string_view nqn, const ListenerAddress& address) {
  std::lock_guard lock(mutex_);
  Subsystem* subsystem = find_subsystem_locked(nqn);
  if (subsystem == nullptr) return Unexpected(Errc::not_found, "subsystem");
  auto& listeners = subsystem->listeners_;
  const auto it = std::find(listeners.begin(), listeners.end(), address);
  if (it == listeners.end()) return Unexpected(Errc::not_found, "listener");
  listeners.erase(it);
  bump_discovery_generation_locked();
  return {};
}

size_t Target::controller_count(std::string_view nqn) const {
  std::lock_guard lock(mutex_);
  const Subsystem* subsystem = find_subsystem_locked(nqn);
  return subsystem == nullptr ? 0 : subsystem->controllers_.size();
}

size_t Target::removed_controller_count(std::string_view nqn) const {
  std::lock_guard lock(mutex_);
  size_t count = 0;
  for (const auto& subsystem : subsystems_) {
    if (subsystem->removed_ && subsystem->nqn() == nqn) count += subsystem->controllers_.size();
  }
  return count;
}

std::vector<SubsystemInfo> Target::subsystems_info() const {
  std::vector<SubsystemInfo> infos;  // setup-path (control path: allocates)
  std::lock_guard lock(mutex_);
  for (const auto& subsystem : subsystems_) {
    if (subsystem->removed_) continue;
    SubsystemInfo info;
    info.nqn = subsystem->nqn();
    info.discovery = subsystem->is_discovery();
    info.serial_number = subsystem->serial_number();
    info.model_number = subsystem->model_number();
    info.allow_any_host = subsystem->allow_any_host_;
    info.hosts = subsystem->hosts_;
    info.max_namespaces = subsystem->max_namespaces();
    for (const auto& ns : subsystem->namespaces_) {
      if (!ns) continue;
      info.namespaces.push_back(
          NamespaceInfo{ns->nsid(), ns->bdev().name(), ns->uuid(), ns->nguid(), ns->eui64()});
    }
    info.listeners = subsystem->listeners_;
    for (const Controller* controller : subsystem->controllers_) {
      ControllerInfo entry;
      entry.cntlid = controller->cntlid();
      entry.hostnqn = std::string(controller->hostnqn());
      std::memcpy(entry.hostid.data(), controller->hostid(), entry.hostid.size());
      for (size_t qid = 0; qid < controller->qpairs_.size(); ++qid) {
        const Qpair* qpair = controller->qpairs_[qid];
        if (qpair != nullptr) {
          entry.qpairs.push_back(QpairInfo{static_cast<uint16_t>(qid), qpair->sq_size()});
        }
      }
      info.controllers.push_back(std::move(entry));
    }
    infos.push_back(std::move(info));
  }
  return infos;
}

PollGroup& Target::group_for(reactor::Reactor& reactor) {
  {
    std::lock_guard lock(mutex_);
    for (auto& group : groups_) {
      if (&group->reactor() == &reactor && !group->released()) return *group;
    }
  }
  // Made outside the lock: the constructor registers a poller on this (the calling) thread.
  auto group = std::make_unique<PollGroup>(*this, reactor);  // setup-path
  std::lock_guard lock(mutex_);
  groups_.push_back(std::move(group));  // setup-path
  return *groups_.back();
}

Result<Qpair*> Target::create_qpair(reactor::Reactor& reactor, const TransportOps& ops,
                                    uint32_t queue_depth) {
  if (queue_depth == 0 || queue_depth > 65536 || ops.request_complete == nullptr ||
      ops.request_released == nullptr || ops.qpair_disconnect == nullptr) {
    return Unexpected(Errc::invalid_argument, "queue_depth or transport ops");
  }
  PollGroup& group = group_for(reactor);
  auto* qpair = new Qpair(*this, group, reactor, ops, queue_depth);  // setup-path
  group.add_qpair(*qpair);
  return qpair;
}

void Target::detach_qpair(Qpair& qpair) {
  IntrusiveList<Request, &Request::link> aborted;  // completed after the lock is dropped
  Request* held[kAsyncEventRequestsMax] = {};
  unsigned held_count = 0;
  {
    std::lock_guard lock(mutex_);
    Controller* controller = qpair.controller_;
    if (controller != nullptr) {
      controller->qpairs_[qpair.qid_] = nullptr;
      --controller->attached_;
      if (qpair.is_admin()) {
        // The association ends with the admin queue (owner thread: the admin reactor).
        controller->admin_qpair_ = nullptr;
        controller->admin_reactor_.cancel_timer(controller->keep_alive_timer_);
        held_count = controller->held_event_count_;
        for (unsigned i = 0; i < held_count; ++i) held[i] = controller->held_events_[i];
        controller->held_event_count_ = 0;
        if (controller->state_ != ControllerState::destroying) {
          controller->set_state(ControllerState::destroying);
        }
        controller->request_disconnect_locked(false);
        // Aborts this queue sent that still wait elsewhere.
        for (Qpair* other : controller->qpairs_) {
          if (other == nullptr) continue;
          for (Request* req = other->abort_inbox_.empty() ? nullptr : &other->abort_inbox_.front();
               req != nullptr;) {
            Request* next = other->abort_inbox_.next_of(*req);
            if (req->qpair == &qpair) {
              other->abort_inbox_.remove(*req);
              aborted.push_back(*req);
            }
            req = next;
          }
        }
        auto& returns = qpair.group_.abort_returns_;
        for (Request* req = returns.empty() ? nullptr : &returns.front(); req != nullptr;) {
          Request* next = returns.next_of(*req);
          if (req->qpair == &qpair) {
            returns.remove(*req);
            aborted.push_back(*req);
          }
          req = next;
        }
      }
      qpair.controller_ = nullptr;
      if (controller->attached_ == 0) {
        Subsystem& subsystem = controller->subsystem();
        auto& list = subsystem.controllers_;
        list.erase(std::find(list.begin(), list.end(), controller));
        NVMF_INFOLOG(target, "%s: controller %u destroyed", subsystem.nqn().c_str(),
                     controller->cntlid());
        controllers_.erase(
            std::find_if(controllers_.begin(), controllers_.end(),
                         [&](const auto& owned) { return owned.get() == controller; }));
      }
    }
    // Aborts waiting in this queue's inbox (for a transfer too) go home: "not aborted".
    while (Request* req = qpair.abort_inbox_.pop_front()) {
      req->rsp.cdw0 = 1;
      req->abort_after_transfer = false;
      req->qpair->group_.answer_abort_locked(*req);
    }
  }
  qpair.set_state(QpairState::destroying);
  qpair.teardown_deadline_ns_ =
      qpair.reactor_.clock().now_ns() + uint64_t{opts_.teardown_timeout_ms} * 1000 * 1000;
  const spec::Status deleted = spec::generic_status(spec::sc_generic::aborted_sq_deletion);
  for (unsigned i = 0; i < held_count; ++i) detail::complete_status(*held[i], deleted);
  while (Request* req = aborted.pop_front()) detail::complete_abort(*req, deleted);
  qpair.group_.fail_pending(qpair, deleted);
}

Result<void> Target::destroy_qpair(Qpair& qpair, StuckCommands stuck) {
  qpair.owner_.check();
  if (qpair.state_ != QpairState::destroying) detach_qpair(qpair);
  if (qpair.aborts_in_flight_ > 0) return Unexpected(Errc::busy, "Aborts on other reactors");
  if (qpair.in_bdev_ > 0) {
    const bool timed_out = qpair.reactor_.clock().now_ns() >= qpair.teardown_deadline_ns_;
    if (stuck == StuckCommands::wait && !timed_out) {
      return Unexpected(Errc::busy, "requests inside a bdev");
    }
    // Only requests inside a bdev are left: everything else was answered by detach_qpair.
    assert(qpair.outstanding_ == qpair.in_bdev_);
    NVMF_WARNLOG(target,
                 "queue %u: %u commands still inside a bdev %s; the queue goes without them "
                 "(their completions will be dropped)",
                 qpair.qid_, qpair.in_bdev_,
                 timed_out ? "after teardown_timeout_ms" : "at shutdown");
    qpair.group_.abandon(qpair);
    return {};
  }
  assert(qpair.outstanding_ == 0);
  qpair.group_.remove_qpair(qpair);
  delete &qpair;
  return {};
}

Result<void> Target::release_reactor(reactor::Reactor& reactor) {
  PollGroup* group = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (auto& candidate : groups_) {
      if (&candidate->reactor() == &reactor && !candidate->released()) group = candidate.get();
    }
  }
  if (group == nullptr) return Unexpected(Errc::not_found, "no poll group on this reactor");
  if (!group->qpairs_.empty()) return Unexpected(Errc::busy, "queue pairs remain on the reactor");
  group->shutdown();
  return {};
}

TargetStats Target::stats() const {
  TargetStats stats;
  std::lock_guard lock(mutex_);
  for (const auto& group : groups_) {
    const PollGroupCounters& counters = group->counters();
    stats.bdev_busy_waits += counters.bdev_busy_waits.load(std::memory_order_relaxed);
    stats.abandoned_qpairs += counters.abandoned_qpairs.load(std::memory_order_relaxed);
    stats.late_completions += counters.late_completions.load(std::memory_order_relaxed);
  }
  return stats;
}

void Target::execute(Request& req) noexcept {
  Qpair& qpair = *req.qpair;
  qpair.owner_.check();
  assert(req.state == RequestState::free && "request executed twice");
  req.state = RequestState::executing;
  req.rsp = spec::Cqe{};
  qpair.advance_sq_head();
  ++qpair.outstanding_;

  if (qpair.state_ == QpairState::destroying) {
    return detail::complete_status(req,
                                   spec::generic_status(spec::sc_generic::aborted_sq_deletion));
  }
  if (req.cmd.opcode == spec::fabrics_opcode) return execute_fabrics(req);
  if (!qpair.connected()) {
    // Only Connect is valid on a new queue (SPDK answers Command Sequence Error).
    return detail::complete_status(req,
                                   detail::generic_error(spec::sc_generic::command_sequence_error));
  }
  if (qpair.is_admin()) return qpair.controller_->execute_admin(req);
  qpair.group_.execute_io(req);
}

}  // namespace nvmf::target
