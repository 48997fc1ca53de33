// nvmfctl: the control CLI. Configures a running nvmf_tgt over its JSON-RPC socket (like
// SPDK's rpc.py), looks at NVMe-oF RDMA targets through libnvmf_host and connects to them
// through the host daemon nvmf_hostd (like nvme-cli):
//
//   nvmfctl tgt [--socket PATH] [-o human|json] METHOD [--KEY VALUE]... [--params JSON]
//   nvmfctl discover -t rdma -a ADDR [-s PORT] [-q HOSTNQN] [-I HOSTID] [-o normal|json]
//   nvmfctl id-ctrl  -t rdma -a ADDR [-s PORT] -n NQN [...]
//   nvmfctl id-ns    -t rdma -a ADDR [-s PORT] -n NQN --namespace-id NSID [...]
//   nvmfctl connect | connect-all | disconnect | disconnect-all | list   (through nvmf_hostd)
//
// NVMF_ETC_DIR in the environment replaces /etc/nvme, where the host identity lives.
//
// Exit status: 0 done, 1 the operation failed, 2 usage, 3 cannot reach the target
// (docs/cli.md).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "common/log.h"
#include "run_host.h"
#include "run_hostd.h"
#include "run_tgt.h"

namespace {

// The library's log lines would repeat the one-line error nvmfctl prints (and add notices
// to a successful run): they go nowhere.
void discard_log(nvmf::LogLevel, const char*, const char*, void*) {}

int finish(const nvmf::ctl::Report& report) {
  std::fputs(report.out.c_str(), stdout);
  std::fputs(report.err.c_str(), stderr);
  return report.status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nvmf::ctl;
  Command command;
  const ParseResult parsed =
      parse_command_line(std::vector<std::string>(argv, argv + argc), &command);
  if (!parsed.run) return finish(Report{parsed.status, parsed.out, parsed.err});
  if (const char* etc_dir = std::getenv(kEtcDirVariable); etc_dir != nullptr && *etc_dir != 0) {
    command.host.etc_dir = etc_dir;
    command.hostd.etc_dir = etc_dir;
  }
  switch (command.subcommand) {
    case Subcommand::tgt:
      return finish(run_tgt(command.tgt));
    case Subcommand::connect:
      return finish(run_connect(command.hostd));
    case Subcommand::disconnect:
      return finish(run_disconnect(command.hostd));
    case Subcommand::disconnect_all:
      return finish(run_disconnect_all(command.hostd));
    case Subcommand::list:
      return finish(run_list(command.hostd));
    default:
      break;  // discover, id-ctrl, id-ns, connect-all: an RDMA host of our own
  }

  nvmf::log_set_sink(discard_log, nullptr);
  auto host = nvmf::host::Host::create(nvmf::host::HostOpts{});  // rdma-core
  if (!host) {
    char text[160];
    return finish(Report{exit_status::unreachable, "",
                         std::string("nvmfctl: cannot start the RDMA host: ") +
                             nvmf::error_describe(host.error(), text, sizeof(text)) + "\n"});
  }
  switch (command.subcommand) {
    case Subcommand::discover:
      return finish(run_discover(**host, command.host));
    case Subcommand::id_ctrl:
      return finish(run_id_ctrl(**host, command.host));
    case Subcommand::connect_all:
      return finish(run_connect_all(**host, command.hostd));
    default:
      return finish(run_id_ns(**host, command.host));
  }
}
