// nvmf_tgt: the NVMe-oF RDMA target daemon. Options, wiring, run; the work is in the layers.
//
//   nvmf_tgt -c FILE.json [--reactors N | --cpumask MASK] [--mode poll|interrupt|adaptive]
//            [--log-level LEVEL] [--check-config] [--sim] [--rpc-socket PATH]
//
// Start-up: read and check the JSON config (docs/target-config.md), make the bdevs and
// subsystems, start the reactors, open the RDMA transport, serve JSON-RPC on --rpc-socket
// (default /var/tmp/nvmf_tgt.sock, mode 0600; '' serves none; a socket another live nvmf_tgt
// serves is refused: exit 1) for runtime configuration (rpc_methods.h), and listen on every
// listener address. From then on the RPC server's thread is the setup thread: this one only
// waits for a signal. SIGINT / SIGTERM: stop the RPC server, disconnect every
// host, drain, free, exit 0.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bdev/nvme_bdev.h"
#include "bdev/registry.h"
#include "common/log.h"
#include "nvme_pcie/model/model_controller.h"
#include "nvme_pcie/vfio_environment.h"
#include "reactor/group.h"
#include "rpc/rpc.h"
#include "rpc_methods.h"
#include "target/config.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"
#include "verbs/ibverbs/ibverbs.h"
#include "verbs/sim/sim.h"

NVMF_LOG_COMPONENT(nvmf_tgt);

namespace {

using namespace nvmf;

struct Options {
  std::string config_path;
  unsigned reactors = 1;
  std::string cpumask;
  std::string mode = "poll";
  std::string log_level = "notice";
  bool check_config = false;
  bool sim = false;
  std::string rpc_socket = "/var/tmp/nvmf_tgt.sock";  // "": no JSON-RPC server
};

bool parse_cpumask(const std::string& text, std::vector<int>* cores) {
  std::string hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0 ? text.substr(2) : text;
  if (hex.empty() || hex.size() > 16) return false;
  uint64_t mask = 0;
  for (char c : hex) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) return false;
    mask = (mask << 4) | static_cast<uint64_t>(digit);
  }
  for (int core = 0; core < 64; ++core) {
    if (mask & (uint64_t{1} << core)) cores->push_back(core);
  }
  return !cores->empty();
}

int fail(const char* format, const std::string& detail) {
  std::fprintf(stderr, "nvmf_tgt: ");
  std::fprintf(stderr, format, detail.c_str());
  std::fprintf(stderr, "\n");
  return 1;
}

// Transport options from the configuration's "transports" entry.
transport_rdma::RdmaTargetOpts make_transport_opts(const target::TargetConfig& config) {
  transport_rdma::RdmaTargetOpts transport_opts;
  transport_opts.limits.max_queue_depth = static_cast<uint16_t>(config.opts.max_queue_depth);
  transport_opts.limits.max_admin_queue_depth =
      static_cast<uint16_t>(config.opts.max_admin_queue_depth);
  transport_opts.limits.max_qpairs_per_ctrlr =
      static_cast<uint16_t>(config.opts.max_qpairs_per_ctrlr);
  transport_opts.in_capsule_data_size = config.opts.in_capsule_data_size;
  transport_opts.max_io_size = config.opts.max_io_size;
  // A command may use 16 data buffers (kRequestIovMax): larger transfers need larger units
  // (for the default 1 MiB, 64 KiB). Keep about 16 MiB of buffers per reactor, which holds 16
  // commands of the default max_io_size at once; above 4 MiB, room for 4 of them all the same,
  // so that a host's largest transfers still overlap instead of waiting for each other's buffers.
  constexpr uint32_t kMaxSizeCommands = 4;
  transport_opts.io_unit_size = std::max<uint32_t>(8192, config.opts.max_io_size / 16);
  const uint32_t buffers_per_command =
      (config.opts.max_io_size + transport_opts.io_unit_size - 1) / transport_opts.io_unit_size;
  transport_opts.data_buffers_per_group = std::max<uint32_t>(
      (16u << 20) / transport_opts.io_unit_size, kMaxSizeCommands * buffers_per_command);
  transport_opts.send_with_invalidate =
      config.transport.send_with_invalidate == target::SendWithInvalidate::off
          ? transport_rdma::SendWithInvalidate::off
          : transport_rdma::SendWithInvalidate::automatic;
  transport_opts.acceptor_poll_period_us = config.transport.acceptor_poll_rate_us;
  transport_opts.use_srq = !config.transport.no_srq;
  transport_opts.srq_depth = config.transport.max_srq_depth;
  return transport_opts;
}

// How nvme bdevs open their PCI functions: VFIO (DPDK starts at the first one), or with --sim
// the register-level controller model, one per address (for tests without a device).
bdev::NvmeControllerPool::DeviceOpener make_device_opener(bool sim,
                                                          nvme_pcie::VfioEnvironment& vfio) {
  if (sim) {
    return [](const std::string& pci) -> Result<std::unique_ptr<nvme_pcie::PciDevice>> {
      nvme_pcie::model::ModelOpts opts;
      opts.name = pci;
      NVMF_WARNLOG(nvmf_tgt, "--sim: nvme bdev on %s is the in-process controller model",
                   pci.c_str());
      auto model = nvme_pcie::model::ModelController::create(opts);
      if (!model) return Unexpected(model.error());
      return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
    };
  }
  return [&vfio](const std::string& pci) { return vfio.open(pci); };
}

int run(const Options& options) {
  LogLevel level;
  if (!log_level_parse(options.log_level.c_str(), &level)) {
    return fail("--log-level: '%s' is not one of error, warn, notice, info, debug",
                options.log_level);
  }
  log_set_level(level);
  reactor::Mode mode;
  if (!reactor::mode_parse(options.mode.c_str(), &mode)) {
    return fail("--mode: '%s' is not one of poll, interrupt, adaptive", options.mode);
  }
  reactor::ReactorGroupOpts group_opts;
  group_opts.reactor.mode = mode;
  group_opts.reactor.name = "reactor";
  if (!options.cpumask.empty()) {
    if (!parse_cpumask(options.cpumask, &group_opts.cores)) {
      return fail("--cpumask: '%s' is not a non-zero hex mask such as 0x3", options.cpumask);
    }
  } else {
    if (options.reactors == 0 || options.reactors > 256) {
      return fail("--reactors: %s is not within 1..256", std::to_string(options.reactors));
    }
    group_opts.reactor_count = options.reactors;
  }

  std::ifstream file(options.config_path);
  if (!file) return fail("cannot read config file '%s'", options.config_path);
  std::stringstream text;
  text << file.rdbuf();
  std::string message;
  auto config = target::parse_target_config(text.str(), &message);
  if (!config) return fail("%s", options.config_path + ": " + message);

  auto target = target::Target::create(config->opts);
  if (!target) return fail("%s", options.config_path + ": target options rejected");
  // Declared before the registry: bdevs go first, then their controllers, then DPDK.
  nvme_pcie::VfioEnvironment vfio;
  bdev::NvmeControllerPool nvme_pool(make_device_opener(options.sim, vfio),
                                     nvme_pcie::ControllerOpts{});
  bdev::BdevRegistry registry;
  auto built = target::build_target(*config, registry, **target, &message, &nvme_pool);
  if (!built) return fail("%s", options.config_path + ": " + message);
  if (options.check_config) {
    std::printf("nvmf_tgt: %s: configuration OK (%zu bdevs, %zu subsystems)\n",
                options.config_path.c_str(), config->bdevs.size(), config->subsystems.size());
    return 0;
  }

  std::unique_ptr<verbs::Provider> provider;
  if (options.sim) {
    auto sim = verbs::sim::SimProvider::create();
    if (!sim) return fail("%s", "cannot create the simulated HCA");
    provider = std::move(*sim);
    NVMF_WARNLOG(nvmf_tgt, "--sim: serving on the in-process simulated HCA; no host outside "
                           "this process can connect");
  } else {
    auto ibverbs = verbs::ibverbs::IbverbsProvider::create();
    if (!ibverbs || (*ibverbs)->device_names().empty()) {
      return fail("%s",
                  "no RDMA device found (ibv_get_device_list lists none): load an RDMA driver "
                  "(e.g. 'rdma link add rxe0 type rxe netdev eth0' for soft-RoCE), or use --sim "
                  "for a test run");
    }
    provider = std::move(*ibverbs);
  }

  // Signals go to the main thread only: block them before any reactor thread exists.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto group = reactor::ReactorGroup::start(group_opts);
  if (!group) return fail("%s", std::string("cannot start reactors: ") + errc_name(group.error().code));
  std::vector<reactor::Reactor*> reactors;
  for (size_t i = 0; i < (*group)->size(); ++i) reactors.push_back(&(*group)->reactor(i));

  transport_rdma::RdmaTargetOpts transport_opts = make_transport_opts(*config);
  // With PCIe devices, RDMA buffers live in DPDK memory the devices reach: zero copy.
  transport_opts.buffer_memory = vfio.memory();

  std::unique_ptr<transport_rdma::RdmaTargetTransport> transport;
  std::string startup_error;
  reactor::run_and_wait(*reactors[0], [&] {
    auto created = transport_rdma::RdmaTargetTransport::create(*provider, **target, reactors,
                                                               transport_opts);
    if (!created) {
      startup_error = std::string("cannot open the RDMA transport: ") +
                      errc_name(created.error().code) + " (" + created.error().detail + ")";
      return;
    }
    transport = std::move(*created);
  });

  // Runtime configuration over JSON-RPC, started before the listeners open so that a second
  // instance on the same socket stops here with the server's message. From here on the
  // server's thread is the only one that touches the registry, the nvme pool and the context.
  tgt::RpcContext rpc_context{.target = **target,
                              .registry = registry,
                              .nvme_pool = nvme_pool,
                              .transport = transport.get(),
                              .reactors = reactors,
                              .transport_config = config->transport,
                              .bdevs = config->bdevs};
  rpc::Dispatcher dispatcher;
  tgt::register_rpc_methods(dispatcher, rpc_context);
  std::unique_ptr<rpc::Server> rpc_server;
  if (startup_error.empty() && !options.rpc_socket.empty()) {
    rpc::ServerOpts rpc_opts;
    rpc_opts.socket_path = options.rpc_socket;
    std::string rpc_message;
    auto started = rpc::Server::start(rpc_opts, dispatcher, &rpc_message);
    if (started) {
      rpc_server = std::move(*started);
      NVMF_NOTICELOG(nvmf_tgt, "JSON-RPC on %s", rpc_server->socket_path().c_str());
    } else {
      startup_error = rpc_message;  // e.g. "another nvmf_tgt is serving PATH"
    }
  }
  if (startup_error.empty()) {
    reactor::run_and_wait(*reactors[0], [&] {
      for (const auto& subsystem : config->subsystems) {
        for (const auto& listener : subsystem.listeners) {
          auto port = static_cast<uint16_t>(std::stoul(listener.trsvcid));
          // Shared by several subsystems (or opened by an early listener_add): open once.
          if (transport->listening(listener.traddr, port)) continue;
          if (!transport->listen(listener.traddr, port)) {
            startup_error = "cannot listen on " + listener.traddr + ":" + listener.trsvcid;
            return;
          }
        }
      }
    });
  }
  int status = 0;
  if (!startup_error.empty()) {
    status = fail("%s", startup_error);
  } else {
    NVMF_NOTICELOG(nvmf_tgt, "ready: %zu subsystems on %zu reactors (%s mode)",
                   config->subsystems.size(), reactors.size(), options.mode.c_str());
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    NVMF_NOTICELOG(nvmf_tgt, "%s: disconnecting hosts and shutting down",
                   signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  }
  // No configuration change may race the teardown: the server's thread goes first (a call in
  // progress finishes), and this thread is the setup thread again.
  rpc_server.reset();
  if (status == 0) {
    reactor::run_and_wait(*reactors[0], [&] { transport->begin_shutdown(); });
    // Hosts get a few seconds to let go; after that the reactors stop regardless.
    for (int i = 0; i < 500; ++i) {
      bool drained = false;
      reactor::run_and_wait(*reactors[0], [&] { drained = transport->drained(); });
      if (drained) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Each reactor closes the core's bdev channels on its own thread (every queue is gone by
  // now, or the reactors stop with them and the process exits anyway).
  for (reactor::Reactor* reactor : reactors) {
    reactor::run_and_wait(*reactor, [&] { (void)(*target)->release_reactor(*reactor); });
  }
  (*group)->stop();
  // The reactor threads are gone: this thread may now take their objects apart.
  for (reactor::Reactor* reactor : reactors) reactor->take_ownership();
  transport.reset();
  target->reset();
  // The zero-copy account of each NVMe namespace: 0 unless data arrived outside DMA memory.
  registry.for_each([](const bdev::Bdev& bdev) {
    if (std::string_view(bdev.backend_name()) != "nvme") return;
    NVMF_NOTICELOG(nvmf_tgt, "bdev %s: %" PRIu64 " bytes copied through bounce buffers",
                   bdev.name().c_str(), bdev::nvme_bdev_bytes_copied(bdev));
  });
  NVMF_NOTICELOG(nvmf_tgt, "stopped");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"nvmf_tgt: NVMe-over-Fabrics RDMA target"};
  app.add_option("-c,--config", options.config_path, "JSON configuration (docs/target-config.md)")
      ->required();
  auto* reactors = app.add_option("--reactors", options.reactors,
                                  "reactor threads, not pinned (default 1)");
  auto* cpumask = app.add_option("--cpumask", options.cpumask,
                                 "hex mask of cores to run pinned reactors on, e.g. 0x3");
  reactors->excludes(cpumask);
  app.add_option("--mode", options.mode,
                 "poll (default, lowest latency), interrupt (sleep when idle), adaptive");
  app.add_option("--log-level", options.log_level, "error, warn, notice (default), info, debug");
  app.add_flag("--check-config", options.check_config,
               "check the configuration (and create its bdevs), then exit");
  app.add_flag("--sim", options.sim,
               "serve on an in-process simulated HCA (tests: no outside host can connect)");
  app.add_option("--rpc-socket", options.rpc_socket,
                 "Unix socket for JSON-RPC runtime control (default /var/tmp/nvmf_tgt.sock, "
                 "mode 0600; '' for none)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return run(options);
}
