// nvmf_hostd's core: the controllers it holds (through libnvmf_host) and the block devices it
// exports for their namespaces (through a DeviceExporter: NBD in the daemon, a socket pair
// the test plays the kernel on in tests).
//
// Threads:
//   admin reactor   owns every Controller (its admin queue): connect, keep-alive and async
//                   events every 100 ms (process_admin_completions), controller-level
//                   reconnect, disconnect. Blocking library calls run here and stall only
//                   the control plane.
//   I/O reactors    reactor r owns I/O queue pair r of each controller and the NBD queue of
//                   each exported namespace's socket r: the kernel gets one hardware queue per
//                   reactor. Polls while I/O is in flight, sleeps on the sockets when idle.
//   callers         (the RPC server's thread, tests) call connect/disconnect/list, which run
//                   on the admin reactor and wait.
//
// Controller loss: when a controller's admin queue fails (keep-alive unanswered, the target
// gone), the daemon holds the NBD requests in flight and reconnects the whole controller every
// reconnect_delay until ctrl_loss_timeout ("reconnecting in N s, attempt K of M, T s before
// the controller is lost"); on success each reactor gets a new I/O queue pair and the held
// requests go out again; at the loss timeout they fail with EIO and the devices stay (a
// disconnect removes them).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "exporter.h"
#include "nvmf/host.h"
#include "reactor/reactor.h"

namespace nvmf::hostd {

using Json = nlohmann::json;

struct DaemonOpts {
  unsigned io_reactors = 2;
  reactor::Mode mode = reactor::Mode::adaptive;
  uint32_t max_request_bytes = 128 * 1024;  // largest NBD read/write (max_sectors_kb)
  uint32_t slots_per_queue = 128;           // NBD requests in flight per socket
  verbs::Provider* provider = nullptr;      // nullptr = rdma-core
  unsigned admin_poll_ms = 100;
};

// What `connect` asks for (the RPC's params, decoded).
struct ConnectRequest {
  host::TransportId trid;
  host::ControllerOpts opts;  // hostnqn/hostid empty: the library's default identity
  uint16_t nr_io_queues = 0;  // 0 = one per I/O reactor; more than reactors is capped
  bool ctrl_loss_forever = false;
};

enum class ControllerState : uint8_t { live, reconnecting, lost, deleting };
const char* controller_state_name(ControllerState state) noexcept;

class Daemon {
 public:
  static Result<std::unique_ptr<Daemon>> start(const DaemonOpts& opts, DeviceExporter& exporter,
                                               std::string* message);
  ~Daemon();  // disconnect_all(), then the reactors stop

  // Any thread. Each returns the JSON the RPC answers with (docs/cli.md, "nvmf_hostd").
  // connect: errors already_exists ("already connected to ..."), or the library's reason.
  Result<Json> connect(const ConnectRequest& request, std::string* message);
  // By subsystem NQN (every controller of it) or by device path ("/dev/nbd0" or "nbd0").
  Result<Json> disconnect_nqn(const std::string& subnqn, std::string* message);
  Result<Json> disconnect_device(const std::string& device, std::string* message);
  Json disconnect_all();
  Json list();

  struct Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvmf::hostd
