// nvmf_perf's command line: what CLI11 refuses (exit 2), what check_options refuses (one line
// naming the option) and the defaults it resolves.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "options.h"

namespace nvmf::perf {
namespace {

struct Parsed {
  int code = -1;       // parse_command_line's answer
  std::string error;   // its error, or check_options' reason
  Settings settings;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nvmf_perf");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  Parsed parsed;
  Options options;
  parsed.code = parse_command_line(static_cast<int>(argv.size()), argv.data(), &options,
                                   &parsed.error);
  if (parsed.code == 0) parsed.error = check_options(options, &parsed.settings);
  return parsed;
}

// The run is refused, with a reason that contains `text`.
void expect_refused(const std::vector<std::string>& args, const std::string& text) {
  const Parsed parsed = parse(args);
  std::string joined;
  for (const std::string& arg : args) joined += arg + " ";
  EXPECT_FALSE(parsed.error.empty()) << joined;
  EXPECT_NE(parsed.error.find(text), std::string::npos)
      << joined << "-> '" << parsed.error << "' lacks '" << text << "'";
  EXPECT_EQ(parsed.error.find('\n'), std::string::npos) << "one line: " << parsed.error;
}

TEST(PerfOptions, SimDefaults) {
  const Parsed parsed = parse({"--sim", "-w", "randrw"});
  ASSERT_EQ(parsed.code, 0);
  ASSERT_EQ(parsed.error, "");
  const Settings& s = parsed.settings;
  EXPECT_TRUE(s.sim);
  EXPECT_EQ(s.workload, Workload::randrw);
  EXPECT_EQ(s.read_percent, 50u);
  EXPECT_EQ(s.queue_depth, 32u);
  EXPECT_EQ(s.io_size_bytes, 4096u);
  EXPECT_EQ(s.time_s, 10u);
  EXPECT_EQ(s.cores, 1u);
  EXPECT_EQ(s.ns_count, 1u);
  EXPECT_EQ(s.sim_bdev, SimBdevKind::null);
  EXPECT_EQ(s.sim_bdev_bytes, kSimNullBytesDefault);
  EXPECT_EQ(s.sim_profile, "rxe");
  EXPECT_TRUE(s.sim_remote_invalidate);
  EXPECT_FALSE(s.sim_payload_skip) << "payloads are copied unless told";
  EXPECT_EQ(s.sim_send_fence, "profile");
  EXPECT_EQ(s.sim_race_one_in, 0u) << "the sim's default";
  EXPECT_EQ(s.memreg, "global");
  EXPECT_FALSE(s.verify);
}

TEST(PerfOptions, ChaosNamesFaultsOfTheSim) {
  Parsed parsed = parse({"--sim", "-w", "randrw", "--chaos", "drop,bdev-error",
                         "--chaos-every-ms", "50"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.chaos_faults, (std::vector<std::string>{"drop", "bdev-error"}));
  EXPECT_EQ(parsed.settings.chaos_every_ms, 50u);
  parsed = parse({"--sim", "-w", "randrw", "--chaos", "all"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.chaos_faults.size(), std::size(kChaosFaultNames));
  EXPECT_EQ(parsed.settings.chaos_every_ms, kChaosEveryMsDefault);
  EXPECT_TRUE(parse({"--sim", "-w", "randrw"}).settings.chaos_faults.empty());
  expect_refused({"-r", "trtype:RDMA traddr:10.0.0.1 subnqn:nqn.2026-01.io.x:y", "-w", "read",
                  "--chaos", "drop"},
                 "--chaos needs --sim");
  expect_refused({"--sim", "-w", "read", "--chaos", "drop,flood"}, "'flood' is not one of");
  expect_refused({"--sim", "-w", "read", "--chaos", "drop,drop"}, "drop is named twice");
  expect_refused({"--sim", "-w", "read", "--chaos", "drop,"}, "'' is not one of");
  expect_refused({"--sim", "-w", "read", "--chaos-every-ms", "10"},
                 "--chaos-every-ms needs --chaos");
  expect_refused({"--sim", "-w", "read", "--chaos", "drop", "--chaos-every-ms", "0"},
                 "--chaos-every-ms: 0 is not 1 or more");
}

TEST(PerfOptions, CompletionModes) {
  Parsed parsed = parse({"--sim", "-w", "read"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.mode, CompletionMode::poll) << "polling stays the default";
  parsed = parse({"--sim", "-w", "read", "--mode", "interrupt"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.mode, CompletionMode::interrupt);
  parsed = parse({"--sim", "-w", "read", "--mode", "adaptive"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.mode, CompletionMode::adaptive);
  EXPECT_EQ(parsed.settings.adaptive_idle_us, kAdaptiveIdleUsDefault);
  parsed = parse({"--sim", "-w", "read", "--mode", "adaptive", "--adaptive-idle-us", "200"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.adaptive_idle_us, 200u);
  for (CompletionMode mode :
       {CompletionMode::poll, CompletionMode::interrupt, CompletionMode::adaptive}) {
    CompletionMode back = CompletionMode::poll;
    EXPECT_TRUE(completion_mode_parse(completion_mode_name(mode), &back));
    EXPECT_EQ(back, mode);
  }

  expect_refused({"--sim", "-w", "read", "--mode", "spin"},
                 "--mode: 'spin' is not one of poll, interrupt or adaptive");
  expect_refused({"--sim", "-w", "read", "--adaptive-idle-us", "10"},
                 "--adaptive-idle-us applies to --mode adaptive only");
  expect_refused({"--sim", "-w", "read", "--mode", "interrupt", "--adaptive-idle-us", "10"},
                 "--adaptive-idle-us applies to --mode adaptive only");
  expect_refused({"--sim", "-w", "read", "--mode", "adaptive", "--adaptive-idle-us", "0"},
                 "--adaptive-idle-us: 0 is not 1 or more");
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--mode", "interrupt"},
                 "--mode applies to RDMA targets");
}

TEST(PerfOptions, TheE2eCommandLine) {
  const Parsed parsed = parse({"--sim", "-w", "randrw", "-M", "70", "-q", "32", "-o", "4096",
                               "-t", "2", "--verify", "--json", "out.json"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.read_percent, 70u);
  EXPECT_EQ(parsed.settings.time_s, 2u);
  EXPECT_TRUE(parsed.settings.verify);
  EXPECT_EQ(parsed.settings.sim_bdev, SimBdevKind::malloc) << "--verify picks malloc";
  EXPECT_EQ(parsed.settings.sim_bdev_bytes, kSimMallocBytesDefault);
  EXPECT_EQ(parsed.settings.json_path, "out.json");
}

TEST(PerfOptions, RemoteTarget) {
  const Parsed parsed = parse({"-r", "trtype:RDMA traddr:10.0.0.1 subnqn:nqn.2026-01.io.x:y",
                               "-w", "read", "-c", "2"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_FALSE(parsed.settings.sim);
  EXPECT_EQ(parsed.settings.read_percent, 100u);
  EXPECT_EQ(parsed.settings.ns_count, 0u) << "all active namespaces";
  EXPECT_EQ(parsed.settings.cores, 2u);
}

TEST(PerfOptions, ReadPercentFollowsTheWorkload) {
  EXPECT_EQ(parse({"--sim", "-w", "write"}).settings.read_percent, 0u);
  EXPECT_EQ(parse({"--sim", "-w", "randwrite"}).settings.read_percent, 0u);
  EXPECT_EQ(parse({"--sim", "-w", "randread"}).settings.read_percent, 100u);
  EXPECT_EQ(parse({"--sim", "-w", "rw", "-M", "0"}).settings.read_percent, 0u);
  EXPECT_EQ(parse({"--sim", "-w", "rw", "-M", "100"}).settings.read_percent, 100u);
  EXPECT_TRUE(workload_random(parse({"--sim", "-w", "randwrite"}).settings.workload));
  EXPECT_FALSE(workload_random(parse({"--sim", "-w", "rw"}).settings.workload));
}

TEST(PerfOptions, CliSyntaxErrorsAreExit2) {
  const std::vector<std::vector<std::string>> cases = {
      {"--sim"},                                      // -w missing
      {"--sim", "-w", "read", "-q", "many"},          // not a number
      {"--sim", "-w", "read", "-t", "-1"},            // negative
      {"--sim", "-w", "read", "--no-such-flag"},      // unknown
      {"--sim", "-r", "trtype:RDMA traddr:1.2.3.4", "-w", "read"},  // both targets
  };
  for (const auto& args : cases) {
    const Parsed parsed = parse(args);
    EXPECT_EQ(parsed.code, 2) << args.back();
    EXPECT_FALSE(parsed.error.empty());
  }
  EXPECT_NE(parse({"--sim"}).error.find("-w"), std::string::npos);
}

TEST(PerfOptions, HelpIsNotAnError) {
  testing::internal::CaptureStdout();
  const Parsed parsed = parse({"--help"});
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_EQ(parsed.code, 1);
  EXPECT_NE(help.find("--sim-profile"), std::string::npos);
  EXPECT_NE(help.find("mlx5-2017-rare"), std::string::npos);
  EXPECT_NE(help.find("--sim-send-fence"), std::string::npos);
  EXPECT_NE(help.find("--sim-race-one-in"), std::string::npos);
  EXPECT_NE(help.find("with --sim-profile mlx5-2017-rare only"), std::string::npos);
  EXPECT_NE(help.find("trtype:PCIe traddr:model"), std::string::npos);
  EXPECT_NE(help.find("-P,--qpairs-per-worker"), std::string::npos);
}

TEST(PerfOptions, BadValuesNameTheOption) {
  expect_refused({"-w", "read"}, "no target");
  expect_refused({"--sim", "-w", "readwrite"}, "-w");
  expect_refused({"--sim", "-w", "randrw", "-M", "101"}, "-M");
  expect_refused({"--sim", "-w", "read", "-M", "50"}, "-M applies to -w rw and randrw");
  expect_refused({"--sim", "-w", "read", "-q", "0"}, "-q");
  expect_refused({"--sim", "-w", "read", "-q", "65535"}, "-q");
  expect_refused({"--sim", "-w", "read", "-o", "0"}, "-o");
  expect_refused({"--sim", "-w", "read", "-o", "1000"}, "-o");
  expect_refused({"--sim", "-w", "read", "-t", "0"}, "-t");
  expect_refused({"--sim", "-w", "read", "-c", "0"}, "-c");
  expect_refused({"--sim", "-w", "read", "-c", "128"}, "-c");
  expect_refused({"--sim", "-w", "read", "--ns-count", "0"}, "--ns-count");
  expect_refused({"--sim", "-w", "read", "--ns-count", "1025"}, "--ns-count");
  expect_refused({"--sim", "-w", "read", "--sim-bdev", "aio"}, "--sim-bdev");
  expect_refused({"--sim", "-w", "read", "--sim-profile", "mlx4"}, "--sim-profile");
  expect_refused({"--sim", "-w", "read", "--sim-remote-invalidate", "yes"},
                 "--sim-remote-invalidate");
  expect_refused({"--sim", "-w", "read", "--sim-payload", "none"}, "--sim-payload");
  expect_refused({"--sim", "-w", "read", "--memreg", "fast"}, "--memreg");
  expect_refused({"--sim", "-w", "read", "--log-level", "loud"}, "--log-level");
  expect_refused({"--sim", "-w", "read", "--io-queue-size", "1"}, "--io-queue-size");
  expect_refused({"--sim", "-w", "read", "--sim-bdev", "malloc", "--sim-bdev-size-mib", "1",
                  "-o", "2097152"},
                 "smaller than one I/O");
}

TEST(PerfOptions, NullBdevCannotVerify) {
  expect_refused({"--sim", "-w", "randrw", "--verify", "--sim-bdev", "null"}, "discards writes");
  EXPECT_EQ(parse({"--sim", "-w", "randrw", "--verify", "--sim-bdev", "malloc"}).error, "");
}

TEST(PerfOptions, SkippedPayloadsCannotVerify) {
  expect_refused({"--sim", "-w", "randrw", "--verify", "--sim-payload", "skip"},
                 "--sim-payload skip cannot be used with --verify");
  EXPECT_TRUE(parse({"--sim", "-w", "randread", "--sim-payload", "skip"}).settings.sim_payload_skip);
  EXPECT_EQ(parse({"--sim", "-w", "randrw", "--verify", "--sim-payload", "copy"}).error, "");
}

TEST(PerfOptions, SimOptionsNeedSim) {
  const std::string trid = "trtype:RDMA traddr:10.0.0.1";
  expect_refused({"-r", trid, "-w", "read", "--sim-bdev", "malloc"}, "--sim-bdev needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-profile", "rxe"}, "--sim-profile needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-remote-invalidate", "off"},
                 "--sim-remote-invalidate needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-payload", "skip"}, "--sim-payload needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-bdev-size-mib", "8"},
                 "--sim-bdev-size-mib needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-send-fence", "reads"},
                 "--sim-send-fence needs --sim");
  expect_refused({"-r", trid, "-w", "read", "--sim-race-one-in", "50"},
                 "--sim-race-one-in needs --sim");
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--sim-race-one-in", "50"},
                 "--sim-race-one-in needs --sim");
}

TEST(PerfOptions, SimSendFence) {
  for (const char* name : kSimSendFenceNames) {
    const Parsed parsed = parse({"--sim", "-w", "read", "--sim-send-fence", name});
    EXPECT_EQ(parsed.error, "") << name;
    EXPECT_EQ(parsed.settings.sim_send_fence, name);
  }
  // Any profile: rxe's fence can be made to order key updates, mlx5's to order reads only.
  for (const char* profile : kSimProfileNames) {
    const Parsed parsed = parse({"--sim", "-w", "read", "--sim-profile", profile,
                                 "--sim-send-fence", "reads", "--memreg", "max", "--verify"});
    EXPECT_EQ(parsed.error, "") << profile;
    EXPECT_EQ(parsed.settings.sim_send_fence, "reads") << profile;
  }
  expect_refused({"--sim", "-w", "read", "--sim-send-fence", "strong"},
                 "--sim-send-fence: 'strong' is not one of profile, reads or key-updates");
  expect_refused({"--sim", "-w", "read", "--sim-send-fence", "key_updates"}, "--sim-send-fence");
  expect_refused({"--sim", "-w", "read", "--sim-send-fence", ""}, "--sim-send-fence");
}

TEST(PerfOptions, SimRaceOneInIsForTheRareProfileOnly) {
  const Parsed parsed = parse({"--sim", "-w", "randread", "--sim-profile", "mlx5-2017-rare",
                               "--sim-race-one-in", "50", "--memreg", "unsafe", "--verify",
                               "-t", "2"});
  ASSERT_EQ(parsed.code, 0);
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.sim_profile, "mlx5-2017-rare");
  EXPECT_EQ(parsed.settings.sim_race_one_in, 50u);
  EXPECT_EQ(parsed.settings.memreg, "unsafe");
  // 1: every bind and LOCAL_INV lags, as mlx5-2017; the largest 32-bit count is fine too.
  EXPECT_EQ(parse({"--sim", "-w", "read", "--sim-profile", "mlx5-2017-rare",
                   "--sim-race-one-in", "1"})
                .settings.sim_race_one_in,
            1u);
  EXPECT_EQ(parse({"--sim", "-w", "read", "--sim-profile", "mlx5-2017-rare",
                   "--sim-race-one-in", "4294967295"})
                .settings.sim_race_one_in,
            4294967295u);
  // The rare profile without the option: the sim's own default.
  const Parsed rare = parse({"--sim", "-w", "read", "--sim-profile", "mlx5-2017-rare"});
  ASSERT_EQ(rare.error, "");
  EXPECT_EQ(rare.settings.sim_race_one_in, 0u);
  // Every other profile refuses it, naming the option and the profile it needs.
  for (const char* profile : kSimProfileNames) {
    if (std::string(profile) == kSimRareProfile) continue;
    expect_refused({"--sim", "-w", "read", "--sim-profile", profile, "--sim-race-one-in", "50"},
                   std::string("--sim-race-one-in applies to --sim-profile mlx5-2017-rare only, "
                               "not to ") +
                       profile);
  }
  // No --sim-profile is rxe.
  expect_refused({"--sim", "-w", "read", "--sim-race-one-in", "50"}, "not to rxe");
  expect_refused({"--sim", "-w", "read", "--sim-profile", "mlx5-2017-rare", "--sim-race-one-in",
                  "0"},
                 "--sim-race-one-in: 0 is not 1 or more");
  // What CLI11 refuses: not a number, negative, beyond 32 bits.
  for (const char* value : {"often", "-5", "4294967296"}) {
    const Parsed bad = parse({"--sim", "-w", "read", "--sim-profile", "mlx5-2017-rare",
                              "--sim-race-one-in", value});
    EXPECT_EQ(bad.code, 2) << value;
    EXPECT_NE(bad.error.find("--sim-race-one-in"), std::string::npos) << bad.error;
  }
  // A bad profile is reported as such, not as a misplaced --sim-race-one-in.
  expect_refused({"--sim", "-w", "read", "--sim-profile", "mlx5-2018", "--sim-race-one-in",
                  "50"},
                 "--sim-profile: 'mlx5-2018' is not one of");
}

TEST(PerfOptions, PcieTransportIdSelectsThePciePath) {
  const Parsed parsed = parse({"-r", "trtype:PCIe traddr:0000:01:00.0", "-w", "randread",
                               "-q", "64", "-c", "2"});
  ASSERT_EQ(parsed.code, 0);
  ASSERT_EQ(parsed.error, "");
  const Settings& s = parsed.settings;
  EXPECT_TRUE(s.pcie);
  EXPECT_FALSE(s.sim);
  EXPECT_FALSE(s.pcie_model());
  EXPECT_EQ(s.pci_address, "0000:01:00.0");
  EXPECT_EQ(s.ns_count, 0u) << "all active namespaces of the device";
  EXPECT_EQ(s.cores, 2u);
  // trtype and the keys are matched without regard to case (SPDK's strcasecmp); the address
  // is kept lowercase, as sysfs spells it.
  const Parsed upper = parse({"-r", "TRTYPE:pcie TrAddr:0000:AB:1F.7", "-w", "read"});
  ASSERT_EQ(upper.error, "");
  EXPECT_TRUE(upper.settings.pcie);
  EXPECT_EQ(upper.settings.pci_address, "0000:ab:1f.7");
  EXPECT_EQ(parse({"-r", "traddr=0000:00:04.0 trtype=PCIe", "-w", "read"}).settings.pci_address,
            "0000:00:04.0");
}

TEST(PerfOptions, PcieModelMakesItsNamespaces) {
  const Parsed parsed = parse({"-r", "trtype:PCIe traddr:model", "-w", "randrw", "-M", "70",
                               "-q", "16", "--verify", "--json", "F"});
  ASSERT_EQ(parsed.error, "");
  const Settings& s = parsed.settings;
  EXPECT_TRUE(s.pcie_model());
  EXPECT_EQ(s.ns_count, 1u);
  EXPECT_EQ(s.sim_bdev_bytes, kSimMallocBytesDefault);
  const Parsed sized = parse({"-r", "trtype:PCIe traddr:model", "-w", "read", "--ns-count", "3",
                              "--sim-bdev-size-mib", "8"});
  ASSERT_EQ(sized.error, "");
  EXPECT_EQ(sized.settings.ns_count, 3u);
  EXPECT_EQ(sized.settings.sim_bdev_bytes, uint64_t{8} << 20);
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--sim-bdev-size-mib", "1",
                  "-o", "2097152"},
                 "smaller than one I/O");
}

TEST(PerfOptions, BadPciAddressIsRefused) {
  for (const char* address : {"01:00.0", "0000:01:00", "0000:01:00.8", "0000:01:20.0",
                              "0000-01-00.0", "00000:01:00.0", "0000:01:00.0x", "0000:g1:00.0",
                              "model0"}) {
    expect_refused({"-r", std::string("trtype:PCIe traddr:") + address, "-w", "read"},
                   "is not a PCI address DDDD:BB:DD.F");
  }
  expect_refused({"-r", "trtype:PCIe", "-w", "read"}, "trtype PCIe needs traddr");
  expect_refused({"-r", "trtype:PCIe traddr:0000:01:00.0 subnqn:nqn.2026-01.io.x:y", "-w", "read"},
                 "takes traddr only, not subnqn");
  EXPECT_TRUE(pci_address_valid("0000:00:1f.7"));
  EXPECT_TRUE(pci_address_valid("FFFF:FF:1F.0"));
  EXPECT_FALSE(pci_address_valid(""));
  EXPECT_FALSE(pci_address_valid("0000:00:1f.7 "));
}

TEST(PerfOptions, PcieExcludesSimAndItsOptions) {
  const Parsed both = parse({"--sim", "-r", "trtype:PCIe traddr:model", "-w", "read"});
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.error.find("--sim"), std::string::npos) << both.error;
  const std::string device = "trtype:PCIe traddr:0000:01:00.0";
  expect_refused({"-r", device, "-w", "read", "--sim-bdev", "malloc"}, "--sim-bdev needs --sim");
  expect_refused({"-r", device, "-w", "read", "--sim-profile", "rxe"}, "--sim-profile needs --sim");
  expect_refused({"-r", device, "-w", "read", "--sim-bdev-size-mib", "8"},
                 "--sim-bdev-size-mib needs --sim or -r 'trtype:PCIe traddr:model'");
  // The fabric's options mean nothing to a local controller.
  expect_refused({"-r", device, "-w", "read", "--memreg", "sagi"}, "--memreg applies to RDMA");
  expect_refused({"-r", device, "-w", "read", "--reconnect-delay-ms", "5"},
                 "--reconnect-delay-ms applies to RDMA");
  expect_refused({"-r", device, "-w", "read", "--ctrl-loss-timeout-ms", "5"},
                 "--ctrl-loss-timeout-ms applies to RDMA");
  // ... and are still fine on RDMA.
  EXPECT_EQ(parse({"-r", "trtype:RDMA traddr:10.0.0.1", "-w", "read", "--memreg", "sagi"}).error,
            "");
}

TEST(PerfOptions, OnlyTrtypePcieIsThePciePath) {
  // A traddr that looks like a PCI address does not make an RDMA ID a PCIe one; other trtypes
  // are left to the host library (which refuses them when the run starts).
  for (const char* trid : {"trtype:RDMA traddr:0000:01:00.0", "traddr:10.0.0.1",
                           "trtype:TCP traddr:10.0.0.1"}) {
    const Parsed parsed = parse({"-r", trid, "-w", "read"});
    EXPECT_EQ(parsed.error, "") << trid;
    EXPECT_FALSE(parsed.settings.pcie) << trid;
  }
  expect_refused({"-w", "read"}, "trtype:PCIe");  // the no-target message names both paths
}

TEST(PerfOptions, PcieQueueEntriesFollowTheSameRule) {
  Settings settings =
      parse({"-r", "trtype:PCIe traddr:model", "-w", "read", "-q", "64", "--ns-count", "4"})
          .settings;
  uint32_t entries = 0;
  EXPECT_EQ(io_queue_entries(settings, 4, &entries), "");
  EXPECT_EQ(entries, 257u) << "q x namespaces + 1";
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "-q", "64", "--ns-count", "4",
                  "--io-queue-size", "256"},
                 "needs 257");
}

TEST(PerfOptions, EveryLibraryNameIsAccepted) {
  for (const char* name : kMemregNames) {
    EXPECT_EQ(parse({"--sim", "-w", "read", "--memreg", name}).error, "") << name;
  }
  for (const char* name : kSimProfileNames) {
    const Parsed parsed = parse({"--sim", "-w", "read", "--sim-profile", name});
    EXPECT_EQ(parsed.error, "") << name;
    EXPECT_EQ(parsed.settings.sim_profile, name);
  }
  EXPECT_FALSE(parse({"--sim", "-w", "read", "--sim-remote-invalidate", "off"})
                   .settings.sim_remote_invalidate);
  for (const char* name : {"read", "write", "randread", "randwrite", "rw", "randrw"}) {
    Workload workload;
    ASSERT_TRUE(workload_parse(name, &workload)) << name;
    EXPECT_STREQ(workload_name(workload), name);
  }
}

TEST(PerfOptions, QueueEntriesFitEveryNamespaceOfAWorker) {
  // 32 x 1 + 1 = 33 is below the default: 128.
  Settings settings = parse({"--sim", "-w", "read"}).settings;
  uint32_t entries = 0;
  EXPECT_EQ(io_queue_entries(settings, 1, &entries), "");
  EXPECT_EQ(entries, 128u);
  // 64 x 4 + 1: all namespaces share the queue, plus the slot a queue leaves empty.
  settings = parse({"--sim", "-w", "read", "-q", "64", "--ns-count", "4"}).settings;
  EXPECT_EQ(io_queue_entries(settings, 4, &entries), "");
  EXPECT_EQ(entries, 257u);
  // An explicit size is used as given when it fits ...
  settings = parse({"--sim", "-w", "read", "--io-queue-size", "1024"}).settings;
  EXPECT_EQ(io_queue_entries(settings, 1, &entries), "");
  EXPECT_EQ(entries, 1024u);
  // ... and refused when it does not.
  expect_refused({"--sim", "-w", "read", "-q", "64", "--ns-count", "4", "--io-queue-size", "256"},
                 "needs 257");
  expect_refused({"--sim", "-w", "read", "-q", "30000", "--ns-count", "3"}, "lower -q");
  // Without --sim the namespace count comes from the controller: checked later, same rule.
  settings = parse({"-r", "trtype:RDMA traddr:1.2.3.4", "-w", "read", "-q", "30000"}).settings;
  EXPECT_EQ(settings.ns_count, 0u);
  EXPECT_EQ(io_queue_entries(settings, 2, &entries), "");
  EXPECT_EQ(entries, 60001u);
  EXPECT_NE(io_queue_entries(settings, 3, &entries), "");
}

TEST(PerfOptions, QpairsPerWorkerShareTheWorkersIos) {
  EXPECT_EQ(parse({"--sim", "-w", "read"}).settings.qpairs_per_worker, 1u) << "the default";
  // The seed-001 shape: one worker, 12 queue pairs, 8 I/Os on each.
  const Parsed parsed = parse({"--sim", "-w", "read", "-c", "1", "-P", "12", "-q", "96"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.qpairs_per_worker, 12u);
  EXPECT_EQ(parsed.settings.io_qpairs(), 12u);
  EXPECT_EQ(
      parse({"--sim", "-w", "read", "-c", "2", "--qpairs-per-worker", "6"}).settings.io_qpairs(),
      12u);
  // Each queue holds its share, rounded up, plus the slot a queue leaves empty.
  EXPECT_EQ(io_qpair_commands(96, 1, 12), 8u);
  EXPECT_EQ(io_qpair_commands(10, 1, 4), 3u) << "dealt 3, 3, 2, 2";
  EXPECT_EQ(io_queue_entries_needed(32, 4, 2), 65u) << "all namespaces share the queue pairs";
  uint32_t entries = 0;
  EXPECT_EQ(io_queue_entries(parsed.settings, 1, &entries), "");
  EXPECT_EQ(entries, 128u) << "9 needed: the default size";
  const Parsed sized =
      parse({"--sim", "-w", "read", "-q", "96", "-P", "2", "--io-queue-size", "49"});
  ASSERT_EQ(sized.error, "");
  expect_refused({"--sim", "-w", "read", "-q", "96", "-P", "2", "--io-queue-size", "48"},
                 "needs 49");
}

TEST(PerfOptions, QpairsPerWorkerRefused) {
  expect_refused({"--sim", "-w", "read", "-P", "0"}, "-P: 0 is not within 1..127");
  expect_refused({"--sim", "-w", "read", "-c", "2", "-P", "64"}, "-P: 64 is not within 1..63");
  expect_refused({"--sim", "-w", "read", "-q", "8", "-P", "12"},
                 "-P 12: -q 8 x 1 namespaces gives a worker 8 I/Os, fewer than its queue pairs");
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "-P", "2"},
                 "-P applies to RDMA targets, not to trtype PCIe");
  EXPECT_EQ(parse({"--sim", "-w", "read", "-P", "many"}).code, 2) << "CLI11: not a number";
  // A remote target's namespaces are counted after connecting; the same rule applies then.
  const Settings remote =
      parse({"-r", "trtype:RDMA traddr:1.2.3.4", "-w", "read", "-q", "4", "-P", "8"}).settings;
  uint32_t entries = 0;
  EXPECT_NE(io_queue_entries(remote, 1, &entries), "") << "4 I/Os for 8 queue pairs";
  EXPECT_EQ(io_queue_entries(remote, 2, &entries), "") << "8 I/Os: one each";
}

TEST(PerfOptions, MemregSwitchCyclesTheSafePoliciesByDefault) {
  const Parsed parsed = parse({"--sim", "-w", "read", "-t", "2", "--memreg-switch-every", "0.2"});
  ASSERT_EQ(parsed.error, "");
  const Settings& s = parsed.settings;
  EXPECT_DOUBLE_EQ(s.memreg_switch_every_s, 0.2);
  EXPECT_EQ(s.memreg_switch_policies,
            (std::vector<std::string>{"global", "sagi", "max", "deferred"}));
  EXPECT_EQ(s.memreg, "global") << "the run starts with the cycle's first";
  EXPECT_EQ(parse({"--sim", "-w", "read"}).settings.memreg_switch_every_s, 0.0) << "off";

  const Settings chosen = parse({"--sim", "-w", "read", "--memreg-switch-every", "1",
                                 "--memreg-switch-policies", "max,unsafe,max,sagi"})
                              .settings;
  EXPECT_EQ(chosen.memreg_switch_policies,
            (std::vector<std::string>{"max", "unsafe", "max", "sagi"}));
  EXPECT_EQ(chosen.memreg, "max");
}

TEST(PerfOptions, MemregSwitchRefused) {
  const std::vector<std::string> run = {"--sim", "-w", "read", "-t", "2"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = run;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  for (const char* every : {"0", "-1", "nan", "inf"}) {
    expect_refused(with({"--memreg-switch-every", every}), "is not a positive number of seconds");
  }
  expect_refused(with({"--memreg-switch-every", "2"}),
                 "--memreg-switch-every 2 never switches in a run of -t 2 s");
  expect_refused(with({"--memreg", "sagi", "--memreg-switch-every", "0.5"}),
                 "--memreg and --memreg-switch-every exclude each other");
  expect_refused(with({"--memreg-switch-policies", "global,sagi"}),
                 "--memreg-switch-policies needs --memreg-switch-every");
  const std::vector<std::pair<std::string, std::string>> cycles = {
      {"global,fastest", "'fastest' is not one of global, unsafe, sagi, max or deferred"},
      {"sagi", "give two policies or more"},
      {"global,,sagi", "an empty policy name"},
      {",sagi", "an empty policy name"},
      {"global,sagi,", "an empty policy name"},
      {"global,global", "global follows itself"},
      {"sagi,global,sagi", "sagi follows itself (the cycle starts again after the last)"},
      {"Global,sagi", "'Global' is not one of"},
  };
  for (const auto& [cycle, text] : cycles) {
    expect_refused(with({"--memreg-switch-every", "0.5", "--memreg-switch-policies", cycle}), text);
  }
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--memreg-switch-every", "0.5"},
                 "--memreg-switch-every applies to RDMA targets, not to trtype PCIe");
  EXPECT_EQ(parse(with({"--memreg-switch-every", "soon"})).code, 2) << "CLI11: not a number";
}

TEST(PerfOptions, NumberIosBoundsTheRunLikeSpdkPerf) {
  EXPECT_EQ(parse({"--sim", "-w", "read"}).settings.number_ios, 0u) << "-t alone by default";
  Parsed parsed = parse({"--sim", "-w", "randrw", "-t", "60", "-d", "4000"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.number_ios, 4000u);
  EXPECT_EQ(parsed.settings.time_s, 60u) << "-t stays the other bound";
  parsed = parse({"-r", "trtype:PCIe traddr:model", "-w", "read", "--number-ios", "10"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.number_ios, 10u) << "the PCIe path too: the run loop is shared";
  EXPECT_EQ(parse({"--sim", "-w", "read", "-d", "many"}).code, 2) << "CLI11: not a number";
}

TEST(PerfOptions, MemregSwitchEveryIosSwitchesByCount) {
  const Parsed parsed =
      parse({"--sim", "-w", "randrw", "-d", "4000", "--memreg-switch-every-ios", "250"});
  ASSERT_EQ(parsed.error, "");
  const Settings& s = parsed.settings;
  EXPECT_EQ(s.memreg_switch_every_ios, 250u);
  EXPECT_EQ(s.memreg_switch_every_s, 0.0) << "not by time";
  EXPECT_TRUE(s.memreg_switching());
  EXPECT_EQ(s.memreg_switch_policies,
            (std::vector<std::string>{"global", "sagi", "max", "deferred"}));
  EXPECT_EQ(s.memreg, "global") << "the run starts with the cycle's first";
  EXPECT_FALSE(parse({"--sim", "-w", "read"}).settings.memreg_switching()) << "off";
  // Without -d the run's length is -t's, and any count may be reached.
  EXPECT_EQ(parse({"--sim", "-w", "read", "--memreg-switch-every-ios", "1000000"}).error, "");
  const Settings chosen = parse({"--sim", "-w", "read", "--memreg-switch-every-ios", "64",
                                 "--memreg-switch-policies", "unsafe,deferred"})
                              .settings;
  EXPECT_EQ(chosen.memreg_switch_policies, (std::vector<std::string>{"unsafe", "deferred"}));

  const std::vector<std::string> run = {"--sim", "-w", "read", "-q", "4"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = run;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  expect_refused(with({"--memreg-switch-every-ios", "0"}), "--memreg-switch-every-ios: 0 is not");
  expect_refused(with({"--memreg-switch-every-ios", "10", "--memreg-switch-every", "0.5"}),
                 "--memreg-switch-every and --memreg-switch-every-ios exclude each other");
  expect_refused(with({"--memreg", "sagi", "--memreg-switch-every-ios", "10"}),
                 "--memreg and --memreg-switch-every-ios exclude each other");
  expect_refused(with({"-d", "100", "--memreg-switch-every-ios", "100"}),
                 "--memreg-switch-every-ios 100 never switches: with -d 100 a queue pair "
                 "completes about 100 I/Os");
  // -P 2 shares a worker's 100 I/Os: 50 on each queue pair.
  expect_refused(with({"-d", "100", "-P", "2", "--memreg-switch-every-ios", "50"}),
                 "completes about 50 I/Os");
  EXPECT_EQ(parse(with({"-d", "100", "-P", "2", "--memreg-switch-every-ios", "49"})).error, "");
  // Two namespaces: 200 I/Os per worker.
  EXPECT_EQ(parse(with({"-d", "100", "--ns-count", "2", "--memreg-switch-every-ios", "150"})).error,
            "");
  expect_refused(
      {"-r", "trtype:PCIe traddr:model", "-w", "read", "--memreg-switch-every-ios", "10"},
      "--memreg-switch-every-ios applies to RDMA targets, not to trtype PCIe");
  EXPECT_EQ(parse(with({"--memreg-switch-every-ios", "often"})).code, 2) << "CLI11";
}

TEST(PerfOptions, IoTimeoutAndFastIoFailReachTheSettings) {
  Parsed parsed = parse({"--sim", "-w", "read"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.io_timeout_ms, 30000u) << "the library's (the kernel's) default";
  EXPECT_FALSE(parsed.settings.fast_io_fail) << "off unless given";
  parsed = parse({"--sim", "-w", "read", "--io-timeout-ms", "2500", "--fast-io-fail-ms", "0"});
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.settings.io_timeout_ms, 2500u);
  EXPECT_TRUE(parsed.settings.fast_io_fail);
  EXPECT_EQ(parsed.settings.fast_io_fail_ms, 0u) << "0 = fail at once";
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--io-timeout-ms", "100"},
                 "--io-timeout-ms applies to RDMA targets");
  expect_refused({"-r", "trtype:PCIe traddr:model", "-w", "read", "--fast-io-fail-ms", "100"},
                 "--fast-io-fail-ms applies to RDMA targets");
  EXPECT_EQ(parse({"--sim", "-w", "read", "--io-timeout-ms", "-1"}).code, 2) << "CLI11: unsigned";
}

}  // namespace
}  // namespace nvmf::perf
