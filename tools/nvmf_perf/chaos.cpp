#include "chaos.h"

#include <algorithm>
#include <utility>
#include <cinttypes>

#include "common/log.h"
#include "spec/status.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

constexpr uint64_t kNsPerMs = 1000 * 1000;
// delay: at most this many CQEs held, for at most this many polls and this long: long enough
// to reorder against the other queues, short against the host's timeouts.
constexpr uint32_t kDelayCqesMax = 32;
constexpr uint32_t kDelayPollsMax = 64;
constexpr uint64_t kDelayNsMax = 2 * kNsPerMs;
// bdev-error: at most this many I/Os failed per fault, every 1st..4th of the matching ones.
constexpr uint64_t kBdevFailuresMax = 8;
constexpr uint64_t kBdevEveryNthMax = 4;
// refuse: 2.5 reconnect delays at least, so two attempts meet the refusal; 10 at most, should
// no reconnect come (the QP made fatal went away before its event, say).
constexpr uint64_t kRefuseDelaysTimes2 = 5;
constexpr uint64_t kRefuseDelaysMax = 10;

// A stream of its own, so adding a fault kind does not move the workers' offsets.
constexpr uint64_t kChaosSeedSalt = 0xC4A05C4A05C4A05Cull;

}  // namespace

bool ChaosInjector::fault_parse(const std::string& name, Fault* fault) noexcept {
  static_assert(std::size(kChaosFaultNames) == 6, "one Fault per name, in the same order");
  for (size_t i = 0; i < std::size(kChaosFaultNames); ++i) {
    if (name == kChaosFaultNames[i]) {
      *fault = static_cast<Fault>(i);
      return true;
    }
  }
  return false;
}

ChaosInjector::ChaosInjector(const Settings& settings, SimTarget& sim)
    : sim_(sim),
      rng_(settings.seed ^ kChaosSeedSalt),
      every_ns_(uint64_t{settings.chaos_every_ms} * kNsPerMs),
      run_ns_(uint64_t{settings.time_s} * 1000 * kNsPerMs),
      refuse_ns_(uint64_t{settings.reconnect_delay_ms} * kNsPerMs * kRefuseDelaysTimes2 / 2),
      refuse_max_ns_(uint64_t{settings.reconnect_delay_ms} * kNsPerMs * kRefuseDelaysMax) {
  for (const std::string& name : settings.chaos_faults) {
    Fault fault;
    if (!fault_parse(name, &fault)) continue;  // check_options took names from the list
    faults_.push_back(fault);
    names_.push_back(name);
  }
  injected_.assign(faults_.size(), 0);
  round_.resize(faults_.size());
  shuffle_round();
}

void ChaosInjector::shuffle_round() noexcept {
  for (size_t i = 0; i < round_.size(); ++i) round_[i] = i;
  for (size_t i = round_.size(); i > 1; --i) std::swap(round_[i - 1], round_[rng_.below(i)]);
  round_next_ = 0;
}

void ChaosInjector::tick(uint64_t now_ns) noexcept {
  if (finished_ || faults_.empty()) return;
  if (next_ns_ == 0) {
    next_ns_ = now_ns + every_ns_;
    end_ns_ = now_ns + run_ns_;
    return;
  }
  stop_refusing_if_due(now_ns);
  if (now_ns < next_ns_ || now_ns >= end_ns_) return;
  next_ns_ = now_ns + every_ns_;
  if (round_next_ == round_.size()) shuffle_round();
  const size_t pick = round_[round_next_++];
  ++injected_[pick];
  inject(faults_[pick], now_ns);
}

void ChaosInjector::finish() noexcept {
  if (finished_) return;
  finished_ = true;
  stop_refusing();
}

void ChaosInjector::start_refusing(uint64_t now_ns) noexcept {
  if (!refusing_) {
    sim_.target_sim().refuse_connections(kSimAddress, kSimPort, verbs::sim::RefuseMode::reject);
    refusing_ = true;
    rejects_before_ = sim_.host_counters().rejects;
  }
  refuse_from_ns_ = now_ns;  // a second refuse while refusing: the time starts again
  raise_qp_fatal(sim_.host_sim());
}

void ChaosInjector::stop_refusing_if_due(uint64_t now_ns) noexcept {
  if (!refusing_ || now_ns < refuse_from_ns_ + refuse_ns_) return;
  const bool refused_one = sim_.host_counters().rejects > rejects_before_;
  if (refused_one || now_ns >= refuse_from_ns_ + refuse_max_ns_) stop_refusing();
}

void ChaosInjector::stop_refusing() noexcept {
  if (!refusing_) return;
  sim_.target_sim().refuse_connections(kSimAddress, kSimPort, verbs::sim::RefuseMode::none);
  refusing_ = false;
}

void ChaosInjector::inject(Fault fault, uint64_t now_ns) noexcept {
  using verbs::WcStatus;
  switch (fault) {
    case Fault::qp_error:
      sim_.host_sim().fail_next_wrs(1, WcStatus::general_error);
      return;
    case Fault::drop:
      // A remote status takes the peer QP to error too (sim.h), as a NAK would.
      sim_.host_sim().fail_next_wrs(1, WcStatus::remote_operation_error);
      return;
    case Fault::delay:
      delay_completions();
      return;
    case Fault::refuse:
      start_refusing(now_ns);
      return;
    case Fault::bdev_error:
      fail_bdev_io();
      return;
    case Fault::async_event:
      raise_qp_fatal(pick_side());
      return;
  }
}

verbs::sim::SimProvider& ChaosInjector::pick_side() noexcept {
  return rng_.below(2) == 0 ? sim_.host_sim() : sim_.target_sim();
}

uint32_t ChaosInjector::pick_io_qp(verbs::sim::SimProvider& side) noexcept {
  const std::vector<uint32_t> qps = side.qp_nums();
  if (qps.size() < 2) return 0;  // the admin queue's alone (or nothing): spare it
  return qps[1 + rng_.below(qps.size() - 1)];
}

void ChaosInjector::delay_completions() noexcept {
  verbs::sim::SimProvider& side = pick_side();
  const uint32_t qp = pick_io_qp(side);
  const verbs::CompletionQueue* cq = qp != 0 ? side.send_cq_of(qp) : nullptr;
  if (cq == nullptr) return;  // the QP went away meanwhile (a reconnect): nothing to delay
  verbs::sim::CompletionDelay delay;
  delay.count = 1 + static_cast<uint32_t>(rng_.below(kDelayCqesMax));
  delay.polls = 1 + static_cast<uint32_t>(rng_.below(kDelayPollsMax));
  delay.delay_ns = rng_.below(kDelayNsMax);
  // send_cq_of() names the CQ const (for observation); the CQ itself is the device's, mutable,
  // and delay_completions() is the fault-injection call made for it.
  (void)side.delay_completions(const_cast<verbs::CompletionQueue&>(*cq), delay);
}

void ChaosInjector::fail_bdev_io() noexcept {
  const std::vector<bdev::ErrorBdev*>& bdevs = sim_.error_bdevs();
  if (bdevs.empty()) return;
  bdev::ErrorInjection rule;
  rule.io_types = bdev::io_type_bit(bdev::IoType::read) | bdev::io_type_bit(bdev::IoType::write);
  rule.action = bdev::ErrorAction::fail;
  rule.count = 1 + rng_.below(kBdevFailuresMax);
  rule.every_nth = 1 + rng_.below(kBdevEveryNthMax);
  rule.sct = spec::sct::generic;
  rule.sc = rng_.below(2) == 0 ? spec::sc_generic::internal_error
                               : spec::sc_generic::data_transfer_error;
  rule.dnr = rng_.below(2) == 0;
  bdev::ErrorBdev& target = *bdevs[rng_.below(bdevs.size())];
  if (const Result<void> set = target.inject(rule); !set) {
    NVMF_ERRLOG(nvmf_perf, "chaos: error bdev %s refused the rule: %s (%s)",
                target.name().c_str(), errc_name(set.error().code), set.error().detail);
  }
}

void ChaosInjector::raise_qp_fatal(verbs::sim::SimProvider& side) noexcept {
  verbs::AsyncEvent event;
  event.type = verbs::AsyncEventType::qp_fatal;
  event.qp_num = pick_io_qp(side);
  if (event.qp_num == 0) return;
  // invalid_argument: the QP went away since qp_nums() (a reconnect); the next fault will do.
  (void)side.inject_async_event(event);
}

std::vector<std::pair<std::string, uint64_t>> ChaosInjector::injected() const {
  std::vector<std::pair<std::string, uint64_t>> counts;
  for (size_t i = 0; i < faults_.size(); ++i) counts.emplace_back(names_[i], injected_[i]);
  return counts;
}

std::vector<std::pair<std::string, uint64_t>> ChaosInjector::effects() const {
  const verbs::sim::SimCounters host = sim_.host_counters();
  const verbs::sim::SimCounters target = sim_.target_counters();
  uint64_t bdev_failed = 0;
  for (const bdev::ErrorBdev* bdev : sim_.error_bdevs()) bdev_failed += bdev->counters().failed;
  return {
      {"wrs_failed", host.injected_faults + target.injected_faults},
      {"qp_errors", host.qp_errors + target.qp_errors},
      {"async_events", host.async_events + target.async_events},
      {"connects_refused", host.rejects},
      {"bdev_ios_failed", bdev_failed},
  };
}

}  // namespace nvmf::perf
