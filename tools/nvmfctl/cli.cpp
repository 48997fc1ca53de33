#include "cli.h"

#include <CLI/CLI.hpp>

#include <cctype>

#include "params.h"

namespace nvmf::ctl {

const char* const kExitCodesHelp =
    "Exit status: 0 done; 1 the operation failed (the target's or nvmf_hostd's RPC error, a "
    "connect the target refused, no such namespace); 2 usage error; 3 cannot reach the target "
    "(nothing at the RPC socket of nvmf_tgt or nvmf_hostd; no RDMA device, no route or nothing "
    "listening at the address).";

namespace {

constexpr const char* kTgtFooter =
    "Synopsis: nvmfctl tgt [--socket PATH] [-o human|json] METHOD [--KEY VALUE | "
    "--KEY=VALUE]... [--params JSON] [-o human|json] [-h]\n"
    "METHOD is any method the target registers (nvmfctl tgt --help asks it for the list); "
    "each --KEY VALUE or --KEY=VALUE becomes params[\"KEY\"]: a JSON number, true, false, "
    "null, [array] or {object} as JSON, '\"text\"' as that string, anything else as text. "
    "--params '{...}' gives the whole object (no key twice). After METHOD only -o and "
    "-h/--help are nvmfctl's own. -o human prints tables for lists, \"ok\" for a null "
    "result, key: value lines for objects; -o json the result as JSON.";

struct HostArgs {
  std::string transport;
  std::string traddr;
  std::string trsvcid = "4420";
  std::string nqn;
  std::string hostnqn;
  std::string hostid;
  std::string output = "normal";
  uint32_t nsid = 0;
};

constexpr const char* kIdentityFooter =
    "Host identity: -q / -I, else the files hostnqn and hostid in /etc/nvme (or in "
    "$NVMF_ETC_DIR), else generated: a host ID from the NQN's UUID (or the NQN from the ID), "
    "or one random UUID for both.";
constexpr const char* kSavedFooter =
    " connect and connect-all save what they generate there (mode 0644), as the identity of "
    "this host from then on.";
constexpr const char* kHostdFooter =
    "nvmf_hostd holds the controllers and exports each namespace as /dev/nbdN; nvmfctl asks it "
    "over its RPC socket (--socket, default /var/tmp/nvmf_hostd.sock; nvmf_hostd "
    "--rpc-socket).";

void add_address_options(CLI::App* sub, HostArgs* a, bool takes_nqn) {
  sub->add_option("-t,--transport", a->transport, "transport type: rdma")
      ->required()
      ->check(CLI::IsMember({"rdma"}, CLI::ignore_case));
  sub->add_option("-a,--traddr", a->traddr, "target address (IPv4 or IPv6)")->required();
  sub->add_option("-s,--trsvcid", a->trsvcid, "target port (default 4420)");
  if (takes_nqn) sub->add_option("-n,--nqn", a->nqn, "subsystem NQN")->required();
}

void add_identity_options(CLI::App* sub, HostArgs* a, bool saved) {
  const std::string then = saved ? "one generated and saved there" : "one generated";
  sub->add_option("-q,--hostnqn", a->hostnqn,
                  "host NQN (default: /etc/nvme/hostnqn, else " + then + ")");
  sub->add_option("-I,--hostid", a->hostid,
                  "host ID, a UUID (default: /etc/nvme/hostid, else " + then + ")");
}

void add_output_option(CLI::App* sub, HostArgs* a) {
  sub->add_option("-o,--output-format", a->output, "normal (default) or json")
      ->check(CLI::IsMember({"normal", "json"}));
}

void add_host_options(CLI::App* sub, HostArgs* a, bool takes_nqn, bool takes_nsid) {
  add_address_options(sub, a, takes_nqn);
  if (takes_nsid) {
    sub->add_option("--namespace-id", a->nsid, "namespace ID (1..4294967294)")
        ->required()
        ->check(CLI::Range(uint32_t{1}, uint32_t{0xFFFFFFFE}));
  }
  add_identity_options(sub, a, false);
  add_output_option(sub, a);
  sub->footer(std::string(kIdentityFooter) + "\n" + kExitCodesHelp);
}

// connect's and connect-all's options beyond the address and identity: nvme-cli's names, in
// nvme-cli's units (seconds); only those given are sent (nvmf_hostd has the defaults).
struct ConnectArgs {
  HostArgs host;
  std::string socket_path = kDefaultHostdSocketPath;
  uint32_t nr_io_queues = 0;
  uint32_t queue_size = 0;
  uint32_t keep_alive_tmo = 0;
  uint32_t reconnect_delay = 0;
  int64_t ctrl_loss_tmo = 0;
  std::string memreg;
  // Whether each was given: the options themselves, asked after parsing.
  const CLI::Option* nr_io_queues_option = nullptr;
  const CLI::Option* queue_size_option = nullptr;
  const CLI::Option* keep_alive_tmo_option = nullptr;
  const CLI::Option* reconnect_delay_option = nullptr;
  const CLI::Option* ctrl_loss_tmo_option = nullptr;
  const CLI::Option* memreg_option = nullptr;
};

// nvmf_hostd's bounds (tools/nvmf_hostd/rpc_methods.cpp), checked here too so that a value out
// of range is a usage error naming the flag.
constexpr uint32_t kKeepAliveSecondsMax = 3600;
constexpr uint32_t kReconnectDelaySecondsMax = 3600;
constexpr int64_t kCtrlLossSecondsMax = 4000000;

void add_socket_option(CLI::App* sub, std::string* socket_path) {
  sub->add_option("--socket", *socket_path,
                  std::string("nvmf_hostd's RPC socket (default ") + kDefaultHostdSocketPath + ")");
}

void add_connect_options(CLI::App* sub, ConnectArgs* a, bool takes_nqn) {
  add_address_options(sub, &a->host, takes_nqn);
  add_identity_options(sub, &a->host, true);
  a->nr_io_queues_option =
      sub->add_option("-i,--nr-io-queues", a->nr_io_queues,
                      "I/O queues to ask for, 1..65535 (default: nvmf_hostd's reactor count)")
          ->check(CLI::Range(uint32_t{1}, uint32_t{65535}));
  a->queue_size_option = sub->add_option("-Q,--queue-size", a->queue_size,
                                         "entries per I/O queue, 2..65535 (default 128)")
                             ->check(CLI::Range(uint32_t{2}, uint32_t{65535}));
  a->keep_alive_tmo_option =
      sub->add_option("-k,--keep-alive-tmo", a->keep_alive_tmo,
                      "keep-alive timeout in seconds, 0..3600, 0 = none (default 10)")
          ->check(CLI::Range(uint32_t{0}, kKeepAliveSecondsMax));
  a->reconnect_delay_option =
      sub->add_option("-c,--reconnect-delay", a->reconnect_delay,
                      "seconds between reconnect attempts, 1..3600 (default 10)")
          ->check(CLI::Range(uint32_t{1}, kReconnectDelaySecondsMax));
  a->ctrl_loss_tmo_option =
      sub->add_option("-l,--ctrl-loss-tmo", a->ctrl_loss_tmo,
                      "seconds to keep reconnecting before giving up, 0..4000000, -1 = forever "
                      "(default: nvmf_hostd's)")
          ->check(CLI::Range(int64_t{-1}, kCtrlLossSecondsMax));
  a->memreg_option = sub->add_option("--memreg", a->memreg,
                                     "memory registration policy of the I/O queues: global "
                                     "(default), unsafe, sagi, max or deferred")
                         ->check(CLI::IsMember({"global", "unsafe", "sagi", "max", "deferred"}));
  add_socket_option(sub, &a->socket_path);
  add_output_option(sub, &a->host);
  sub->footer(std::string(kHostdFooter) + "\n" + kIdentityFooter + kSavedFooter + "\n" +
              kExitCodesHelp);
}

// The -t/-a/-s/-n/-q/-I options as the library's TransportId and ControllerOpts; "" or a
// one-line reason.
std::string host_command(const HostArgs& a, bool takes_nqn, HostCommand* command) {
  // The library's parser checks the port and the NQN, with its messages.
  const bool ipv6 = a.traddr.find(':') != std::string::npos;
  std::string text = std::string("trtype:RDMA adrfam:") + (ipv6 ? "IPv6" : "IPv4") +
                     " traddr:" + a.traddr + " trsvcid:" + a.trsvcid;
  if (takes_nqn) text += " subnqn:" + a.nqn;
  std::string reason;
  auto trid = host::TransportId::parse(text, &reason);
  if (!trid) return reason;
  command->trid = *trid;
  command->opts.hostnqn = a.hostnqn;
  if (!a.hostid.empty() && !host::uuid_parse(a.hostid, &command->opts.hostid)) {
    return "-I/--hostid: '" + a.hostid + "' is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)";
  }
  command->output = a.output == "json" ? OutputFormat::json : OutputFormat::human;
  command->nsid = a.nsid;
  return "";
}

// connect / connect-all as a HostdCommand; "" or a one-line reason.
std::string hostd_connect_command(const ConnectArgs& a, bool takes_nqn, HostdCommand* command) {
  HostCommand host;
  std::string reason = host_command(a.host, takes_nqn, &host);
  if (!reason.empty()) return reason;
  command->trid = host.trid;
  command->identity.hostnqn = host.opts.hostnqn;
  command->identity.hostid = host.opts.hostid;
  command->output = host.output;
  command->socket_path = a.socket_path;
  auto put = [&](const char* key, const CLI::Option* option, Json value) {
    if (option->count() != 0) command->options[key] = std::move(value);
  };
  put("nr_io_queues", a.nr_io_queues_option, a.nr_io_queues);
  put("queue_size", a.queue_size_option, a.queue_size);
  put("keep_alive_tmo", a.keep_alive_tmo_option, a.keep_alive_tmo);
  put("reconnect_delay", a.reconnect_delay_option, a.reconnect_delay);
  put("ctrl_loss_tmo", a.ctrl_loss_tmo_option, a.ctrl_loss_tmo);
  put("memreg", a.memreg_option, a.memreg);
  return "";
}

// The words after `tgt`'s own options: METHOD and its parameters.
std::string tgt_command(const std::vector<std::string>& words, TgtCommand* command) {
  if (words.empty())
    return command->help ? "" : "METHOD is required (nvmfctl tgt --help lists them)";
  const std::string& method = words.front();
  if (method.empty() || method.front() == '-') {
    return "unknown option '" + method + "' before METHOD (nvmfctl tgt --help)";
  }
  command->method = method;
  MethodArgs args;
  std::string reason =
      parse_method_args(std::vector<std::string>(words.begin() + 1, words.end()), &args);
  if (!reason.empty()) return method + ": " + reason;
  if (!args.output.empty()) {
    if (args.output != "human" && args.output != "json") {
      return "-o: '" + args.output + "' is not human or json";
    }
    command->output = args.output == "json" ? OutputFormat::json : OutputFormat::human;
  }
  command->help = command->help || args.help;
  command->params = std::move(args.params);
  return "";
}

ParseResult usage_error(const std::string& reason, const std::string& where) {
  ParseResult result;
  result.status = exit_status::usage;
  result.err = "nvmfctl: " + reason + " (see nvmfctl " + where + "--help)\n";
  return result;
}

}  // namespace

ParseResult parse_command_line(const std::vector<std::string>& args, Command* command) {
  CLI::App app{
      "nvmfctl: configure a running nvmf_tgt (JSON-RPC), look at NVMe-oF RDMA targets and "
      "connect to them through nvmf_hostd (like nvme-cli)",
      "nvmfctl"};
  app.require_subcommand(1);
  app.footer(kExitCodesHelp);

  CLI::App* tgt = app.add_subcommand("tgt", "call a JSON-RPC method of a running nvmf_tgt");
  TgtCommand& t = command->tgt;
  // Our own help flag: `tgt --help` asks the target for its methods.
  tgt->set_help_flag();
  tgt->add_flag("-h,--help", t.help,
                "this help and the target's methods; after METHOD: the method's summary");
  tgt->add_option("--socket", t.socket_path,
                  std::string("the target's RPC socket (default ") + kDefaultSocketPath + ")");
  std::string tgt_output = "human";
  tgt->add_option("-o,--output", tgt_output, "human (default) or json")
      ->check(CLI::IsMember({"human", "json"}));
  tgt->prefix_command();  // METHOD and everything after it: ours to parse
  tgt->footer(std::string(kTgtFooter) + "\n" + kExitCodesHelp);

  HostArgs discover_args;
  CLI::App* discover = app.add_subcommand(
      "discover", "read the discovery log of a target's discovery controller (nvme discover)");
  add_host_options(discover, &discover_args, false, false);
  HostArgs id_ctrl_args;
  CLI::App* id_ctrl = app.add_subcommand(
      "id-ctrl", "connect to a subsystem, print its Identify Controller data, disconnect");
  add_host_options(id_ctrl, &id_ctrl_args, true, false);
  HostArgs id_ns_args;
  CLI::App* id_ns = app.add_subcommand(
      "id-ns", "connect to a subsystem, print a namespace's Identify data, disconnect");
  add_host_options(id_ns, &id_ns_args, true, true);

  ConnectArgs connect_args;
  CLI::App* connect = app.add_subcommand(
      "connect", "connect to a subsystem through nvmf_hostd; prints its /dev/nbdN devices");
  add_connect_options(connect, &connect_args, true);
  ConnectArgs connect_all_args;
  CLI::App* connect_all = app.add_subcommand(
      "connect-all",
      "discover a target's subsystems and connect to each through nvmf_hostd; prints the devices");
  add_connect_options(connect_all, &connect_all_args, false);

  HostdCommand& d = command->hostd;
  CLI::App* disconnect = app.add_subcommand(
      "disconnect", "disconnect nvmf_hostd's controllers of a subsystem, or the one of a device");
  disconnect->add_option("-n,--nqn", d.nqn, "subsystem NQN: every controller connected to it");
  disconnect->add_option("-d,--device", d.device,
                         "block device (/dev/nbd0 or nbd0): the controller exporting it");
  add_socket_option(disconnect, &d.socket_path);
  disconnect->footer(std::string(kHostdFooter) + "\n" + kExitCodesHelp);
  CLI::App* disconnect_all =
      app.add_subcommand("disconnect-all", "disconnect every controller of nvmf_hostd");
  add_socket_option(disconnect_all, &d.socket_path);
  disconnect_all->footer(std::string(kHostdFooter) + "\n" + kExitCodesHelp);
  std::string list_output = "normal";
  CLI::App* list = app.add_subcommand(
      "list", "list nvmf_hostd's controllers and their block devices (nvme list)");
  add_socket_option(list, &d.socket_path);
  list->add_option("-o,--output-format", list_output, "normal (default) or json")
      ->check(CLI::IsMember({"normal", "json"}));
  list->footer(std::string(kHostdFooter) + "\n" + kExitCodesHelp);

  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    ParseResult result;
    result.out = app.help();  // the selected subcommand's, if one was
    return result;
  } catch (const CLI::ParseError& error) {
    if (app.get_subcommands().empty() && args.size() > 1 && !args[1].empty() &&
        args[1].front() != '-') {
      return usage_error("unknown subcommand '" + args[1] +
                             "': nvmfctl has tgt, discover, id-ctrl, id-ns, connect, "
                             "connect-all, disconnect, disconnect-all and list",
                         "");
    }
    std::string where;
    for (const CLI::App* sub : app.get_subcommands()) where = sub->get_name() + " ";
    return usage_error(error.what(), where);
  }

  ParseResult result;
  result.run = true;
  std::string reason;
  if (tgt->parsed()) {
    command->subcommand = Subcommand::tgt;
    t.output = tgt_output == "json" ? OutputFormat::json : OutputFormat::human;
    t.usage = app.help();  // the selected subcommand's: "Usage: nvmfctl tgt ..."
    reason = tgt_command(tgt->remaining(), &t);
    if (!reason.empty()) return usage_error(reason, "tgt ");
  } else if (discover->parsed()) {
    command->subcommand = Subcommand::discover;
    reason = host_command(discover_args, false, &command->host);
    if (!reason.empty()) return usage_error(reason, "discover ");
  } else if (id_ctrl->parsed()) {
    command->subcommand = Subcommand::id_ctrl;
    reason = host_command(id_ctrl_args, true, &command->host);
    if (!reason.empty()) return usage_error(reason, "id-ctrl ");
  } else if (id_ns->parsed()) {
    command->subcommand = Subcommand::id_ns;
    reason = host_command(id_ns_args, true, &command->host);
    if (!reason.empty()) return usage_error(reason, "id-ns ");
  } else if (connect->parsed()) {
    command->subcommand = Subcommand::connect;
    reason = hostd_connect_command(connect_args, true, &d);
    if (!reason.empty()) return usage_error(reason, "connect ");
  } else if (connect_all->parsed()) {
    command->subcommand = Subcommand::connect_all;
    reason = hostd_connect_command(connect_all_args, false, &d);
    if (!reason.empty()) return usage_error(reason, "connect-all ");
  } else if (disconnect->parsed()) {
    command->subcommand = Subcommand::disconnect;
    if (d.nqn.empty() == d.device.empty()) {
      return usage_error(d.nqn.empty() ? "give -n/--nqn NQN or -d/--device DEVICE"
                                       : "-n/--nqn and -d/--device exclude each other",
                         "disconnect ");
    }
  } else if (disconnect_all->parsed()) {
    command->subcommand = Subcommand::disconnect_all;
  } else {
    command->subcommand = Subcommand::list;
    d.output = list_output == "json" ? OutputFormat::json : OutputFormat::human;
  }
  return result;
}

}  // namespace nvmf::ctl
