#include "run_workers.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <thread>

#include "common/log.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

constexpr uint64_t kNsPerSecond = 1000ull * 1000 * 1000;
// The control path is polled this often: keep-alives go out every KATO/2 (5 s by default) and
// async events should not wait long; 1 ms costs nothing measurable.
constexpr uint64_t kControlPollIntervalNs = 1000ull * 1000;

std::atomic<bool> g_stop_requested{false};

void on_signal(int) { g_stop_requested.store(true, std::memory_order_relaxed); }

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills a run stuck in its drain
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

void pin_current_thread(int cpu, uint32_t worker) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    NVMF_WARNLOG(nvmf_perf,
                 "worker %" PRIu32 ": cannot pin to core %d (error %d); running unpinned", worker,
                 cpu, rc);
  }
}

// CPU time of every thread of the process so far.
double process_cpu_s() noexcept {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// The main thread's duties between its own I/O polls: the control path and the progress line.
struct MainDuties {
  ControlPoll control;
  const std::vector<std::unique_ptr<Worker>>* workers = nullptr;
  uint64_t next_control_ns = 0;
  uint64_t last_progress_ns = 0;
  uint32_t second = 0;
  uint64_t last_ios = 0;
  uint64_t last_bytes = 0;

  void poll_control() {
    if (control.poll != nullptr) control.poll(control.ctx);
  }

  static void tick(void* ctx, uint64_t now_ns) noexcept {
    auto* duties = static_cast<MainDuties*>(ctx);
    if (now_ns >= duties->next_control_ns) {
      duties->poll_control();
      duties->next_control_ns = now_ns + kControlPollIntervalNs;
    }
    if (now_ns - duties->last_progress_ns >= kNsPerSecond) duties->progress(now_ns);
  }

  void progress(uint64_t now_ns) {
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    for (const auto& worker : *workers) {
      const LiveCounters& live = worker->core().live();
      ios += live.ios.load(std::memory_order_relaxed);
      bytes += live.bytes.load(std::memory_order_relaxed);
      errors += live.errors.load(std::memory_order_relaxed);
    }
    ++second;
    const double interval_s = static_cast<double>(now_ns - last_progress_ns) / kNsPerSecond;
    std::printf(
        "%s\n",
        progress_line(second, ios - last_ios, bytes - last_bytes, errors, interval_s).c_str());
    std::fflush(stdout);
    last_ios = ios;
    last_bytes = bytes;
    last_progress_ns = now_ns;
  }
};

// One run's rendezvous between the main thread (worker 0) and the other workers' threads.
struct Launch {
  Launch(const Settings& settings_in, const CoreLayout& cores_in,
         std::vector<std::unique_ptr<Worker>>& workers_in)
      : settings(settings_in),
        cores(cores_in),
        workers(workers_in),
        setup_errors(settings_in.cores),
        usage_errors(settings_in.cores, 0) {}

  const Settings& settings;
  const CoreLayout& cores;
  std::vector<std::unique_ptr<Worker>>& workers;
  std::atomic<int> go{0};  // 0 = wait, 1 = go, 2 = abort (a worker's setup failed)
  std::atomic<uint64_t> deadline_ns{0};
  // Workers other than 0 that finished setup(), run() and teardown().
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> ran{0};
  std::atomic<uint32_t> finished{0};
  std::vector<std::string> setup_errors;
  std::vector<char> usage_errors;

  void setup(uint32_t i) {
    bool usage_error = false;
    setup_errors[i] = workers[i]->setup(&usage_error);
    usage_errors[i] = usage_error;
  }

  // Worker i > 0, on its own thread.
  void thread_main(uint32_t i) {
    pin_current_thread(cores.host_core(i), i);
    setup(i);
    ready.fetch_add(1, std::memory_order_release);
    go.wait(0, std::memory_order_acquire);
    if (go.load(std::memory_order_acquire) == 1 && setup_errors[i].empty()) {
      workers[i]->run(deadline_ns.load(std::memory_order_relaxed), Ticker{});
    }
    ran.fetch_add(1, std::memory_order_release);
    workers[i]->teardown();
    finished.fetch_add(1, std::memory_order_release);
  }

  // 0, or the worst setup failure (usage errors are 2), each reason printed.
  int setup_status() const {
    int status = 0;
    for (uint32_t i = 0; i < settings.cores; ++i) {
      if (setup_errors[i].empty()) continue;
      status = usage_errors[i] ? 2 : std::max(status, 1);
      std::fprintf(stderr, "nvmf_perf: %s\n", setup_errors[i].c_str());
    }
    return status;
  }
};

}  // namespace

CoreLayout plan_cores(const Settings& settings) {
  CoreLayout layout;
  layout.host_cores = allowed_cpus();
  if (settings.sim && layout.host_cores.size() >= 2) {
    layout.target_core = layout.host_cores.back();
    layout.host_cores.pop_back();
  }
  if (settings.cores > layout.host_cores.size() && !layout.host_cores.empty()) {
    NVMF_WARNLOG(nvmf_perf, "%" PRIu32 " workers share %zu cores: they will slow each other down",
                 settings.cores, layout.host_cores.size());
  }
  return layout;
}

const std::atomic<bool>* stop_requested() noexcept { return &g_stop_requested; }

int check_namespace_fits(const Settings& settings, const NamespaceShape& ns, std::string* reason) {
  if (ns.block_size_bytes == 0 || settings.io_size_bytes % ns.block_size_bytes != 0) {
    *reason = "-o " + std::to_string(settings.io_size_bytes) + " is not a multiple of namespace " +
              std::to_string(ns.nsid) + "'s block size " + std::to_string(ns.block_size_bytes);
    return 2;
  }
  const uint64_t capacity_bytes = ns.block_count * ns.block_size_bytes;
  if (capacity_bytes < settings.io_size_bytes) {
    *reason = "namespace " + std::to_string(ns.nsid) + " (" + std::to_string(capacity_bytes) +
              " bytes) is smaller than one I/O of -o " + std::to_string(settings.io_size_bytes);
    return 2;
  }
  return 0;
}

void print_banner(const Settings& settings, const std::string& target, size_t ns_count) {
  char qpairs[48] = "";
  if (settings.qpairs_per_worker > 1) {
    std::snprintf(qpairs, sizeof(qpairs), " (-P %" PRIu32 " queue pairs each)",
                  settings.qpairs_per_worker);
  }
  char number_ios[48] = "";
  if (settings.number_ios != 0) {
    std::snprintf(number_ios, sizeof(number_ios), " or -d %" PRIu64 " I/Os", settings.number_ios);
  }
  std::printf("nvmf_perf: %s, %s, -q %" PRIu32 " x %zu namespaces x %" PRIu32
              " workers%s, -o %" PRIu32 ", %" PRIu32 " s%s%s\n",
              target.c_str(), workload_name(settings.workload), settings.queue_depth, ns_count,
              settings.cores, qpairs, settings.io_size_bytes, settings.time_s, number_ios,
              settings.verify ? ", verify" : "");
  std::fflush(stdout);
}

void note_early_stop() {
  if (g_stop_requested.load(std::memory_order_relaxed)) {
    NVMF_NOTICELOG(nvmf_perf, "stopped early by a signal");
  }
}

int run_workers(const Settings& settings, const CoreLayout& cores, const Clock& clock,
                std::vector<std::unique_ptr<Worker>>& workers, ControlPoll control, double* cpu_s) {
  Launch launch(settings, cores, workers);
  install_signal_handlers();
  std::vector<std::thread> threads;
  for (uint32_t i = 1; i < settings.cores; ++i) {
    threads.emplace_back([&launch, i] { launch.thread_main(i); });
  }
  pin_current_thread(cores.host_core(0), 0);
  MainDuties duties;
  duties.control = control;
  duties.workers = &workers;
  launch.setup(0);
  // Keep the control path alive while the other workers set up (and later finish).
  auto wait_for = [&](std::atomic<uint32_t>& counter) {
    while (counter.load(std::memory_order_acquire) < settings.cores - 1) {
      duties.poll_control();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  wait_for(launch.ready);
  const int status = launch.setup_status();
  const double cpu_start_s = process_cpu_s();
  const uint64_t start_ns = clock.now_ns();
  launch.deadline_ns.store(start_ns + settings.time_s * kNsPerSecond, std::memory_order_relaxed);
  launch.go.store(status == 0 ? 1 : 2, std::memory_order_release);
  launch.go.notify_all();
  if (status == 0) {
    duties.last_progress_ns = start_ns;
    workers[0]->run(launch.deadline_ns.load(std::memory_order_relaxed),
                    Ticker{&MainDuties::tick, &duties});
  }
  wait_for(launch.ran);
  *cpu_s = process_cpu_s() - cpu_start_s;
  workers[0]->teardown();
  wait_for(launch.finished);
  for (std::thread& thread : threads) thread.join();
  return status;
}

Summary summarize(const std::vector<std::unique_ptr<Worker>>& workers, std::vector<ResultRow>* rows,
                  double cpu_s) {
  LatencyHistogram total_latency;
  Summary summary;
  summary.total.label = "Total";
  for (const auto& worker : workers) {
    const WorkerCore& core = worker->core();
    for (const ResultRow& row : core.rows()) {
      summary.total.ios += row.ios;
      summary.total.bytes += row.bytes;
      summary.total.errors += row.errors;
      summary.total.verify_failures += row.verify_failures;
      rows->push_back(row);
    }
    core.merge_latency_into(&total_latency);
    summary.total.elapsed_s = std::max(summary.total.elapsed_s, core.elapsed_s());
    summary.busy_retries += core.busy_retries();
    summary.host_cpu_s += core.cpu_s();
    summary.account.merge(core.account());
    worker->add_counters(&summary);
  }
  summary.total.latency = summarize_latency(total_latency);
  summary.cpu_s = cpu_s;
  return summary;
}

nlohmann::ordered_json config_json(const Settings& settings, uint32_t ns_count,
                                   uint32_t queue_entries) {
  nlohmann::ordered_json config;
  config["target"] = settings.sim ? "sim" : settings.trid;
  config["workload"] = workload_name(settings.workload);
  config["read_percent"] = settings.read_percent;
  config["io_size"] = settings.io_size_bytes;
  config["queue_depth"] = settings.queue_depth;
  config["time_s"] = settings.time_s;
  if (settings.number_ios != 0) config["number_ios"] = settings.number_ios;
  config["cores"] = settings.cores;
  if (!settings.pcie) config["qpairs_per_worker"] = settings.qpairs_per_worker;
  config["ns_count"] = ns_count;
  config["io_queue_size"] = queue_entries;
  if (!settings.pcie) config["memreg"] = settings.memreg;
  if (settings.memreg_switching()) {
    if (settings.memreg_switch_every_s > 0) {
      config["memreg_switch_every_s"] = settings.memreg_switch_every_s;
    } else {
      config["memreg_switch_every_ios"] = settings.memreg_switch_every_ios;
    }
    config["memreg_switch_policies"] = settings.memreg_switch_policies;
  }
  if (!settings.pcie) config["mode"] = completion_mode_name(settings.mode);
  if (settings.mode == CompletionMode::adaptive) {
    config["adaptive_idle_us"] = settings.adaptive_idle_us;
  }
  config["verify"] = settings.verify;
  config["seed"] = settings.seed;
  if (settings.pcie) config["pci_address"] = settings.pci_address;
  if (settings.pcie_model()) config["model_ns_bytes"] = settings.sim_bdev_bytes;
  if (settings.sim) {
    static constexpr const char* kBdevNames[] = {"null", "malloc", "nvme"};  // SimBdevKind
    config["sim_bdev"] = kBdevNames[static_cast<size_t>(settings.sim_bdev)];
    config["sim_bdev_bytes"] = settings.sim_bdev_bytes;
    config["sim_profile"] = settings.sim_profile;
    config["sim_remote_invalidate"] = settings.sim_remote_invalidate;
    config["sim_payload"] = settings.sim_payload_skip ? "skip" : "copy";
    config["sim_send_fence"] = settings.sim_send_fence;  // as given; config.sim: as applied
    if (settings.sim_race_one_in != 0) config["sim_race_one_in"] = settings.sim_race_one_in;
    if (!settings.chaos_faults.empty()) {
      config["chaos"] = settings.chaos_faults;
      config["chaos_every_ms"] = settings.chaos_every_ms;
    }
  }
  return config;
}

std::string open_json(const Settings& settings, std::ofstream* file) {
  if (settings.json_path.empty()) return "";
  file->open(settings.json_path, std::ios::out | std::ios::trunc);
  if (!*file) return "--json: cannot write '" + settings.json_path + "'";
  return "";
}

int write_json(const Settings& settings, std::ofstream* file, const nlohmann::ordered_json& json) {
  if (!file->is_open()) return 0;
  *file << json.dump(2) << "\n";
  file->close();
  if (*file) return 0;
  std::fprintf(stderr, "nvmf_perf: --json: writing '%s' failed\n", settings.json_path.c_str());
  return 1;
}

}  // namespace nvmf::perf
