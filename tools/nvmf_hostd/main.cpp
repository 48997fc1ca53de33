// nvmf_hostd: the host daemon. Holds NVMe-oF RDMA controllers made through libnvmf_host and
// exports each namespace as a kernel block device through the NBD driver, so unmodified
// programs (mkfs, fio, dd) use it. nvmfctl connect / disconnect / list talk to it over
// JSON-RPC (docs/cli.md).
//
//   nvmf_hostd [--rpc-socket PATH] [--reactors N] [--mode poll|interrupt|adaptive]
//              [--max-io-kib KIB] [--log-level LEVEL]
//
// Needs the nbd module (modprobe nbd) and an RDMA device. SIGINT / SIGTERM: every device is
// written back and removed, every controller disconnected, exit 0.
#include <signal.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "common/log.h"
#include "daemon.h"
#include "nbd_exporter.h"
#include "rpc/rpc.h"
#include "rpc_methods.h"

NVMF_LOG_COMPONENT(nvmf_hostd);

namespace {

using namespace nvmf;

struct Options {
  std::string rpc_socket = "/var/tmp/nvmf_hostd.sock";
  unsigned reactors = 2;
  std::string mode = "adaptive";
  unsigned max_io_kib = 128;
  std::string log_level = "notice";
};

int fail(const std::string& message) {
  std::fprintf(stderr, "nvmf_hostd: %s\n", message.c_str());
  return 1;
}

int run(const Options& options) {
  LogLevel level;
  if (!log_level_parse(options.log_level.c_str(), &level)) {
    return fail("--log-level: '" + options.log_level +
                "' is not one of error, warn, notice, info, debug");
  }
  log_set_level(level);
  hostd::DaemonOpts opts;
  if (!reactor::mode_parse(options.mode.c_str(), &opts.mode)) {
    return fail("--mode: '" + options.mode + "' is not one of poll, interrupt, adaptive");
  }
  if (options.reactors == 0 || options.reactors > 64) {
    return fail("--reactors: " + std::to_string(options.reactors) + " is not within 1..64");
  }
  opts.io_reactors = options.reactors;
  if (options.max_io_kib < 4 || options.max_io_kib > 4096 ||
      (options.max_io_kib & (options.max_io_kib - 1)) != 0) {
    return fail("--max-io-kib: " + std::to_string(options.max_io_kib) +
                " is not a power of two within 4..4096");
  }
  opts.max_request_bytes = options.max_io_kib * 1024;

  std::string message;
  auto exporter = hostd::NbdExporter::open(&message);
  if (!exporter) return fail(message);

  // Signals go to this thread only: block them before any other thread exists.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a kernel socket gone mid-reply is an error return, not a death

  auto daemon = hostd::Daemon::start(opts, **exporter, &message);
  if (!daemon) return fail(message);
  rpc::Dispatcher dispatcher;
  hostd::register_rpc_methods(dispatcher, **daemon);
  rpc::ServerOpts rpc_opts;
  rpc_opts.socket_path = options.rpc_socket;
  // connect and disconnect wait for the target and for the kernel: longer than a config call.
  auto server = rpc::Server::start(rpc_opts, dispatcher, &message);
  if (!server) return fail(message);
  NVMF_NOTICELOG(nvmf_hostd, "ready: JSON-RPC on %s, %u I/O reactors (%s mode), max I/O %u KiB",
                 (*server)->socket_path().c_str(), options.reactors, options.mode.c_str(),
                 options.max_io_kib);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  NVMF_NOTICELOG(nvmf_hostd, "%s: removing devices and disconnecting",
                 signal_number == SIGINT ? "SIGINT" : "SIGTERM");
  server->reset();  // no call may race the teardown
  daemon->reset();
  NVMF_NOTICELOG(nvmf_hostd, "stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "nvmf_hostd: exports NVMe-oF (RDMA) namespaces as /dev/nbdN block devices; "
      "nvmfctl connect/disconnect/list drive it (docs/cli.md)"};
  app.add_option("--rpc-socket", options.rpc_socket, "JSON-RPC socket (mode 0600)")
      ->capture_default_str();
  app.add_option("--reactors", options.reactors,
                 "I/O reactor threads: each owns one I/O queue pair per controller and one NBD "
                 "socket per device (the kernel's hardware queues)")
      ->capture_default_str();
  app.add_option("--mode", options.mode,
                 "poll (spin), interrupt (sleep when idle) or adaptive (poll while busy)")
      ->capture_default_str();
  app.add_option("--max-io-kib", options.max_io_kib,
                 "largest read or write the kernel sends (the devices' max_sectors_kb); larger "
                 "ones are split at the controller's MDTS")
      ->capture_default_str();
  app.add_option("--log-level", options.log_level, "error, warn, notice, info or debug")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return run(options);
}
