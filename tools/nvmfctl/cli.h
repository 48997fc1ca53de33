// nvmfctl's command line (CLI11), parsed into a Command without touching a target, so the
// parsing and its usage errors are unit-tested.
//
//   nvmfctl tgt [--socket PATH] [-o human|json] METHOD [--KEY VALUE | --KEY=VALUE]...
//               [--params JSON] [-o human|json] [-h]
//   nvmfctl discover -t rdma -a ADDR [-s PORT] [-q HOSTNQN] [-I HOSTID] [-o normal|json]
//   nvmfctl id-ctrl  -t rdma -a ADDR [-s PORT] -n NQN [-q HOSTNQN] [-I HOSTID] [-o normal|json]
//   nvmfctl id-ns    -t rdma -a ADDR [-s PORT] -n NQN --namespace-id NSID [-q ...] [-I ...]
//                    [-o normal|json]
//   nvmfctl connect  -t rdma -a ADDR [-s PORT] -n NQN [-q HOSTNQN] [-I HOSTID]
//                    [-i NR_IO_QUEUES] [-Q QUEUE_SIZE] [-k KATO_S] [-c RECONNECT_DELAY_S]
//                    [-l CTRL_LOSS_TMO_S] [--memreg POLICY] [--socket PATH] [-o normal|json]
//   nvmfctl connect-all -t rdma -a ADDR [-s PORT] [the same options, no -n]
//   nvmfctl disconnect -n NQN | -d DEVICE [--socket PATH]
//   nvmfctl disconnect-all [--socket PATH]
//   nvmfctl list [--socket PATH] [-o normal|json]
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "nvmf/host.h"

namespace nvmf::ctl {

using Json = nlohmann::json;

// What a script may rely on (docs/cli.md).
namespace exit_status {
inline constexpr int ok = 0;
inline constexpr int failed = 1;       // the operation failed: an RPC error, a connect the
                                       // target refused, no such namespace
inline constexpr int usage = 2;        // bad command line
inline constexpr int unreachable = 3;  // cannot reach the target (RPC socket, RDMA address)
}  // namespace exit_status

// nvmf_tgt's default RPC socket (rpc::ServerOpts::socket_path).
inline constexpr const char* kDefaultSocketPath = "/var/tmp/nvmf_tgt.sock";
// nvmf_hostd's default RPC socket (its --rpc-socket).
inline constexpr const char* kDefaultHostdSocketPath = "/var/tmp/nvmf_hostd.sock";
// Where the host identity lives (nvme-cli's); the environment variable NVMF_ETC_DIR, read by
// main, replaces it (tests, a second identity on one machine).
inline constexpr const char* kDefaultEtcDir = "/etc/nvme";
inline constexpr const char* kEtcDirVariable = "NVMF_ETC_DIR";

// The exit codes as --help prints them.
extern const char* const kExitCodesHelp;

enum class Subcommand : uint8_t {
  tgt,
  discover,
  id_ctrl,
  id_ns,
  connect,  // the rest: over nvmf_hostd's RPC socket
  connect_all,
  disconnect,
  disconnect_all,
  list,
};
enum class OutputFormat : uint8_t { human, json };  // host side: "normal" is human

struct TgtCommand {
  std::string socket_path = kDefaultSocketPath;
  OutputFormat output = OutputFormat::human;
  std::string method;  // empty with help: the tool's help (and the target's method list)
  Json params = Json::object();
  bool help = false;  // `tgt --help` (method empty) or `tgt METHOD --help`
  std::string usage;  // CLI11's help of `tgt`, for the runner to print with the methods
};

struct HostCommand {
  host::TransportId trid;     // trtype, traddr, trsvcid and (id-ctrl, id-ns) subnqn
  host::ControllerOpts opts;  // hostnqn / hostid from -q / -I; empty: resolved from etc_dir
                              // by the runner (read only: nothing saved)
  OutputFormat output = OutputFormat::human;
  uint32_t nsid = 0;  // id-ns
  std::string etc_dir = kDefaultEtcDir;
};

// connect, connect-all, disconnect, disconnect-all, list: one nvmf_hostd RPC call each
// (connect-all: discovery in process, then one connect per subsystem).
struct HostdCommand {
  std::string socket_path = kDefaultHostdSocketPath;
  OutputFormat output = OutputFormat::human;  // connect, connect-all, list
  // connect: the subsystem (subnqn from -n); connect-all: the discovery controller's address.
  host::TransportId trid;
  host::HostIdentity identity;  // -q / -I as given; empty / zero: resolved from etc_dir by
                                // the runner, generated and saved there when absent
  // connect's optional params, only those given (nvmf_hostd's defaults for the rest):
  // nr_io_queues, queue_size, keep_alive_tmo, reconnect_delay, ctrl_loss_tmo, memreg.
  Json options = Json::object();
  std::string nqn;     // disconnect -n
  std::string device;  // disconnect -d
  std::string etc_dir = kDefaultEtcDir;
};

struct Command {
  Subcommand subcommand = Subcommand::tgt;
  TgtCommand tgt;
  HostCommand host;
  HostdCommand hostd;
};

// What a subcommand did: its exit status, what goes to stdout, what goes to stderr (each
// message one line, prefixed "nvmfctl: ").
struct Report {
  int status = exit_status::ok;
  std::string out;
  std::string err;
};

// What parsing decided: run the command, or exit now with `status` after printing `out`
// (help) to stdout and `err` (one line) to stderr.
struct ParseResult {
  bool run = false;
  int status = exit_status::ok;
  std::string out;
  std::string err;
};

ParseResult parse_command_line(const std::vector<std::string>& args, Command* command);

}  // namespace nvmf::ctl
