// nvmfctl connect / disconnect / disconnect-all / list against an in-process fake nvmf_hostd
// (fake_hostd.h) on a socket in a scratch directory: the command line parsed as the tool
// parses it, the params that reach the daemon (the host identity resolved from a scratch
// etc directory, generated and saved there when absent), the output (normal and json) and
// the exit status of each of the daemon's errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli.h"
#include "fake_hostd.h"
#include "run_hostd.h"

namespace nvmf::ctl {
namespace {

using testing::FakeHostd;
using testing::ScratchDir;

constexpr const char* kNqn = "nqn.2026-11.io.nvmf-rdma:malloc0";
constexpr const char* kUuidPrefix = "nqn.2014-08.org.nvmexpress:uuid:";
constexpr const char* kFileNqn =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kFileId = "0f8fad5b-d9cb-469f-a165-70867728950e";

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class HostdCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(hostd_.started()) << hostd_.message();
  }

  // Parses "nvmfctl SUBCOMMAND ARGS... --socket <the fake's>" and runs it with etc_dir_.
  Report run(const std::string& subcommand, std::vector<std::string> args,
             const std::string& socket = "") {
    std::vector<std::string> words = {"nvmfctl", subcommand};
    words.insert(words.end(), args.begin(), args.end());
    words.insert(words.end(), {"--socket", socket.empty() ? socket_path() : socket});
    Command command;
    const ParseResult parsed = parse_command_line(words, &command);
    if (!parsed.run) {
      ADD_FAILURE() << "parse: status " << parsed.status << ": " << parsed.err;
      return Report{parsed.status, parsed.out, parsed.err};
    }
    command.hostd.etc_dir = etc_dir_;
    switch (command.subcommand) {
      case Subcommand::connect:
        return run_connect(command.hostd);
      case Subcommand::disconnect:
        return run_disconnect(command.hostd);
      case Subcommand::disconnect_all:
        return run_disconnect_all(command.hostd);
      case Subcommand::list:
        return run_list(command.hostd);
      default:
        ADD_FAILURE() << "not an nvmf_hostd subcommand without discovery";
        return Report{};
    }
  }

  // connect -t rdma -a TRADDR -n NQN ARGS...
  Report connect(std::vector<std::string> args = {}, const std::string& traddr = "10.0.0.1",
                 const std::string& nqn = kNqn) {
    std::vector<std::string> words = {"-t", "rdma", "-a", traddr, "-n", nqn};
    words.insert(words.end(), args.begin(), args.end());
    return run("connect", words);
  }

  std::string socket_path() const { return dir_.file("hostd.sock"); }

  ScratchDir dir_;
  std::string etc_dir_ = dir_.file("etc/nvme");  // missing until something saves there
  FakeHostd hostd_{socket_path()};
};

TEST_F(HostdCommandsTest, ConnectSendsTheAddressAndTheIdentityOfTheFiles) {
  std::filesystem::create_directories(etc_dir_);
  dir_.write("etc/nvme/hostnqn", std::string(kFileNqn) + "\n");
  dir_.write("etc/nvme/hostid", std::string(kFileId) + "\n");
  const Report report = connect();
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.err, "");
  EXPECT_EQ(report.out, "/dev/nbd0\n");
  const std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0], Json({{"trtype", "rdma"},
                           {"adrfam", "ipv4"},
                           {"traddr", "10.0.0.1"},
                           {"trsvcid", "4420"},
                           {"subnqn", kNqn},
                           {"hostnqn", kFileNqn},
                           {"hostid", kFileId}}))
      << sent[0].dump();
}

TEST_F(HostdCommandsTest, ConnectGeneratesTheIdentityAndSavesIt) {
  Report report = connect();
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.err, "");
  std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  const std::string hostnqn = sent[0]["hostnqn"];
  const std::string hostid = sent[0]["hostid"];
  ASSERT_EQ(hostnqn.rfind(kUuidPrefix, 0), 0u) << hostnqn;
  EXPECT_EQ(hostnqn.substr(std::string(kUuidPrefix).size()), hostid) << "one UUID for both";
  EXPECT_EQ(dir_.read("etc/nvme/hostnqn"), hostnqn + "\n");
  EXPECT_EQ(dir_.read("etc/nvme/hostid"), hostid + "\n");
  EXPECT_EQ(dir_.mode("etc/nvme/hostnqn"), 0644);
  EXPECT_EQ(dir_.mode("etc/nvme/hostid"), 0644);
  EXPECT_EQ(dir_.mode("etc/nvme"), 0755);
  EXPECT_EQ(dir_.mode("etc"), 0755);

  // The next run finds them (a second subsystem: the first is connected already).
  report = connect({}, "10.0.0.1", "nqn.2026-11.io.example:other");
  ASSERT_EQ(report.status, 0) << report.err;
  sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["hostnqn"], hostnqn);
  EXPECT_EQ(sent[1]["hostid"], hostid);
}

TEST_F(HostdCommandsTest, TheFlagsWinAndNothingIsSavedForThem) {
  std::filesystem::create_directories(etc_dir_);
  dir_.write("etc/nvme/hostnqn", std::string(kFileNqn) + "\n");
  dir_.write("etc/nvme/hostid", std::string(kFileId) + "\n");
  Report report =
      connect({"-q", "nqn.2026-11.io.example:host", "-I", "2f0e0d0c-0b0a-0908-0706-050403020100"});
  ASSERT_EQ(report.status, 0) << report.err;
  std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["hostnqn"], "nqn.2026-11.io.example:host");
  EXPECT_EQ(sent[0]["hostid"], "2f0e0d0c-0b0a-0908-0706-050403020100");

  // Both flags: the directory is not even created.
  etc_dir_ = dir_.file("unused");
  report = run("connect",
               {"-t", "rdma", "-a", "10.0.0.2", "-n", kNqn, "--hostnqn",
                "nqn.2026-11.io.example:host", "--hostid", "2f0e0d0c-0b0a-0908-0706-050403020100"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(dir_.mode("unused"), -1);
}

TEST_F(HostdCommandsTest, OnlyTheHostNqnGivenTheHostIdIsItsUuidAndSaved) {
  // libnvme's order: the file first, then the UUID of the NQN; the derived ID is saved.
  Report report = connect({"-q", kFileNqn});
  ASSERT_EQ(report.status, 0) << report.err;
  const std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["hostnqn"], kFileNqn);
  EXPECT_EQ(sent[0]["hostid"], "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(dir_.read("etc/nvme/hostid"), "11111111-2222-3333-4444-555555555555\n");
  EXPECT_EQ(dir_.mode("etc/nvme/hostnqn"), -1) << "the given NQN is not saved";
}

TEST_F(HostdCommandsTest, AHostIdFileAloneGivesTheNqnItsUuid) {
  std::filesystem::create_directories(etc_dir_);
  dir_.write("etc/nvme/hostid", std::string(kFileId) + "\n");
  const Report report = connect();
  ASSERT_EQ(report.status, 0) << report.err;
  const std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["hostnqn"], std::string(kUuidPrefix) + kFileId);
  EXPECT_EQ(sent[0]["hostid"], kFileId);
  EXPECT_EQ(dir_.read("etc/nvme/hostnqn"), std::string(kUuidPrefix) + kFileId + "\n");
}

TEST_F(HostdCommandsTest, AnIdentityThatCannotBeSavedIsAWarning) {
  dir_.write("blocker", "a file where the directory would go\n");
  etc_dir_ = dir_.file("blocker/nvme");
  const Report report = connect();
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "/dev/nbd0\n");
  EXPECT_EQ(report.err.rfind("nvmfctl: connect: warning: cannot save the host identity: ", 0), 0u)
      << report.err;
  EXPECT_TRUE(contains(report.err, "blocker")) << report.err;
  EXPECT_EQ(hostd_.params_of("connect").size(), 1u) << "the connect still happened";
}

TEST_F(HostdCommandsTest, ConnectOptionsAreSentInTheDaemonsNames) {
  Report report = connect(
      {"-s", "4421", "-i", "4", "-Q", "64", "-k", "5", "-c", "2", "-l", "-1", "--memreg", "sagi"});
  ASSERT_EQ(report.status, 0) << report.err;
  std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0]["trsvcid"], "4421");
  EXPECT_EQ(sent[0]["nr_io_queues"], 4);
  EXPECT_EQ(sent[0]["queue_size"], 64);
  EXPECT_EQ(sent[0]["keep_alive_tmo"], 5);
  EXPECT_EQ(sent[0]["reconnect_delay"], 2);
  EXPECT_EQ(sent[0]["ctrl_loss_tmo"], -1);
  EXPECT_EQ(sent[0]["memreg"], "sagi");

  // IPv6, long names; nothing not given is sent.
  report = run("connect", {"--transport", "rdma", "--traddr", "fe80::1", "--nqn", kNqn,
                           "--nr-io-queues=1", "--ctrl-loss-tmo", "600"});
  ASSERT_EQ(report.status, 0) << report.err;
  sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1]["adrfam"], "ipv6");
  EXPECT_EQ(sent[1]["traddr"], "fe80::1");
  EXPECT_EQ(sent[1]["nr_io_queues"], 1);
  EXPECT_EQ(sent[1]["ctrl_loss_tmo"], 600);
  for (const char* key : {"queue_size", "keep_alive_tmo", "reconnect_delay", "memreg"}) {
    EXPECT_FALSE(sent[1].contains(key)) << key;
  }
}

TEST_F(HostdCommandsTest, ConnectJsonIsTheControllerObject) {
  const Report report = connect({"-o", "json"});
  ASSERT_EQ(report.status, 0) << report.err;
  const Json controller = Json::parse(report.out);
  EXPECT_EQ(controller, hostd_.controllers()[0]);
  EXPECT_EQ(controller["name"], "nvmf0");
  EXPECT_EQ(controller["namespaces"][0]["device"], "/dev/nbd0");
}

TEST_F(HostdCommandsTest, ConnectPrintsEveryNamespacesDevice) {
  Json controller = {{"name", "nvmf3"},
                     {"subnqn", kNqn},
                     {"namespaces", Json::array({{{"nsid", 1}, {"device", "/dev/nbd3"}},
                                                 {{"nsid", 2}, {"device", "/dev/nbd4"}}})}};
  hostd_.answer("connect", controller);
  Report report = connect();
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "/dev/nbd3\n/dev/nbd4\n");
  controller["namespaces"] = Json::array();
  hostd_.answer("connect", controller);
  report = connect();
  EXPECT_EQ(report.status, 0);
  EXPECT_EQ(report.out, "");
  EXPECT_EQ(report.err, "nvmfctl: connect: nvmf3 has no active namespace: no block device\n");
}

TEST_F(HostdCommandsTest, AlreadyConnectedExits1WithTheDaemonsMessage) {
  ASSERT_EQ(connect().status, 0);
  const Report report = connect();
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.out, "");
  EXPECT_EQ(report.err, std::string("nvmfctl: connect: already connected to ") + kNqn +
                            " at 10.0.0.1:4420 (nvmf0)\n");
}

TEST_F(HostdCommandsTest, ExitStatusOfEachConnectFailure) {
  struct Case {
    int code;
    const char* message;
    int status;
  };
  const Case cases[] = {
      {rpc::error_code::failed, "connect refused: Connect Invalid Host", 1},
      {rpc::error_code::failed, "subsystem nqn.x:y as nqn.a:b refused: Connect Invalid Parameters",
       1},
      {rpc::error_code::failed,
       "cannot start connecting to 10.0.0.1:4420: system_error (errno 19: No such device)", 3},
      {rpc::error_code::failed, "cannot connect queue 0 to 10.0.0.1:4420: timed_out", 3},
      {rpc::error_code::failed, "cannot reach 10.0.0.1:4420: no route", 3},
      {rpc::error_code::invalid_params, "params.queue_size: 4096 is not within 2..1024", 1},
      {rpc::error_code::exists, "already connected to x at 10.0.0.1:4420 (nvmf0)", 1},
      {rpc::error_code::internal_error, "something threw", 1},
  };
  for (const Case& c : cases) {
    hostd_.fail_connect(kNqn, rpc::RpcError{c.code, c.message});
    const Report report = connect();
    EXPECT_EQ(report.status, c.status) << c.message;
    EXPECT_EQ(report.out, "") << c.message;
    EXPECT_EQ(report.err, std::string("nvmfctl: connect: ") + c.message + "\n");
  }
}

TEST_F(HostdCommandsTest, NoDaemonAtTheSocketExits3ForEverySubcommand) {
  const std::string none = dir_.file("none.sock");
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"connect", {"-t", "rdma", "-a", "10.0.0.1", "-n", kNqn}},
      {"disconnect", {"-n", kNqn}},
      {"disconnect-all", {}},
      {"list", {}},
  };
  for (const auto& [subcommand, args] : commands) {
    const Report report = run(subcommand, args, none);
    EXPECT_EQ(report.status, 3) << subcommand;
    EXPECT_EQ(report.out, "") << subcommand;
    EXPECT_EQ(report.err, "nvmfctl: " + subcommand + ": no nvmf_hostd is listening on " + none +
                              " (start it, or give --socket)\n");
  }
  EXPECT_EQ(dir_.mode("etc"), -1) << "no identity saved when nvmf_hostd is not there";
}

TEST_F(HostdCommandsTest, DisconnectByNqnAndByDevice) {
  ASSERT_EQ(connect().status, 0);                                            // nvmf0, /dev/nbd0
  ASSERT_EQ(connect({}, "10.0.0.2").status, 0);                              // nvmf1: a second path
  ASSERT_EQ(connect({}, "10.0.0.1", "nqn.2026-11.io.example:b").status, 0);  // nvmf2, /dev/nbd2
  Report report = run("disconnect", {"-n", kNqn});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, std::string("NQN:") + kNqn + " disconnected 2 controller(s)\n");
  EXPECT_EQ(hostd_.params_of("disconnect").back(), Json({{"subnqn", kNqn}}));

  report = run("disconnect", {"-d", "/dev/nbd2"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "NQN:nqn.2026-11.io.example:b disconnected 1 controller(s)\n");
  EXPECT_EQ(hostd_.params_of("disconnect").back(), Json({{"device", "/dev/nbd2"}}));
  EXPECT_TRUE(hostd_.controllers().empty());
}

TEST_F(HostdCommandsTest, DisconnectOfNothingExits1WithTheDaemonsMessage) {
  Report report = run("disconnect", {"-n", kNqn});
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.out, "");
  EXPECT_EQ(report.err,
            std::string("nvmfctl: disconnect: no controller of nvmf_hostd is connected to ") +
                kNqn + "\n");
  report = run("disconnect", {"--device", "nbd9"});
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.err, "nvmfctl: disconnect: /dev/nbd9 is not exported by nvmf_hostd\n");
  EXPECT_EQ(hostd_.params_of("disconnect").back(), Json({{"device", "nbd9"}})) << "as typed";
}

TEST_F(HostdCommandsTest, DisconnectAllSendsNoParamsAndCountsPerSubsystem) {
  Report report = run("disconnect-all", {});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "disconnected 0 controller(s)\n");
  ASSERT_EQ(connect().status, 0);
  ASSERT_EQ(connect({}, "10.0.0.2").status, 0);
  ASSERT_EQ(connect({}, "10.0.0.1", "nqn.2026-11.io.example:b").status, 0);
  report = run("disconnect-all", {});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, std::string("NQN:") + kNqn +
                            " disconnected 2 controller(s)\n"
                            "NQN:nqn.2026-11.io.example:b disconnected 1 controller(s)\n");
  const std::vector<Json> sent = hostd_.params_of("disconnect_all");
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1], Json::object());
  EXPECT_TRUE(hostd_.controllers().empty());
}

TEST_F(HostdCommandsTest, ListIsATableAndJsonIsTheDaemonsAnswer) {
  Report report = run("list", {});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "No controllers are connected through nvmf_hostd.\n");
  ASSERT_EQ(connect({"--memreg", "deferred"}).status, 0);
  ASSERT_EQ(connect({"-s", "4421"}, "fe80::1").status, 0);
  report = run("list", {});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out,
            "Node       Namespace     Size  Format  Subsystem NQN                     "
            "Address         State  Memreg\n"
            "---------  ---------  -------  ------  --------------------------------  "
            "--------------  -----  --------\n"
            "/dev/nbd0          1  4.19 MB  512 B   nqn.2026-11.io.nvmf-rdma:malloc0  "
            "10.0.0.1:4420   live   deferred\n"
            "/dev/nbd1          1  4.19 MB  512 B   nqn.2026-11.io.nvmf-rdma:malloc0  "
            "[fe80::1]:4421  live   global\n");
  report = run("list", {"-o", "json"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(Json::parse(report.out), Json({{"controllers", hostd_.controllers()}}));
  EXPECT_EQ(hostd_.params_of("list").back(), Json::object());
}

TEST_F(HostdCommandsTest, AMalformedAnswerExits1) {
  hostd_.answer("connect", Json{{"namespaces", Json::array({{{"nsid", 1}}})}});
  Report report = connect();
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.err.rfind("nvmfctl: connect: malformed answer from nvmf_hostd: ", 0), 0u)
      << report.err;
  hostd_.answer("disconnect", Json{{"gone", 1}});
  report = run("disconnect", {"-n", kNqn});
  EXPECT_EQ(report.status, 1);
  EXPECT_TRUE(contains(report.err, "malformed answer from nvmf_hostd")) << report.err;
}

}  // namespace
}  // namespace nvmf::ctl
