// nvmfctl's command line: what each subcommand parses into, help, and usage errors (exit 2).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli.h"

namespace nvmf::ctl {
namespace {

struct Parsed {
  ParseResult result;
  Command command;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nvmfctl");
  Parsed parsed;
  parsed.result = parse_command_line(args, &parsed.command);
  return parsed;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A usage error: not run, status 2, one line on stderr that contains `what`.
::testing::AssertionResult usage_error(const std::vector<std::string>& args,
                                       const std::string& what) {
  const Parsed parsed = parse(args);
  const ParseResult& r = parsed.result;
  if (r.run || r.status != exit_status::usage) {
    return ::testing::AssertionFailure() << "run " << r.run << ", status " << r.status;
  }
  if (!contains(r.err, what) || r.err.rfind("nvmfctl: ", 0) != 0 ||
      r.err.find('\n') != r.err.size() - 1) {
    return ::testing::AssertionFailure() << "stderr: " << r.err;
  }
  return ::testing::AssertionSuccess();
}

TEST(Cli, ExitCodesAreTheDocumentedOnes) {
  EXPECT_EQ(exit_status::ok, 0);
  EXPECT_EQ(exit_status::failed, 1);
  EXPECT_EQ(exit_status::usage, 2);
  EXPECT_EQ(exit_status::unreachable, 3);
}

TEST(Cli, TopLevelHelpListsSubcommandsAndExitCodes) {
  const Parsed parsed = parse({"--help"});
  EXPECT_FALSE(parsed.result.run);
  EXPECT_EQ(parsed.result.status, 0);
  for (const char* what :
       {"tgt", "discover", "id-ctrl", "id-ns", "connect", "connect-all", "disconnect",
        "disconnect-all", "list", "Exit status", "3 cannot reach"}) {
    EXPECT_TRUE(contains(parsed.result.out, what)) << what << " in " << parsed.result.out;
  }
}

TEST(Cli, NoSubcommandOrAnUnknownOneIsAUsageError) {
  EXPECT_TRUE(usage_error({}, "subcommand"));
  EXPECT_TRUE(usage_error({"bogus", "-t", "rdma"}, "unknown subcommand 'bogus'"));
  EXPECT_TRUE(usage_error({"ls"}, "connect-all, disconnect, disconnect-all and list"));
  EXPECT_TRUE(usage_error({"--bogus"}, "subcommand"));
}

TEST(CliTgt, MethodAndParams) {
  const Parsed parsed =
      parse({"tgt", "bdev_create", "--type", "malloc", "--name", "M1", "--num_blocks", "1024"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const TgtCommand& t = parsed.command.tgt;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::tgt);
  EXPECT_EQ(t.socket_path, "/var/tmp/nvmf_tgt.sock");
  EXPECT_EQ(t.output, OutputFormat::human);
  EXPECT_EQ(t.method, "bdev_create");
  EXPECT_FALSE(t.help);
  EXPECT_EQ(t.params, Json::parse(R"({"type": "malloc", "name": "M1", "num_blocks": 1024})"));
}

TEST(CliTgt, SocketAndOutputBeforeMethodAndOutputAfter) {
  Parsed parsed = parse({"tgt", "--socket", "/tmp/t.sock", "-o", "json", "subsystem_list"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.tgt.socket_path, "/tmp/t.sock");
  EXPECT_EQ(parsed.command.tgt.output, OutputFormat::json);
  EXPECT_EQ(parsed.command.tgt.method, "subsystem_list");
  EXPECT_TRUE(parsed.command.tgt.params.empty());
  parsed = parse({"tgt", "--socket=/tmp/u.sock", "subsystem_list", "-o", "json"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.tgt.socket_path, "/tmp/u.sock");
  EXPECT_EQ(parsed.command.tgt.output, OutputFormat::json);
}

TEST(CliTgt, Help) {
  Parsed parsed = parse({"tgt", "--help"});
  ASSERT_TRUE(parsed.result.run) << "the runner asks the target for its methods";
  EXPECT_TRUE(parsed.command.tgt.help);
  EXPECT_EQ(parsed.command.tgt.method, "");
  EXPECT_TRUE(contains(parsed.command.tgt.usage, "--socket"));
  EXPECT_TRUE(contains(parsed.command.tgt.usage, "Exit status"));
  EXPECT_TRUE(contains(parsed.command.tgt.usage, "--params"));
  parsed = parse({"tgt", "-h", "--socket", "/tmp/x"});
  ASSERT_TRUE(parsed.result.run);
  EXPECT_TRUE(parsed.command.tgt.help);
  EXPECT_EQ(parsed.command.tgt.socket_path, "/tmp/x");
  parsed = parse({"tgt", "namespace_add", "--help"});
  ASSERT_TRUE(parsed.result.run);
  EXPECT_TRUE(parsed.command.tgt.help);
  EXPECT_EQ(parsed.command.tgt.method, "namespace_add");
}

TEST(CliTgt, UsageErrors) {
  EXPECT_TRUE(usage_error({"tgt"}, "METHOD is required"));
  EXPECT_TRUE(usage_error({"tgt", "--bogus", "x", "bdev_list"}, "--bogus"));
  EXPECT_TRUE(usage_error({"tgt", "-o", "yaml", "bdev_list"}, "yaml"));
  EXPECT_TRUE(usage_error({"tgt", "bdev_list", "-o", "yaml"}, "yaml"));
  EXPECT_TRUE(usage_error({"tgt", "bdev_delete", "--name"}, "bdev_delete: --name needs a value"));
  EXPECT_TRUE(
      usage_error({"tgt", "bdev_delete", "--name", "a", "--name", "b"}, "--name given twice"));
  EXPECT_TRUE(usage_error({"tgt", "bdev_delete", "M1"}, "unexpected 'M1'"));
  EXPECT_TRUE(usage_error({"tgt", "bdev_delete", "--params", "[]"}, "not a JSON object"));
  EXPECT_TRUE(usage_error({"tgt", "--socket"}, "--socket"));
}

TEST(CliHost, DiscoverDefaults) {
  const Parsed parsed = parse({"discover", "-t", "rdma", "-a", "10.0.0.1"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostCommand& h = parsed.command.host;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::discover);
  EXPECT_EQ(h.trid.traddr, "10.0.0.1");
  EXPECT_EQ(h.trid.trsvcid, "4420");
  EXPECT_EQ(h.trid.adrfam, "IPv4");
  EXPECT_EQ(h.trid.subnqn, host::kDiscoveryNqn);
  EXPECT_EQ(h.output, OutputFormat::human);
  // Identity resolved by the runner: /etc/nvme/hostnqn and hostid, else generated.
  EXPECT_EQ(h.opts.hostnqn, "");
  EXPECT_EQ(h.opts.hostid, (std::array<uint8_t, 16>{}));
  EXPECT_EQ(h.etc_dir, "/etc/nvme");
}

TEST(CliHost, LongNamesIpv6PortIdentityJson) {
  const Parsed parsed = parse({"discover", "--transport=RDMA", "--traddr", "fe80::1", "--trsvcid",
                               "4421", "--hostnqn", "nqn.2026-11.io.example:host", "--hostid",
                               "2f0e0d0c-0b0a-0908-0706-050403020100", "--output-format", "json"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostCommand& h = parsed.command.host;
  EXPECT_EQ(h.trid.traddr, "fe80::1");
  EXPECT_EQ(h.trid.adrfam, "IPv6");
  EXPECT_EQ(h.trid.trsvcid, "4421");
  EXPECT_EQ(h.opts.hostnqn, "nqn.2026-11.io.example:host");
  EXPECT_EQ(h.opts.hostid[0], 0x2f);
  EXPECT_EQ(h.opts.hostid[15], 0x00);
  EXPECT_EQ(h.output, OutputFormat::json);
}

TEST(CliHost, IdCtrlAndIdNs) {
  Parsed parsed = parse({"id-ctrl", "-t", "rdma", "-a", "10.0.0.1", "-n",
                         "nqn.2026-11.io.nvmf-rdma:malloc0", "-s", "4420", "-o", "normal"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::id_ctrl);
  EXPECT_EQ(parsed.command.host.trid.subnqn, "nqn.2026-11.io.nvmf-rdma:malloc0");
  parsed = parse({"id-ns", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.nvmf-rdma:malloc0",
                  "--namespace-id", "7", "-q", "nqn.a:h"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::id_ns);
  EXPECT_EQ(parsed.command.host.nsid, 7u);
  EXPECT_EQ(parsed.command.host.opts.hostnqn, "nqn.a:h");
}

TEST(CliHost, UsageErrors) {
  EXPECT_TRUE(usage_error({"discover", "-a", "10.0.0.1"}, "--transport"));
  EXPECT_TRUE(usage_error({"discover", "-t", "rdma"}, "--traddr"));
  EXPECT_TRUE(usage_error({"discover", "-t", "tcp", "-a", "10.0.0.1"}, "tcp"));
  EXPECT_TRUE(usage_error({"discover", "-t", "rdma", "-a", "10.0.0.1", "-s", "http"}, "trsvcid"));
  EXPECT_TRUE(usage_error({"discover", "-t", "rdma", "-a", "10.0.0.1", "-o", "yaml"}, "yaml"));
  EXPECT_TRUE(
      usage_error({"discover", "-t", "rdma", "-a", "10.0.0.1", "-I", "nope"}, "is not a UUID"));
  EXPECT_TRUE(usage_error({"discover", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.a:b"}, "-n"));
  EXPECT_TRUE(usage_error({"id-ctrl", "-t", "rdma", "-a", "10.0.0.1"}, "--nqn"));
  EXPECT_TRUE(
      usage_error({"id-ctrl", "-t", "rdma", "-a", "10.0.0.1", "-n", "not-an-nqn"}, "subnqn"));
  EXPECT_TRUE(
      usage_error({"id-ns", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.a:b"}, "--namespace-id"));
  EXPECT_TRUE(
      usage_error({"id-ns", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.a:b", "--namespace-id", "0"},
                  "--namespace-id"));
  EXPECT_TRUE(
      usage_error({"id-ns", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.a:b", "--namespace-id", "x"},
                  "--namespace-id"));
}

TEST(CliHost, HelpOfEachSubcommand) {
  for (const char* sub : {"discover", "id-ctrl", "id-ns"}) {
    const Parsed parsed = parse({sub, "--help"});
    EXPECT_FALSE(parsed.result.run) << sub;
    EXPECT_EQ(parsed.result.status, 0) << sub;
    for (const char* what : {"-t,--transport", "-a,--traddr", "-s,--trsvcid", "-q,--hostnqn",
                             "-I,--hostid", "-o,--output-format", "Exit status"}) {
      EXPECT_TRUE(contains(parsed.result.out, what)) << sub << ": " << what;
    }
  }
  EXPECT_TRUE(contains(parse({"id-ns", "--help"}).result.out, "--namespace-id"));
  EXPECT_TRUE(contains(parse({"id-ctrl", "--help"}).result.out, "-n,--nqn"));
}

TEST(CliHostd, ConnectDefaults) {
  const Parsed parsed =
      parse({"connect", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.example:b"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostdCommand& d = parsed.command.hostd;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::connect);
  EXPECT_EQ(d.socket_path, "/var/tmp/nvmf_hostd.sock");
  EXPECT_EQ(d.output, OutputFormat::human);
  EXPECT_EQ(d.trid.traddr, "10.0.0.1");
  EXPECT_EQ(d.trid.adrfam, "IPv4");
  EXPECT_EQ(d.trid.trsvcid, "4420");
  EXPECT_EQ(d.trid.subnqn, "nqn.2026-11.io.example:b");
  EXPECT_EQ(d.identity.hostnqn, "");
  EXPECT_EQ(d.identity.hostid, (std::array<uint8_t, 16>{}));
  EXPECT_EQ(d.options, Json::object()) << "nvmf_hostd's defaults for what is not given";
  EXPECT_EQ(d.etc_dir, "/etc/nvme");
}

TEST(CliHostd, ConnectEveryShortFlag) {
  const Parsed parsed = parse({"connect",
                               "-t",
                               "RDMA",
                               "-a",
                               "fe80::2",
                               "-s",
                               "4421",
                               "-n",
                               "nqn.2026-11.io.example:b",
                               "-q",
                               "nqn.2026-11.io.example:host",
                               "-I",
                               "2f0e0d0c-0b0a-0908-0706-050403020100",
                               "-i",
                               "8",
                               "-Q",
                               "256",
                               "-k",
                               "15",
                               "-c",
                               "3",
                               "-l",
                               "-1",
                               "--memreg",
                               "max",
                               "--socket",
                               "/tmp/h.sock",
                               "-o",
                               "json"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostdCommand& d = parsed.command.hostd;
  EXPECT_EQ(d.trid.traddr, "fe80::2");
  EXPECT_EQ(d.trid.adrfam, "IPv6");
  EXPECT_EQ(d.trid.trsvcid, "4421");
  EXPECT_EQ(d.identity.hostnqn, "nqn.2026-11.io.example:host");
  EXPECT_EQ(d.identity.hostid[0], 0x2f);
  EXPECT_EQ(d.socket_path, "/tmp/h.sock");
  EXPECT_EQ(d.output, OutputFormat::json);
  EXPECT_EQ(d.options, Json({{"nr_io_queues", 8},
                             {"queue_size", 256},
                             {"keep_alive_tmo", 15},
                             {"reconnect_delay", 3},
                             {"ctrl_loss_tmo", -1},
                             {"memreg", "max"}}));
}

TEST(CliHostd, ConnectEveryLongFlag) {
  const Parsed parsed =
      parse({"connect", "--transport=rdma", "--traddr=10.0.0.3", "--trsvcid=4422",
             "--nqn=nqn.2026-11.io.example:b", "--hostnqn=nqn.2026-11.io.example:host",
             "--hostid=2f0e0d0c-0b0a-0908-0706-050403020100", "--nr-io-queues=2", "--queue-size=32",
             "--keep-alive-tmo=0", "--reconnect-delay=10", "--ctrl-loss-tmo=600", "--memreg=global",
             "--socket=/tmp/h.sock", "--output-format=normal"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostdCommand& d = parsed.command.hostd;
  EXPECT_EQ(d.trid.traddr, "10.0.0.3");
  EXPECT_EQ(d.trid.trsvcid, "4422");
  EXPECT_EQ(d.identity.hostnqn, "nqn.2026-11.io.example:host");
  EXPECT_EQ(d.socket_path, "/tmp/h.sock");
  EXPECT_EQ(d.output, OutputFormat::human);
  EXPECT_EQ(d.options, Json({{"nr_io_queues", 2},
                             {"queue_size", 32},
                             {"keep_alive_tmo", 0},
                             {"reconnect_delay", 10},
                             {"ctrl_loss_tmo", 600},
                             {"memreg", "global"}}));
}

TEST(CliHostd, ConnectAllHasTheSameOptionsWithoutNqn) {
  const Parsed parsed =
      parse({"connect-all", "-t", "rdma", "-a", "10.0.0.1", "-s", "8009", "-i", "2", "--memreg",
             "sagi", "-q", "nqn.2026-11.io.example:host", "-o", "json"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  const HostdCommand& d = parsed.command.hostd;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::connect_all);
  EXPECT_EQ(d.trid.trsvcid, "8009");
  EXPECT_EQ(d.trid.subnqn, host::kDiscoveryNqn);
  EXPECT_EQ(d.identity.hostnqn, "nqn.2026-11.io.example:host");
  EXPECT_EQ(d.output, OutputFormat::json);
  EXPECT_EQ(d.options, Json({{"nr_io_queues", 2}, {"memreg", "sagi"}}));
}

TEST(CliHostd, DisconnectDisconnectAllList) {
  Parsed parsed = parse({"disconnect", "-n", "nqn.2026-11.io.example:b"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::disconnect);
  EXPECT_EQ(parsed.command.hostd.nqn, "nqn.2026-11.io.example:b");
  EXPECT_EQ(parsed.command.hostd.device, "");
  EXPECT_EQ(parsed.command.hostd.socket_path, "/var/tmp/nvmf_hostd.sock");
  parsed = parse({"disconnect", "--device", "/dev/nbd3", "--socket", "/tmp/h.sock"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.hostd.device, "/dev/nbd3");
  EXPECT_EQ(parsed.command.hostd.nqn, "");
  EXPECT_EQ(parsed.command.hostd.socket_path, "/tmp/h.sock");

  parsed = parse({"disconnect-all", "--socket=/tmp/h.sock"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::disconnect_all);
  EXPECT_EQ(parsed.command.hostd.socket_path, "/tmp/h.sock");

  parsed = parse({"list"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.subcommand, Subcommand::list);
  EXPECT_EQ(parsed.command.hostd.output, OutputFormat::human);
  parsed = parse({"list", "-o", "json", "--socket", "/tmp/h.sock"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
  EXPECT_EQ(parsed.command.hostd.output, OutputFormat::json);
  EXPECT_EQ(parsed.command.hostd.socket_path, "/tmp/h.sock");
  parsed = parse({"list", "--output-format=normal"});
  ASSERT_TRUE(parsed.result.run) << parsed.result.err;
}

TEST(CliHostd, UsageErrors) {
  const std::vector<std::string> base = {
      "connect", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.example:b"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> words = base;
    words.insert(words.end(), more.begin(), more.end());
    return words;
  };
  EXPECT_TRUE(usage_error({"connect", "-t", "rdma", "-a", "10.0.0.1"}, "--nqn"));
  EXPECT_TRUE(
      usage_error({"connect", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.example:b"}, "--transport"));
  EXPECT_TRUE(usage_error({"connect", "-t", "rdma", "-n", "nqn.2026-11.io.example:b"}, "--traddr"));
  EXPECT_TRUE(usage_error(
      {"connect", "-t", "tcp", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.example:b"}, "tcp"));
  EXPECT_TRUE(usage_error({"connect", "-t", "rdma", "-a", "10.0.0.1", "-n", "bad"}, "subnqn"));
  EXPECT_TRUE(usage_error(with({"-s", "http"}), "trsvcid"));
  EXPECT_TRUE(usage_error(with({"-I", "nope"}), "is not a UUID"));
  EXPECT_TRUE(usage_error(with({"-i", "0"}), "--nr-io-queues"));
  EXPECT_TRUE(usage_error(with({"-i", "65536"}), "--nr-io-queues"));
  EXPECT_TRUE(usage_error(with({"-i", "two"}), "--nr-io-queues"));
  EXPECT_TRUE(usage_error(with({"-Q", "1"}), "--queue-size"));
  EXPECT_TRUE(usage_error(with({"-Q", "65536"}), "--queue-size"));
  EXPECT_TRUE(usage_error(with({"-k", "-1"}), "--keep-alive-tmo"));
  EXPECT_TRUE(usage_error(with({"-k", "3601"}), "--keep-alive-tmo"));
  EXPECT_TRUE(usage_error(with({"-c", "0"}), "--reconnect-delay"));
  EXPECT_TRUE(usage_error(with({"-c", "3601"}), "--reconnect-delay"));
  EXPECT_TRUE(usage_error(with({"-l", "-2"}), "--ctrl-loss-tmo"));
  EXPECT_TRUE(usage_error(with({"-l", "4000001"}), "--ctrl-loss-tmo"));
  EXPECT_TRUE(usage_error(with({"--memreg", "fast"}), "fast"));
  EXPECT_TRUE(usage_error(with({"-o", "yaml"}), "yaml"));
  EXPECT_TRUE(usage_error(with({"--socket"}), "--socket"));
  EXPECT_TRUE(usage_error(with({"--namespace-id", "1"}), "--namespace-id"));
  EXPECT_TRUE(usage_error(
      {"connect-all", "-t", "rdma", "-a", "10.0.0.1", "-n", "nqn.2026-11.io.example:b"}, "-n"));
  EXPECT_TRUE(usage_error({"connect-all", "-t", "rdma"}, "--traddr"));
  EXPECT_TRUE(usage_error({"disconnect"}, "give -n/--nqn NQN or -d/--device DEVICE"));
  EXPECT_TRUE(usage_error({"disconnect", "-n", "nqn.2026-11.io.example:b", "-d", "nbd0"},
                          "-n/--nqn and -d/--device exclude each other"));
  EXPECT_TRUE(usage_error({"disconnect", "-n"}, "--nqn"));
  EXPECT_TRUE(usage_error({"disconnect", "nqn.2026-11.io.example:b"}, "nqn.2026-11.io.example:b"));
  EXPECT_TRUE(usage_error({"disconnect-all", "-n", "nqn.2026-11.io.example:b"}, "-n"));
  EXPECT_TRUE(usage_error({"list", "-o", "yaml"}, "yaml"));
  EXPECT_TRUE(usage_error({"list", "-t", "rdma"}, "-t"));
}

TEST(CliHostd, HelpOfEachSubcommandListsEveryOption) {
  const std::vector<const char*> connect_options = {"-t,--transport",
                                                    "-a,--traddr",
                                                    "-s,--trsvcid",
                                                    "-q,--hostnqn",
                                                    "-I,--hostid",
                                                    "-i,--nr-io-queues",
                                                    "-Q,--queue-size",
                                                    "-k,--keep-alive-tmo",
                                                    "-c,--reconnect-delay",
                                                    "-l,--ctrl-loss-tmo",
                                                    "--memreg",
                                                    "--socket",
                                                    "-o,--output-format",
                                                    "Exit status",
                                                    "/var/tmp/nvmf_hostd.sock",
                                                    "NVMF_ETC_DIR",
                                                    "saved"};
  for (const char* sub : {"connect", "connect-all"}) {
    const Parsed parsed = parse({sub, "--help"});
    EXPECT_FALSE(parsed.result.run) << sub;
    EXPECT_EQ(parsed.result.status, 0) << sub;
    for (const char* what : connect_options) {
      EXPECT_TRUE(contains(parsed.result.out, what)) << sub << ": " << what;
    }
  }
  EXPECT_TRUE(contains(parse({"connect", "--help"}).result.out, "-n,--nqn"));
  EXPECT_FALSE(contains(parse({"connect-all", "--help"}).result.out, "-n,--nqn"));
  const std::vector<std::pair<const char*, std::vector<const char*>>> others = {
      {"disconnect", {"-n,--nqn", "-d,--device", "--socket", "Exit status"}},
      {"disconnect-all", {"--socket", "Exit status"}},
      {"list", {"--socket", "-o,--output-format", "Exit status"}},
  };
  for (const auto& [sub, options] : others) {
    const Parsed parsed = parse({sub, "--help"});
    EXPECT_FALSE(parsed.result.run) << sub;
    EXPECT_EQ(parsed.result.status, 0) << sub;
    for (const char* what : options) {
      EXPECT_TRUE(contains(parsed.result.out, what)) << sub << ": " << what;
    }
  }
}

}  // namespace
}  // namespace nvmf::ctl
