#include "report.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "spec/status.h"

namespace nvmf::perf {

namespace {

double us(uint64_t ns) noexcept { return static_cast<double>(ns) / 1000.0; }

// Two decimals are what spdk_nvme_perf prints; JSON gets the very digits the table shows
// (printf's rounding), so the two never disagree in the last place.
double round2(double value) noexcept {
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f", value);
  return std::strtod(text, nullptr);
}

// Per-I/O counts are ratios of integers: four decimals show a LOCAL_INV on one I/O in 10000.
double round4(double value) noexcept {
  char text[64];
  std::snprintf(text, sizeof(text), "%.4f", value);
  return std::strtod(text, nullptr);
}

double per_io(uint64_t count, uint64_t ios) noexcept {
  return ios > 0 ? static_cast<double>(count) / static_cast<double>(ios) : 0;
}

// HostWorkCounts under their JSON names: first the work requests (what wrs() adds up, in
// per_io after them), then the rest.
struct WorkCounter {
  const char* name;
  uint64_t HostWorkCounts::*count;
};
constexpr WorkCounter kWrCounters[] = {
    {"send", &HostWorkCounts::sends},
    {"bind_mw", &HostWorkCounts::binds},
    {"local_inv", &HostWorkCounts::local_invalidates},
};
constexpr WorkCounter kOtherWorkCounters[] = {
    {"signaled", &HostWorkCounts::signaled},
    {"fenced", &HostWorkCounts::fenced},
    {"doorbells", &HostWorkCounts::doorbells},
    {"cqes_reaped", &HostWorkCounts::cqes_reaped},
};

nlohmann::ordered_json host_work_json(const HostWorkCounts& work) {
  nlohmann::ordered_json json;
  for (const WorkCounter& counter : kWrCounters) json[counter.name] = work.*counter.count;
  for (const WorkCounter& counter : kOtherWorkCounters) json[counter.name] = work.*counter.count;
  return json;
}

nlohmann::ordered_json per_io_json(const Summary& summary) {
  const HostWorkCounts& work = summary.host_work;
  const uint64_t ios = summary.total.ios;
  nlohmann::ordered_json json;
  for (const WorkCounter& counter : kWrCounters) {
    json[counter.name] = round4(per_io(work.*counter.count, ios));
  }
  json["wrs"] = round4(per_io(work.wrs(), ios));
  for (const WorkCounter& counter : kOtherWorkCounters) {
    json[counter.name] = round4(per_io(work.*counter.count, ios));
  }
  if (summary.sim) {
    json["sim_work_steps"] = round4(per_io(summary.sim_work.steps(), ios));
    json["sim_payload_bytes_copied"] = round4(per_io(summary.sim_work.payload_bytes_copied, ios));
    json["sim_payload_bytes_skipped"] =
        round4(per_io(summary.sim_work.payload_bytes_skipped, ios));
  }
  return json;
}

// "per I/O: 3.00 WRs (1.00 SEND, 1.00 BIND_MW, 1.00 LOCAL_INV), 2.00 signaled, ..."
std::string per_io_line(const Summary& summary) {
  const HostWorkCounts& work = summary.host_work;
  const uint64_t ios = summary.total.ios;
  char line[400];
  std::snprintf(line, sizeof(line),
                "per I/O: %.2f WRs (%.2f SEND, %.2f BIND_MW, %.2f LOCAL_INV), %.2f signaled, "
                "%.2f fenced, %.2f doorbells, %.2f CQEs reaped",
                per_io(work.wrs(), ios), per_io(work.sends, ios), per_io(work.binds, ios),
                per_io(work.local_invalidates, ios), per_io(work.signaled, ios),
                per_io(work.fenced, ios), per_io(work.doorbells, ios),
                per_io(work.cqes_reaped, ios));
  std::string text = line;
  if (summary.sim) {
    std::snprintf(line, sizeof(line),
                  "; sim: %.2f work steps (WRs taken + CQEs written), payload bytes %.0f "
                  "copied, %.0f skipped",
                  per_io(summary.sim_work.steps(), ios),
                  per_io(summary.sim_work.payload_bytes_copied, ios),
                  per_io(summary.sim_work.payload_bytes_skipped, ios));
    text += line;
  }
  return text + "\n";
}

// "mode interrupt: 1200 waits, 1000 sleeps (900 woken by the fd, 10 of them by a timer), 1100
// CQ arms, 0 worker sleeps"
std::string host_events_line(const Summary& summary) {
  const HostEventCounts& events = summary.host_events;
  char line[256];
  std::snprintf(line, sizeof(line),
                "mode %s: %" PRIu64 " waits, %" PRIu64 " sleeps (%" PRIu64
                " woken by the fd, %" PRIu64 " of them by a timer), %" PRIu64 " CQ arms, %" PRIu64
                " worker sleeps\n",
                summary.mode, events.waits, events.sleeps, events.wakeups, events.timer_wakeups,
                events.arms, events.worker_sleeps);
  return line;
}

nlohmann::ordered_json host_events_json(const HostEventCounts& events) {
  return {{"waits", events.waits},
          {"arms", events.arms},
          {"sleeps", events.sleeps},
          {"wakeups", events.wakeups},
          {"timer_wakeups", events.timer_wakeups},
          {"worker_sleeps", events.worker_sleeps}};
}

// "memreg switches: 40 (0 failed); time per policy: global 25.0%, sagi 25.0%, ..."
std::string memreg_switching_line(const MemregSwitching& switching) {
  char line[128];
  std::snprintf(line, sizeof(line),
                "memreg switches: %" PRIu64 " (%" PRIu64 " failed); time per policy:",
                switching.switches, switching.failures);
  std::string text = line;
  for (size_t i = 0; i < switching.policies.size(); ++i) {
    std::snprintf(line, sizeof(line), "%s %s %.1f%%", i == 0 ? "" : ",",
                  switching.policies[i].c_str(), 100.0 * switching.share(i));
    text += line;
  }
  return text + "\n";
}

// " a 1, b 2" (nothing when empty).
std::string counts_text(const std::vector<std::pair<std::string, uint64_t>>& counts) {
  std::string text;
  for (size_t i = 0; i < counts.size(); ++i) {
    text += (i == 0 ? " " : ", ") + counts[i].first + " " + std::to_string(counts[i].second);
  }
  return text;
}

nlohmann::ordered_json counts_json(const std::vector<std::pair<std::string, uint64_t>>& counts) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& [name, count] : counts) json[name] = count;
  return json;
}

}  // namespace

void MemregSwitching::add_seconds(const std::string& policy, double more_seconds) {
  for (size_t i = 0; i < policies.size(); ++i) {
    if (policies[i] == policy) {
      seconds[i] += more_seconds;
      return;
    }
  }
  policies.push_back(policy);
  seconds.push_back(more_seconds);
}

double MemregSwitching::share(size_t i) const noexcept {
  double total = 0;
  for (double s : seconds) total += s;
  return total > 0 ? seconds[i] / total : 0;
}

LatencySummaryUs summarize_latency(const LatencyHistogram& histogram) noexcept {
  LatencySummaryUs summary;
  if (histogram.count() == 0) return summary;
  summary.avg = histogram.mean() / 1000.0;
  summary.min = us(histogram.min());
  summary.max = us(histogram.max());
  summary.p50 = us(histogram.value_at_percentile(50.0));
  summary.p99 = us(histogram.value_at_percentile(99.0));
  summary.p999 = us(histogram.value_at_percentile(99.9));
  summary.p9999 = us(histogram.value_at_percentile(99.99));
  return summary;
}

std::string progress_line(uint32_t second, uint64_t ios, uint64_t bytes, uint64_t errors,
                          double interval_s) {
  const double seconds = interval_s > 0 ? interval_s : 1.0;
  char line[160];
  std::snprintf(line, sizeof(line), "[%3" PRIu32 " s] %.0f IOPS  %.2f MiB/s  errors %" PRIu64,
                second, static_cast<double>(ios) / seconds,
                static_cast<double>(bytes) / seconds / (1024.0 * 1024.0), errors);
  return line;
}

std::string format_table(const std::vector<ResultRow>& rows, const Summary& summary) {
  std::string table;
  char line[512];
  std::snprintf(line, sizeof(line), "%-28s %12s %10s %10s %10s %10s %10s %10s %10s %10s %8s %8s\n",
                "", "IOPS", "MiB/s", "avg us", "min us", "max us", "p50 us", "p99 us",
                "p99.9 us", "p99.99 us", "errors", "verify");
  table += line;
  auto add = [&](const ResultRow& row) {
    std::snprintf(line, sizeof(line),
                  "%-28s %12.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %8" PRIu64
                  " %8" PRIu64 "\n",
                  row.label.c_str(), row.iops(), row.mibps(), row.latency.avg, row.latency.min,
                  row.latency.max, row.latency.p50, row.latency.p99, row.latency.p999,
                  row.latency.p9999, row.errors, row.verify_failures);
    table += line;
  };
  for (const ResultRow& row : rows) add(row);
  table += std::string(28 + 13 * 1 + 11 * 9 + 9 * 2, '-') + "\n";
  add(summary.total);
  std::snprintf(line, sizeof(line),
                "%" PRIu64 " I/Os, %" PRIu64 " I/O errors, %" PRIu64 " verify failures, %" PRIu64
                " reconnects, %" PRIu64 " busy retries, %" PRIu64 " QP errors, %" PRIu64
                " MW bind errors\n",
                summary.total.ios, summary.total.errors, summary.total.verify_failures,
                summary.reconnects, summary.busy_retries, summary.qp_errors,
                summary.mw_bind_errors);
  table += line;
  std::snprintf(line, sizeof(line),
                "%.2f IOPS, %.2f us CPU per I/O (%.2f s process CPU for %" PRIu64
                " I/Os); host workers %.2f s CPU, %.2f us per I/O\n",
                summary.total.iops(), summary.cpu_us_per_io(), summary.cpu_s, summary.total.ios,
                summary.host_cpu_s, summary.host_cpu_us_per_io());
  table += line;
  if (summary.rdma) table += per_io_line(summary);
  if (summary.rdma && std::string_view(summary.mode) != "poll") table += host_events_line(summary);
  if (summary.memreg_switching.on) table += memreg_switching_line(summary.memreg_switching);
  table += account_lines(summary);
  if (summary.pcie) {
    std::snprintf(line, sizeof(line),
                  "PCIe: %" PRIu64 " bytes copied through bounce buffers, %" PRIu64
                  " requests split, %" PRIu64 " controller resets\n",
                  summary.bytes_copied, summary.commands_split, summary.controller_resets);
    table += line;
  }
  return table;
}

nlohmann::ordered_json summary_json(const Summary& summary) {
  const ResultRow& total = summary.total;
  nlohmann::ordered_json json;
  json["iops"] = round2(total.iops());
  json["mibps"] = round2(total.mibps());
  nlohmann::ordered_json latency;
  latency["avg"] = round2(total.latency.avg);
  latency["min"] = round2(total.latency.min);
  latency["max"] = round2(total.latency.max);
  latency["p50"] = round2(total.latency.p50);
  latency["p99"] = round2(total.latency.p99);
  latency["p999"] = round2(total.latency.p999);
  latency["p9999"] = round2(total.latency.p9999);
  json["lat_us"] = std::move(latency);
  json["ios"] = total.ios;
  json["errors"] = total.errors;
  json["reconnects"] = summary.reconnects;
  json["verify_failures"] = total.verify_failures;
  json["busy_retries"] = summary.busy_retries;
  json["qp_errors"] = summary.qp_errors;
  json["mw_bind_errors"] = summary.mw_bind_errors;
  json["cpu_us_per_io"] = round2(summary.cpu_us_per_io());
  json["cpu_s"] = round2(summary.cpu_s);
  json["account"] = account_json(summary);
  json["host_cpu_s"] = round2(summary.host_cpu_s);
  json["host_cpu_us_per_io"] = round2(summary.host_cpu_us_per_io());
  if (summary.rdma) {
    json["mode"] = summary.mode;
    if (std::string_view(summary.mode) != "poll") {
      json["host_events"] = host_events_json(summary.host_events);
    }
    json["host_work"] = host_work_json(summary.host_work);
    if (summary.sim) {
      const SimWorkCounts& sim = summary.sim_work;
      json["sim_work"] = {{"host", {{"wrs", sim.host_wrs}, {"cqes", sim.host_cqes}}},
                          {"target", {{"wrs", sim.target_wrs}, {"cqes", sim.target_cqes}}}};
    }
    json["per_io"] = per_io_json(summary);
  }
  const MemregSwitching& switching = summary.memreg_switching;
  if (switching.on) {
    json["memreg_switches"] = switching.switches;
    json["memreg_switch_failures"] = switching.failures;
    nlohmann::ordered_json share = nlohmann::ordered_json::object();
    for (size_t i = 0; i < switching.policies.size(); ++i) {
      share[switching.policies[i]] = round4(switching.share(i));
    }
    json["memreg_time_share"] = std::move(share);
  }
  if (summary.pcie) {
    json["bytes_copied"] = summary.bytes_copied;
    json["commands_split"] = summary.commands_split;
    json["controller_resets"] = summary.controller_resets;
  }
  if (summary.chaos) {
    json["chaos"] = {{"injected", counts_json(summary.chaos_injected)},
                     {"effects", counts_json(summary.chaos_effects)}};
  }
  return json;
}

void FailureCounts::add(bool refused, uint8_t sct, uint8_t sc, uint64_t count) noexcept {
  for (size_t i = 0; i < kinds_used; ++i) {
    Kind& kind = kinds[i];
    if (kind.refused == refused && kind.sct == sct && kind.sc == sc) {
      kind.count += count;
      return;
    }
  }
  if (kinds_used == kKindsMax) {
    other += count;
    return;
  }
  kinds[kinds_used++] = Kind{refused, sct, sc, count};
}

void FailureCounts::merge(const FailureCounts& more) noexcept {
  for (size_t i = 0; i < more.kinds_used; ++i) {
    const Kind& kind = more.kinds[i];
    add(kind.refused, kind.sct, kind.sc, kind.count);
  }
  other += more.other;
}

std::string FailureCounts::name(const Kind& kind) {
  if (kind.refused) return "refused";
  char text[96];
  std::snprintf(text, sizeof(text), "%s (SCT %" PRIx8 "h SC %02" PRIx8 "h)",
                spec::status_name(kind.sct, kind.sc), kind.sct, kind.sc);
  return text;
}

void IoAccount::merge(const IoAccount& more) noexcept {
  submitted += more.submitted;
  completed += more.completed;
  failed += more.failed;
  in_flight += more.in_flight;
  failures.merge(more.failures);
}

bool account_ok(const Summary& summary) noexcept {
  return summary.account.balanced() && summary.total.verify_failures == 0;
}

std::string account_lines(const Summary& summary) {
  const IoAccount& account = summary.account;
  char line[256];
  std::snprintf(line, sizeof(line),
                "account: submitted=%" PRIu64 " completed=%" PRIu64 " failed=%" PRIu64
                " inflight=%" PRIu64 " verify_failures=%" PRIu64 " %s\n",
                account.submitted, account.completed, account.failed, account.in_flight,
                summary.total.verify_failures, account_ok(summary) ? "ok" : "FAILED");
  std::string text = line;
  const FailureCounts& failures = account.failures;
  if (failures.kinds_used > 0 || failures.other > 0) {
    text += "failed by status:";
    for (size_t i = 0; i < failures.kinds_used; ++i) {
      text += (i == 0 ? " " : ", ") + FailureCounts::name(failures.kinds[i]) + " " +
              std::to_string(failures.kinds[i].count);
    }
    if (failures.other > 0) text += ", other " + std::to_string(failures.other);
    text += "\n";
  }
  if (summary.chaos) {
    text += "chaos:" + counts_text(summary.chaos_injected) +
            "; effects:" + counts_text(summary.chaos_effects) + "\n";
  }
  return text;
}

nlohmann::ordered_json account_json(const Summary& summary) {
  const IoAccount& account = summary.account;
  nlohmann::ordered_json json;
  json["submitted"] = account.submitted;
  json["completed"] = account.completed;
  json["failed"] = account.failed;
  json["inflight"] = account.in_flight;
  json["verify_failures"] = summary.total.verify_failures;
  json["ok"] = account_ok(summary);
  nlohmann::ordered_json by_status = nlohmann::ordered_json::object();
  const FailureCounts& failures = account.failures;
  for (size_t i = 0; i < failures.kinds_used; ++i) {
    by_status[FailureCounts::name(failures.kinds[i])] = failures.kinds[i].count;
  }
  if (failures.other > 0) by_status["other"] = failures.other;
  json["failed_by_status"] = std::move(by_status);
  return json;
}

int summary_exit_status(const Summary& summary) noexcept {
  if (!account_ok(summary)) return 1;
  return summary.chaos || summary.total.errors == 0 ? 0 : 1;
}

}  // namespace nvmf::perf
