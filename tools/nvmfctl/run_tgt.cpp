#include "run_tgt.h"

#include <algorithm>
#include <memory>
#include <variant>

#include "render.h"
#include "rpc/rpc.h"

namespace nvmf::ctl {

namespace {

std::string how_to_reach(const std::string& socket_path) {
  return "Start the target with its RPC socket (nvmf_tgt -c CONFIG --rpc-socket " + socket_path +
         "), or point --socket at the one it uses (default " + kDefaultSocketPath +
         "); then nvmfctl tgt --help lists its methods.\n";
}

// The target's methods, or an RpcError.
std::variant<std::vector<std::pair<std::string, std::string>>, rpc::RpcError> ask_methods(
    rpc::Client& client) {
  rpc::Outcome outcome = client.call("rpc_get_methods", Json::object());
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) return *error;
  return method_list(std::get<Json>(outcome));
}

Report methods_help(const TgtCommand& command, rpc::Client* client, const std::string& why) {
  Report report;
  report.out = command.usage;
  if (client == nullptr) {
    report.out += "\nThe target is not reachable at " + command.socket_path + ": " + why + "\n" +
                  how_to_reach(command.socket_path);
    return report;
  }
  auto methods = ask_methods(*client);
  if (const auto* error = std::get_if<rpc::RpcError>(&methods)) {
    report.out += "\nThe target at " + command.socket_path +
                  " did not list its methods: " + error->message + "\n";
    return report;
  }
  const auto& list = std::get<0>(methods);
  Table table;
  table.header = {"METHOD", "SUMMARY"};
  for (const auto& [name, summary] : list) table.rows.push_back({name, summary});
  report.out += "\nMethods of the target at " + command.socket_path + " (" +
                std::to_string(list.size()) + "):\n" + render_table(table, 2);
  return report;
}

Report method_help(const TgtCommand& command, rpc::Client& client) {
  Report report;
  auto methods = ask_methods(client);
  if (const auto* error = std::get_if<rpc::RpcError>(&methods)) {
    report.status = exit_status::failed;
    report.err = "nvmfctl: rpc_get_methods: " + error->message + "\n";
    return report;
  }
  const auto& list = std::get<0>(methods);
  const auto found = std::find_if(list.begin(), list.end(),
                                  [&](const auto& entry) { return entry.first == command.method; });
  if (found == list.end()) {
    report.status = exit_status::failed;
    report.err = "nvmfctl: " + command.method + ": the target at " + command.socket_path +
                 " has no such method (nvmfctl tgt --help lists them)\n";
    return report;
  }
  report.out = command.method + ": " + (found->second.empty() ? "(no summary)" : found->second) +
               "\nUsage: nvmfctl tgt [--socket PATH] [-o human|json] " + command.method +
               " [--KEY VALUE | --KEY=VALUE]... [--params JSON]\n";
  return report;
}

}  // namespace

Report run_tgt(const TgtCommand& command) {
  std::string message;
  auto client = rpc::Client::connect(command.socket_path, &message);
  if (!client) {
    if (command.help && command.method.empty()) return methods_help(command, nullptr, message);
    Report report;
    report.status = exit_status::unreachable;
    report.err = "nvmfctl: " + message + "\n";
    return report;
  }
  if (command.help) {
    return command.method.empty() ? methods_help(command, client->get(), "")
                                  : method_help(command, **client);
  }
  rpc::Outcome outcome = (*client)->call(command.method, command.params);
  Report report;
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    report.status = exit_status::failed;
    report.err = "nvmfctl: " + command.method + ": " + error->message + "\n";
    return report;
  }
  const Json& result = std::get<Json>(outcome);
  report.out = command.output == OutputFormat::json ? result.dump(2) + "\n"
                                                    : render_human(command.method, result);
  return report;
}

}  // namespace nvmf::ctl
