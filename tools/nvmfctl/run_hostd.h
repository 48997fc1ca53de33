// nvmfctl connect / connect-all / disconnect / disconnect-all / list: one JSON-RPC call to
// nvmf_hostd over its Unix socket (src/rpc) per controller, the answer printed (hostd_render.h,
// or JSON). The host identity is resolved here (-q / -I, else the files in etc_dir, else
// generated and saved there: host::resolve_host_identity) and always sent, so that nvmf_hostd
// connects as the identity nvmfctl shows. connect-all discovers in process through the Host it
// is given (main: rdma-core; tests: the simulated HCA). Blocking; one connection per run.
#pragma once

#include "cli.h"
#include "nvmf/host.h"

namespace nvmf::ctl {

// Exit status 0; 1 nvmf_hostd answered an error (already connected, the target refused, no
// such controller, bad params), "nvmfctl: SUBCOMMAND: its message" on stderr; 3 nvmf_hostd is
// not at the socket ("nvmfctl: SUBCOMMAND: no nvmf_hostd is listening on PATH (start it, or
// give --socket)"), or the target cannot be reached (nvmf_hostd's connect failed before the
// admin queue came up; connect-all's discovery).
Report run_connect(const HostdCommand& command);
// As run_connect, per NVM subsystem entry of the discovery log (referrals are not followed);
// entries nvmf_hostd already holds are skipped with a note on stderr. Entries that fail do
// not stop the others; the status is the first failure's.
Report run_connect_all(host::Host& host, const HostdCommand& command);
Report run_disconnect(const HostdCommand& command);
Report run_disconnect_all(const HostdCommand& command);
Report run_list(const HostdCommand& command);

// connect's params for `trid` as identity: trtype, adrfam, traddr, trsvcid, subnqn, hostnqn,
// hostid, then command.options.
Json connect_params(const HostdCommand& command, const host::TransportId& trid,
                    const host::HostIdentity& identity);

}  // namespace nvmf::ctl
