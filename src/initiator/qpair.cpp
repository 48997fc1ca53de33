// I/O qpairs and the namespace commands. Submission is the data path: no allocation, no lock,
// no exception; a full queue answers busy.
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/log.h"
#include "common/util.h"
#include "initiator/host_internal.h"

NVMF_LOG_COMPONENT(host_io);

namespace nvmf::host {

namespace {

using transport_rdma::DataDirection;
using transport_rdma::HostCommand;
using transport_rdma::HostQueue;
using transport_rdma::HostQueueState;

// NLB is 16 bits, 0's based.
constexpr uint32_t kMaxBlocksPerCommand = 65536;

constexpr uint64_t kNsPerMs = 1000 * 1000;
// How often the owner looks for timed-out commands: the kernel block layer's granularity
// (blk_mq_timeout_work, rounded up to a second), finer for short timeouts so that a command
// is noticed at most 1/8 of its timeout late.
constexpr uint64_t kTimeoutScanIntervalMaxNs = 1000 * kNsPerMs;
constexpr uint64_t kTimeoutScanFraction = 8;
// fast_io_fail: what held commands complete with (the kernel's NVME_SC_HOST_PATH_ERROR).
constexpr spec::Status kFastFailStatus =
    spec::make_status(spec::sct::path_related, spec::sc_path::host_pathing_error);

memreg::KeyPolicyKind to_key_policy(MemregPolicy policy) {
  switch (policy) {
    case MemregPolicy::global: return memreg::KeyPolicyKind::global;
    case MemregPolicy::unsafe: return memreg::KeyPolicyKind::unsafe;
    case MemregPolicy::sagi: return memreg::KeyPolicyKind::sagi;
    case MemregPolicy::max: return memreg::KeyPolicyKind::max;
    case MemregPolicy::deferred: return memreg::KeyPolicyKind::deferred;
  }
  return memreg::KeyPolicyKind::global;
}

MemregPolicy from_key_policy(memreg::KeyPolicyKind kind) {
  switch (kind) {
    case memreg::KeyPolicyKind::global:
      return MemregPolicy::global;
    case memreg::KeyPolicyKind::unsafe:
      return MemregPolicy::unsafe;
    case memreg::KeyPolicyKind::sagi:
      return MemregPolicy::sagi;
    case memreg::KeyPolicyKind::max:
      return MemregPolicy::max;
    case memreg::KeyPolicyKind::deferred:
      return MemregPolicy::deferred;
  }
  return MemregPolicy::global;
}

bool known_memreg_policy(MemregPolicy policy) {
  return static_cast<uint8_t>(policy) <= static_cast<uint8_t>(MemregPolicy::deferred);
}

// QpairRegistry::memreg_request: the request number above the policy's 8 bits.
constexpr uint32_t kMemregRequestPolicyBits = 8;
MemregPolicy requested_policy(uint32_t request) {
  return static_cast<MemregPolicy>(request & ((1u << kMemregRequestPolicyBits) - 1));
}

void io_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* qpair = static_cast<IoQpair::Impl*>(command.owner);
  ++qpair->stats.completed;
  // Bits 15:1 all zero (the phase tag aside) is plain success, which most completions are:
  // the field is decoded only otherwise.
  if ((cqe.status >> 1) == 0) return command.status_fn(command.cb_ctx, spec::status_success);
  const spec::Status status = cqe.decoded_status();
  if (!status.is_success()) ++qpair->stats.errors;
  command.status_fn(command.cb_ctx, status);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// IoQpair::Impl

IoQpair::Impl::~Impl() {
  if (queue) queue->disconnect();
  queue.reset();  // takes its fds out of epoll_fd
  if (timer_fd >= 0) ::close(timer_fd);
  if (epoll_fd >= 0) ::close(epoll_fd);
  release_qid();
  if (host != nullptr) {
    host->map->free(dsm_ranges);
    host->map->free(connect_data);
  }
}

void IoQpair::Impl::release_qid() noexcept {
  if (!registry) return;
  std::lock_guard<std::mutex> lock(registry->mutex);
  for (size_t i = 0; i < registry->live.size(); ++i) {
    if (registry->live[i] == this) {
      registry->live.erase(registry->live.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (qid >= 1 && qid <= registry->qid_used.size()) registry->qid_used[qid - 1] = false;
  // Aborts still waiting for the admin thread would name the next qpair with this QID.
  const uint32_t waiting = registry->aborts_requested.load(std::memory_order_relaxed);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < waiting; ++i) {
    const AbortRequest request =
        registry->abort_ring[(registry->abort_ring_head + i) % kAbortRequestsMax];
    if (request.sqid == qid) continue;
    registry->abort_ring[(registry->abort_ring_head + kept) % kAbortRequestsMax] = request;
    ++kept;
  }
  registry->aborts_requested.store(kept, std::memory_order_release);
  registry.reset();
}

// ---------------------------------------------------------------------------------------
// Controller::alloc_io_qpair

Result<std::unique_ptr<IoQpair>> Controller::alloc_io_qpair(const IoQpairOpts& qpair_opts,
                                                             std::string* message) {
  Impl& ctrl = *impl_;
  if (!connected()) {
    set_message(message, "controller not connected");
    return Unexpected(Errc::bad_state, "controller not connected");
  }
  auto qpair = std::make_unique<IoQpair::Impl>();
  qpair->host = ctrl.host;
  {
    std::lock_guard<std::mutex> lock(ctrl.registry->mutex);
    for (size_t i = 0; i < ctrl.registry->qid_used.size(); ++i) {
      if (!ctrl.registry->qid_used[i]) {
        ctrl.registry->qid_used[i] = true;
        qpair->qid = static_cast<uint16_t>(i + 1);
        break;
      }
    }
    if (qpair->qid == 0) {
      set_message(message, "all " + std::to_string(ctrl.data.io_queues_granted) +
                               " I/O queues of the controller are in use");
      return Unexpected(Errc::busy, "no free I/O queue");
    }
    // The controller this queue connects to; a reset after this load is seen at the first
    // process_completions().
    qpair->controller_seen = ctrl.registry->controller.load(std::memory_order_acquire);
    const ControllerEpoch epoch = ControllerEpoch::unpack(qpair->controller_seen);
    if (epoch.link != ControllerLink::live) {
      ctrl.registry->qid_used[qpair->qid - 1] = false;
      set_message(message, "controller resetting");
      return Unexpected(Errc::bad_state, "controller resetting");
    }
    qpair->generation = epoch.generation;
    qpair->cntlid = epoch.cntlid;
    qpair->registry = ctrl.registry;
    ctrl.registry->live.push_back(qpair.get());
    ++ctrl.stats.io_qpairs_allocated;
    // Under the mutex Controller::set_memreg_policy() takes: a request made before this qpair
    // was registered is its first policy, a later one it takes when polled.
    qpair->memreg_request_taken = ctrl.registry->memreg_request.load(std::memory_order_relaxed);
  }
  const uint32_t request = qpair->memreg_request_taken;
  const MemregPolicy first_policy = request != 0 ? requested_policy(request) : ctrl.opts.memreg;

  const uint16_t entries = qpair_opts.queue_size != 0
                               ? std::min<uint16_t>(qpair_opts.queue_size, ctrl.data.io_queue_size)
                               : ctrl.data.io_queue_size;
  transport_rdma::HostQueueOpts queue_opts;
  queue_opts.address = ctrl.trid.traddr;
  queue_opts.port = ctrl.trid.port();
  queue_opts.qid = qpair->qid;
  queue_opts.entries = std::max<uint16_t>(entries, 2);
  queue_opts.cntlid = qpair->cntlid;
  queue_opts.connect_timeout_ms = ctrl.opts.connect_timeout_ms;
  queue_opts.clock = ctrl.host->clock;
  queue_opts.key_policy = to_key_policy(first_policy);
  queue_opts.keep_commands_on_error = true;
  qpair->max_transfer_bytes = ctrl.data.max_transfer_bytes;
  qpair->subnqn = ctrl.trid.subnqn;
  qpair->controller_recovery = ctrl.opts.controller_recovery;
  qpair->reconnect_delay_ms = ctrl.opts.reconnect_delay_ms;
  qpair->ctrl_loss_timeout_ms = ctrl.opts.ctrl_loss_timeout_ms;
  qpair->io_timeout_ns = uint64_t{ctrl.opts.io_timeout_ms} * kNsPerMs;
  qpair->timeout_scan_interval_ns =
      std::min(kTimeoutScanIntervalMaxNs, qpair->io_timeout_ns / kTimeoutScanFraction);
  if (ctrl.opts.fast_io_fail_timeout_ms != kFastIoFailOff) {
    qpair->fast_io_fail_ns = uint64_t{ctrl.opts.fast_io_fail_timeout_ms} * kNsPerMs;
  }
  if (qpair_opts.completion_events) {
    auto opened = qpair->open_events();
    if (!opened) {
      set_message(message, std::string("event mode: ") + opened.error().detail);
      return Unexpected(opened.error());
    }
    queue_opts.wake_epoll_fd = qpair->epoll_fd;
  }
  qpair->dsm_ranges = static_cast<spec::DsmRange*>(
      ctrl.host->map->allocate(size_t{queue_opts.entries} * sizeof(spec::DsmRange)));
  qpair->connect_data = ctrl.host->map->allocate(sizeof(spec::ConnectData));
  if (qpair->dsm_ranges == nullptr || qpair->connect_data == nullptr) {
    set_message(message, "cannot allocate DMA memory for the queue");
    return Unexpected(Errc::no_memory, "qpair buffers");
  }
  auto queue = HostQueue::create(*ctrl.host->provider, *ctrl.host->domains, queue_opts);
  if (!queue) {
    set_message(message, "cannot create I/O queue " + std::to_string(qpair->qid));
    return Unexpected(queue.error());
  }
  qpair->queue = std::move(*queue);
  auto up = wait_connected(*ctrl.host, *qpair->queue, ctrl.trid, message, &ctrl);
  if (!up) return Unexpected(up.error());
  auto connected_cqe = ctrl.fabrics_connect(*qpair->queue, qpair->connect_data, qpair->cntlid,
                                            message);
  if (!connected_cqe) return Unexpected(connected_cqe.error());
  const uint32_t in_capsule = std::min(ctrl.opts.in_capsule_data_bytes,
                                       ctrl.data.in_capsule_data_bytes);
  qpair->queue->set_in_capsule_limit(in_capsule);
  NVMF_INFOLOG(host_io, "%s: I/O queue %u connected, depth %u, in-capsule %u bytes",
               ctrl.trid.subnqn.c_str(), qpair->qid, qpair->queue->depth(), in_capsule);
  return std::make_unique<IoQpair>(std::move(qpair));
}

// ---------------------------------------------------------------------------------------
// IoQpair

IoQpair::IoQpair(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IoQpair::~IoQpair() = default;

int IoQpair::process_completions(uint32_t max_completions) noexcept {
  IoQpair::Impl& q = *impl_;
  const uint32_t request = q.registry->memreg_request.load(std::memory_order_acquire);
  if (request != q.memreg_request_taken) q.take_memreg_request(request);
  const uint64_t controller = q.registry->controller.load(std::memory_order_acquire);
  if (controller != q.controller_seen) q.take_controller_epoch(controller);
  int ran = q.queue->poll(max_completions);
  if (q.queue->state() != HostQueueState::connected || q.recovery != Impl::Recovery::none) {
    ran += q.recover();
  } else if (q.io_timeout_ns != 0) {
    const uint64_t now = q.host->now_ns();  // the data path's one clock read
    if (now >= q.next_timeout_scan_ns) q.check_timeouts(now);
  }
  return ran;
}
uint16_t IoQpair::qid() const noexcept { return impl_->qid; }
uint32_t IoQpair::depth() const noexcept { return impl_->queue->depth(); }
uint32_t IoQpair::outstanding() const noexcept { return impl_->queue->outstanding(); }
bool IoQpair::connected() const noexcept {
  return impl_->queue->state() == HostQueueState::connected &&
         impl_->recovery == Impl::Recovery::none;
}
bool IoQpair::reconnecting() const noexcept { return impl_->recovering(); }
IoQpairStats IoQpair::stats() const noexcept {
  IoQpairStats stats = impl_->stats;
  const transport_rdma::HostQueueStats& queue = impl_->queue->stats();
  stats.in_capsule_writes = queue.in_capsule_writes;
  stats.qp_errors = queue.qp_errors;
  stats.bind_errors = queue.bind_errors;
  stats.resubmitted = queue.resubmitted;
  stats.aborts_sent = impl_->aborts_sent.load(std::memory_order_relaxed);
  stats.sends_posted = queue.sends_posted;
  stats.binds_posted = queue.binds_posted;
  stats.local_invalidates_posted = queue.local_invalidates_posted;
  stats.signaled_posted = queue.signaled_posted;
  stats.fenced_posted = queue.fenced_posted;
  stats.doorbells = queue.doorbells;
  stats.cqes_reaped = queue.cqes_reaped;
  stats.memreg_switches = queue.key_policy_switches;
  stats.memreg_switch_failures = queue.key_policy_switch_failures;
  return stats;
}
void IoQpair::disconnect() noexcept { impl_->queue->disconnect(); }

// ---------------------------------------------------------------------------------------
// Memory-registration policy switch (the state machine is the HostQueue's)

Result<void> IoQpair::set_memreg_policy(MemregPolicy policy) noexcept {
  return impl_->set_memreg_policy(policy);
}

MemregPolicy IoQpair::memreg_policy() const noexcept {
  return from_key_policy(impl_->queue->key_policy_kind());
}

bool IoQpair::switching() const noexcept {
  return impl_->queue->key_switch_state() != transport_rdma::KeySwitchState::none;
}

Result<void> IoQpair::Impl::set_memreg_policy(MemregPolicy policy) noexcept {
  if (!known_memreg_policy(policy)) {
    return Unexpected(Errc::invalid_argument, "not a memreg policy");
  }
  if (recovery == Recovery::gave_up) {
    return Unexpected(Errc::bad_state, "qpair gave up reconnecting");
  }
  auto asked = queue->request_key_policy(to_key_policy(policy));
  if (!asked) return asked;
  const bool switching = queue->key_switch_state() != transport_rdma::KeySwitchState::none;
  if (policy == MemregPolicy::unsafe && switching && !warned_unsafe) {
    warned_unsafe = true;
    NVMF_WARNLOG(host_io,
                 "%s: queue %u: switching to memreg policy 'unsafe', which reuses a "
                 "memory window before its invalidation is known to have landed (the 2017 "
                 "nvme-rdma race): for reproduction only",
                 subnqn.c_str(), qid);
  }
  return {};
}

void IoQpair::Impl::take_memreg_request(uint32_t request) noexcept {
  memreg_request_taken = request;
  const MemregPolicy policy = requested_policy(request);
  auto asked = set_memreg_policy(policy);
  if (!asked && asked.error().code != Errc::bad_state) {  // a disconnected qpair has no say
    NVMF_ERRLOG(host_io, "%s: queue %u: the controller's switch to memreg policy %s: %s",
                subnqn.c_str(), qid, memreg_policy_name(policy), errc_name(asked.error().code));
  }
}

Result<void> Controller::set_memreg_policy(MemregPolicy policy) {
  Impl& ctrl = *impl_;
  if (!known_memreg_policy(policy)) {
    return Unexpected(Errc::invalid_argument, "not a memreg policy");
  }
  if (!connected() || !ctrl.admin) return Unexpected(Errc::bad_state, "controller not connected");
  // Every queue of the controller is on the admin queue's device (one address).
  if (!ctrl.admin->supports_key_policy(to_key_policy(policy))) {
    NVMF_ERRLOG(host_io,
                "%s: memreg policy %s needs type-2 memory windows, which the device "
                "lacks",
                ctrl.trid.subnqn.c_str(), memreg_policy_name(policy));
    return Unexpected(Errc::not_supported, "memreg policy: no type-2 memory windows");
  }
  std::lock_guard<std::mutex> lock(ctrl.registry->mutex);
  const uint32_t previous = ctrl.registry->memreg_request.load(std::memory_order_relaxed);
  uint32_t number = (previous >> kMemregRequestPolicyBits) + 1;
  if ((number << kMemregRequestPolicyBits) == 0) number = 1;  // wrapped: 0 means "none"
  ctrl.registry->memreg_request.store(
      (number << kMemregRequestPolicyBits) | static_cast<uint32_t>(policy),
      std::memory_order_release);
  return {};
}

// ---------------------------------------------------------------------------------------
// Error recovery

namespace {

void reconnect_connect_done(HostCommand& command, const spec::Cqe& cqe) {
  auto* q = static_cast<IoQpair::Impl*>(command.owner);
  q->connect_answered = true;
  q->connect_status = cqe.decoded_status();
}

}  // namespace

void IoQpair::Impl::give_up(const char* why) noexcept {
  NVMF_ERRLOG(host_io, "%s: queue %u: %s: giving up, %u commands fail", subnqn.c_str(), qid, why,
              queue->pending_retry());
  recovery = Recovery::gave_up;
  queue->abort_pending();
}

void IoQpair::Impl::schedule_retry(const char* why) noexcept {
  const uint64_t now = host->now_ns();
  if (now >= loss_deadline_ns) {
    NVMF_ERRLOG(host_io, "%s: queue %u: %s; controller loss timeout (%u ms) reached",
                subnqn.c_str(), qid, why, ctrl_loss_timeout_ms);
    give_up("controller loss timeout");
    return;
  }
  NVMF_NOTICELOG(host_io, "%s: queue %u: %s; reconnecting in %.3g seconds", subnqn.c_str(), qid,
                 why, reconnect_delay_ms / 1000.0);
  retry_at_ns = now + uint64_t{reconnect_delay_ms} * 1000 * 1000;
  recovery = Recovery::waiting;
}

int IoQpair::Impl::recover() noexcept {
  const int before = static_cast<int>(queue->outstanding());
  switch (recovery) {
    case Recovery::none:
      if (queue->state() == HostQueueState::disconnected && !queue->stopping()) {
        attempts = 0;
        lost_at_ns = host->now_ns();
        loss_deadline_ns = lost_at_ns + uint64_t{ctrl_loss_timeout_ms} * 1000 * 1000;
        schedule_retry(queue->error_reason());
      }
      break;
    case Recovery::waiting: {
      if (queue->stopping()) {
        recovery = Recovery::gave_up;
        break;
      }
      const uint64_t now = host->now_ns();
      if (now >= loss_deadline_ns) {
        schedule_retry("still disconnected");
        break;
      }
      const EpochVerdict verdict = consult_controller();
      if (verdict == EpochVerdict::give_up) {
        give_up("the controller was given up");
        break;
      }
      if (verdict == EpochVerdict::wait || (verdict == EpochVerdict::as_scheduled &&
                                            now < retry_at_ns)) {
        break;
      }
      ++attempts;
      auto started = queue->reconnect(cntlid);
      if (!started) {
        schedule_retry("reconnect could not start");
        break;
      }
      recovery = Recovery::connecting;
      break;
    }
    case Recovery::connecting: {
      const HostQueueState state = queue->progress_connect();
      if (state == HostQueueState::failed) {
        schedule_retry(queue->failure().reason);
      } else if (state == HostQueueState::connected) {
        HostCommand* command = queue->reserved_command();
        if (command == nullptr) {
          queue->fail_connection("no slot for Connect");
          recovery = Recovery::fabric_connect;
          break;
        }
        command->sqe = spec::to_sqe(spec::make_connect_command(0, qid, queue->entries(), 0));
        command->callback = reconnect_connect_done;
        command->owner = this;
        connect_answered = false;
        const iovec iov{connect_data, sizeof(spec::ConnectData)};
        if (!queue->submit(*command, DataDirection::host_to_controller, &iov, 1)) {
          queue->fail_connection("cannot send Connect");
        }
        recovery = Recovery::fabric_connect;
      }
      break;
    }
    case Recovery::fabric_connect:
      if (connect_answered) {
        connect_answered = false;
        if (connect_status.is_success()) {
          const uint32_t resent = queue->resubmit_pending();
          restart_timers();
          registry->reconnects.fetch_add(1, std::memory_order_relaxed);
          ++stats.reconnects;
          recovery = Recovery::none;
          failing_fast = false;
          NVMF_NOTICELOG(host_io,
                         "%s: queue %u: Successfully reconnected (attempt %u), %u commands resent",
                         subnqn.c_str(), qid, attempts, resent);
        } else {
          NVMF_ERRLOG(host_io, "%s: queue %u: Connect on reconnect refused: %s", subnqn.c_str(),
                      qid, spec::status_name(connect_status, true));
          queue->fail_connection("Connect refused");
        }
      } else if (queue->state() == HostQueueState::disconnected) {
        schedule_retry(queue->error_reason());
      }
      break;
    case Recovery::gave_up:
      break;
  }
  if (recovering()) check_fast_io_fail();
  // Callbacks run here when commands were given up on.
  const int after = static_cast<int>(queue->outstanding());
  return before > after ? before - after : 0;
}

void IoQpair::Impl::take_controller_epoch(uint64_t word) noexcept {
  controller_seen = word;
  const ControllerEpoch epoch = ControllerEpoch::unpack(word);
  if (epoch.generation == generation) return;  // given up: recover() decides when it waits
  if (queue->state() == HostQueueState::connected && !queue->in_error() &&
      recovery == Recovery::none) {
    NVMF_NOTICELOG(host_io, "%s: queue %u: the controller is resetting: resetting the queue",
                   subnqn.c_str(), qid);
    queue->fail_connection("controller reset");  // recover(): waits for the new controller
  }
}

IoQpair::Impl::EpochVerdict IoQpair::Impl::consult_controller() noexcept {
  const ControllerEpoch epoch =
      ControllerEpoch::unpack(registry->controller.load(std::memory_order_acquire));
  switch (epoch.link) {
    case ControllerLink::lost: return EpochVerdict::give_up;
    case ControllerLink::resetting: return EpochVerdict::wait;
    case ControllerLink::live: break;
  }
  if (epoch.generation == generation) return EpochVerdict::as_scheduled;
  // A new controller is up (its reset already waited reconnect_delay_ms): connect to it now.
  generation = epoch.generation;
  cntlid = epoch.cntlid;
  std::memcpy(static_cast<uint8_t*>(connect_data) + offsetof(spec::ConnectData, cntlid), &cntlid,
              sizeof(cntlid));  // the Connect data is the admin Connect's, CNTLID aside
  return EpochVerdict::now;
}

// ---------------------------------------------------------------------------------------
// I/O timeouts (Abort, then reset) and fast_io_fail

void IoQpair::Impl::check_timeouts(uint64_t now_ns) noexcept {
  next_timeout_scan_ns = now_ns + timeout_scan_interval_ns;
  const uint64_t failed = aborts_failed.load(std::memory_order_acquire);
  const bool an_abort_failed = failed != aborts_failed_seen;
  aborts_failed_seen = failed;
  if (queue->outstanding() == 0 || queue->in_error()) return;
  const char* reset_why = nullptr;
  uint32_t reset_cid = 0;
  for (uint32_t cid = 0; cid < queue->depth(); ++cid) {  // the reserved Connect slot aside
    HostCommand& command = queue->command_at(cid);
    if (command.state != HostCommand::State::posted) continue;
    const uint64_t waited_ns = now_ns - command.timer_started_ns;
    switch (command.timer) {
      case HostCommand::Timer::unarmed:
        command.timer = HostCommand::Timer::running;
        command.timer_started_ns = now_ns;
        break;
      case HostCommand::Timer::running:
        if (waited_ns < io_timeout_ns) break;
        ++stats.timeouts;
        NVMF_ERRLOG(host_io, "%s: queue %u: I/O CID %u (opcode %02xh) timed out after %llu ms: "
                    "aborting", subnqn.c_str(), qid, cid, command.sqe.opcode,
                    static_cast<unsigned long long>(io_timeout_ns / kNsPerMs));
        if (request_abort(static_cast<uint16_t>(cid))) {
          command.timer = HostCommand::Timer::abort_sent;
          command.timer_started_ns = now_ns;
        } else if (reset_why == nullptr) {
          reset_why = "no room to queue its Abort";
          reset_cid = cid;
        }
        break;
      case HostCommand::Timer::abort_sent:
        if (reset_why != nullptr) break;
        if (an_abort_failed) {
          reset_why = "its Abort failed";
        } else if (waited_ns >= io_timeout_ns) {
          reset_why = "still outstanding one I/O timeout after its Abort";
        }
        if (reset_why != nullptr) reset_cid = cid;
        break;
    }
  }
  if (reset_why == nullptr) return;
  NVMF_ERRLOG(host_io, "%s: queue %u: I/O CID %u timed out, %s: resetting the %s",
              subnqn.c_str(), qid, reset_cid, reset_why,
              controller_recovery ? "controller" : "queue");
  // The queue holds its commands for the resend (recover()): to the controller the admin
  // thread resets, or, without controller_recovery, to a reconnect of this queue alone.
  if (controller_recovery) registry->reset_requested.store(true, std::memory_order_release);
  queue->fail_connection("I/O timeout");
}

bool IoQpair::Impl::request_abort(uint16_t cid) noexcept {
  std::lock_guard<std::mutex> lock(registry->mutex);  // rare: a command timed out
  const uint32_t waiting = registry->aborts_requested.load(std::memory_order_relaxed);
  if (waiting >= kAbortRequestsMax) return false;
  registry->abort_ring[(registry->abort_ring_head + waiting) % kAbortRequestsMax] =
      AbortRequest{qid, cid};
  registry->aborts_requested.store(waiting + 1, std::memory_order_release);
  return true;
}

void IoQpair::Impl::restart_timers() noexcept {
  for (uint32_t cid = 0; cid < queue->depth(); ++cid) {
    queue->command_at(cid).timer = HostCommand::Timer::unarmed;
  }
}

void IoQpair::Impl::check_fast_io_fail() noexcept {
  if (fast_io_fail_ns == UINT64_MAX) return;
  if (!failing_fast) {
    if (host->now_ns() - lost_at_ns < fast_io_fail_ns) return;
    failing_fast = true;
    NVMF_ERRLOG(host_io, "%s: queue %u: fast_io_fail_tmo (%llu ms) expired: %u held commands "
                "fail, new ones are refused until the queue is back", subnqn.c_str(), qid,
                static_cast<unsigned long long>(fast_io_fail_ns / kNsPerMs),
                queue->pending_retry());
  }
  const uint32_t held = queue->pending_retry();
  if (held == 0) return;
  stats.fast_failed += held;
  queue->fail_pending(kFastFailStatus);
}

// ---------------------------------------------------------------------------------------
// Event mode (IoQpairOpts::completion_events): the CQ's completion channel, the CM channel and
// a timerfd in one epoll set per qpair; a wait polls, arms, polls again and sleeps, as the
// target's interrupt-mode reactor does.

namespace {

// epoll_event.data.u64 of timer_fd (the HostQueue's fds carry kWakeCompletion and
// kWakeConnection).
constexpr uint64_t kWakeTimer = 3;
// epoll_fd holds three fds: the CQ's, the CM channel's and timer_fd.
constexpr int kWakeEventsMax = 3;
// While the queue reconnects, its owner's sleep ends this often to drive the reconnect: CM
// timeouts are noticed only when the channel is polled (verbs.h), and during a controller
// reset the qpair waits for the admin thread, which does not wake it. Short beside a
// reconnect's delay (ControllerOpts::reconnect_delay_ms, 10 s by default); during recovery only.
constexpr uint64_t kRecoveryPollIntervalNs = 10 * kNsPerMs;

// Arms the CQ and the timer before a sleep. A CQ armed now is polled once more: a completion
// that landed between the last poll and the arm raised no event, and the sleep would miss it.
// Returns the callbacks that poll ran.
Result<int> arm_for_sleep(IoQpair& qpair) noexcept {
  IoQpair::Impl& q = qpair.impl();
  auto armed = q.queue->arm_completions();
  if (!armed) return Unexpected(armed.error());
  int ran = 0;
  if (*armed) {
    ++q.stats.arms;
    ran = qpair.process_completions();
  }
  q.set_timer(q.next_timer_ns());
  return ran;
}

// epoll_wait()'s timeout for a wait that ends at `give_up_ns` (UINT64_MAX: never): whole
// milliseconds, rounded up so that a short rest does not spin.
int remaining_ms(const Clock& clock, uint64_t give_up_ns) noexcept {
  if (give_up_ns == UINT64_MAX) return -1;
  const uint64_t now = clock.now_ns();
  if (now >= give_up_ns) return 0;
  return static_cast<int>(
      std::min<uint64_t>((give_up_ns - now + kNsPerMs - 1) / kNsPerMs, INT32_MAX));
}

}  // namespace

Result<void> IoQpair::Impl::open_events() noexcept {
  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Unexpected(make_system_error(errno, "epoll_create1"));
  // Set with relative times (set_timer): HostOpts::clock may be a test's FakeClock.
  timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd < 0) return Unexpected(make_system_error(errno, "timerfd_create"));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeTimer;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer_fd, &event) != 0) {
    return Unexpected(make_system_error(errno, "epoll_ctl: the qpair's timerfd"));
  }
  return {};
}

uint64_t IoQpair::Impl::next_timer_ns() const noexcept {
  if (recovering()) {
    const uint64_t now = host->now_ns();
    const uint64_t poll_at = now + kRecoveryPollIntervalNs;
    // A retry time already passed means the controller's reset holds the attempt back.
    if (recovery == Recovery::waiting && retry_at_ns > now) return std::min(poll_at, retry_at_ns);
    return poll_at;
  }
  // The scan process_completions() runs on a live queue (a disconnected one holds nothing).
  const bool live = recovery == Recovery::none && queue->state() == HostQueueState::connected;
  if (live && io_timeout_ns != 0 && queue->outstanding() != 0) return next_timeout_scan_ns;
  return UINT64_MAX;
}

void IoQpair::Impl::set_timer(uint64_t deadline_ns) noexcept {
  if (deadline_ns == timer_deadline_ns) return;  // set for it already: no system call
  timer_deadline_ns = deadline_ns;
  itimerspec spec{};  // all zero: disarmed
  if (deadline_ns != UINT64_MAX) {
    const uint64_t now = host->now_ns();
    // 1 ns, the shortest, for a deadline already passed: zero would disarm.
    const uint64_t delay_ns = deadline_ns > now ? deadline_ns - now : 1;
    spec.it_value.tv_sec = static_cast<time_t>(delay_ns / (1000 * kNsPerMs));
    spec.it_value.tv_nsec = static_cast<long>(delay_ns % (1000 * kNsPerMs));
  }
  (void)timerfd_settime(timer_fd, 0, &spec, nullptr);
}

bool IoQpair::Impl::take_wakeups(const epoll_event* events, int count) noexcept {
  bool timer = false;
  for (int i = 0; i < count; ++i) {
    switch (events[i].data.u64) {
      case transport_rdma::kWakeCompletion:
        queue->consume_completion_event();
        break;
      case transport_rdma::kWakeConnection:
        queue->poll_connection_events();
        break;
      case kWakeTimer: {
        uint64_t expirations = 0;
        (void)!read(timer_fd, &expirations, sizeof(expirations));
        timer_deadline_ns = UINT64_MAX;  // expired: the next set_timer() sets it again
        timer = true;
        break;
      }
      default:
        break;
    }
  }
  if (timer) {
    ++stats.timer_wakeups;
    // What no fd reports (an async event such as CQ_ERR) is looked for on the timer.
    queue->poll_connection_events();
  }
  return timer;
}

Result<int> IoQpair::wait_for_completions(int timeout_ms) noexcept {
  Impl& q = *impl_;
  if (q.epoll_fd < 0) {
    return Unexpected(Errc::bad_state, "event mode off (IoQpairOpts::completion_events)");
  }
  ++q.stats.waits;
  const int ran = process_completions();  // sends what was submitted, as always
  if (ran > 0) return ran;
  const Clock& clock = q.host->monotonic;
  const uint64_t give_up_ns =
      timeout_ms < 0 ? UINT64_MAX : clock.now_ns() + uint64_t(timeout_ms) * kNsPerMs;
  for (;;) {
    auto armed = arm_for_sleep(*this);
    if (!armed || *armed > 0) return armed;
    const int sleep_ms = remaining_ms(clock, give_up_ns);
    epoll_event events[kWakeEventsMax];
    ++q.stats.sleeps;
    const int count = epoll_wait(q.epoll_fd, events, kWakeEventsMax, sleep_ms);
    if (count < 0) {
      if (errno == EINTR) return 0;  // a signal: the caller decides (the CQ is still armed)
      return Unexpected(make_system_error(errno, "epoll_wait on the qpair's event fd"));
    }
    if (count == 0) return 0;  // timeout_ms passed (still armed)
    ++q.stats.wakeups;
    const bool timer = q.take_wakeups(events, count);
    const int woke = process_completions();
    if (woke > 0) return woke;
    // A timer with nothing to complete, or the one look of a wait that may not sleep: arm again
    // what the wake-up took, and return. Else (an event of an earlier arm whose completion a
    // poll took, a CM event): sleep again.
    if (timer || sleep_ms == 0) return arm_for_sleep(*this);
  }
}

int IoQpair::event_fd() const noexcept { return impl_->epoll_fd; }

// ---------------------------------------------------------------------------------------
// Namespace

namespace {

Result<void> submit(IoQpair& qpair, const spec::Sqe& sqe, DataDirection direction,
                    const iovec* iov, int iovcnt, IoCallback cb, void* cb_ctx) noexcept {
  IoQpair::Impl& q = qpair.impl();
  HostQueue& queue = *q.queue;
  if (queue.state() != HostQueueState::connected || queue.in_error() ||
      q.recovery != IoQpair::Impl::Recovery::none) {
    // A failed queue pair that will be reconnected: busy (retry after a poll), as a full queue.
    const bool will_recover =
        q.recovering() || (!queue.stopping() && q.recovery == IoQpair::Impl::Recovery::none);
    if (q.failing_fast) return Unexpected(Errc::bad_state, "qpair reconnecting (fast_io_fail)");
    if (will_recover) {
      ++q.stats.busy;
      return Unexpected(Errc::busy, "qpair reconnecting");
    }
    return Unexpected(Errc::bad_state, "qpair not connected");
  }
  if (queue.key_switch_state() != transport_rdma::KeySwitchState::none) {
    ++q.stats.busy;  // set_memreg_policy(): draining the old policy
    return Unexpected(Errc::busy, "qpair switching its memreg policy");
  }
  HostCommand* command = queue.get_command();
  if (command == nullptr) {
    ++q.stats.busy;
    return Unexpected(Errc::busy, "qpair full");
  }
  command->sqe = sqe;
  command->callback = io_done;
  command->owner = &q;
  command->status_fn = cb;
  command->cb_ctx = cb_ctx;
  command->timer = HostCommand::Timer::unarmed;
  if (sqe.opcode == spec::nvm_opcode::dataset_management) {
    // The range list is the command's data; it lives in the slot's DMA range entry.
    q.dsm_ranges[command->cid] = *static_cast<const spec::DsmRange*>(iov[0].iov_base);
    const iovec range{&q.dsm_ranges[command->cid], sizeof(spec::DsmRange)};
    auto submitted = queue.submit(*command, direction, &range, 1);
    if (submitted) ++q.stats.submitted;
    return submitted;
  }
  auto submitted = queue.submit(*command, direction, iov, iovcnt);
  if (submitted) ++q.stats.submitted;
  return submitted;
}

// Read and Write: the SQE of `blocks` blocks from `lba`, checked by the caller.
Result<void> submit_rw(IoQpair& qpair, uint8_t opcode, uint32_t nsid, DataDirection direction,
                       const iovec* iov, int iovcnt, uint64_t lba, uint32_t blocks, IoCallback cb,
                       void* cb_ctx) noexcept {
  spec::Sqe sqe = spec::make_sqe(opcode, 0, nsid);
  spec::rw_set_range(sqe, lba, blocks);
  return submit(qpair, sqe, direction, iov, iovcnt, cb, cb_ctx);
}

}  // namespace

Result<void> Namespace::check_range(uint64_t lba, uint32_t blocks) const noexcept {
  if (blocks == 0 || blocks > kMaxBlocksPerCommand) {
    return Unexpected(Errc::invalid_argument, "1 to 65536 blocks per command");
  }
  if (!range_within(lba, blocks, block_count_)) {
    return Unexpected(Errc::invalid_argument, "range outside the namespace");
  }
  return {};
}

Result<void> Namespace::check_transfer(const IoQpair& qpair, const iovec* iov, int iovcnt,
                                       uint64_t lba, uint32_t blocks) const noexcept {
  auto range = check_range(lba, blocks);
  if (!range) return range;
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (iovcnt < 1 || total != uint64_t{blocks} * block_size_) {
    return Unexpected(Errc::invalid_argument, "iovecs must add up to blocks x block size");
  }
  const uint32_t limit = qpair.impl_const().max_transfer_bytes;
  if (limit != 0 && total > limit) {
    return Unexpected(Errc::invalid_argument, "larger than the controller's MDTS");
  }
  return {};
}

// read() and write() do not call readv() and writev(): those are exported, so the compiler
// may not inline them (another definition could interpose), and the call would be paid per I/O.
Result<void> Namespace::readv(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba,
                              uint32_t blocks, IoCallback cb, void* cb_ctx) noexcept {
  auto checked = check_transfer(qpair, iov, iovcnt, lba, blocks);
  if (!checked) return checked;
  return submit_rw(qpair, spec::nvm_opcode::read, nsid_, DataDirection::controller_to_host, iov,
                   iovcnt, lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::writev(IoQpair& qpair, const iovec* iov, int iovcnt, uint64_t lba,
                               uint32_t blocks, IoCallback cb, void* cb_ctx) noexcept {
  auto checked = check_transfer(qpair, iov, iovcnt, lba, blocks);
  if (!checked) return checked;
  return submit_rw(qpair, spec::nvm_opcode::write, nsid_, DataDirection::host_to_controller, iov,
                   iovcnt, lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::read(IoQpair& qpair, void* buffer, uint64_t lba, uint32_t blocks,
                             IoCallback cb, void* cb_ctx) noexcept {
  const iovec iov{buffer, size_t{blocks} * block_size_};
  auto checked = check_transfer(qpair, &iov, 1, lba, blocks);
  if (!checked) return checked;
  return submit_rw(qpair, spec::nvm_opcode::read, nsid_, DataDirection::controller_to_host, &iov, 1,
                   lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::write(IoQpair& qpair, const void* buffer, uint64_t lba, uint32_t blocks,
                              IoCallback cb, void* cb_ctx) noexcept {
  const iovec iov{const_cast<void*>(buffer), size_t{blocks} * block_size_};
  auto checked = check_transfer(qpair, &iov, 1, lba, blocks);
  if (!checked) return checked;
  return submit_rw(qpair, spec::nvm_opcode::write, nsid_, DataDirection::host_to_controller, &iov,
                   1, lba, blocks, cb, cb_ctx);
}

Result<void> Namespace::flush(IoQpair& qpair, IoCallback cb, void* cb_ctx) noexcept {
  const spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::flush, 0, nsid_);
  return submit(qpair, sqe, DataDirection::none, nullptr, 0, cb, cb_ctx);
}

Result<void> Namespace::write_zeroes(IoQpair& qpair, uint64_t lba, uint32_t blocks,
                                     IoCallback cb, void* cb_ctx) noexcept {
  auto range = check_range(lba, blocks);
  if (!range) return range;
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::write_zeroes, 0, nsid_);
  spec::rw_set_range(sqe, lba, blocks);
  return submit(qpair, sqe, DataDirection::none, nullptr, 0, cb, cb_ctx);
}

Result<void> Namespace::deallocate(IoQpair& qpair, uint64_t lba, uint32_t blocks, IoCallback cb,
                                   void* cb_ctx) noexcept {
  if (blocks == 0 || !range_within(lba, blocks, block_count_)) {
    return Unexpected(Errc::invalid_argument, "range outside the namespace");
  }
  spec::DsmRange range{};
  range.block_count = blocks;
  range.starting_lba = lba;
  spec::Sqe sqe = spec::make_sqe(spec::nvm_opcode::dataset_management, 0, nsid_);
  sqe.cdw10 = 0;        // NR: one range (0's based)
  sqe.cdw11 = 1u << 2;  // AD: deallocate
  const iovec iov{&range, sizeof(range)};
  return submit(qpair, sqe, DataDirection::host_to_controller, &iov, 1, cb, cb_ctx);
}

}  // namespace nvmf::host
