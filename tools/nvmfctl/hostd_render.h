// nvmfctl connect / connect-all / disconnect / list: nvmf_hostd's answers (its Controller
// objects, docs/cli.md) as text, shaped like nvme-cli's. Pure: unit-tested on made-up
// objects. Members missing from an object print as "-" (a newer or older nvmf_hostd still
// lists); a member of the wrong type throws Json::exception (the runner reports a malformed
// answer).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace nvmf::ctl {

using Json = nlohmann::json;

// One controller's block devices, one "/dev/nbdN" line per namespace: what a script takes
// with dev=$(nvmfctl connect ...). "" when it has no namespace.
std::string devices_text(const Json& controller);

// disconnect's and disconnect-all's {"disconnected": [Controller...]}: nvme-cli's
// "NQN:<nqn> disconnected <n> controller(s)", one line per subsystem NQN in order of first
// appearance. An empty list: "NQN:<nqn> disconnected 0 controller(s)" when `nqn` is given,
// else "disconnected 0 controller(s)".
std::string disconnected_text(const Json& result, const std::string& nqn = "");

// list's {"controllers": [...]}: a table like `nvme list`, one row per namespace (a
// controller without namespaces gets one row with "-" for them):
//   Node       Namespace  Size     Format  Subsystem NQN  Address        State  Memreg
//   ---------  ---------  -------  ------  -------------  -------------  -----  ------
//   /dev/nbd0          1  4.19 MB  512 B   nqn....        10.0.0.1:4420  live   global
// No controllers: "No controllers are connected through nvmf_hostd.\n".
std::string controller_list_text(const Json& result);

// nvme-cli's decimal units with two decimals: "512 B", "4.19 MB", "1.00 TB".
std::string size_text(uint64_t bytes);

// "10.0.0.1:4420", "[fe80::1]:4420".
std::string address_text(const std::string& traddr, const std::string& trsvcid);

}  // namespace nvmf::ctl
