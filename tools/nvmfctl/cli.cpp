#include "cli.h"

#include <CLI/CLI.hpp>

#include <cctype>

#include "params.h"

namespace nvmf::ctl {

const char* const kExitCodesHelp =
    "Exit status: 0 done; 1 the operation failed (the target's RPC error, a connect the "
    "target refused, no such namespace); 2 usage error; 3 cannot reach the target (nothing "
    "at the RPC socket; no RDMA device, no route or nothing listening at the address).";

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

void add_host_options(CLI::App* sub, HostArgs* a, bool takes_nqn, bool takes_nsid) {
  sub->add_option("-t,--transport", a->transport, "transport type: rdma")
      ->required()
      ->check(CLI::IsMember({"rdma"}, CLI::ignore_case));
  sub->add_option("-a,--traddr", a->traddr, "target address (IPv4 or IPv6)")->required();
  sub->add_option("-s,--trsvcid", a->trsvcid, "target port (default 4420)");
  if (takes_nqn) sub->add_option("-n,--nqn", a->nqn, "subsystem NQN")->required();
  if (takes_nsid) {
    sub->add_option("--namespace-id", a->nsid, "namespace ID (1..4294967294)")
        ->required()
        ->check(CLI::Range(uint32_t{1}, uint32_t{0xFFFFFFFE}));
  }
  sub->add_option("-q,--hostnqn", a->hostnqn,
                  "host NQN (default: /etc/nvme/hostnqn, else one generated)");
  sub->add_option("-I,--hostid", a->hostid,
                  "host ID, a UUID (default: /etc/nvme/hostid, else the generated NQN's UUID)");
  sub->add_option("-o,--output-format", a->output, "normal (default) or json")
      ->check(CLI::IsMember({"normal", "json"}));
  sub->footer(kExitCodesHelp);
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
      "nvmfctl: configure a running nvmf_tgt (JSON-RPC) and look at NVMe-oF RDMA "
      "targets (like nvme-cli)",
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
      return usage_error(
          "unknown subcommand '" + args[1] + "': nvmfctl has tgt, discover, id-ctrl and id-ns", "");
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
  } else {
    command->subcommand = Subcommand::id_ns;
    reason = host_command(id_ns_args, true, &command->host);
    if (!reason.empty()) return usage_error(reason, "id-ns ");
  }
  return result;
}

}  // namespace nvmf::ctl
