// nvmfctl discover / id-ctrl / id-ns over libnvmf_host: connect, read, print, disconnect.
// The Host comes from the caller (main: rdma-core; tests: the simulated HCA), the seam that
// lets the commands run against an in-process target.
#pragma once

#include "cli.h"
#include "nvmf/host.h"

namespace nvmf::ctl {

// Exit status 0, 1 (the target refused or failed: Fabrics Connect refused, no such
// namespace, a failed command) or 3 (cannot reach the address); errors on stderr as
// "nvmfctl: SUBCOMMAND: the library's message".
Report run_discover(host::Host& host, const HostCommand& command);
Report run_id_ctrl(host::Host& host, const HostCommand& command);
Report run_id_ns(host::Host& host, const HostCommand& command);

}  // namespace nvmf::ctl
