// What nvmf_perf prints: the progress line each second, the result table and the --json
// document. Pure formatting over numbers the workers collected.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "histogram.h"

namespace nvmf::perf {

struct LatencySummaryUs {
  double avg = 0;
  double min = 0;
  double max = 0;
  double p50 = 0;
  double p99 = 0;
  double p999 = 0;
  double p9999 = 0;
};
LatencySummaryUs summarize_latency(const LatencyHistogram& histogram) noexcept;

// One row of the table (a worker's namespace, or the total).
struct ResultRow {
  std::string label;
  uint64_t ios = 0;     // completed, failed ones included
  uint64_t bytes = 0;   // of completed I/Os
  uint64_t errors = 0;  // completions with an error status
  uint64_t verify_failures = 0;
  double elapsed_s = 0;  // from the first submit to the last completion
  LatencySummaryUs latency;
  double iops() const noexcept { return elapsed_s > 0 ? ios / elapsed_s : 0; }
  double mibps() const noexcept {
    return elapsed_s > 0 ? static_cast<double>(bytes) / elapsed_s / (1024.0 * 1024.0) : 0;
  }
};

// The host's work behind the I/Os on the RDMA path: IoQpairStats' counts summed over every
// worker's queue pairs (reconnects included). Divided by the I/Os completed, what a
// memory-registration policy costs per I/O, free of timing noise; only the doorbells depend on
// timing (how many completions one poll finds).
struct HostWorkCounts {
  uint64_t sends = 0;              // SEND
  uint64_t binds = 0;              // BIND_MW
  uint64_t local_invalidates = 0;  // LOCAL_INV
  uint64_t signaled = 0;           // send-queue WRs asking for a completion
  uint64_t fenced = 0;             // send-queue WRs with IBV_SEND_FENCE
  uint64_t doorbells = 0;
  uint64_t cqes_reaped = 0;  // receives included
  uint64_t wrs() const noexcept { return sends + binds + local_invalidates; }
};

// --mode interrupt or adaptive (RDMA): what the workers' waiting cost, IoQpairStats' event
// counters summed over their queue pairs, and with -P 2 or more the sleeps on each worker's
// own epoll set of its queue pairs' event fds.
struct HostEventCounts {
  uint64_t waits = 0;          // IoQpair::wait_for_completions() calls
  uint64_t arms = 0;           // CQ notification requests
  uint64_t sleeps = 0;         // epoll_wait() calls on a queue pair's event fd
  uint64_t wakeups = 0;        // ... that ended with the fd readable
  uint64_t timer_wakeups = 0;  // ... because a queue pair's timer was due
  uint64_t worker_sleeps = 0;  // epoll_wait() calls on a worker's set (-P 2 or more)
};

// The simulated HCAs' own work (--sim): the work requests each took (post and doorbell) and the
// completions each wrote, the host's HCA and the target's, since the sim started (connects and
// queue set-up included: a few hundred). The sim has no clock of its own to read: its step
// clocks are per queue pair and also tick on polls that find nothing, so their count follows
// how often the threads poll. WRs taken plus CQEs written is the sim's work, time-free.
struct SimWorkCounts {
  uint64_t host_wrs = 0;
  uint64_t host_cqes = 0;
  uint64_t target_wrs = 0;
  uint64_t target_cqes = 0;
  // Payload bytes both HCAs copied, and those they did not (--sim-payload skip).
  uint64_t payload_bytes_copied = 0;
  uint64_t payload_bytes_skipped = 0;
  uint64_t steps() const noexcept { return host_wrs + host_cqes + target_wrs + target_cqes; }
};

// --memreg-switch-every(-ios): the key policy switches the workers' queue pairs made
// (IoQpairStats::memreg_switches and memreg_switch_failures, summed) and, per policy of the
// cycle, the time it was the one asked for (from each switch request to the next: the drain
// counts toward the policy drained to), summed over the workers' queue pairs.
struct MemregSwitching {
  bool on = false;
  uint64_t switches = 0;
  uint64_t failures = 0;
  std::vector<std::string> policies;  // each once, in the order of the cycle
  std::vector<double> seconds;        // parallel to policies
  void add_seconds(const std::string& policy, double more_seconds);
  // The share of policies[i] in all the time booked (0 when none was).
  double share(size_t i) const noexcept;
};

// Failed I/Os by what they failed with: an NVMe status (SCT, SC) or a submit refused for good.
// A fixed table, filled on the data path without allocating; kinds beyond it go to `other`.
struct FailureCounts {
  struct Kind {
    bool refused = false;  // no status: the queue refused the submit
    uint8_t sct = 0;
    uint8_t sc = 0;
    uint64_t count = 0;
  };
  static constexpr size_t kKindsMax = 8;  // more different statuses in one run than anyone reads
  std::array<Kind, kKindsMax> kinds{};
  size_t kinds_used = 0;
  uint64_t other = 0;
  void add(bool refused, uint8_t sct, uint8_t sc, uint64_t count = 1) noexcept;
  void merge(const FailureCounts& more) noexcept;
  // "Internal Error (SCT 0h SC 06h)", "refused": the kind's name in the report.
  static std::string name(const Kind& kind);
};

// The run's account: every I/O handed to a queue ends completed or failed with a status.
struct IoAccount {
  uint64_t submitted = 0;  // handed to a queue, refused submits included
  uint64_t completed = 0;  // with a success status
  uint64_t failed = 0;     // with an error status, or refused for good
  uint64_t in_flight = 0;  // neither when the run ended (0 after the drain)
  FailureCounts failures;  // `failed`, by kind
  void merge(const IoAccount& more) noexcept;
  bool balanced() const noexcept { return in_flight == 0 && submitted == completed + failed; }
};

struct Summary {
  ResultRow total;
  IoAccount account;
  // --chaos: failed I/Os are expected (the account and --verify decide the exit status); the
  // faults injected, by name, in the order of --chaos, and what the sim and the error bdevs
  // counted of them (ChaosInjector::effects()).
  bool chaos = false;
  std::vector<std::pair<std::string, uint64_t>> chaos_injected;
  std::vector<std::pair<std::string, uint64_t>> chaos_effects;
  uint64_t reconnects = 0;    // sum of ControllerStats::reconnects
  uint64_t busy_retries = 0;  // submits refused with busy and retried later
  uint64_t qp_errors = 0;       // IoQpairStats::qp_errors summed over the workers' qpairs
  uint64_t mw_bind_errors = 0;  // IoQpairStats::bind_errors, summed likewise: failed
                                // BIND_MW completions (the 2017 race's status 6, "memory
                                // management operation error")
  // Process CPU time (CLOCK_PROCESS_CPUTIME_ID) from the first submit to the last worker's
  // end: every thread of nvmf_perf, so with --sim the target's reactor as well, and with the
  // PCIe model the model's own work (it runs inside the workers' doorbell writes).
  double cpu_s = 0;
  // CPU time (getrusage RUSAGE_THREAD, user + system) of the workers' threads over their runs,
  // summed: the host side alone (worker 0 also polls the admin queue and prints the progress
  // line), without the in-process target of --sim.
  double host_cpu_s = 0;
  // The PCIe path (-r 'trtype:PCIe ...') only: IoQueueStats summed over the workers' queues.
  bool pcie = false;
  uint64_t bytes_copied = 0;    // through bounce buffers: 0 when the buffers are DMA memory
  uint64_t commands_split = 0;  // requests the driver split at the transfer limit (MDTS)
  uint64_t controller_resets = 0;  // ControllerStats::resets
  // The RDMA path only (-r trtype:RDMA or --sim).
  bool rdma = false;
  HostWorkCounts host_work;
  const char* mode = "poll";  // --mode (completion_mode_name)
  HostEventCounts host_events;  // with a mode other than poll
  bool sim = false;  // --sim: sim_work holds the simulated HCAs' counts
  SimWorkCounts sim_work;
  MemregSwitching memreg_switching;

  // Microseconds of process CPU per completed I/O; 0 without I/Os.
  double cpu_us_per_io() const noexcept {
    return total.ios > 0 ? cpu_s * 1e6 / static_cast<double>(total.ios) : 0;
  }
  // Microseconds of the workers' CPU per completed I/O; 0 without I/Os.
  double host_cpu_us_per_io() const noexcept {
    return total.ios > 0 ? host_cpu_s * 1e6 / static_cast<double>(total.ios) : 0;
  }
};

// "[  3 s] 123456 IOPS  482.25 MiB/s  errors 0": rates from the ios and bytes of the last
// interval; errors counted since the start (so one error stays in sight).
std::string progress_line(uint32_t second, uint64_t ios, uint64_t bytes, uint64_t errors,
                          double interval_s);

// The table: a header, one line per row, the total with percentiles, and a footer with
// reconnects, busy retries, QP errors and memory window bind errors, then the total IOPS with
// the CPU time per I/O beside it (the process's, then the host workers' threads'), on the RDMA
// path the work per I/O (and with --sim the sim's work steps per I/O) and, unless --mode poll,
// the workers' waits, and on the PCIe path the bytes copied, requests split and controller
// resets; with --memreg-switch-every(-ios) the switches and each policy's share of the time; then
// the account (account_lines()).
std::string format_table(const std::vector<ResultRow>& rows, const Summary& summary);

// {"iops","mibps","lat_us":{"avg","min","max","p50","p99","p999","p9999"},"ios","errors",
//  "reconnects","verify_failures"} in that order, then "busy_retries", "qp_errors",
// "mw_bind_errors", "cpu_us_per_io", "cpu_s", "account" (account_json()), "host_cpu_s" and
// "host_cpu_us_per_io"; on the RDMA path then "mode" (poll, interrupt, adaptive), without poll
// "host_events" ({"waits", "arms", "sleeps", "wakeups", "timer_wakeups", "worker_sleeps"}),
// "host_work" (the
// HostWorkCounts: "send", "bind_mw", "local_inv", "signaled", "fenced", "doorbells",
// "cqes_reaped"), with --sim "sim_work" ({"host": {"wrs", "cqes"}, "target": {...}}), and
// "per_io" (each host_work count, "wrs" = send + bind_mw + local_inv, and with --sim
// "sim_work_steps", each divided by the I/Os completed, 4 decimals); on the PCIe path
// "bytes_copied", "commands_split" and "controller_resets"; with --memreg-switch-every(-ios)
// "memreg_switches", "memreg_switch_failures" and "memreg_time_share" ({policy: share of the
// time, 4 decimals}, in the cycle's order); with --chaos "chaos" ({"injected": {fault: count},
// "effects": {counter: count}}). Callers may append more keys
// (e.g. "config").
nlohmann::ordered_json summary_json(const Summary& summary);

// "account: submitted=S completed=C failed=F inflight=0 verify_failures=0 ok" ("FAILED" instead
// of "ok" when submitted != completed + failed, I/Os are left in flight, or a read failed to
// verify), then, when some failed, "failed by status: Internal Error (SCT 0h SC 06h) 3, ...",
// and with --chaos "chaos: qp-error 4, drop 2, ...; effects: wrs_failed 5, ...". Each line
// ends with a newline.
std::string account_lines(const Summary& summary);
// {"submitted","completed","failed","inflight","verify_failures","ok","failed_by_status":
//  {name: count}}: the account line's numbers.
nlohmann::ordered_json account_json(const Summary& summary);
// The account balances and every read verified.
bool account_ok(const Summary& summary) noexcept;

// The exit status: 0 when the account balances, every read verified and (without --chaos) no
// I/O failed; 1 otherwise.
int summary_exit_status(const Summary& summary) noexcept;

}  // namespace nvmf::perf
