// nvmfctl's command line (CLI11), parsed into a Command without touching a target, so the
// parsing and its usage errors are unit-tested.
//
//   nvmfctl tgt [--socket PATH] [-o human|json] METHOD [--KEY VALUE | --KEY=VALUE]...
//               [--params JSON] [-o human|json] [-h]
//   nvmfctl discover -t rdma -a ADDR [-s PORT] [-q HOSTNQN] [-I HOSTID] [-o normal|json]
//   nvmfctl id-ctrl  -t rdma -a ADDR [-s PORT] -n NQN [-q HOSTNQN] [-I HOSTID] [-o normal|json]
//   nvmfctl id-ns    -t rdma -a ADDR [-s PORT] -n NQN --namespace-id NSID [-q ...] [-I ...]
//                    [-o normal|json]
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

// The exit codes as --help prints them.
extern const char* const kExitCodesHelp;

enum class Subcommand : uint8_t { tgt, discover, id_ctrl, id_ns };
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
  host::ControllerOpts opts;  // hostnqn / hostid from -q / -I; empty: the library's defaults
  OutputFormat output = OutputFormat::human;
  uint32_t nsid = 0;  // id-ns
};

struct Command {
  Subcommand subcommand = Subcommand::tgt;
  TgtCommand tgt;
  HostCommand host;
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
