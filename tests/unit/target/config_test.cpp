// JSON configuration: a good config, each kind of error message, and build_target().
#include "target/config.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

#include "fake_transport.h"
#include "nvme_pcie/model/model_controller.h"

namespace nvmf::target::testing {
namespace {

constexpr const char* kGoodConfig = R"({
  "target": { "max_namespaces_default": 16, "keep_alive_granularity_ms": 500 },
  "transports": [ { "type": "rdma", "max_queue_depth": 256, "in_capsule_data_size": 8192,
                    "max_io_size": 262144, "send_with_invalidate": "off",
                    "acceptor_poll_rate": 2500, "no_srq": true, "max_srq_depth": 512 } ],
  "bdevs": [
    { "type": "malloc", "name": "Malloc0", "block_size": 4096, "num_blocks": 1024,
      "uuid": "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9" },
    { "type": "null", "name": "Null0", "num_blocks": 2048, "completion_delay_ns": 1000 },
    { "type": "uring", "name": "File0", "path": "/tmp/nvmf-target-test.img", "create_file": true,
      "size_bytes": 1048576, "direct_io": "off" }
  ],
  "subsystems": [
    { "nqn": "nqn.2026-01.io.example:disk1", "serial_number": "SN1", "model_number": "Disk One",
      "allow_any_host": false,
      "hosts": [ "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555" ],
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0", "nguid": "000102030405060708090a0b0c0d0e0f",
                        "eui64": "0011223344556677" },
                      { "bdev": "Null0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "192.168.1.10", "trsvcid": "4420" },
                     { "adrfam": "ipv6", "traddr": "fe80::1", "trsvcid": 4421 } ] },
    { "nqn": "nqn.2026-01.io.example:disk2", "allow_any_host": true, "max_namespaces": 4 }
  ]
})";

std::string parse_error(const std::string& json) {
  std::string message;
  auto parsed = parse_target_config(json, &message);
  EXPECT_FALSE(parsed.has_value()) << json;
  if (!parsed) {
    EXPECT_EQ(parsed.error().code, Errc::invalid_argument);
  }
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  return message;
}

TEST(ConfigTest, GoodConfigParses) {
  std::string message;
  auto parsed = parse_target_config(kGoodConfig, &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  const TargetConfig& config = *parsed;
  EXPECT_EQ(config.opts.max_namespaces_default, 16u);
  EXPECT_EQ(config.opts.keep_alive_granularity_ms, 500u);
  EXPECT_EQ(config.opts.max_queue_depth, 256u);
  EXPECT_EQ(config.opts.max_admin_queue_depth, 128u);  // default kept
  EXPECT_EQ(config.opts.in_capsule_data_size, 8192u);
  EXPECT_EQ(config.opts.max_io_size, 262144u);
  EXPECT_TRUE(config.transport_configured);
  EXPECT_EQ(config.transport.send_with_invalidate, SendWithInvalidate::off);
  EXPECT_EQ(config.transport.acceptor_poll_rate_us, 2500u);
  EXPECT_TRUE(config.transport.no_srq);
  EXPECT_EQ(config.transport.max_srq_depth, 512u);
  const auto saved = nlohmann::json::parse(target_config_to_json(config))["transports"][0];
  EXPECT_EQ(saved["acceptor_poll_rate"], 2500);
  EXPECT_EQ(saved["no_srq"], true);
  EXPECT_EQ(saved["max_srq_depth"], 512);
  ASSERT_EQ(config.bdevs.size(), 3u);
  EXPECT_EQ(config.bdevs[0].kind, BdevKind::malloc);
  EXPECT_EQ(config.bdevs[0].malloc_opts.block_size_bytes, 4096u);
  EXPECT_EQ(config.bdevs[0].malloc_opts.block_count, 1024u);
  EXPECT_EQ(config.bdevs[0].malloc_opts.uuid[0], 0x0a);
  EXPECT_EQ(config.bdevs[0].malloc_opts.uuid[15], 0xf9);
  EXPECT_EQ(config.bdevs[1].null_opts.completion_delay_ns, 1000u);
  EXPECT_EQ(config.bdevs[2].uring_opts.direct_io, bdev::DirectIo::off);
  EXPECT_TRUE(config.bdevs[2].uring_opts.create_file);
  ASSERT_EQ(config.subsystems.size(), 2u);
  const SubsystemConfig& disk1 = config.subsystems[0];
  EXPECT_EQ(disk1.opts.serial_number, "SN1");
  EXPECT_FALSE(disk1.opts.allow_any_host);
  ASSERT_EQ(disk1.opts.hosts.size(), 1u);
  EXPECT_EQ(disk1.opts.max_namespaces, 16u);  // the target default
  ASSERT_EQ(disk1.namespaces.size(), 2u);
  EXPECT_EQ(disk1.namespaces[0].nguid[15], 0x0f);
  EXPECT_EQ(disk1.namespaces[0].eui64[1], 0x11);
  EXPECT_EQ(disk1.namespaces[1].nsid, 0u);
  ASSERT_EQ(disk1.listeners.size(), 2u);
  EXPECT_EQ(disk1.listeners[1].adrfam, spec::adrfam::ipv6);
  EXPECT_EQ(disk1.listeners[1].trsvcid, "4421");
  EXPECT_EQ(config.subsystems[1].opts.max_namespaces, 4u);
}

TEST(ConfigTest, EmptyConfigGivesDefaults) {
  std::string message;
  auto parsed = parse_target_config("{}", &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  EXPECT_EQ(parsed->opts.max_queue_depth, 128u);
  EXPECT_FALSE(parsed->transport_configured);
  EXPECT_EQ(parsed->transport.send_with_invalidate, SendWithInvalidate::automatic);
  EXPECT_EQ(parsed->transport.acceptor_poll_rate_us, 10000u);  // SPDK's 10 ms
  EXPECT_FALSE(parsed->transport.no_srq);
  EXPECT_EQ(parsed->transport.max_srq_depth, 4096u);  // SPDK's
  EXPECT_TRUE(parsed->subsystems.empty());
}

// 1 MiB, MDTS 8 (the Linux target's), when the configuration does not say: with no transport
// entry, with one that leaves max_io_size out, and in what save_config writes back.
TEST(ConfigTest, DefaultMaxIoSizeIsOneMebibyteMdts8) {
  for (const char* text : {"{}", R"({"transports": [{"type": "rdma"}]})"}) {
    std::string message;
    auto parsed = parse_target_config(text, &message);
    ASSERT_TRUE(parsed.has_value()) << message;
    EXPECT_EQ(parsed->opts.max_io_size, 1048576u) << text;
    EXPECT_EQ(parsed->opts.mdts(), 8) << text;
    const auto saved = nlohmann::json::parse(target_config_to_json(*parsed));
    EXPECT_EQ(saved["transports"][0]["max_io_size"], 1048576) << text;
    auto again = parse_target_config(saved.dump(), &message);
    ASSERT_TRUE(again.has_value()) << message;
    EXPECT_EQ(again->opts.mdts(), 8) << text;
  }
}

TEST(ConfigTest, NamespaceNamingAnUnknownBdev) {
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "Malloc0"}],
    "subsystems": [{"nqn": "nqn.2026-01.io.example:a"},
                   {"nqn": "nqn.2026-01.io.example:b", "namespaces": [{"bdev": "Malloc9"}]}]})"),
            "subsystems[1].namespaces[0].bdev: no bdev named \"Malloc9\"");
}

TEST(ConfigTest, UnknownKeysAreErrors) {
  EXPECT_EQ(parse_error(R"({"subsytems": []})"), "subsytems: unknown key");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "null", "name": "N", "blocksize": 512}]})"),
            "bdevs[0].blocksize: unknown key");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "listeners": [{"traddr": "10.0.0.1", "port": 1}]}]})"),
            "subsystems[0].listeners[0].port: unknown key");
  // A key of another bdev type is unknown too.
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M", "path": "/tmp/x"}]})"),
            "bdevs[0].path: unknown key");
}

TEST(ConfigTest, MissingRequiredFields) {
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc"}]})"), "bdevs[0].name: required");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"serial_number": "x"}]})"),
            "subsystems[0].nqn: required");
  EXPECT_EQ(parse_error(R"({"transports": [{}]})"), "transports[0].type: required");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "uring", "name": "U"}]})"),
            "bdevs[0].path: required");
}

TEST(ConfigTest, WrongTypes) {
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M", "num_blocks": "1024"}]})"),
            "bdevs[0].num_blocks: expected an unsigned integer, got a string");
  EXPECT_EQ(
      parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a", "allow_any_host": 1}]})"),
      "subsystems[0].allow_any_host: expected a boolean, got an unsigned integer");
  EXPECT_EQ(parse_error(R"({"subsystems": {}})"), "subsystems: expected an array, got an object");
  EXPECT_EQ(parse_error(R"([])"), ": expected an object, got an array");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_queue_depth": -1}]})"),
            "transports[0].max_queue_depth: expected an unsigned integer, got a negative integer");
}

TEST(ConfigTest, ValuesOutOfRange) {
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_queue_depth": 1}]})"),
            "transports[0].max_queue_depth: 1 is outside [2, 65535]");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "acceptor_poll_rate": 1000001}]})"),
            "transports[0].acceptor_poll_rate: 1000001 is outside [0, 1000000]");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_srq_depth": 1}]})"),
            "transports[0].max_srq_depth: 1 is outside [2, 16384]");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_srq_depth": 16385}]})"),
            "transports[0].max_srq_depth: 16385 is outside [2, 16384]");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M", "block_size": 1000}]})"),
            "bdevs[0].block_size: 1000 is not a power of two in [512, 65536]");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "in_capsule_data_size": 100}]})"),
            "transports[0].in_capsule_data_size: 100 is not a multiple of 16");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_io_size": 12288}]})"),
            "transports[0].max_io_size: 12288 is not 4096 times a power of two");
  EXPECT_EQ(
      parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a", "max_namespaces": 0}]})"),
      "subsystems[0].max_namespaces: 0 is outside [1, 1024]");
}

// 65536 used to pass and turn into 0 in the transport's 16-bit limits, refusing every host.
TEST(ConfigTest, QueueDepthsFitTheRdmaTransportsSixteenBits) {
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_queue_depth": 65536}]})"),
            "transports[0].max_queue_depth: 65536 is outside [2, 65535]");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_admin_queue_depth": 65536}]})"),
            "transports[0].max_admin_queue_depth: 65536 is outside [2, 65535]");
  std::string message;
  auto parsed = parse_target_config(R"({"transports": [{"type": "rdma", "max_queue_depth": 65535}]})",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  EXPECT_EQ(static_cast<uint16_t>(parsed->opts.max_queue_depth), 65535);
}

// MSDBD cannot promise more descriptors than the transport's SGL parser carries (16).
TEST(ConfigTest, MaxSglDescriptorsStaysWithinWhatTheTransportCarries) {
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "max_sgl_descriptors": 17}]})"),
            "transports[0].max_sgl_descriptors: 17 is outside [1, 16]");
  std::string message;
  EXPECT_TRUE(parse_target_config(R"({"transports": [{"type": "rdma", "max_sgl_descriptors": 16}]})",
                                  &message)
                  .has_value());
  TargetOpts opts;
  opts.max_sgl_descriptors = 255;
  EXPECT_FALSE(opts.validate().has_value());
}

TEST(ConfigTest, BadNamesAndIdentifiers) {
  // "disk1" is accepted, with a warning, as nvmet accepts it; a control character is not.
  std::string message;
  EXPECT_TRUE(parse_target_config(R"({"subsystems": [{"nqn": "disk1"}]})", &message).has_value());
  EXPECT_EQ(parse_error("{\"subsystems\": [{\"nqn\": \"disk\\u0001\"}]}"),
            "subsystems[0].nqn: \"disk\x01\" is not a valid NQN");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2014-08.org.nvmexpress.discovery"}]})"),
            "subsystems[0].nqn: the discovery subsystem is built in and cannot be configured");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a", "hosts": ["h"]}]})"),
            "subsystems[0].hosts[0]: \"h\" is not a valid NQN");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "serial_number": "012345678901234567890"}]})"),
            "subsystems[0].serial_number: must be at most 20 printable ASCII characters");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M", "uuid": "1234"}]})"),
            "bdevs[0].uuid: \"1234\" is not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M"}],
                            "subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                              "namespaces": [{"bdev": "M", "eui64": "00112233"}]}]})"),
            "subsystems[0].namespaces[0].eui64: \"00112233\" is not 16 hex digits");
  EXPECT_EQ(
      parse_error(R"({"bdevs": [{"type": "ramdisk", "name": "R"}]})"),
      "bdevs[0].type: \"ramdisk\" is not a bdev type (null, malloc, uring, nvme, delay, error)");
}

TEST(ConfigTest, Duplicates) {
  EXPECT_EQ(
      parse_error(R"({"bdevs": [{"type": "malloc", "name": "M"}, {"type": "null", "name": "M"}]})"),
      "bdevs[1].name: duplicate bdev name \"M\"");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M"}],
                            "subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                              "namespaces": [{"nsid": 2, "bdev": "M"}, {"nsid": 2, "bdev": "M"}]}]})"),
            "subsystems[0].namespaces[1].nsid: duplicate NSID 2");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a"},
                                           {"nqn": "nqn.2026-01.io.example:a"}]})"),
            "subsystems[1].nqn: duplicate subsystem \"nqn.2026-01.io.example:a\"");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma"}, {"type": "rdma"}]})"),
            "transports[1]: only one rdma transport is supported");
}

TEST(ConfigTest, ListenerAndTransportValues) {
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "listeners": [{"traddr": "10.0.0.300"}]}]})"),
            "subsystems[0].listeners[0].traddr: \"10.0.0.300\" is not an ipv4 address");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "listeners": [{"adrfam": "ib", "traddr": "1"}]}]})"),
            "subsystems[0].listeners[0].adrfam: \"ib\" is not ipv4 or ipv6");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "listeners": [{"traddr": "10.0.0.1", "trsvcid": "44x"}]}]})"),
            "subsystems[0].listeners[0].trsvcid: \"44x\" is not a port number in [1, 65535]");
  EXPECT_EQ(parse_error(R"({"subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                             "listeners": [{"trtype": "tcp", "traddr": "10.0.0.1"}]}]})"),
            "subsystems[0].listeners[0].trtype: \"tcp\" is not supported (rdma)");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "rdma", "send_with_invalidate": "on"}]})"),
            "transports[0].send_with_invalidate: \"on\" is not auto or off");
  EXPECT_EQ(parse_error(R"({"transports": [{"type": "tcp"}]})"),
            "transports[0].type: \"tcp\" is not a supported transport (rdma)");
}

TEST(ConfigTest, InvalidJsonNamesThePosition) {
  const std::string message = parse_error("{\"bdevs\": [\n  {\"type\": \"null\",}\n]}");
  EXPECT_EQ(message.rfind("config: invalid JSON: ", 0), 0u) << message;
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
}

// A number nlohmann::json cannot hold is invalid JSON to us, said as such (not as a library
// exception's text).
TEST(ConfigTest, ANumberTooLargeToHoldIsInvalidJson) {
  const std::string message = parse_error(R"({"target": {"max_queue_depth": 1e999}})");
  EXPECT_EQ(message.rfind("config: invalid JSON: ", 0), 0u) << message;
  EXPECT_NE(message.find("number overflow"), std::string::npos) << message;
}

class BuildTargetTest : public TargetTest {};

TEST_F(BuildTargetTest, BuildsBdevsSubsystemsAndListeners) {
  std::string message;
  auto parsed = parse_target_config(R"({
    "bdevs": [ { "type": "malloc", "name": "CfgMalloc", "num_blocks": 256 },
               { "type": "null", "name": "CfgNull" } ],
    "subsystems": [ { "nqn": "nqn.2026-01.io.example:cfg", "allow_any_host": true,
                      "namespaces": [ { "nsid": 2, "bdev": "CfgMalloc",
                                        "uuid": "00000000-0000-4000-8000-000000000001" },
                                      { "bdev": "CfgNull" } ],
                      "listeners": [ { "traddr": "10.1.1.1" } ] } ] })",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  bdev::BdevRegistry registry;
  ASSERT_TRUE(build_target(*parsed, registry, *target_, &message).has_value()) << message;
  EXPECT_EQ(registry.size(), 2u);
  ASSERT_NE(registry.find("CfgMalloc"), nullptr);
  // A host sees the configured namespaces and finds the listener through discovery.
  FakeQueue& admin = connect_admin(nullptr, "nqn.2026-01.io.example:cfg");
  enable(admin);
  const auto list = as<spec::ActiveNamespaceList>(
      run(admin, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096).data);
  EXPECT_EQ(list.nsid[0], 1u);  // CfgNull took the lowest free NSID
  EXPECT_EQ(list.nsid[1], 2u);
  const auto ns = as<spec::IdentifyNamespace>(
      run(admin, spec::make_identify(0, spec::cns::namespace_data, 2), {}, 4096).data);
  EXPECT_EQ(ns.nsze, 256u);
  FakeQueue& discovery = connect_admin(nullptr, std::string(spec::discovery_nqn));
  enable(discovery);
  const Completion log =
      run(discovery, spec::make_get_log_page(0, spec::log_page::discovery, 2048, 0, 0), {}, 2048);
  EXPECT_EQ(as<spec::DiscoveryLogPageHeader>(log.data).numrec, 1u);
  EXPECT_EQ(spec::get_nul_terminated(as<spec::DiscoveryLogEntry>(log.data, 1024).traddr),
            "10.1.1.1");
  teardown_queues();
  target_.reset();  // channels and namespaces go before the registry's bdevs
}

TEST_F(BuildTargetTest, BuildErrorsNameTheField) {
  std::string message;
  auto parsed = parse_target_config(R"({
    "bdevs": [ { "type": "malloc", "name": "Malloc0" } ],
    "subsystems": [ { "nqn": "nqn.2026-01.io.example:disk1" } ] })",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  bdev::BdevRegistry registry;
  // The fixture already has this subsystem.
  EXPECT_FALSE(build_target(*parsed, registry, *target_, &message).has_value());
  EXPECT_EQ(message.rfind("subsystems[0].nqn: cannot add \"nqn.2026-01.io.example:disk1\"", 0), 0u)
      << message;
  // A registry that already holds the name.
  bdev::BdevRegistry taken;
  bdev::NullBdevOpts opts;
  opts.name = "Malloc0";
  ASSERT_TRUE(taken.add(std::move(*bdev::create_null_bdev(opts))).has_value());
  EXPECT_FALSE(build_target(*parsed, taken, *target_, &message).has_value());
  EXPECT_EQ(message, "bdevs[0].name: \"Malloc0\" is already registered");
}

TEST(ConfigTest, NvmeBdevParsesAndRefusesWhatTheDeviceDecides) {
  std::string message;
  auto parsed = parse_target_config(
      R"({"bdevs": [{"type": "nvme", "name": "Nvme0", "pci": "0000:00:04.0", "nsid": 2}]})",
      &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  ASSERT_EQ(parsed->bdevs[0].kind, BdevKind::nvme);
  EXPECT_EQ(parsed->bdevs[0].nvme_opts.pci, "0000:00:04.0");
  EXPECT_EQ(parsed->bdevs[0].nvme_opts.nsid, 2u);
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "nvme", "name": "N"}]})"),
            "bdevs[0].pci: required");
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "nvme", "name": "N", "pci": "00:04.0"}]})"),
            "bdevs[0].pci: \"00:04.0\" is not a PCI address like \"0000:00:04.0\" "
            "(domain:bus:device.function)");
  // Geometry comes from Identify Namespace: a block size in the config would be a lie.
  EXPECT_NE(parse_error(R"({"bdevs": [{"type": "nvme", "name": "N", "pci": "0000:00:04.0",
                                       "block_size": 4096}]})")
                .find("block_size"),
            std::string::npos);
}

class NvmeBuildTest : public TargetTest {
 protected:
  static bdev::NvmeControllerPool::DeviceOpener model_opener(nvme_pcie::model::ModelController** out) {
    return [out](const std::string& pci) -> bdev::NvmeControllerPool::DeviceResult {
      nvme_pcie::model::ModelOpts opts;
      opts.name = pci;
      opts.namespaces[0].block_count = 8192;
      opts.namespaces[0].nguid = {0xA0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      auto model = nvme_pcie::model::ModelController::create(opts);
      if (!model) return Unexpected(model.error());
      *out = model->get();
      return std::unique_ptr<nvme_pcie::PciDevice>(std::move(*model));
    };
  }
  static constexpr const char* kConfig = R"({
    "bdevs": [ { "type": "nvme", "name": "Nvme0n1", "pci": "0000:00:04.0" } ],
    "subsystems": [ { "nqn": "nqn.2026-01.io.example:ssd", "allow_any_host": true,
                      "namespaces": [ { "bdev": "Nvme0n1" } ] } ] })";
};

TEST_F(NvmeBuildTest, WithoutThePcieDriverNvmeBdevsAreRefused) {
  std::string message;
  auto parsed = parse_target_config(kConfig, &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  bdev::BdevRegistry registry;
  EXPECT_FALSE(build_target(*parsed, registry, *target_, &message).has_value());
  EXPECT_EQ(message, "bdevs[0]: nvme bdevs need the PCIe driver, which this program does not start");
}

TEST_F(NvmeBuildTest, IdentifyDataReachesHostsAndRemovalTakesTheNamespaceAway) {
  nvme_pcie::model::ModelController* model = nullptr;
  bdev::NvmeControllerPool pool(model_opener(&model), nvme_pcie::ControllerOpts{});
  std::string message;
  auto parsed = parse_target_config(kConfig, &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  {
    bdev::BdevRegistry registry;
    ASSERT_TRUE(build_target(*parsed, registry, *target_, &message, &pool).has_value()) << message;
    ASSERT_NE(model, nullptr);
    FakeQueue& admin = connect_admin(nullptr, "nqn.2026-01.io.example:ssd");
    enable(admin);
    const auto ns = as<spec::IdentifyNamespace>(
        run(admin, spec::make_identify(0, spec::cns::namespace_data, 1), {}, 4096).data);
    EXPECT_EQ(ns.nsze, 8192u);  // the device's size, not a configured one
    EXPECT_EQ(ns.nguid[0], 0xA0);  // the device's NGUID
    // Surprise removal: the driver's recovery thread notices, the target drops the namespace.
    model->remove();
    for (int i = 0; i < 2000 && target_->controller_count("nqn.2026-01.io.example:ssd") > 0; ++i) {
      const auto list = as<spec::ActiveNamespaceList>(
          run(admin, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096).data);
      if (list.nsid[0] == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto list = as<spec::ActiveNamespaceList>(
        run(admin, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096).data);
    EXPECT_EQ(list.nsid[0], 0u);
    teardown_queues();
    target_.reset();  // namespaces go before the registry's bdevs
  }
}

TEST_F(NvmeBuildTest, RemovalReachesTheNamespaceOfABdevStackedOnTheDevice) {
  nvme_pcie::model::ModelController* model = nullptr;
  bdev::NvmeControllerPool pool(model_opener(&model), nvme_pcie::ControllerOpts{});
  std::string message;
  auto parsed = parse_target_config(R"({
    "bdevs": [ { "type": "nvme", "name": "Nvme0n1", "pci": "0000:00:04.0" },
               { "type": "delay", "name": "Slow0", "base_bdev": "Nvme0n1" },
               { "type": "error", "name": "Flaky0", "base_bdev": "Slow0" } ],
    "subsystems": [ { "nqn": "nqn.2026-01.io.example:ssd", "allow_any_host": true,
                      "namespaces": [ { "bdev": "Flaky0" } ] } ] })",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  {
    bdev::BdevRegistry registry;
    ASSERT_TRUE(build_target(*parsed, registry, *target_, &message, &pool).has_value()) << message;
    ASSERT_NE(model, nullptr);
    FakeQueue& admin = connect_admin(nullptr, "nqn.2026-01.io.example:ssd");
    enable(admin);
    const auto ns = as<spec::IdentifyNamespace>(
        run(admin, spec::make_identify(0, spec::cns::namespace_data, 1), {}, 4096).data);
    EXPECT_EQ(ns.nsze, 8192u);  // the device's geometry, through both bdevs
    model->remove();
    bool gone = false;
    for (int i = 0; i < 2000 && !gone; ++i) {
      const auto list = as<spec::ActiveNamespaceList>(
          run(admin, spec::make_identify(0, spec::cns::active_namespace_list), {}, 4096).data);
      gone = list.nsid[0] == 0;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(gone) << "the namespace on the error bdev on the delay bdev on the device";
    teardown_queues();
    target_.reset();  // namespaces go before the registry's bdevs
  }
}

// ---- delay and error bdevs ----

constexpr const char* kWrappedBdevs = R"({
  "bdevs": [
    { "type": "malloc", "name": "M0", "num_blocks": 256 },
    { "type": "delay", "name": "D0", "base_bdev": "M0", "read_latency_us": 10,
      "write_latency_us": 20, "flush_latency_us": 30, "jitter_us": 5,
      "uuid": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9" },
    { "type": "null", "name": "N0" },
    { "type": "error", "name": "E0", "base_bdev": "N0",
      "inject": { "io_types": ["read", "unmap"], "action": "drop", "count": 3, "every_nth": 2,
                  "sct": 2, "sc": 129, "dnr": true } },
    { "type": "error", "name": "E1", "base_bdev": "D0" }
  ],
  "subsystems": [ { "nqn": "nqn.2026-01.io.example:w", "namespaces": [ { "bdev": "E0" },
                                                                      { "bdev": "E1" } ] } ]
})";

TEST(ConfigTest, DelayAndErrorBdevsParseWithTheirDefaults) {
  std::string message;
  auto parsed = parse_target_config(kWrappedBdevs, &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  const std::vector<BdevConfig>& bdevs = parsed->bdevs;
  ASSERT_EQ(bdevs.size(), 5u);
  EXPECT_EQ(bdevs[1].kind, BdevKind::delay);
  EXPECT_EQ(*bdevs[1].base_bdev(), "M0");
  EXPECT_EQ(bdevs[1].delay_opts.name, "D0");
  EXPECT_EQ(bdevs[1].delay_opts.latency.read_latency_us, 10u);
  EXPECT_EQ(bdevs[1].delay_opts.latency.write_latency_us, 20u);
  EXPECT_EQ(bdevs[1].delay_opts.latency.flush_latency_us, 30u);
  EXPECT_EQ(bdevs[1].delay_opts.latency.jitter_us, 5u);
  EXPECT_EQ(bdevs[1].delay_opts.uuid[0], 0x0a);
  EXPECT_EQ(bdevs[0].base_bdev(), nullptr);
  const bdev::ErrorInjection& rule = bdevs[3].error_opts.injection;
  EXPECT_EQ(bdevs[3].kind, BdevKind::error);
  EXPECT_EQ(rule.io_types,
            bdev::io_type_bit(bdev::IoType::read) | bdev::io_type_bit(bdev::IoType::unmap));
  EXPECT_EQ(rule.action, bdev::ErrorAction::drop);
  EXPECT_EQ(rule.count, 3u);
  EXPECT_EQ(rule.every_nth, 2u);
  EXPECT_EQ(rule.sct, 2);
  EXPECT_EQ(rule.sc, 129);
  EXPECT_TRUE(rule.dnr);
  // No "inject": no rule. An "inject" without io_types: every type, SPDK's default status.
  EXPECT_EQ(bdevs[4].error_opts.injection, bdev::ErrorInjection{});
  auto every = parse_error_injection(R"({"count": 1})", "inject", &message);
  ASSERT_TRUE(every.has_value()) << message;
  EXPECT_EQ(every->io_types, bdev::kAllIoTypes);
  EXPECT_EQ(every->sct, 0);
  EXPECT_EQ(every->sc, 0x06);  // Internal Error
  EXPECT_FALSE(every->dnr);
  auto none = parse_error_injection(R"({"io_types": []})", "inject", &message);
  ASSERT_TRUE(none.has_value()) << message;
  EXPECT_EQ(none->io_types, 0u);
}

TEST(ConfigTest, DelayAndErrorBdevErrorsNameTheField) {
  const auto bdevs = [](const std::string& entries) {
    return parse_error(R"({"bdevs": [{"type": "malloc", "name": "M0"}, )" + entries + "]}");
  };
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0"})"), "bdevs[1].base_bdev: required");
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0", "base_bdev": ""})"),
            "bdevs[1].base_bdev: must not be empty");
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0", "base_bdev": "D0"})"),
            "bdevs[1].base_bdev: a bdev cannot be its own base");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "E1"},
                     {"type": "error", "name": "E1", "base_bdev": "M0"})"),
            "bdevs[1].base_bdev: no bdev named \"E1\" earlier in bdevs");
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0", "base_bdev": "M0"},
                     {"type": "error", "name": "E0", "base_bdev": "M0"})"),
            "bdevs[2].base_bdev: \"M0\" is already the base of \"D0\"");
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0", "base_bdev": "M0", "queue_depth": 8})"),
            "bdevs[1].queue_depth: unknown key");
  EXPECT_EQ(
      bdevs(R"({"type": "delay", "name": "D0", "base_bdev": "M0", "read_latency_us": 60000001})"),
      "bdevs[1].read_latency_us: 60000001 is outside [0, 60000000]");
  EXPECT_EQ(bdevs(R"({"type": "delay", "name": "D0", "base_bdev": "M0", "jitter_us": -1})"),
            "bdevs[1].jitter_us: expected an unsigned integer, got a negative integer");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0", "inject": 1})"),
            "bdevs[1].inject: expected an object, got an unsigned integer");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0",
                      "inject": {"io_types": ["read", "trim"]}})"),
            "bdevs[1].inject.io_types[1]: \"trim\" is not read, write, flush, write_zeroes, unmap "
            "or all");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0",
                      "inject": {"io_types": "read"}})"),
            "bdevs[1].inject.io_types: expected an array, got a string");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0",
                      "inject": {"action": "explode"}})"),
            "bdevs[1].inject.action: \"explode\" is not fail or drop");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0",
                      "inject": {"every_nth": 0}})"),
            "bdevs[1].inject.every_nth: 0 is outside [1, 18446744073709551615]");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0", "inject": {"sct": 8}})"),
            "bdevs[1].inject.sct: 8 is outside [0, 7]");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0", "inject": {"sc": 0}})"),
            "bdevs[1].inject.sc: 0 with sct 0 is Successful Completion, not a failure");
  EXPECT_EQ(bdevs(R"({"type": "error", "name": "E0", "base_bdev": "M0", "inject": {"nth": 2}})"),
            "bdevs[1].inject.nth: unknown key");
  // A base is reached only through the bdev on top of it.
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "malloc", "name": "M0"},
                                      {"type": "error", "name": "E0", "base_bdev": "M0"}],
                           "subsystems": [{"nqn": "nqn.2026-01.io.example:a",
                                           "namespaces": [{"bdev": "E0"}, {"bdev": "M0"}]}]})"),
            "subsystems[0].namespaces[1].bdev: \"M0\" is the base of error bdev \"E0\"; name that "
            "one instead");
}

TEST(ConfigTest, DelayAndErrorBdevsRoundTripThroughSaveConfig) {
  std::string message;
  auto first = parse_target_config(kWrappedBdevs, &message);
  ASSERT_TRUE(first.has_value()) << message;
  const std::string written = target_config_to_json(*first);
  auto second = parse_target_config(written, &message);
  ASSERT_TRUE(second.has_value()) << message << "\n" << written;
  EXPECT_EQ(target_config_to_json(*second), written);
  const auto saved = nlohmann::json::parse(written);
  EXPECT_EQ(saved["bdevs"][1],
            nlohmann::json::parse(R"({"type": "delay", "name": "D0", "base_bdev": "M0",
                                      "uuid": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9",
                                      "read_latency_us": 10, "write_latency_us": 20,
                                      "flush_latency_us": 30, "jitter_us": 5})"));
  EXPECT_EQ(saved["bdevs"][3]["inject"],
            nlohmann::json::parse(R"({"io_types": ["read", "unmap"], "action": "drop",
                                      "count": 3, "every_nth": 2, "sct": 2, "sc": 129,
                                      "dnr": true})"));
  // No rule is written out as one that hits nothing.
  EXPECT_EQ(saved["bdevs"][4]["inject"]["io_types"], nlohmann::json::array());
  EXPECT_EQ(second->bdevs[3].error_opts.injection, first->bdevs[3].error_opts.injection);
  EXPECT_EQ(second->bdevs[4].error_opts.injection, bdev::ErrorInjection{});
  EXPECT_EQ(bdev_config_to_json(second->bdevs[1]), bdev_config_to_json(first->bdevs[1]));
  // "all" stays "all".
  auto all = parse_error_injection(R"({"io_types": ["all"]})", "inject", &message);
  ASSERT_TRUE(all.has_value()) << message;
  EXPECT_EQ(nlohmann::json::parse(error_injection_to_json(*all))["io_types"],
            nlohmann::json::parse(R"(["all"])"));
}

class WrappedBdevTest : public TargetTest {
 protected:
  // NS 3 of the fixture's subsystem on bdev `name` of `registry`.
  void add_namespace(bdev::BdevRegistry& registry, const std::string& name) {
    std::string message;
    NamespaceConfig ns;
    ns.nsid = 3;
    ns.bdev = name;
    ASSERT_TRUE(build_namespace(ns, kSubsystemNqn, registry, *target_, "", &message).has_value())
        << message;
  }
};

TEST_F(WrappedBdevTest, AnInjectedStatusReachesTheHostAsChosen) {
  std::string message;
  auto parsed = parse_target_config(R"({"bdevs": [
      { "type": "malloc", "name": "W0", "num_blocks": 64 },
      { "type": "error", "name": "E0", "base_bdev": "W0",
        "inject": { "io_types": ["read"], "count": 1, "sct": 2, "sc": 129, "dnr": true } } ]})",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  bdev::BdevRegistry registry;
  ASSERT_TRUE(build_target(*parsed, registry, *target_, &message).has_value()) << message;
  add_namespace(registry, "E0");
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  const std::vector<uint8_t> data = pattern(512, 3);
  EXPECT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 3, 7, 1), data).ok());
  const Completion failed = run(io, io_sqe(spec::nvm_opcode::read, 3, 7, 1), {}, 512);
  EXPECT_EQ(failed.status().sct, spec::sct::media_data_integrity);
  EXPECT_EQ(failed.status().sc, spec::sc_media::unrecovered_read_error);
  EXPECT_TRUE(failed.status().dnr);
  const Completion read = run(io, io_sqe(spec::nvm_opcode::read, 3, 7, 1), {}, 512);
  ASSERT_TRUE(read.ok());  // count 1: the rule is used up
  EXPECT_EQ(read.data, data);
  // Changed at run time: the next flush fails with SPDK's default, Internal Error.
  bdev::ErrorBdev* error_bdev = bdev::as_error_bdev(*registry.find("E0"));
  ASSERT_NE(error_bdev, nullptr);
  ASSERT_TRUE(error_bdev->inject({.io_types = bdev::io_type_bit(bdev::IoType::flush)}));
  const Completion flush = run(io, spec::make_sqe(spec::nvm_opcode::flush, 0, 3));
  EXPECT_EQ(flush.status().sct, spec::sct::generic);
  EXPECT_EQ(flush.status().sc, spec::sc_generic::internal_error);
  EXPECT_FALSE(flush.status().dnr);
  teardown_queues();
  target_.reset();  // namespaces go before the registry's bdevs
}

TEST_F(WrappedBdevTest, AStalledNamespaceHoldsOnlyItsOwnIo) {
  std::string message;
  auto parsed = parse_target_config(R"({"bdevs": [
      { "type": "malloc", "name": "W0", "num_blocks": 64 },
      { "type": "delay", "name": "D0", "base_bdev": "W0" } ]})",
                                    &message);
  ASSERT_TRUE(parsed.has_value()) << message;
  bdev::BdevRegistry registry;
  ASSERT_TRUE(build_target(*parsed, registry, *target_, &message).has_value()) << message;
  add_namespace(registry, "D0");
  uint16_t cntlid = 0;
  bring_up(&cntlid);
  FakeQueue& io = connect_io(cntlid, 1);
  bdev::DelayBdev* delay = bdev::as_delay_bdev(*registry.find("D0"));
  ASSERT_NE(delay, nullptr);
  delay->stall();
  const uint16_t stuck = io.submit(io_sqe(spec::nvm_opcode::write, 3, 0, 1), pattern(512, 4));
  // NS 1 (malloc) on the same queue is served meanwhile.
  EXPECT_TRUE(run(io, io_sqe(spec::nvm_opcode::write, 1, 0, 1), pattern(512, 5)).ok());
  for (int i = 0; i < 100; ++i) harness_.poll_round();
  EXPECT_FALSE(io.completed(stuck));
  delay->release();
  const Completion done = wait(io, stuck);
  EXPECT_TRUE(done.ok());
  teardown_queues();
  target_.reset();
}

TEST_F(WrappedBdevTest, BuildRefusesABaseThatIsANamespaceOrTaken) {
  bdev::BdevRegistry registry;
  std::string message;
  auto base =
      parse_bdev_config(R"({"type": "malloc", "name": "W0", "num_blocks": 64})", "", &message);
  ASSERT_TRUE(base.has_value()) << message;
  ASSERT_TRUE(build_bdev(*base, registry, *target_, "", &message).has_value()) << message;
  auto error_config =
      parse_bdev_config(R"({"type": "error", "name": "E0", "base_bdev": "W0"})", "", &message);
  ASSERT_TRUE(error_config.has_value()) << message;
  auto unknown =
      parse_bdev_config(R"({"type": "delay", "name": "D9", "base_bdev": "nope"})", "", &message);
  ASSERT_TRUE(unknown.has_value()) << message;

  // Not registered.
  EXPECT_FALSE(build_bdev(*unknown, registry, *target_, "bdevs[4]", &message).has_value());
  EXPECT_EQ(message, "bdevs[4].base_bdev: no bdev named \"nope\"");
  // A namespace already: refused, the base stays free.
  add_namespace(registry, "W0");
  auto refused = build_bdev(*error_config, registry, *target_, "", &message);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Errc::busy);
  EXPECT_EQ(message, std::string("base_bdev: \"W0\" is used by namespace 3 of ") + kSubsystemNqn +
                         " (a base cannot be a namespace)");
  EXPECT_EQ(registry.find("W0")->claimed_by(), nullptr);
  ASSERT_TRUE(target_->remove_namespace(kSubsystemNqn, 3).has_value());
  harness_.poll_until_idle(100);  // the poll group closes its channel to W0
  // Free now; then a second bdev on it, and a namespace on it, are refused.
  ASSERT_TRUE(build_bdev(*error_config, registry, *target_, "", &message).has_value()) << message;
  auto delay_config =
      parse_bdev_config(R"({"type": "delay", "name": "D0", "base_bdev": "W0"})", "", &message);
  ASSERT_TRUE(delay_config.has_value()) << message;
  EXPECT_FALSE(build_bdev(*delay_config, registry, *target_, "", &message).has_value());
  EXPECT_EQ(message, "base_bdev: \"W0\" is already the base of \"E0\"");
  NamespaceConfig ns;
  ns.bdev = "W0";
  auto added = build_namespace(ns, kSubsystemNqn, registry, *target_, "namespaces[0]", &message);
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error().code, Errc::busy);
  EXPECT_EQ(message,
            "namespaces[0].bdev: \"W0\" is the base of error bdev \"E0\"; name that one instead");
  // The target refuses it too when asked directly.
  NamespaceOpts direct;
  direct.bdev = registry.find("W0");
  EXPECT_EQ(target_->add_namespace(kSubsystemNqn, direct).error().code, Errc::busy);
  // And the registry keeps the base while the error bdev stands.
  EXPECT_EQ(registry.remove("W0").error().code, Errc::busy);
  teardown_queues();
  target_.reset();
}

}  // namespace
}  // namespace nvmf::target::testing
