#include "run_hostd.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <variant>
#include <vector>

#include "host_render.h"
#include "hostd_render.h"
#include "rpc/rpc.h"
#include "spec/discovery.h"

namespace nvmf::ctl {

namespace {

// nvmf_hostd's connect waits for the library's whole bring-up (5 s connect timeout per queue,
// one admin command after another) and then for the NBD device; disconnect for the shutdown
// (CC.SHN) and the device's teardown. Generous: a daemon that does not answer at all is rare.
constexpr unsigned kConnectTimeoutMs = 120000;
constexpr unsigned kCallTimeoutMs = 60000;

Report failure(const char* subcommand, int status, const std::string& message) {
  Report report;
  report.status = status;
  report.err = std::string("nvmfctl: ") + subcommand + ": " + message + "\n";
  return report;
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The rpc Client's own messages name nvmf_tgt, its first server: say which daemon this is.
std::string hostd_wording(const std::string& message) {
  return replace_all(message, "nvmf_tgt", "nvmf_hostd");
}

// Connects to nvmf_hostd, or sets *report (exit status 3: nvmf_hostd is not reachable).
std::unique_ptr<rpc::Client> connect_hostd(const HostdCommand& command, const char* subcommand,
                                           Report* report) {
  std::string message;
  auto client = rpc::Client::connect(command.socket_path, &message);
  if (client) return std::move(*client);
  const std::string& path = command.socket_path;
  switch (client.error().code) {
    case Errc::connection_refused:
      message = "no nvmf_hostd is listening on " + path + " (start it, or give --socket)";
      break;
    case Errc::permission_denied:
      message =
          "permission denied on " + path + " (run as the user that started nvmf_hostd, or as root)";
      break;
    default:
      message = hostd_wording(message);
      break;
  }
  *report = failure(subcommand, exit_status::unreachable, message);
  return nullptr;
}

// The status of nvmf_hostd's error to a connect: 3 when its library could not reach the
// target (the messages host_render.h's connect_failure_status knows, or nvmf_hostd's own
// "cannot reach A:P: ..."), 1 for every other failure (refused, already connected, params).
int connect_error_status(const rpc::RpcError& error) {
  if (error.code != rpc::error_code::failed) return exit_status::failed;
  if (error.message.rfind("cannot reach ", 0) == 0) return exit_status::unreachable;
  return connect_failure_status(error.message);
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return text;
}

// Resolves the identity; a file that could not be saved is a warning on stderr.
host::HostIdentity identity_of(const HostdCommand& command, const char* subcommand,
                               Report* report) {
  std::string warning;
  host::HostIdentity identity =
      host::resolve_host_identity(command.identity, command.etc_dir, true, &warning);
  if (!warning.empty())
    report->err += std::string("nvmfctl: ") + subcommand + ": warning: " + warning + "\n";
  return identity;
}

// One call; a result, or the error (transport failures in nvmf_hostd's name).
rpc::Outcome call(rpc::Client& client, const std::string& method, const Json& params,
                  unsigned timeout_ms = kCallTimeoutMs) {
  rpc::Outcome outcome = client.call(method, params, timeout_ms);
  if (auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    if (error->code == rpc::error_code::internal_error)
      error->message = hostd_wording(error->message);
  }
  return outcome;
}

// The answer's shape was not what docs/cli.md says nvmf_hostd answers.
Report malformed(const char* subcommand, const std::exception& error) {
  return failure(subcommand, exit_status::failed,
                 std::string("malformed answer from nvmf_hostd: ") + error.what());
}

// A wildcard listener (0.0.0.0, ::) in the discovery log means "any of the target's
// addresses": the one the discovery controller answered on is one of them.
bool wildcard_address(const std::string& traddr) {
  return traddr.empty() || traddr == "0.0.0.0" || traddr == "::" || traddr == "[::]";
}

}  // namespace

Json connect_params(const HostdCommand& command, const host::TransportId& trid,
                    const host::HostIdentity& identity) {
  Json params = {{"trtype", lower(trid.trtype)},
                 {"adrfam", lower(trid.adrfam)},
                 {"traddr", trid.traddr},
                 {"trsvcid", trid.trsvcid},
                 {"subnqn", trid.subnqn},
                 {"hostnqn", identity.hostnqn},
                 {"hostid", host::uuid_to_string(identity.hostid)}};
  for (const auto& [key, value] : command.options.items()) params[key] = value;
  return params;
}

Report run_connect(const HostdCommand& command) {
  Report report;
  auto client = connect_hostd(command, "connect", &report);
  if (client == nullptr) return report;
  const host::HostIdentity identity = identity_of(command, "connect", &report);
  rpc::Outcome outcome =
      call(*client, "connect", connect_params(command, command.trid, identity), kConnectTimeoutMs);
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    Report failed = failure("connect", connect_error_status(*error), error->message);
    failed.err = report.err + failed.err;
    return failed;
  }
  const Json& controller = std::get<Json>(outcome);
  try {
    if (command.output == OutputFormat::json) {
      report.out = controller.dump(2) + "\n";
    } else {
      report.out = devices_text(controller);
      if (report.out.empty()) {
        report.err +=
            "nvmfctl: connect: " + controller.value("name", std::string("the controller")) +
            " has no active namespace: no block device\n";
      }
    }
  } catch (const Json::exception& error) {
    return malformed("connect", error);
  }
  return report;
}

Report run_connect_all(host::Host& host, const HostdCommand& command) {
  Report report;
  auto client = connect_hostd(command, "connect-all", &report);
  if (client == nullptr) return report;
  const host::HostIdentity identity = identity_of(command, "connect-all", &report);

  host::ControllerOpts opts;
  opts.hostnqn = identity.hostnqn;
  opts.hostid = identity.hostid;
  std::string message;
  auto entries = host.discover(command.trid, opts, &message);
  if (!entries) {
    if (message.empty()) {
      char text[160];
      message = error_describe(entries.error(), text, sizeof(text));
    }
    Report failed = failure("connect-all", connect_failure_status(message), message);
    failed.err = report.err + failed.err;
    return failed;
  }

  Json connected = Json::array();
  Json skipped = Json::array();
  Json failed = Json::array();
  std::vector<host::TransportId> asked;
  try {
    for (const host::DiscoveryEntry& entry : *entries) {
      // NVM subsystems only: referrals (other discovery controllers) are not followed.
      if (entry.subtype != spec::subsystem_type::nvm) continue;
      host::TransportId trid = entry.trid();
      const std::string where = entry.subnqn + " at " + address_text(entry.traddr, entry.trsvcid);
      if (entry.trtype != spec::trtype::rdma ||
          (entry.adrfam != spec::adrfam::ipv4 && entry.adrfam != spec::adrfam::ipv6)) {
        report.err += "nvmfctl: connect-all: " + where + ": skipped: not RDMA over IPv4 or IPv6\n";
        skipped.push_back({{"subnqn", entry.subnqn},
                           {"traddr", entry.traddr},
                           {"trsvcid", entry.trsvcid},
                           {"message", "not RDMA over IPv4 or IPv6"}});
        continue;
      }
      if (wildcard_address(trid.traddr)) {
        trid.traddr = command.trid.traddr;
        trid.adrfam = command.trid.adrfam;
      }
      if (trid.trsvcid.empty()) trid.trsvcid = command.trid.trsvcid;
      // Two listeners can name one address once the wildcard is replaced.
      if (std::find(asked.begin(), asked.end(), trid) != asked.end()) continue;
      asked.push_back(trid);

      rpc::Outcome outcome =
          call(*client, "connect", connect_params(command, trid, identity), kConnectTimeoutMs);
      const Json entry_json = {
          {"subnqn", trid.subnqn}, {"traddr", trid.traddr}, {"trsvcid", trid.trsvcid}};
      if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
        Json noted = entry_json;
        noted["message"] = error->message;
        if (error->code == rpc::error_code::exists) {
          // nvme-cli's connect-all skips what is connected already.
          report.err += "nvmfctl: connect-all: " + error->message + ", skipped\n";
          skipped.push_back(noted);
        } else {
          report.err += "nvmfctl: connect-all: " + trid.subnqn + " at " +
                        address_text(trid.traddr, trid.trsvcid) + ": " + error->message + "\n";
          if (report.status == exit_status::ok) report.status = connect_error_status(*error);
          failed.push_back(noted);
        }
        continue;
      }
      const Json& controller = std::get<Json>(outcome);
      if (command.output == OutputFormat::human) report.out += devices_text(controller);
      connected.push_back(controller);
    }
  } catch (const Json::exception& error) {
    Report bad = malformed("connect-all", error);
    bad.err = report.err + bad.err;
    return bad;
  }
  if (command.output == OutputFormat::json) {
    report.out =
        Json{{"connected", connected}, {"skipped", skipped}, {"failed", failed}}.dump(2) + "\n";
  }
  return report;
}

Report run_disconnect(const HostdCommand& command) {
  Report report;
  auto client = connect_hostd(command, "disconnect", &report);
  if (client == nullptr) return report;
  const Json params =
      command.nqn.empty() ? Json{{"device", command.device}} : Json{{"subnqn", command.nqn}};
  rpc::Outcome outcome = call(*client, "disconnect", params);
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    return failure("disconnect", exit_status::failed, error->message);
  }
  try {
    report.out = disconnected_text(std::get<Json>(outcome), command.nqn);
  } catch (const Json::exception& error) {
    return malformed("disconnect", error);
  }
  return report;
}

Report run_disconnect_all(const HostdCommand& command) {
  Report report;
  auto client = connect_hostd(command, "disconnect-all", &report);
  if (client == nullptr) return report;
  rpc::Outcome outcome = call(*client, "disconnect_all", Json());  // null: no params
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    return failure("disconnect-all", exit_status::failed, error->message);
  }
  try {
    report.out = disconnected_text(std::get<Json>(outcome));
  } catch (const Json::exception& error) {
    return malformed("disconnect-all", error);
  }
  return report;
}

Report run_list(const HostdCommand& command) {
  Report report;
  auto client = connect_hostd(command, "list", &report);
  if (client == nullptr) return report;
  rpc::Outcome outcome = call(*client, "list", Json());
  if (const auto* error = std::get_if<rpc::RpcError>(&outcome)) {
    return failure("list", exit_status::failed, error->message);
  }
  const Json& result = std::get<Json>(outcome);
  try {
    report.out =
        command.output == OutputFormat::json ? result.dump(2) + "\n" : controller_list_text(result);
  } catch (const Json::exception& error) {
    return malformed("list", error);
  }
  return report;
}

}  // namespace nvmf::ctl
