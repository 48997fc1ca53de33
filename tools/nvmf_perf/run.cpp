#include "run.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "nvmf/host.h"
#include "report.h"
#include "sim_target.h"
#include "worker.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

constexpr uint64_t kNsPerSecond = 1000ull * 1000 * 1000;
// The admin queue is polled this often: keep-alives go out every KATO/2 (5 s by default) and
// async events should not wait long; 1 ms costs nothing measurable.
constexpr uint64_t kAdminPollIntervalNs = 1000ull * 1000;

std::atomic<bool> g_stop_requested{false};

void on_signal(int) { g_stop_requested.store(true, std::memory_order_relaxed); }

int fail(int status, const std::string& reason) {
  std::fprintf(stderr, "nvmf_perf: %s\n", reason.c_str());
  return status;
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
    NVMF_WARNLOG(nvmf_perf, "worker %" PRIu32 ": cannot pin to core %d (error %d); running unpinned",
                 worker, cpu, rc);
  }
}

// Where things run: with --sim and two or more cores the target's reactor takes the last core
// and the workers the others (round robin when there are more workers than cores).
struct CoreLayout {
  int target_core = -1;
  std::vector<int> host_cores;
  int host_core(uint32_t worker) const {
    return host_cores.empty() ? -1 : host_cores[worker % host_cores.size()];
  }
};

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

// The main thread's duties between its own I/O polls: the admin queue and the progress line.
struct MainDuties {
  host::Controller* controller = nullptr;
  std::mutex* controller_mutex = nullptr;
  const std::vector<std::unique_ptr<Worker>>* workers = nullptr;
  uint64_t next_admin_ns = 0;
  uint64_t last_progress_ns = 0;
  uint32_t second = 0;
  uint64_t last_ios = 0;
  uint64_t last_bytes = 0;

  void poll_admin() {
    std::lock_guard<std::mutex> lock(*controller_mutex);
    controller->process_admin_completions();
  }

  static void tick(void* ctx, uint64_t now_ns) noexcept {
    auto* duties = static_cast<MainDuties*>(ctx);
    if (now_ns >= duties->next_admin_ns) {
      duties->poll_admin();
      duties->next_admin_ns = now_ns + kAdminPollIntervalNs;
    }
    if (now_ns - duties->last_progress_ns >= kNsPerSecond) duties->progress(now_ns);
  }

  void progress(uint64_t now_ns) {
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    for (const auto& worker : *workers) {
      ios += worker->live().ios.load(std::memory_order_relaxed);
      bytes += worker->live().bytes.load(std::memory_order_relaxed);
      errors += worker->live().errors.load(std::memory_order_relaxed);
    }
    ++second;
    const double interval_s = static_cast<double>(now_ns - last_progress_ns) / kNsPerSecond;
    std::printf("%s\n",
                progress_line(second, ios - last_ios, bytes - last_bytes, errors, interval_s).c_str());
    std::fflush(stdout);
    last_ios = ios;
    last_bytes = bytes;
    last_progress_ns = now_ns;
  }
};

nlohmann::ordered_json config_json(const Settings& settings, const std::string& trid,
                                   uint32_t ns_count, uint32_t queue_entries) {
  nlohmann::ordered_json config;
  config["target"] = settings.sim ? "sim" : trid;
  config["workload"] = workload_name(settings.workload);
  config["read_percent"] = settings.read_percent;
  config["io_size"] = settings.io_size_bytes;
  config["queue_depth"] = settings.queue_depth;
  config["time_s"] = settings.time_s;
  config["cores"] = settings.cores;
  config["ns_count"] = ns_count;
  config["io_queue_size"] = queue_entries;
  config["memreg"] = settings.memreg;
  config["verify"] = settings.verify;
  config["seed"] = settings.seed;
  if (settings.sim) {
    config["sim_bdev"] = settings.sim_bdev == SimBdevKind::null     ? "null"
                         : settings.sim_bdev == SimBdevKind::malloc ? "malloc"
                                                                    : "nvme";
    config["sim_bdev_bytes"] = settings.sim_bdev_bytes;
    config["sim_profile"] = settings.sim_profile;
    config["sim_remote_invalidate"] = settings.sim_remote_invalidate;
  }
  return config;
}

}  // namespace

int run(const Settings& settings) {
  LogLevel level = LogLevel::notice;
  (void)log_level_parse(settings.log_level.c_str(), &level);  // check_options checked it
  log_set_level(level);

  // Names check_options accepted must be names the libraries accept.
  host::MemregPolicy memreg = host::MemregPolicy::global;
  if (!host::memreg_policy_parse(settings.memreg, &memreg)) {
    return fail(2, "--memreg: '" + settings.memreg + "' is not known to libnvmf_host");
  }
  verbs::sim::SimProfile profile = verbs::sim::SimProfile::rxe;
  if (settings.sim && !verbs::sim::sim_profile_parse(settings.sim_profile.c_str(), &profile)) {
    return fail(2, "--sim-profile: '" + settings.sim_profile + "' is not known to the sim");
  }

  const std::string trid_text = settings.sim ? SimTarget::trid_string() : settings.trid;
  std::string message;
  auto trid = host::TransportId::parse(trid_text, &message);
  if (!trid) return fail(2, "-r: " + message);

  // Fail on an unwritable --json before running for minutes.
  std::ofstream json_file;
  if (!settings.json_path.empty()) {
    json_file.open(settings.json_path, std::ios::out | std::ios::trunc);
    if (!json_file) return fail(2, "--json: cannot write '" + settings.json_path + "'");
  }

  const CoreLayout cores = plan_cores(settings);
  // With --sim the namespace count is known now, so the target's limits can fit the queues.
  uint32_t queue_entries = kIoQueueSizeDefault;
  if (settings.ns_count != 0) {
    const std::string reason = io_queue_entries(settings, settings.ns_count, &queue_entries);
    if (!reason.empty()) return fail(2, reason);
  }

  std::unique_ptr<SimTarget> sim;
  if (settings.sim) {
    SimTargetOpts sim_opts;
    sim_opts.profile = profile;
    sim_opts.seed = settings.seed;
    sim_opts.ns_count = settings.ns_count;
    sim_opts.bdev = settings.sim_bdev;
    sim_opts.bdev_bytes = settings.sim_bdev_bytes;
    sim_opts.send_with_invalidate = settings.sim_remote_invalidate
                                        ? transport_rdma::SendWithInvalidate::automatic
                                        : transport_rdma::SendWithInvalidate::off;
    sim_opts.io_queue_entries = queue_entries;
    sim_opts.io_queues = settings.cores;
    sim_opts.io_size_bytes = settings.io_size_bytes;
    sim_opts.core = cores.target_core;
    sim = SimTarget::start(sim_opts, &message);
    if (!sim) return fail(1, message);
  }

  host::HostOpts host_opts;
  host_opts.provider = sim ? &sim->host_provider() : nullptr;
  auto host = host::Host::create(host_opts);
  if (!host) {
    return fail(1, std::string("cannot create the host: ") + errc_name(host.error().code) +
                       (settings.sim ? "" : " (is an RDMA device present? see ibv_devices)"));
  }

  host::ControllerOpts controller_opts;
  controller_opts.io_queue_count = static_cast<uint16_t>(settings.cores);
  controller_opts.io_queue_size = static_cast<uint16_t>(queue_entries);
  controller_opts.memreg = memreg;
  controller_opts.reconnect_delay_ms = settings.reconnect_delay_ms;
  controller_opts.ctrl_loss_timeout_ms = settings.ctrl_loss_timeout_ms;
  auto connected = (*host)->connect(*trid, controller_opts, &message);
  if (!connected) {
    return fail(1, "cannot connect to " + trid_text + ": " +
                       (message.empty() ? errc_name(connected.error().code) : message));
  }
  std::unique_ptr<host::Controller> controller = std::move(*connected);
  const host::ControllerData& data = controller->data();

  // Which namespaces, and whether the I/O size fits them and the controller.
  int status = 0;
  std::string reason;
  std::vector<host::Namespace*> namespaces;
  const std::vector<uint32_t>& active = controller->active_namespaces();
  if (active.empty()) {
    status = 1;
    reason = data.subnqn + " has no active namespaces";
  } else if (settings.ns_count > active.size()) {
    status = 2;
    reason = "--ns-count " + std::to_string(settings.ns_count) + ": " + data.subnqn + " has " +
             std::to_string(active.size()) + " active namespaces";
  } else if (data.io_queues_granted < settings.cores) {
    status = 2;
    reason = "-c " + std::to_string(settings.cores) + " needs as many I/O queues; the controller "
             "granted " + std::to_string(data.io_queues_granted);
  } else if (data.max_transfer_bytes != 0 && settings.io_size_bytes > data.max_transfer_bytes) {
    status = 2;
    reason = "-o " + std::to_string(settings.io_size_bytes) + " exceeds the controller's largest "
             "transfer (MDTS) of " + std::to_string(data.max_transfer_bytes) + " bytes";
  }
  const size_t ns_used = settings.ns_count != 0 ? settings.ns_count : active.size();
  for (size_t i = 0; status == 0 && i < ns_used; ++i) {
    host::Namespace* ns = controller->ns(active[i]);
    if (ns == nullptr) {
      status = 1;
      reason = "namespace " + std::to_string(active[i]) + " went away";
    } else if (settings.io_size_bytes % ns->block_size() != 0) {
      status = 2;
      reason = "-o " + std::to_string(settings.io_size_bytes) + " is not a multiple of namespace " +
               std::to_string(ns->id()) + "'s block size " + std::to_string(ns->block_size());
    } else if (ns->capacity_bytes() < settings.io_size_bytes) {
      status = 2;
      reason = "namespace " + std::to_string(ns->id()) + " (" +
               std::to_string(ns->capacity_bytes()) + " bytes) is smaller than one I/O of -o " +
               std::to_string(settings.io_size_bytes);
    } else {
      namespaces.push_back(ns);
    }
  }
  if (status == 0) {
    reason = io_queue_entries(settings, static_cast<uint32_t>(ns_used), &queue_entries);
    if (!reason.empty()) status = 2;
  }
  if (status != 0) {
    (void)controller->disconnect();
    return fail(status, reason);
  }
  std::printf("nvmf_perf: %s, %s, -q %" PRIu32 " x %zu namespaces x %" PRIu32
              " workers, -o %" PRIu32 ", %" PRIu32 " s%s\n",
              settings.sim ? "sim target" : trid_text.c_str(), workload_name(settings.workload),
              settings.queue_depth, namespaces.size(), settings.cores, settings.io_size_bytes,
              settings.time_s, settings.verify ? ", verify" : "");
  std::fflush(stdout);

  // Workers: the main thread is worker 0 and also polls the admin queue; the others run on
  // threads of their own. Each allocates its qpair and buffers on its own thread.
  TscClock clock;
  std::mutex controller_mutex;
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < settings.cores; ++i) {
    WorkerParams params;
    params.index = i;
    params.workers = settings.cores;
    params.settings = &settings;
    params.host = host->get();
    params.controller = controller.get();
    params.namespaces = namespaces;
    params.queue_entries = static_cast<uint16_t>(queue_entries);
    params.clock = &clock;
    params.controller_mutex = &controller_mutex;
    params.stop_requested = &g_stop_requested;
    workers.push_back(std::make_unique<Worker>(params));
  }

  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills a run stuck in its drain
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  // 0 = wait, 1 = go, 2 = abort (a worker's setup failed).
  std::atomic<int> go{0};
  std::atomic<uint64_t> deadline_ns{0};
  std::atomic<uint32_t> ready{0};
  std::atomic<uint32_t> finished{0};
  std::vector<std::string> setup_errors(settings.cores);
  std::vector<char> setup_usage_errors(settings.cores, 0);
  std::vector<std::thread> threads;
  for (uint32_t i = 1; i < settings.cores; ++i) {
    threads.emplace_back([&, i] {
      pin_current_thread(cores.host_core(i), i);
      bool usage_error = false;
      setup_errors[i] = workers[i]->setup(&usage_error);
      setup_usage_errors[i] = usage_error;
      ready.fetch_add(1, std::memory_order_release);
      go.wait(0, std::memory_order_acquire);
      if (go.load(std::memory_order_acquire) == 1 && setup_errors[i].empty()) {
        workers[i]->run(deadline_ns.load(std::memory_order_relaxed), Ticker{});
      }
      workers[i]->teardown();
      finished.fetch_add(1, std::memory_order_release);
    });
  }
  pin_current_thread(cores.host_core(0), 0);
  MainDuties duties;
  duties.controller = controller.get();
  duties.controller_mutex = &controller_mutex;
  duties.workers = &workers;
  bool usage_error = false;
  setup_errors[0] = workers[0]->setup(&usage_error);
  setup_usage_errors[0] = usage_error;
  // Keep the admin queue alive while the other workers connect their qpairs.
  auto wait_for = [&](std::atomic<uint32_t>& counter) {
    while (counter.load(std::memory_order_acquire) < settings.cores - 1) {
      duties.poll_admin();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  wait_for(ready);
  for (uint32_t i = 0; i < settings.cores; ++i) {
    if (!setup_errors[i].empty()) {
      status = setup_usage_errors[i] ? 2 : std::max(status, 1);
      std::fprintf(stderr, "nvmf_perf: %s\n", setup_errors[i].c_str());
    }
  }
  const uint64_t start_ns = clock.now_ns();
  deadline_ns.store(start_ns + settings.time_s * kNsPerSecond, std::memory_order_relaxed);
  go.store(status == 0 ? 1 : 2, std::memory_order_release);
  go.notify_all();
  if (status == 0) {
    duties.last_progress_ns = start_ns;
    workers[0]->run(deadline_ns.load(std::memory_order_relaxed),
                    Ticker{&MainDuties::tick, &duties});
  }
  workers[0]->teardown();
  wait_for(finished);
  for (std::thread& thread : threads) thread.join();

  if (status == 0) {
    std::vector<ResultRow> rows;
    LatencyHistogram total_latency;
    Summary summary;
    summary.total.label = "Total";
    for (const auto& worker : workers) {
      for (const ResultRow& row : worker->rows()) {
        summary.total.ios += row.ios;
        summary.total.bytes += row.bytes;
        summary.total.errors += row.errors;
        summary.total.verify_failures += row.verify_failures;
        rows.push_back(row);
      }
      worker->merge_latency_into(&total_latency);
      summary.total.elapsed_s = std::max(summary.total.elapsed_s, worker->elapsed_s());
      summary.busy_retries += worker->busy_retries();
      summary.qp_errors += worker->qpair_stats().qp_errors;
      summary.mw_bind_errors += worker->qpair_stats().bind_errors;
    }
    summary.total.latency = summarize_latency(total_latency);
    summary.reconnects = controller->stats().reconnects;
    std::printf("\n%s", format_table(rows, summary).c_str());
    const bool nvme_sim = sim && settings.sim_bdev == SimBdevKind::nvme;
    if (nvme_sim) {
      // The zero-copy claim, checked: what the target's nvme bdevs bounced through copies.
      std::printf("sim target nvme bdevs: %" PRIu64 " bytes copied through bounce buffers\n",
                  sim->bdev_bytes_copied());
    }
    std::fflush(stdout);
    if (json_file.is_open()) {
      nlohmann::ordered_json json = summary_json(summary);
      if (nvme_sim) json["target_bytes_copied"] = sim->bdev_bytes_copied();
      json["config"] = config_json(settings, trid_text, static_cast<uint32_t>(namespaces.size()),
                                   queue_entries);
      json_file << json.dump(2) << "\n";
      json_file.close();
      if (!json_file) status = fail(1, "--json: writing '" + settings.json_path + "' failed");
    }
    if (status == 0) status = summary_exit_status(summary);
    if (g_stop_requested.load(std::memory_order_relaxed)) {
      NVMF_NOTICELOG(nvmf_perf, "stopped early by a signal");
    }
  }

  workers.clear();
  if (auto disconnected = controller->disconnect(); !disconnected) {
    NVMF_WARNLOG(nvmf_perf, "controller disconnect: %s", errc_name(disconnected.error().code));
  }
  controller.reset();
  host->reset();
  if (sim) sim->stop();
  return status;
}

}  // namespace nvmf::perf
