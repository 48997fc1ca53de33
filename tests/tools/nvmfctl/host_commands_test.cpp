// nvmfctl discover / id-ctrl / id-ns / connect-all end to end, in process: the command line
// parsed as the tool parses it, run over a Host on the simulated HCA against the in-process
// target of the initiator library's e2e tests (tests/e2e/host_fixture.h), so the output is
// what the library really returned and the exit status what its real messages map to.
// connect-all's connects go to a fake nvmf_hostd (fake_hostd.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "fake_hostd.h"
#include "host_fixture.h"
#include "run_host.h"
#include "run_hostd.h"

namespace nvmf::e2e {
namespace {

using ctl::Json;
using ctl::Report;

constexpr const char* kHostIdText = "2f0e0d0c-0b0a-0908-0706-050403020100";  // kHostId

class NvmfctlHostTest : public HostFixture {
 protected:
  // Parses `args` (after "nvmfctl SUBCOMMAND -t rdma -a 10.0.0.1", with this fixture's host
  // identity unless the test gives -q) and runs the subcommand on the fixture's Host.
  Report run(const std::string& subcommand, std::vector<std::string> args) {
    std::vector<std::string> words = {"nvmfctl", subcommand, "-t",
                                      "rdma",    "-a",       kHostTargetAddress};
    const bool identity_given = std::find(args.begin(), args.end(), "-q") != args.end();
    words.insert(words.end(), args.begin(), args.end());
    if (!identity_given) words.insert(words.end(), {"-q", kHostNqn, "-I", kHostIdText});
    ctl::Command command;
    const ctl::ParseResult parsed = ctl::parse_command_line(words, &command);
    if (!parsed.run) {
      ADD_FAILURE() << "parse: status " << parsed.status << ": " << parsed.err;
      return Report{parsed.status, parsed.out, parsed.err};
    }
    switch (command.subcommand) {
      case ctl::Subcommand::discover:
        return ctl::run_discover(*host_, command.host);
      case ctl::Subcommand::id_ctrl:
        return ctl::run_id_ctrl(*host_, command.host);
      case ctl::Subcommand::id_ns:
        return ctl::run_id_ns(*host_, command.host);
      default:
        ADD_FAILURE() << "not a host subcommand";
        return Report{};
    }
  }

  // The target's controller count of `nqn` once it has handled what the host sent (the
  // disconnect reaches it asynchronously).
  size_t controllers_after_disconnect(const char* nqn) {
    for (int i = 0; i < kMaxRounds && target_->controller_count(nqn) != 0; ++i) {
      harness_.poll_round();
    }
    return target_->controller_count(nqn);
  }
};

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

TEST_F(NvmfctlHostTest, DiscoverPrintsTheLogLikeNvmeCli) {
  const Report report = run("discover", {});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.err, "");
  EXPECT_TRUE(contains(report.out, "\nDiscovery Log Number of Records 2\n")) << report.out;
  EXPECT_TRUE(contains(report.out,
                       "=====Discovery Log Entry 0======\ntrtype:  rdma\n"
                       "adrfam:  ipv4\nsubtype: nvme subsystem\n"))
      << report.out;
  EXPECT_TRUE(contains(report.out, "=====Discovery Log Entry 1======\n")) << report.out;
  for (const char* nqn : {kNqn512, kNqn4k}) {
    EXPECT_TRUE(contains(report.out, std::string("subnqn:  ") + nqn + "\n")) << report.out;
  }
  EXPECT_TRUE(contains(report.out, "traddr:  10.0.0.1\n")) << report.out;
  EXPECT_TRUE(contains(report.out, "trsvcid: 4420\n")) << report.out;
  EXPECT_FALSE(contains(report.out, kNqnRestricted)) << "not for this host";
}

TEST_F(NvmfctlHostTest, DiscoverJson) {
  const Report report = run("discover", {"-o", "json"});
  ASSERT_EQ(report.status, 0) << report.err;
  const Json json = Json::parse(report.out);
  ASSERT_EQ(json["records"].size(), 2u) << report.out;
  std::set<std::string> nqns;
  for (const Json& record : json["records"]) {
    nqns.insert(record["subnqn"].get<std::string>());
    EXPECT_EQ(record["trtype"], "rdma");
    EXPECT_EQ(record["subtype"], "nvme subsystem");
    EXPECT_EQ(record["traddr"], kHostTargetAddress);
    EXPECT_EQ(record["trsvcid"], "4420");
  }
  EXPECT_EQ(nqns, (std::set<std::string>{kNqn512, kNqn4k}));
}

TEST_F(NvmfctlHostTest, IdCtrlPrintsIdentifyAndDisconnects) {
  const Report report = run("id-ctrl", {"-n", kNqn512});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.err, "");
  EXPECT_EQ(report.out.rfind("NVME Identify Controller:\n", 0), 0u) << report.out;
  EXPECT_TRUE(contains(report.out, std::string("sn        : ") + kSerial512 + "\n")) << report.out;
  EXPECT_TRUE(contains(report.out, std::string("mn        : ") + kModel512 + "\n")) << report.out;
  EXPECT_TRUE(contains(report.out, std::string("subnqn    : ") + kNqn512 + "\n")) << report.out;
  EXPECT_TRUE(contains(report.out, "nn        : ")) << report.out;
  EXPECT_TRUE(contains(report.out, "cntlid    : 0x")) << report.out;
  EXPECT_EQ(controllers_after_disconnect(kNqn512), 0u) << "id-ctrl left its controller connected";
}

TEST_F(NvmfctlHostTest, IdCtrlJsonHasTheNumbers) {
  const Report report = run("id-ctrl", {"-n", kNqn4k, "-o", "json"});
  ASSERT_EQ(report.status, 0) << report.err;
  const Json json = Json::parse(report.out);
  EXPECT_EQ(json["sn"], kSerial4k);
  EXPECT_EQ(json["mn"], kModel4k);
  EXPECT_EQ(json["subnqn"], kNqn4k);
  EXPECT_TRUE(json["cntlid"].is_number());
  EXPECT_GE(json["nn"].get<uint32_t>(), 1u);
  EXPECT_GT(json["ioccsz"].get<uint32_t>(), 4u) << "the target takes in-capsule data";
}

TEST_F(NvmfctlHostTest, IdNsPrintsTheGeometry) {
  Report report = run("id-ns", {"-n", kNqn4k, "--namespace-id", "1"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_TRUE(contains(report.out, "NVME Identify Namespace 1:\n")) << report.out;
  EXPECT_TRUE(contains(report.out, "nsze    : 0x400\n")) << report.out;  // kBlocks4k
  EXPECT_TRUE(contains(report.out, "lbads   : 12 (4096-byte blocks")) << report.out;
  report = run("id-ns", {"-n", kNqn512, "--namespace-id", "1", "-o", "json"});
  ASSERT_EQ(report.status, 0) << report.err;
  const Json json = Json::parse(report.out);
  EXPECT_EQ(json["nsze"], kBlocks512);
  EXPECT_EQ(json["block_size"], 512);
  EXPECT_EQ(json["lbads"], 9);
  EXPECT_EQ(controllers_after_disconnect(kNqn512), 0u);
}

TEST_F(NvmfctlHostTest, NoSuchNamespaceExits1AndDisconnects) {
  const Report report = run("id-ns", {"-n", kNqn512, "--namespace-id", "5"});
  EXPECT_EQ(report.status, 1);
  EXPECT_EQ(report.out, "");
  EXPECT_EQ(report.err, std::string("nvmfctl: id-ns: namespace 5 is not active on ") + kNqn512 +
                            " (active: 1)\n");
  EXPECT_EQ(controllers_after_disconnect(kNqn512), 0u);
}

TEST_F(NvmfctlHostTest, HostNotAllowedExits1AndTheFlagsIdentityIsUsed) {
  Report report = run("id-ctrl", {"-n", kNqnRestricted});
  EXPECT_EQ(report.status, 1) << report.err;
  EXPECT_TRUE(contains_nocase(report.err, "Invalid Host")) << report.err;
  EXPECT_EQ(report.err.rfind("nvmfctl: id-ctrl: ", 0), 0u) << report.err;
  report = run("id-ctrl", {"-n", kNqnRestricted, "-q", kAllowedHostNqn});
  EXPECT_EQ(report.status, 0) << report.err;
  EXPECT_TRUE(contains(report.out, kNqnRestricted)) << report.out;
}

TEST_F(NvmfctlHostTest, UnknownSubsystemExits1) {
  const Report report = run("id-ctrl", {"-n", "nqn.2026-11.io.nvmf-rdma:no-such-subsystem"});
  EXPECT_EQ(report.status, 1) << report.err;
  EXPECT_TRUE(contains_nocase(report.err, "SUBNQN")) << report.err;
}

TEST_F(NvmfctlHostTest, NothingListeningExits3) {
  for (const char* subcommand : {"discover", "id-ctrl"}) {
    std::vector<std::string> args = {"-s", "4421"};
    if (std::string(subcommand) == "id-ctrl") args.insert(args.end(), {"-n", kNqn512});
    const Report report = run(subcommand, args);
    EXPECT_EQ(report.status, 3) << subcommand << ": " << report.err;
    EXPECT_EQ(report.out, "") << subcommand;
    EXPECT_TRUE(contains(report.err, "4421")) << report.err;
  }
}

// connect-all: the discovery over the sim, the connects to a fake nvmf_hostd.
class NvmfctlConnectAllTest : public NvmfctlHostTest {
 protected:
  void SetUp() override {
    NvmfctlHostTest::SetUp();
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(hostd_.started()) << hostd_.message();
  }

  // nvmfctl connect-all -t rdma -a 10.0.0.1 ARGS... --socket <the fake's>, with etc_dir_.
  Report connect_all(std::vector<std::string> args) {
    std::vector<std::string> words = {"nvmfctl", "connect-all",      "-t",       "rdma",
                                      "-a",      kHostTargetAddress, "--socket", socket_path()};
    words.insert(words.end(), args.begin(), args.end());
    ctl::Command command;
    const ctl::ParseResult parsed = ctl::parse_command_line(words, &command);
    if (!parsed.run) {
      ADD_FAILURE() << "parse: status " << parsed.status << ": " << parsed.err;
      return Report{parsed.status, parsed.out, parsed.err};
    }
    command.hostd.etc_dir = etc_dir_;
    return ctl::run_connect_all(*host_, command.hostd);
  }

  std::vector<std::string> connected_nqns() const {
    std::vector<std::string> nqns;
    for (const Json& params : hostd_.params_of("connect")) nqns.push_back(params["subnqn"]);
    std::sort(nqns.begin(), nqns.end());
    return nqns;
  }

  std::string socket_path() const { return dir_.file("hostd.sock"); }

  ctl::testing::ScratchDir dir_;
  std::string etc_dir_ = dir_.file("etc");
  ctl::testing::FakeHostd hostd_{socket_path()};
};

TEST_F(NvmfctlConnectAllTest, ConnectsEachSubsystemAndSkipsOneConnectedAlready) {
  hostd_.add_controller(
      {{"subnqn", kNqn4k}, {"traddr", kHostTargetAddress}, {"trsvcid", "4420"}});  // nvmf0
  const Report report = connect_all({"-q", kHostNqn, "-I", kHostIdText, "-i", "2"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "/dev/nbd1\n");
  EXPECT_EQ(report.err, std::string("nvmfctl: connect-all: already connected to ") + kNqn4k +
                            " at 10.0.0.1:4420 (nvmf0), skipped\n");
  const std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 2u);
  for (const Json& params : sent) {
    EXPECT_EQ(params["trtype"], "rdma");
    EXPECT_EQ(params["adrfam"], "ipv4");
    EXPECT_EQ(params["traddr"], kHostTargetAddress);
    EXPECT_EQ(params["trsvcid"], "4420");
    EXPECT_EQ(params["hostnqn"], kHostNqn);
    EXPECT_EQ(params["hostid"], kHostIdText);
    EXPECT_EQ(params["nr_io_queues"], 2);
  }
  EXPECT_EQ(connected_nqns(), (std::vector<std::string>{kNqn4k, kNqn512}));
  EXPECT_EQ(hostd_.controllers().size(), 2u);
}

TEST_F(NvmfctlConnectAllTest, JsonListsConnectedSkippedAndFailed) {
  hostd_.add_controller({{"subnqn", kNqn4k}, {"traddr", kHostTargetAddress}, {"trsvcid", "4420"}});
  hostd_.fail_connect(
      kNqn512, rpc::RpcError{rpc::error_code::failed, "connect refused: Connect Invalid Host"});
  const Report report = connect_all({"-q", kHostNqn, "-o", "json"});
  EXPECT_EQ(report.status, 1) << "a failed entry sets the status";
  const Json json = Json::parse(report.out);
  EXPECT_EQ(json["connected"], Json::array());
  ASSERT_EQ(json["skipped"].size(), 1u);
  EXPECT_EQ(json["skipped"][0]["subnqn"], kNqn4k);
  ASSERT_EQ(json["failed"].size(), 1u);
  EXPECT_EQ(json["failed"][0]["subnqn"], kNqn512);
  EXPECT_EQ(json["failed"][0]["message"], "connect refused: Connect Invalid Host");
  EXPECT_TRUE(
      contains(report.err, std::string("nvmfctl: connect-all: ") + kNqn512 +
                               " at 10.0.0.1:4420: connect refused: Connect Invalid Host\n"))
      << report.err;
}

TEST_F(NvmfctlConnectAllTest, TheIdentityOfTheEtcDirDiscoversAndConnects) {
  // The restricted subsystem is in the log only for kAllowedHostNqn: the resolved identity is
  // the one discovery used, and the one sent to nvmf_hostd.
  std::filesystem::create_directories(etc_dir_);
  dir_.write("etc/hostnqn", std::string(kAllowedHostNqn) + "\n");
  const Report report = connect_all({});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(report.out, "/dev/nbd0\n/dev/nbd1\n/dev/nbd2\n");
  EXPECT_EQ(connected_nqns(), (std::vector<std::string>{kNqn4k, kNqn512, kNqnRestricted}));
  const std::vector<Json> sent = hostd_.params_of("connect");
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0]["hostnqn"], kAllowedHostNqn);
  const std::string saved = dir_.read("etc/hostid");
  ASSERT_EQ(saved.size(), 37u) << "the generated host ID is saved";
  EXPECT_EQ(sent[0]["hostid"], saved.substr(0, 36));
}

TEST_F(NvmfctlConnectAllTest, NothingListeningExits3AndNoDaemonExits3) {
  Report report = connect_all({"-q", kHostNqn, "-s", "4421"});
  EXPECT_EQ(report.status, 3) << report.err;
  EXPECT_EQ(report.out, "");
  EXPECT_EQ(report.err.rfind("nvmfctl: connect-all: ", 0), 0u) << report.err;
  EXPECT_TRUE(contains(report.err, "4421")) << report.err;
  EXPECT_TRUE(hostd_.params_of("connect").empty());

  std::vector<std::string> words = {
      "nvmfctl", "connect-all",      "-t",       "rdma",
      "-a",      kHostTargetAddress, "--socket", dir_.file("none.sock")};
  ctl::Command command;
  ASSERT_TRUE(ctl::parse_command_line(words, &command).run);
  report = ctl::run_connect_all(*host_, command.hostd);
  EXPECT_EQ(report.status, 3);
  EXPECT_EQ(report.err, "nvmfctl: connect-all: no nvmf_hostd is listening on " +
                            dir_.file("none.sock") + " (start it, or give --socket)\n");
}

TEST_F(NvmfctlHostTest, UnreachableAddressExits3) {
  host_provider_->set_unreachable("10.0.0.9", true);
  idle_clock_step_ms_ = 1;  // the sim times the resolve out on the fake clock
  std::vector<std::string> words = {"nvmfctl", "discover", "-t", "rdma",
                                    "-a",      "10.0.0.9", "-q", kHostNqn};
  ctl::Command command;
  ASSERT_TRUE(ctl::parse_command_line(words, &command).run);
  const Report report = ctl::run_discover(*host_, command.host);
  idle_clock_step_ms_ = 0;
  EXPECT_EQ(report.status, 3) << report.err;
  EXPECT_TRUE(contains(report.err, "10.0.0.9")) << report.err;
}

}  // namespace
}  // namespace nvmf::e2e
