#include "pcie_run.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "env/vfio.h"
#include "nvme_pcie/controller.h"
#include "nvme_pcie/model/model_controller.h"
#include "nvme_pcie/vfio_environment.h"
#include "pcie_worker.h"
#include "run_workers.h"

NVMF_LOG_COMPONENT_DECLARE(nvmf_perf);

namespace nvmf::perf {

namespace {

// The model's limits, raised to fit the run: its defaults (1024 entries per queue, 64 queue
// pairs) are a small SSD's.
constexpr uint32_t kModelQueueEntriesMin = 1024;
constexpr uint32_t kModelQueuePairsMin = 64;

int fail(int status, const std::string& reason) {
  std::fprintf(stderr, "nvmf_perf: %s\n", reason.c_str());
  return status;
}

std::string describe(const Error& error) {
  return std::string(errc_name(error.code)) +
         (error.detail[0] != '\0' ? std::string(" (") + error.detail + ")" : std::string());
}

// What to do about a device that would not open, by the driver's error code.
std::string open_hint(Errc code) {
  switch (code) {
    case Errc::no_memory:
      return ": reserve hugepages with scripts/setup.sh (or echo 512 > /proc/sys/vm/nr_hugepages)";
    case Errc::not_supported: {
      const env::VfioStatus vfio = env::vfio_probe();
      return std::string(": ") +
             (vfio.available() ? "VFIO is not enabled in DPDK" : vfio.reason()) +
             " (see scripts/setup.sh)";
    }
    case Errc::not_found:
      return ": is the address right, and the function bound to vfio-pci? run scripts/setup.sh";
    default:
      return "";
  }
}

// One model controller with ns_count namespaces of 512-byte blocks, its queues large enough.
Result<std::unique_ptr<nvme_pcie::PciDevice>> open_model(const Settings& settings,
                                                         uint32_t queue_entries) {
  nvme_pcie::model::ModelOpts opts;
  opts.name = kPcieModelAddress;
  opts.mqes = std::max(kModelQueueEntriesMin, queue_entries) - 1;  // 0's based
  opts.io_queue_pairs_max = static_cast<uint16_t>(std::max(kModelQueuePairsMin, settings.cores));
  opts.namespaces.clear();
  for (uint32_t i = 0; i < settings.ns_count; ++i) {
    nvme_pcie::model::ModelNamespace ns;
    ns.nsid = i + 1;
    ns.block_size_bytes = kSimBlockSizeBytes;
    ns.block_count = settings.sim_bdev_bytes / kSimBlockSizeBytes;
    opts.namespaces.push_back(ns);
  }
  auto model = nvme_pcie::model::ModelController::create(opts);
  if (!model) return Unexpected(model.error());
  return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
}

// Opens the function (VFIO or the model) and brings the controller up. 0 or 1 (printed).
int open_controller(const Settings& settings, uint32_t queue_entries,
                    nvme_pcie::VfioEnvironment* vfio,
                    std::unique_ptr<nvme_pcie::Controller>* controller) {
  auto device = settings.pcie_model() ? open_model(settings, queue_entries)
                                      : vfio->open(settings.pci_address);
  if (!device) {
    return fail(1, "cannot open " + settings.pci_address + ": " + describe(device.error()) +
                       open_hint(device.error().code));
  }
  nvme_pcie::ControllerOpts opts;
  opts.io_queues_requested = settings.cores;
  opts.io_queue_entries = queue_entries;
  auto created = nvme_pcie::Controller::create(std::move(*device), opts);
  if (!created) {
    return fail(1, "cannot bring up the controller at " + settings.pci_address + ": " +
                       describe(created.error()));
  }
  *controller = std::move(*created);
  return 0;
}

// Which namespaces, and whether the controller fits the run. 0 or the exit status (printed).
int pick_namespaces(const Settings& settings, const nvme_pcie::Controller& controller,
                    std::vector<NamespaceShape>* namespaces) {
  const std::vector<nvme_pcie::NamespaceInfo>& active = controller.namespaces();
  const std::string& address = controller.address();
  if (active.empty()) return fail(1, address + " has no active namespaces");
  if (settings.ns_count > active.size()) {
    return fail(2, "--ns-count " + std::to_string(settings.ns_count) + ": " + address + " has " +
                       std::to_string(active.size()) + " active namespaces");
  }
  if (controller.io_queues_granted() < settings.cores) {
    return fail(2, "-c " + std::to_string(settings.cores) + " needs as many I/O queues; " +
                       address + " granted " + std::to_string(controller.io_queues_granted()));
  }
  const size_t ns_used = settings.ns_count != 0 ? settings.ns_count : active.size();
  std::string reason;
  for (size_t i = 0; i < ns_used; ++i) {
    const NamespaceShape shape{active[i].nsid, active[i].block_size_bytes, active[i].block_count};
    if (int status = check_namespace_fits(settings, shape, &reason); status != 0) {
      return fail(status, reason);
    }
    namespaces->push_back(shape);
  }
  // The queue size was fixed when the controller came up: before its namespaces were known.
  const uint64_t needed =
      io_queue_entries_needed(settings.queue_depth, static_cast<uint32_t>(ns_used));
  if (controller.io_queue_entries() < needed) {
    return fail(2, "-q " + std::to_string(settings.queue_depth) + " x " + std::to_string(ns_used) +
                       " namespaces needs I/O queues of " + std::to_string(needed) + " entries; " +
                       address + "'s hold " + std::to_string(controller.io_queue_entries()) +
                       " (CAP.MQES or --io-queue-size): lower -q or --ns-count");
  }
  return 0;
}

// Split requests take a command each per part: with fewer commands than -q x namespaces x
// parts, the queue holds fewer I/Os than asked (busy retries show it).
void warn_if_splits_crowd(const Settings& settings, const nvme_pcie::Controller& controller,
                          size_t ns_count) {
  const uint32_t max_transfer = controller.max_transfer_bytes();
  const uint64_t parts = (uint64_t{settings.io_size_bytes} + max_transfer - 1) / max_transfer;
  const uint64_t commands = uint64_t{settings.queue_depth} * ns_count * parts;
  if (parts > 1 && commands > controller.io_queue_entries() - 1) {
    NVMF_WARNLOG(nvmf_perf,
                 "-o %" PRIu32 " is split into %" PRIu64 " commands (transfer limit %" PRIu32
                 " bytes): -q x namespaces needs %" PRIu64 " commands, the I/O queues hold %" PRIu32
                 " (--io-queue-size %" PRIu64 " would fit)",
                 settings.io_size_bytes, parts, max_transfer, commands,
                 controller.io_queue_entries() - 1, commands + 1);
  }
}

std::vector<std::unique_ptr<Worker>> make_workers(const Settings& settings,
                                                  nvme_pcie::Controller* controller,
                                                  const std::vector<NamespaceShape>& namespaces,
                                                  const Clock* clock) {
  std::vector<std::unique_ptr<Worker>> workers;
  for (uint32_t i = 0; i < settings.cores; ++i) {
    PcieWorkerParams params;
    params.core = WorkerCoreParams{i, settings.cores, &settings, clock, stop_requested()};
    params.controller = controller;
    params.namespaces = namespaces;
    workers.push_back(std::make_unique<PcieWorker>(params));
  }
  return workers;
}

// The table (with the copies), the JSON. The exit status of the results.
int report(const Settings& settings, const std::vector<std::unique_ptr<Worker>>& workers,
           double cpu_s, const nvme_pcie::Controller& controller, uint32_t ns_count,
           std::ofstream* json_file) {
  std::vector<ResultRow> rows;
  Summary summary = summarize(workers, &rows, cpu_s);
  summary.pcie = true;
  summary.controller_resets = controller.stats().resets;
  std::printf("\n%s", format_table(rows, summary).c_str());
  std::fflush(stdout);
  nlohmann::ordered_json json = summary_json(summary);
  json["config"] = config_json(settings, ns_count, controller.io_queue_entries());
  const int status = write_json(settings, json_file, json);
  return status != 0 ? status : summary_exit_status(summary);
}

}  // namespace

int run_pcie(const Settings& settings) {
  std::ofstream json_file;
  if (std::string reason = open_json(settings, &json_file); !reason.empty()) return fail(2, reason);
  // Sized for the namespaces asked for (one when all: the count is known only once the
  // controller is up, and then checked).
  uint32_t queue_entries = 0;
  const std::string reason =
      io_queue_entries(settings, std::max<uint32_t>(settings.ns_count, 1), &queue_entries);
  if (!reason.empty()) return fail(2, reason);

  // Before DPDK starts: the CPUs this process may use, as the caller gave them.
  const CoreLayout cores = plan_cores(settings);
  // Declared first, destroyed last: DPDK's memory outlives the controller and its queues.
  nvme_pcie::VfioEnvironment vfio;
  std::unique_ptr<nvme_pcie::Controller> controller;
  if (int status = open_controller(settings, queue_entries, &vfio, &controller); status != 0) {
    return status;
  }
  std::vector<NamespaceShape> namespaces;
  if (int status = pick_namespaces(settings, *controller, &namespaces); status != 0) {
    return status;
  }
  warn_if_splits_crowd(settings, *controller, namespaces.size());
  print_banner(settings, "PCIe " + controller->address(), namespaces.size());

  // Workers: the main thread is worker 0; each creates its queue and buffers on its thread.
  TscClock clock;
  std::vector<std::unique_ptr<Worker>> workers =
      make_workers(settings, controller.get(), namespaces, &clock);
  double cpu_s = 0;
  int status = run_workers(settings, cores, clock, workers, ControlPoll{}, &cpu_s);
  if (status == 0) {
    status = report(settings, workers, cpu_s, *controller, static_cast<uint32_t>(namespaces.size()),
                    &json_file);
    note_early_stop();
  }
  workers.clear();  // every IoQueue is gone by now (torn down on its own thread)
  controller.reset();
  return status;
}

}  // namespace nvmf::perf
