// nvmfctl tgt: one JSON-RPC call to a running nvmf_tgt over its Unix socket (src/rpc), its
// result printed (render.h, or JSON); `--help` asks the target for its methods
// (rpc_get_methods). Blocking; one connection per run.
#pragma once

#include "cli.h"

namespace nvmf::ctl {

// Exit status 0 (done, or help printed), 1 (the method answered an error: "nvmfctl: METHOD:
// MESSAGE" on stderr), 3 (nothing answers at the socket: the client's message).
Report run_tgt(const TgtCommand& command);

}  // namespace nvmf::ctl
