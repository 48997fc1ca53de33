// What both of nvmf_perf's paths (RDMA in run.cpp, PCIe in pcie_run.cpp) do once their
// workers exist: place them on cores, set each up on its own thread, start them together, show
// the progress line, measure the process CPU time of the I/O phase, collect the results, and
// print the table and the --json document.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "options.h"
#include "report.h"
#include "worker.h"

namespace nvmf::perf {

// Where things run: with --sim and two or more cores the target's reactor takes the last core
// and the workers the others (round robin when there are more workers than cores).
struct CoreLayout {
  int target_core = -1;
  std::vector<int> host_cores;
  int host_core(uint32_t worker) const {
    return host_cores.empty() ? -1 : host_cores[worker % host_cores.size()];
  }
};
CoreLayout plan_cores(const Settings& settings);

// Set by SIGINT / SIGTERM while run_workers() runs: the workers stop early, drain and report.
const std::atomic<bool>* stop_requested() noexcept;

// The main thread's control-path duty between its I/O polls, at most once a millisecond, and
// while it waits for the other workers: the RDMA controller's admin queue (keep-alives, async
// events). nullptr for none (a PCIe controller polls its admin queue on its own thread).
struct ControlPoll {
  void (*poll)(void* ctx) = nullptr;
  void* ctx = nullptr;
};

// 0 when -o is whole blocks of the namespace and fits in it; else 2 with *reason.
int check_namespace_fits(const Settings& settings, const NamespaceShape& ns, std::string* reason);

// "nvmf_perf: TARGET, randrw, -q 32 x 1 namespaces x 1 workers, -o 4096, 10 s, verify"; with
// -P 2 "... x 1 workers (-P 2 queue pairs each), ..."; with -d 1000 "..., 10 s or -d 1000
// I/Os, ..."
void print_banner(const Settings& settings, const std::string& target, size_t ns_count);

// Logs that a signal ended the run early, if one did.
void note_early_stop();

// Sets every worker up on its own thread (worker 0 on the calling thread), starts them at
// once for settings.time_s, prints a progress line each second, tears them down. Returns 0,
// or 1 / 2 when a worker's setup failed (the reasons are printed; 2 for usage errors); then
// nothing ran. *cpu_s: process CPU seconds from the start to the end of the I/O.
// `clock` is the workers' (their deadline is read on it).
int run_workers(const Settings& settings, const CoreLayout& cores, const Clock& clock,
                std::vector<std::unique_ptr<Worker>>& workers, ControlPoll control, double* cpu_s);

// The totals of every worker's rows and counters (Worker::add_counters()).
Summary summarize(const std::vector<std::unique_ptr<Worker>>& workers, std::vector<ResultRow>* rows,
                  double cpu_s);

// The settings every path reports under "config"; the path adds its own keys.
nlohmann::ordered_json config_json(const Settings& settings, uint32_t ns_count,
                                   uint32_t queue_entries);

// Opens --json before the run, so an unwritable path fails before minutes of I/O. "" or the
// reason (a usage error).
std::string open_json(const Settings& settings, std::ofstream* file);
// Writes `json` into the file open_json() opened (if any). 0, or 1 when writing failed.
int write_json(const Settings& settings, std::ofstream* file, const nlohmann::ordered_json& json);

}  // namespace nvmf::perf
