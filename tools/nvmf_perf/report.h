// What nvmf_perf prints: the progress line each second, the result table and the --json
// document. Pure formatting over numbers the workers collected.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
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

struct Summary {
  ResultRow total;
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
  // The PCIe path (-r 'trtype:PCIe ...') only: IoQueueStats summed over the workers' queues.
  bool pcie = false;
  uint64_t bytes_copied = 0;    // through bounce buffers: 0 when the buffers are DMA memory
  uint64_t commands_split = 0;  // requests the driver split at the transfer limit (MDTS)
  uint64_t controller_resets = 0;  // ControllerStats::resets

  // Microseconds of process CPU per completed I/O; 0 without I/Os.
  double cpu_us_per_io() const noexcept {
    return total.ios > 0 ? cpu_s * 1e6 / static_cast<double>(total.ios) : 0;
  }
};

// "[  3 s] 123456 IOPS  482.25 MiB/s  errors 0": rates from the ios and bytes of the last
// interval; errors counted since the start (so one error stays in sight).
std::string progress_line(uint32_t second, uint64_t ios, uint64_t bytes, uint64_t errors,
                          double interval_s);

// The table: a header, one line per row, the total with percentiles, and a footer with
// reconnects, busy retries, QP errors and memory window bind errors, then the total IOPS with
// the CPU time per I/O beside it, and on the PCIe path the bytes copied, requests split and
// controller resets.
std::string format_table(const std::vector<ResultRow>& rows, const Summary& summary);

// {"iops","mibps","lat_us":{"avg","min","max","p50","p99","p999","p9999"},"ios","errors",
//  "reconnects","verify_failures"} in that order, then "busy_retries", "qp_errors",
// "mw_bind_errors", "cpu_us_per_io" and "cpu_s"; on the PCIe path then "bytes_copied",
// "commands_split" and "controller_resets". Callers may append more keys (e.g. "config").
nlohmann::ordered_json summary_json(const Summary& summary);

// The exit status: 0 when no I/O failed and every read verified, 1 otherwise.
int summary_exit_status(const Summary& summary) noexcept;

}  // namespace nvmf::perf
