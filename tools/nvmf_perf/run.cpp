#include "run.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chaos.h"
#include "common/clock.h"
#include "common/log.h"
#include "nvmf/host.h"
#include "pcie_run.h"
#include "rdma_worker.h"
#include "report.h"
#include "run_workers.h"
#include "sim_target.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

int fail(int status, const std::string& reason) {
  std::fprintf(stderr, "nvmf_perf: %s\n", reason.c_str());
  return status;
}

// The RDMA path's setup, checked: the library's names for the option strings, the target.
struct RdmaPlan {
  host::MemregPolicy memreg = host::MemregPolicy::global;
  verbs::sim::SimProfile profile = verbs::sim::SimProfile::rxe;
  verbs::sim::SendFence send_fence = verbs::sim::SendFence::profile;
  std::string trid_text;
  host::TransportId trid;
  uint32_t queue_entries = kIoQueueSizeDefault;
};

// Names check_options accepted must be names the libraries accept. 0 or the exit status.
int plan_rdma(const Settings& settings, RdmaPlan* plan) {
  if (!host::memreg_policy_parse(settings.memreg, &plan->memreg)) {
    return fail(2, "--memreg: '" + settings.memreg + "' is not known to libnvmf_host");
  }
  if (settings.sim &&
      !verbs::sim::sim_profile_parse(settings.sim_profile.c_str(), &plan->profile)) {
    return fail(2, "--sim-profile: '" + settings.sim_profile + "' is not known to the sim");
  }
  if (settings.sim &&
      !verbs::sim::send_fence_parse(settings.sim_send_fence.c_str(), &plan->send_fence)) {
    return fail(2, "--sim-send-fence: '" + settings.sim_send_fence + "' is not known to the sim");
  }
  plan->trid_text = settings.sim ? SimTarget::trid_string() : settings.trid;
  std::string message;
  auto trid = host::TransportId::parse(plan->trid_text, &message);
  if (!trid) return fail(2, "-r: " + message);
  plan->trid = *trid;
  // With --sim the namespace count is known now, so the target's limits can fit the queues.
  if (settings.ns_count != 0) {
    const std::string reason = io_queue_entries(settings, settings.ns_count, &plan->queue_entries);
    if (!reason.empty()) return fail(2, reason);
  }
  return 0;
}

std::unique_ptr<SimTarget> start_sim(const Settings& settings, const RdmaPlan& plan,
                                     const CoreLayout& cores, std::string* message) {
  SimTargetOpts sim_opts;
  sim_opts.profile = plan.profile;
  sim_opts.send_fence = plan.send_fence;
  sim_opts.race_one_in = settings.sim_race_one_in;
  sim_opts.seed = settings.seed;
  sim_opts.ns_count = settings.ns_count;
  sim_opts.bdev = settings.sim_bdev;
  sim_opts.bdev_bytes = settings.sim_bdev_bytes;
  sim_opts.send_with_invalidate = settings.sim_remote_invalidate
                                      ? transport_rdma::SendWithInvalidate::automatic
                                      : transport_rdma::SendWithInvalidate::off;
  sim_opts.io_queue_entries = plan.queue_entries;
  sim_opts.io_queues = settings.io_qpairs();
  sim_opts.io_size_bytes = settings.io_size_bytes;
  sim_opts.core = cores.target_core;
  const std::vector<std::string>& chaos = settings.chaos_faults;
  sim_opts.error_bdevs = std::find(chaos.begin(), chaos.end(), "bdev-error") != chaos.end();
  return SimTarget::start(sim_opts, message);
}

// Which namespaces, and whether the I/O size fits them and the controller. 0 or the exit
// status with *reason.
int pick_namespaces(const Settings& settings, host::Controller& controller,
                    std::vector<host::Namespace*>* namespaces, std::string* reason) {
  const host::ControllerData& data = controller.data();
  const std::vector<uint32_t>& active = controller.active_namespaces();
  if (active.empty()) {
    *reason = data.subnqn + " has no active namespaces";
    return 1;
  }
  if (settings.ns_count > active.size()) {
    *reason = "--ns-count " + std::to_string(settings.ns_count) + ": " + data.subnqn + " has " +
              std::to_string(active.size()) + " active namespaces";
    return 2;
  }
  if (data.io_queues_granted < settings.io_qpairs()) {
    *reason = "-c " + std::to_string(settings.cores) + " x -P " +
              std::to_string(settings.qpairs_per_worker) + " needs " +
              std::to_string(settings.io_qpairs()) + " I/O queues; the controller granted " +
              std::to_string(data.io_queues_granted);
    return 2;
  }
  if (data.max_transfer_bytes != 0 && settings.io_size_bytes > data.max_transfer_bytes) {
    *reason = "-o " + std::to_string(settings.io_size_bytes) +
              " exceeds the controller's "
              "largest transfer (MDTS) of " +
              std::to_string(data.max_transfer_bytes) + " bytes";
    return 2;
  }
  const size_t ns_used = settings.ns_count != 0 ? settings.ns_count : active.size();
  for (size_t i = 0; i < ns_used; ++i) {
    host::Namespace* ns = controller.ns(active[i]);
    if (ns == nullptr) {
      *reason = "namespace " + std::to_string(active[i]) + " went away";
      return 1;
    }
    const NamespaceShape shape{ns->id(), ns->block_size(), ns->block_count()};
    if (int status = check_namespace_fits(settings, shape, reason); status != 0) return status;
    namespaces->push_back(ns);
  }
  return 0;
}

// The admin queue, polled by the main thread (host.h: the control path under one lock), and
// with --chaos the fault injector's turn.
struct AdminPoll {
  host::Controller* controller;
  std::mutex* mutex;
  ChaosInjector* chaos = nullptr;
  const Clock* clock = nullptr;  // with chaos
  static void poll(void* ctx) {
    auto* admin = static_cast<AdminPoll*>(ctx);
    {
      std::lock_guard<std::mutex> lock(*admin->mutex);
      admin->controller->process_admin_completions();
    }
    if (admin->chaos != nullptr) admin->chaos->tick(admin->clock->now_ns());
  }
};

std::vector<std::unique_ptr<Worker>> make_rdma_workers(
    const Settings& settings, host::Host* host, host::Controller* controller,
    const std::vector<host::Namespace*>& namespaces, uint32_t queue_entries, const Clock* clock,
    std::mutex* controller_mutex, verbs::sim::SimProvider* skip_payloads_of) {
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < settings.cores; ++i) {
    RdmaWorkerParams params;
    params.core = WorkerCoreParams{i, settings.cores, &settings, clock, stop_requested()};
    params.host = host;
    params.controller = controller;
    params.namespaces = namespaces;
    params.queue_entries = static_cast<uint16_t>(queue_entries);
    params.controller_mutex = controller_mutex;
    params.skip_payloads_of = skip_payloads_of;
    workers.push_back(std::make_unique<RdmaWorker>(params));
  }
  return workers;
}

// A simulated HCA's work (SimWorkCounts): the WRs it took, send and receive queues, and the
// CQEs it wrote.
void sim_work_of(const verbs::sim::SimCounters& c, uint64_t* wrs, uint64_t* cqes) noexcept {
  *wrs = c.send + c.send_with_inv + c.rdma_write + c.rdma_read + c.local_inv + c.bind_mw + c.recv;
  *cqes = c.completions;
}

// The table, the sim's nvme copies, the JSON. The exit status of the results.
int report_rdma(const Settings& settings, const std::vector<std::unique_ptr<Worker>>& workers,
                double cpu_s, host::Controller& controller, const SimTarget* sim,
                const ChaosInjector* chaos, uint32_t ns_count, uint32_t queue_entries,
                std::ofstream* json_file) {
  std::vector<ResultRow> rows;
  Summary summary = summarize(workers, &rows, cpu_s);
  if (chaos != nullptr) {
    summary.chaos = true;
    summary.chaos_injected = chaos->injected();
    summary.chaos_effects = chaos->effects();
  }
  summary.reconnects = controller.stats().reconnects;
  summary.rdma = true;
  summary.mode = completion_mode_name(settings.mode);
  if (sim != nullptr) {
    summary.sim = true;
    const verbs::sim::SimCounters host = sim->host_counters();
    const verbs::sim::SimCounters target = sim->target_counters();
    sim_work_of(host, &summary.sim_work.host_wrs, &summary.sim_work.host_cqes);
    sim_work_of(target, &summary.sim_work.target_wrs, &summary.sim_work.target_cqes);
    summary.sim_work.payload_bytes_copied = host.bytes_moved + target.bytes_moved;
    summary.sim_work.payload_bytes_skipped = host.bytes_skipped + target.bytes_skipped;
  }
  std::printf("\n%s", format_table(rows, summary).c_str());
  const bool nvme_sim = sim != nullptr && settings.sim_bdev == SimBdevKind::nvme;
  if (nvme_sim) {
    // The zero-copy claim, checked: what the target's nvme bdevs bounced through copies.
    std::printf("sim target nvme bdevs: %" PRIu64 " bytes copied through bounce buffers\n",
                sim->bdev_bytes_copied());
  }
  std::fflush(stdout);
  nlohmann::ordered_json json = summary_json(summary);
  if (nvme_sim) json["target_bytes_copied"] = sim->bdev_bytes_copied();
  json["config"] = config_json(settings, ns_count, queue_entries);
  // What the simulated fabric ran with, every default resolved (send_fence: the rule applied).
  if (sim != nullptr) {
    json["config"]["sim"] =
        nlohmann::ordered_json::parse(verbs::sim::opts_to_json(sim->sim_opts()));
  }
  const int status = write_json(settings, json_file, json);
  return status != 0 ? status : summary_exit_status(summary);
}

int run_rdma(const Settings& settings) {
  RdmaPlan plan;
  if (int status = plan_rdma(settings, &plan); status != 0) return status;
  std::ofstream json_file;
  if (std::string reason = open_json(settings, &json_file); !reason.empty()) return fail(2, reason);
  const CoreLayout cores = plan_cores(settings);
  std::string message;
  std::unique_ptr<SimTarget> sim;
  if (settings.sim) {
    sim = start_sim(settings, plan, cores, &message);
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
  controller_opts.io_queue_count = static_cast<uint16_t>(settings.io_qpairs());
  controller_opts.io_queue_size = static_cast<uint16_t>(plan.queue_entries);
  controller_opts.memreg = plan.memreg;
  controller_opts.reconnect_delay_ms = settings.reconnect_delay_ms;
  controller_opts.ctrl_loss_timeout_ms = settings.ctrl_loss_timeout_ms;
  controller_opts.io_timeout_ms = settings.io_timeout_ms;
  if (settings.fast_io_fail) controller_opts.fast_io_fail_timeout_ms = settings.fast_io_fail_ms;
  auto connected = (*host)->connect(plan.trid, controller_opts, &message);
  if (!connected) {
    return fail(1, "cannot connect to " + plan.trid_text + ": " +
                       (message.empty() ? errc_name(connected.error().code) : message));
  }
  std::unique_ptr<host::Controller> controller = std::move(*connected);

  std::vector<host::Namespace*> namespaces;
  std::string reason;
  int status = pick_namespaces(settings, *controller, &namespaces, &reason);
  if (status == 0) {
    reason =
        io_queue_entries(settings, static_cast<uint32_t>(namespaces.size()), &plan.queue_entries);
    if (!reason.empty()) status = 2;
  }
  if (status != 0) {
    (void)controller->disconnect();
    return fail(status, reason);
  }
  print_banner(settings, settings.sim ? "sim target" : plan.trid_text, namespaces.size());

  // Workers: the main thread is worker 0 and also polls the admin queue; the others run on
  // threads of their own. Each allocates its qpair and buffers on its own thread.
  TscClock clock;
  std::mutex controller_mutex;
  std::vector<std::unique_ptr<Worker>> workers =
      make_rdma_workers(settings, host->get(), controller.get(), namespaces, plan.queue_entries,
                        &clock, &controller_mutex,
                        sim && settings.sim_payload_skip ? &sim->host_sim() : nullptr);
  std::unique_ptr<ChaosInjector> chaos;
  if (sim && !settings.chaos_faults.empty()) chaos = std::make_unique<ChaosInjector>(settings, *sim);
  AdminPoll admin{controller.get(), &controller_mutex, chaos.get(), &clock};
  double cpu_s = 0;
  status =
      run_workers(settings, cores, clock, workers, ControlPoll{&AdminPoll::poll, &admin}, &cpu_s);
  if (chaos) chaos->finish();
  if (status == 0) {
    status = report_rdma(settings, workers, cpu_s, *controller, sim.get(), chaos.get(),
                         static_cast<uint32_t>(namespaces.size()), plan.queue_entries, &json_file);
    note_early_stop();
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

}  // namespace

int run(const Settings& settings) {
  LogLevel level = LogLevel::notice;
  (void)log_level_parse(settings.log_level.c_str(), &level);  // check_options checked it
  log_set_level(level);
  return settings.pcie ? run_pcie(settings) : run_rdma(settings);
}

}  // namespace nvmf::perf
