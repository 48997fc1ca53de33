#include "rdma_worker.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "common/log.h"
#include "verbs/sim/sim.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

// --mode interrupt / adaptive: the longest a worker sleeps before its loop runs again, so that
// the main thread's duties (the admin queue: a Keep Alive every KATO / 2, 5 s by default; the
// progress line each second) and the run's deadline are at most this late.
constexpr int kWaitSliceMs = 10;

}  // namespace

RdmaWorker::RdmaWorker(const RdmaWorkerParams& params) : Worker(params.core), params_(params) {
  const Settings& s = *params.core.settings;
  sleeper_.mode = s.mode;
  sleeper_.adaptive_idle_ns = uint64_t{s.adaptive_idle_us} * 1000;
}

RdmaWorker::~RdmaWorker() { teardown(); }

std::string RdmaWorker::setup(bool* usage_error) {
  *usage_error = false;
  const Settings& s = *params_.core.settings;
  core_.reserve_namespaces(params_.namespaces.size());
  for (host::Namespace* ns : params_.namespaces) {
    const NamespaceShape shape{ns->id(), ns->block_size(), ns->block_count()};
    std::string reason = core_.add_namespace(shape, usage_error);
    if (!reason.empty()) return reason;
  }
  if (std::string reason = allocate_qpairs(); !reason.empty()) return reason;
  if (std::string reason = open_worker_epoll(); !reason.empty()) return reason;
  if (std::string reason = plan_memreg_cycle(); !reason.empty()) return reason;
  if (std::string reason = check_qpair_depth(); !reason.empty()) {
    *usage_error = true;
    return reason;
  }
  if (std::string reason = allocate_buffers(); !reason.empty()) return reason;
  const uint32_t qpairs = static_cast<uint32_t>(qpairs_.size());
  size_t offset = 0;
  for (WorkerCore::NsState& ns : core_.namespaces()) {
    for (uint32_t i = 0; i < s.queue_depth; ++i) {
      const auto dealt = static_cast<uint32_t>(core_.tasks().size() % qpairs);
      core_.add_task(ns, buffers_ + offset, this).queue = dealt;
      offset += s.io_size_bytes;
    }
  }
  return "";
}

std::string RdmaWorker::allocate_buffers() {
  const Settings& s = *params_.core.settings;
  const size_t count = core_.namespaces().size() * size_t{s.queue_depth};
  const size_t bytes = count * s.io_size_bytes;
  buffers_ = static_cast<uint8_t*>(params_.host->dma_alloc(bytes));
  if (buffers_ == nullptr) {
    return core_.who() + "Host::dma_alloc(" + std::to_string(bytes) + ") for " +
           std::to_string(count) + " buffers of -o " + std::to_string(s.io_size_bytes) +
           " failed: lower -q, -o, -c or --ns-count";
  }
  if (params_.skip_payloads_of != nullptr) {
    auto skipped = params_.skip_payloads_of->skip_payloads(buffers_, bytes);
    if (!skipped) {
      return core_.who() + "--sim-payload skip: " + skipped.error().detail;
    }
  }
  return "";
}

std::string RdmaWorker::allocate_qpairs() {
  std::lock_guard<std::mutex> lock(*params_.controller_mutex);
  const uint32_t wanted = params_.core.settings->qpairs_per_worker;
  qpairs_.reserve(wanted);
  for (uint32_t i = 0; i < wanted; ++i) {
    std::string message;
    host::IoQpairOpts opts;
    opts.queue_size = params_.queue_entries;
    opts.completion_events = sleeper_.mode != CompletionMode::poll;
    auto qpair = params_.controller->alloc_io_qpair(opts, &message);
    if (!qpair) {
      return core_.who() + "cannot allocate I/O qpair " + std::to_string(i + 1) + " of " +
             std::to_string(wanted) + ": " +
             (message.empty() ? std::string(errc_name(qpair.error().code)) : message);
    }
    qpairs_.push_back(std::move(*qpair));
  }
  return "";
}

// Every qpair must hold its share of the tasks (dealt in turn: the shallowest decides). "" or
// a reason (a usage error).
std::string RdmaWorker::check_qpair_depth() const {
  uint32_t shallowest = qpairs_.front()->depth();
  for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) {
    shallowest = std::min(shallowest, qpair->depth());
  }
  const auto qpairs = static_cast<uint32_t>(qpairs_.size());
  if (qpairs == 1) {
    return core_.check_queue_depth(shallowest, "the target granted I/O queues of depth");
  }
  // shallowest x qpairs holds every task exactly when each qpair holds its rounded-up share.
  const std::string what = "the target granted -P " + std::to_string(qpairs) +
                           " I/O queues of depth " + std::to_string(shallowest) +
                           ", holding in all";
  return core_.check_queue_depth(uint64_t{shallowest} * qpairs, what.c_str());
}

std::string RdmaWorker::open_worker_epoll() {
  if (sleeper_.mode == CompletionMode::poll || qpairs_.size() < 2) return "";
  sleeper_.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (sleeper_.epoll_fd < 0) return core_.who() + "epoll_create1: " + strerror(errno);
  for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u32 = qpair->qid();
    if (epoll_ctl(sleeper_.epoll_fd, EPOLL_CTL_ADD, qpair->event_fd(), &event) != 0) {
      return core_.who() + "cannot add queue pair " + std::to_string(qpair->qid()) +
             "'s event fd to the worker's epoll set: " + strerror(errno);
    }
  }
  return "";
}

void RdmaWorker::poll_or_sleep() noexcept {
  int ran = 0;
  for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) ran += qpair->process_completions();
  if (ran > 0) {
    sleeper_.idle_since_ns = 0;
    return;
  }
  if (sleeper_.mode == CompletionMode::adaptive) {
    const uint64_t now = params_.core.clock->now_ns();
    if (sleeper_.idle_since_ns == 0) sleeper_.idle_since_ns = now;
    if (now - sleeper_.idle_since_ns < sleeper_.adaptive_idle_ns) return;
  }
  sleep_until_completion();
  sleeper_.idle_since_ns = 0;
}

void RdmaWorker::sleep_until_completion() noexcept {
  if (qpairs_.size() == 1) {
    (void)wait_on(*qpairs_.front(), kWaitSliceMs);
    return;
  }
  // Each qpair armed by a wait that may not sleep (it polls, arms, polls again); then one
  // sleep for all of them. The next poll looks at every qpair: which fd woke it does not matter.
  for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) {
    if (wait_on(*qpair, 0) > 0) return;
  }
  ++sleeper_.worker_sleeps;
  epoll_event event{};
  (void)epoll_wait(sleeper_.epoll_fd, &event, 1, kWaitSliceMs);
}

int RdmaWorker::wait_on(host::IoQpair& qpair, int timeout_ms) noexcept {
  const Result<int> waited = qpair.wait_for_completions(timeout_ms);
  if (waited) return *waited;
  if (!sleeper_.wait_error_logged) {
    sleeper_.wait_error_logged = true;  // once per worker: it polls on regardless
    NVMF_ERRLOG(nvmf_perf, "worker %" PRIu32 ": queue pair %u: wait_for_completions: %s (%s)",
                core_.index(), qpair.qid(), errc_name(waited.error().code),
                waited.error().detail);
  }
  return 0;
}

std::string RdmaWorker::plan_memreg_cycle() {
  const Settings& s = *params_.core.settings;
  if (!s.memreg_switching()) return "";
  for (const std::string& name : s.memreg_switch_policies) {
    host::MemregPolicy policy;
    if (!host::memreg_policy_parse(name, &policy)) {
      return "--memreg-switch-policies: '" + name + "' is not known to libnvmf_host";
    }
    cycle_.policies.push_back(policy);
  }
  cycle_.every_ns = static_cast<uint64_t>(s.memreg_switch_every_s * 1e9);
  cycle_.every_ios = s.memreg_switch_every_ios;
  cycle_.qpairs.assign(qpairs_.size(), MemregCycle::Position{});
  cycle_.asked_for_ns.assign(cycle_.policies.size(), 0);
  return "";
}

void RdmaWorker::run(uint64_t deadline_ns, const Ticker& ticker) noexcept {
  if (cycle_.policies.empty()) {
    core_.run(*this, deadline_ns, ticker);
    return;
  }
  const Clock& clock = *params_.core.clock;
  outer_ticker_ = ticker;
  const uint64_t start_ns = clock.now_ns();  // the qpairs start with the cycle's first policy
  cycle_.next_switch_ns = start_ns + cycle_.every_ns;
  for (MemregCycle::Position& position : cycle_.qpairs) {
    position.asked_ns = start_ns;
    position.next_switch_ios = cycle_.every_ios;
  }
  core_.run(*this, deadline_ns, Ticker{&RdmaWorker::tick, this});
  const uint64_t end_ns = clock.now_ns();
  for (const MemregCycle::Position& position : cycle_.qpairs) {
    cycle_.asked_for_ns[position.current] += end_ns - position.asked_ns;
  }
}

void RdmaWorker::tick(void* ctx, uint64_t now_ns) noexcept {
  auto& worker = *static_cast<RdmaWorker*>(ctx);
  worker.switch_memreg_if_due(now_ns);
  const Ticker& outer = worker.outer_ticker_;
  if (outer.tick != nullptr) outer.tick(outer.ctx, now_ns);
}

void RdmaWorker::switch_memreg_if_due(uint64_t now_ns) noexcept {
  MemregCycle& cycle = cycle_;
  if (core_.stopping()) return;
  if (cycle.every_ios == 0) {  // by time: every qpair at once
    if (now_ns < cycle.next_switch_ns) return;
    cycle.next_switch_ns = now_ns + cycle.every_ns;
    for (size_t i = 0; i < qpairs_.size(); ++i) switch_memreg(i, now_ns);
    return;
  }
  // By count: each qpair once it completed every_ios more I/Os since it was last asked (the
  // I/Os its drain completes count toward the next switch).
  for (size_t i = 0; i < qpairs_.size(); ++i) {
    const uint64_t completed = qpairs_[i]->stats().completed;
    if (completed < cycle.qpairs[i].next_switch_ios) continue;
    cycle.qpairs[i].next_switch_ios = completed + cycle.every_ios;
    switch_memreg(i, now_ns);
  }
}

void RdmaWorker::switch_memreg(size_t qpair_index, uint64_t now_ns) noexcept {
  MemregCycle& cycle = cycle_;
  MemregCycle::Position& position = cycle.qpairs[qpair_index];
  cycle.asked_for_ns[position.current] += now_ns - position.asked_ns;
  position.current = (position.current + 1) % cycle.policies.size();
  position.asked_ns = now_ns;
  const host::MemregPolicy policy = cycle.policies[position.current];
  host::IoQpair& qpair = *qpairs_[qpair_index];
  const Result<void> asked = qpair.set_memreg_policy(policy);
  if (asked || cycle.refusal_logged) return;
  cycle.refusal_logged = true;  // once per worker: the next cycles would say the same
  NVMF_ERRLOG(nvmf_perf, "worker %" PRIu32 ": queue pair %u refused memreg policy %s: %s (%s)",
              core_.index(), qpair.qid(), host::memreg_policy_name(policy),
              errc_name(asked.error().code), asked.error().detail);
}

SubmitOutcome RdmaWorker::submit(Task& task, Error* error) noexcept {
  const WorkerCore::NsState& ns = *task.ns;
  host::Namespace& host_ns = *params_.namespaces[ns.index];
  host::IoQpair& qpair = *qpairs_[task.queue];
  const Result<void> submitted =
      task.is_read
          ? host_ns.read(qpair, task.buffer, task.lba, ns.blocks_per_io, &on_complete, &task)
          : host_ns.write(qpair, task.buffer, task.lba, ns.blocks_per_io, &on_complete, &task);
  if (submitted) return SubmitOutcome::submitted;
  switch (submitted.error().code) {
    case Errc::busy:
      // Draining for a memreg switch: a pause like a reconnect's, not a full queue.
      return qpair.switching() ? SubmitOutcome::down : SubmitOutcome::busy;
    case Errc::bad_state:
    case Errc::disconnected:
      // The qpair is down (the controller is reconnecting it): try again after a poll.
      return SubmitOutcome::down;
    default:
      // A range or buffer the library rejects: retrying cannot help.
      *error = submitted.error();
      return SubmitOutcome::refused;
  }
}

void RdmaWorker::on_complete(void* ctx, const spec::Status& status) noexcept {
  auto& task = *static_cast<Task*>(ctx);
  auto& worker = *static_cast<RdmaWorker*>(task.owner);
  worker.core_.complete(worker, task, status);
}

void RdmaWorker::teardown() noexcept {
  core_.stop();  // callbacks of a disconnect must not start new I/O
  if (!qpairs_.empty()) {
    for (const std::unique_ptr<host::IoQpair>& qpair : qpairs_) {
      add_qpair_stats(qpair->stats());  // the counters go with the qpair
    }
    std::lock_guard<std::mutex> lock(*params_.controller_mutex);
    qpairs_.clear();
  }
  if (sleeper_.epoll_fd >= 0) {
    ::close(sleeper_.epoll_fd);
    sleeper_.epoll_fd = -1;
  }
  for (Task& task : core_.tasks()) task.buffer = nullptr;
  if (buffers_ != nullptr) {
    params_.host->dma_free(buffers_);
    buffers_ = nullptr;
  }
}

namespace {

// The IoQpairStats counters the worker keeps past its qpairs (teardown() sums them).
constexpr uint64_t host::IoQpairStats::*kSummedQpairStats[] = {
    &host::IoQpairStats::qp_errors,
    &host::IoQpairStats::bind_errors,
    &host::IoQpairStats::sends_posted,
    &host::IoQpairStats::binds_posted,
    &host::IoQpairStats::local_invalidates_posted,
    &host::IoQpairStats::signaled_posted,
    &host::IoQpairStats::fenced_posted,
    &host::IoQpairStats::doorbells,
    &host::IoQpairStats::cqes_reaped,
    &host::IoQpairStats::memreg_switches,
    &host::IoQpairStats::memreg_switch_failures,
    &host::IoQpairStats::waits,
    &host::IoQpairStats::arms,
    &host::IoQpairStats::sleeps,
    &host::IoQpairStats::wakeups,
    &host::IoQpairStats::timer_wakeups,
};

// Where the work counts go in the report.
struct WorkCountSource {
  uint64_t HostWorkCounts::*work;
  uint64_t host::IoQpairStats::*stats;
};
constexpr WorkCountSource kWorkCountSources[] = {
    {&HostWorkCounts::sends, &host::IoQpairStats::sends_posted},
    {&HostWorkCounts::binds, &host::IoQpairStats::binds_posted},
    {&HostWorkCounts::local_invalidates, &host::IoQpairStats::local_invalidates_posted},
    {&HostWorkCounts::signaled, &host::IoQpairStats::signaled_posted},
    {&HostWorkCounts::fenced, &host::IoQpairStats::fenced_posted},
    {&HostWorkCounts::doorbells, &host::IoQpairStats::doorbells},
    {&HostWorkCounts::cqes_reaped, &host::IoQpairStats::cqes_reaped},
};

}  // namespace

void RdmaWorker::add_qpair_stats(const host::IoQpairStats& stats) noexcept {
  for (uint64_t host::IoQpairStats::*counter : kSummedQpairStats) {
    qpair_stats_.*counter += stats.*counter;
  }
}

void RdmaWorker::add_counters(Summary* summary) const noexcept {
  summary->qp_errors += qpair_stats_.qp_errors;
  summary->mw_bind_errors += qpair_stats_.bind_errors;
  for (const WorkCountSource& source : kWorkCountSources) {
    summary->host_work.*source.work += qpair_stats_.*source.stats;
  }
  HostEventCounts& events = summary->host_events;
  events.waits += qpair_stats_.waits;
  events.arms += qpair_stats_.arms;
  events.sleeps += qpair_stats_.sleeps;
  events.wakeups += qpair_stats_.wakeups;
  events.timer_wakeups += qpair_stats_.timer_wakeups;
  events.worker_sleeps += sleeper_.worker_sleeps;
  if (!cycle_.policies.empty()) {
    MemregSwitching& switching = summary->memreg_switching;
    switching.on = true;
    switching.switches += qpair_stats_.memreg_switches;
    switching.failures += qpair_stats_.memreg_switch_failures;
    for (size_t i = 0; i < cycle_.policies.size(); ++i) {
      switching.add_seconds(host::memreg_policy_name(cycle_.policies[i]),
                            static_cast<double>(cycle_.asked_for_ns[i]) / 1e9);
    }
  }
}

}  // namespace nvmf::perf
