// nvmf_hostd's JSON-RPC methods (docs/cli.md, "nvmf_hostd"): connect, disconnect,
// disconnect_all, list. Each decodes its params (unknown keys refused), runs on the Daemon
// and answers with its JSON or an RpcError whose message names the problem.
#pragma once

#include "daemon.h"
#include "rpc/rpc.h"

namespace nvmf::hostd {

void register_rpc_methods(rpc::Dispatcher& dispatcher, Daemon& daemon);

// connect's params decoded (throws rpc::ParamError naming the field). Exposed for tests.
ConnectRequest parse_connect_params(const Json& params);

}  // namespace nvmf::hostd
