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
                    "max_io_size": 262144, "send_with_invalidate": "off" } ],
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
  EXPECT_EQ(parse_error(R"({"bdevs": [{"type": "ramdisk", "name": "R"}]})"),
            "bdevs[0].type: \"ramdisk\" is not a bdev type (null, malloc, uring, nvme)");
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

}  // namespace
}  // namespace nvmf::target::testing
