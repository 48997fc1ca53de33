#include "run_host.h"

#include <memory>

#include "host_render.h"

namespace nvmf::ctl {

namespace {

Report failure(const char* subcommand, int status, const std::string& message) {
  Report report;
  report.status = status;
  report.err = std::string("nvmfctl: ") + subcommand + ": " + message + "\n";
  return report;
}

std::string describe(const Error& error) {
  char text[160];
  return error_describe(error, text, sizeof(text));
}

// -q / -I, else the files in command.etc_dir, else generated (nvme-cli's order; nothing is
// saved: only connect and connect-all make an identity permanent).
host::ControllerOpts opts_of(const HostCommand& command) {
  host::ControllerOpts opts = command.opts;
  const host::HostIdentity identity = host::resolve_host_identity(
      host::HostIdentity{opts.hostnqn, opts.hostid}, command.etc_dir, false, nullptr);
  opts.hostnqn = identity.hostnqn;
  opts.hostid = identity.hostid;
  return opts;
}

// Connects to command.trid's subsystem; on failure *report says why (and the status).
std::unique_ptr<host::Controller> connect(host::Host& host, const HostCommand& command,
                                          const char* subcommand, Report* report) {
  std::string message;
  auto controller = host.connect(command.trid, opts_of(command), &message);
  if (!controller) {
    if (message.empty()) message = describe(controller.error());
    *report = failure(subcommand, connect_failure_status(message), message);
    return nullptr;
  }
  return std::move(*controller);
}

// Disconnects; a failure is a warning (what was asked for has been printed).
void disconnect(host::Controller& controller, const char* subcommand, Report* report) {
  auto done = controller.disconnect();
  if (!done) {
    report->err += std::string("nvmfctl: ") + subcommand +
                   ": warning: disconnect: " + describe(done.error()) + "\n";
  }
}

std::string active_list(const std::vector<uint32_t>& nsids) {
  if (nsids.empty()) return "none";
  std::string text;
  for (uint32_t nsid : nsids) {
    if (!text.empty()) text += ", ";
    text += std::to_string(nsid);
  }
  return text;
}

}  // namespace

Report run_discover(host::Host& host, const HostCommand& command) {
  std::string message;
  auto entries = host.discover(command.trid, opts_of(command), &message);
  if (!entries) {
    if (message.empty()) message = describe(entries.error());
    return failure("discover", connect_failure_status(message), message);
  }
  Report report;
  report.out = command.output == OutputFormat::json ? discovery_log_json(*entries).dump(2) + "\n"
                                                    : discovery_log_text(*entries);
  return report;
}

Report run_id_ctrl(host::Host& host, const HostCommand& command) {
  Report report;
  auto controller = connect(host, command, "id-ctrl", &report);
  if (controller == nullptr) return report;
  const host::ControllerData& data = controller->data();
  report.out =
      command.output == OutputFormat::json ? id_ctrl_json(data).dump(2) + "\n" : id_ctrl_text(data);
  disconnect(*controller, "id-ctrl", &report);
  return report;
}

Report run_id_ns(host::Host& host, const HostCommand& command) {
  Report report;
  auto controller = connect(host, command, "id-ns", &report);
  if (controller == nullptr) return report;
  const host::Namespace* ns = controller->ns(command.nsid);
  if (ns == nullptr) {
    report = failure("id-ns", exit_status::failed,
                     "namespace " + std::to_string(command.nsid) + " is not active on " +
                         command.trid.subnqn +
                         " (active: " + active_list(controller->active_namespaces()) + ")");
  } else {
    report.out =
        command.output == OutputFormat::json ? id_ns_json(*ns).dump(2) + "\n" : id_ns_text(*ns);
  }
  disconnect(*controller, "id-ns", &report);
  return report;
}

}  // namespace nvmf::ctl
