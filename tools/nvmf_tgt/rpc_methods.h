// nvmf_tgt's JSON-RPC methods (docs/target-config.md, "Runtime control (JSON-RPC)"): bdevs,
// subsystems, namespaces, listeners, hosts, statistics, the log level and save_config.
// main() registers them explicitly on its Dispatcher (STYLE 2); tests call the Dispatcher in
// process, without a socket.
//
// Threads: every method runs on the RPC server's thread, one call at a time. After start-up
// that thread is the target's setup thread: the only one that touches the BdevRegistry, the
// NvmeControllerPool and this context (main() only waits for signals, and stops the server
// before it tears anything down). Target configuration calls take the target's own mutex;
// transport calls (listen, stop_listening, stats) run on reactors[0], the acceptor, through
// reactor::run_and_wait, so the reactors must run on threads of their own (a ReactorGroup),
// never be polled by the thread that calls the Dispatcher.
//
// A failed call changes nothing: every method checks what it can before it changes anything,
// and undoes its first step when a later one fails (listener_add).
#pragma once

#include <vector>

#include "bdev/nvme_bdev.h"
#include "bdev/registry.h"
#include "reactor/reactor.h"
#include "rpc/rpc.h"
#include "target/config.h"
#include "target/target.h"
#include "transport_rdma/target_transport.h"

namespace nvmf::tgt {

struct RpcContext {
  target::Target& target;
  bdev::BdevRegistry& registry;
  bdev::NvmeControllerPool& nvme_pool;  // nvme bdevs made by bdev_create open controllers here
  // nullptr: no transport (tests of the configuration): listener_add / listener_remove then
  // change only the subsystems' listeners (the discovery log), and stats has no "transport".
  transport_rdma::RdmaTargetTransport* transport = nullptr;
  std::vector<reactor::Reactor*> reactors;  // reactors[0] runs the transport's acceptor
  // What save_config writes besides the live subsystems: the transport section of -c, and
  // the configuration of every bdev in the registry, in creation order (main() seeds it with
  // the -c file's bdevs; bdev_create and bdev_delete keep it up to date).
  target::TransportConfig transport_config{};
  std::vector<target::BdevConfig> bdevs{};
  // How long subsystem_delete waits for the controllers it disconnected to go, and bdev_delete
  // for the channels of removed namespaces to close.
  unsigned drain_timeout_ms = 5000;
};

// Registers every method on `dispatcher` (setup path, before the server starts). `context`
// must outlive the server.
void register_rpc_methods(rpc::Dispatcher& dispatcher, RpcContext& context);

}  // namespace nvmf::tgt
