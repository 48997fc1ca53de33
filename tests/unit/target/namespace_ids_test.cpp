// Namespace identifiers a restarted target reports again: a namespace whose UUID nobody
// configured gets one derived from (subsystem NQN, NSID, bdev name) instead of its bdev's
// random one (namespace_ids), the same from the config file and from the namespace_add RPC's
// path (build_namespace), so Linux hosts that reconnect find the identifiers they knew.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/sha1.h"
#include "fake_transport.h"
#include "target/config.h"
#include "target/target.h"

namespace nvmf::target::testing {
namespace {

constexpr const char* kNqn = "nqn.2026-01.io.example:ids1";

// Bdevs without a "uuid" (random at each start) and namespaces without identifiers.
constexpr const char* kConfig = R"({
  "bdevs": [ { "type": "malloc", "name": "Malloc0", "num_blocks": 64 },
             { "type": "null", "name": "Null0", "num_blocks": 64 },
             { "type": "malloc", "name": "Fixed0", "num_blocks": 64,
               "uuid": "0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9" } ],
  "subsystems": [
    { "nqn": "nqn.2026-01.io.example:ids1", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0" }, { "nsid": 2, "bdev": "Null0" },
                      { "nsid": 3, "bdev": "Fixed0" },
                      { "nsid": 4, "bdev": "Malloc0",
                        "uuid": "11111111-2222-4333-8444-555555555555" },
                      { "nsid": 5, "bdev": "Null0",
                        "nguid": "00112233445566778899aabbccddeeff" } ] },
    { "nqn": "nqn.2026-01.io.example:ids2", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0" } ] } ]
})";

constexpr bdev::Uuid kConfiguredBdevUuid = {0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x40, 0x71,
                                            0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8, 0xf9};
constexpr bdev::Uuid kConfiguredNsUuid = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x43, 0x33,
                                          0x84, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
constexpr std::array<uint8_t, 16> kConfiguredNguid = {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

// One start of nvmf_tgt without transport or reactors: what build_target makes of a config.
struct Started {
  bdev::BdevRegistry registry;  // declared first: the target, holding bdevs, goes first
  std::unique_ptr<Target> target;

  const NamespaceInfo& ns(const std::string& nqn, uint32_t nsid) {
    infos_ = target->subsystems_info();
    for (const SubsystemInfo& info : infos_) {
      if (info.nqn != nqn) continue;
      for (const NamespaceInfo& entry : info.namespaces) {
        if (entry.nsid == nsid) return entry;
      }
    }
    ADD_FAILURE() << nqn << " has no namespace " << nsid;
    static const NamespaceInfo kNone{};
    return kNone;
  }

 private:
  std::vector<SubsystemInfo> infos_;
};

std::unique_ptr<Started> start(const char* text) {
  std::string message;
  auto config = parse_target_config(text, &message);
  EXPECT_TRUE(config) << message;
  if (!config) return nullptr;
  auto started = std::make_unique<Started>();
  auto target = Target::create(config->opts);
  EXPECT_TRUE(target);
  if (!target) return nullptr;
  started->target = std::move(*target);
  EXPECT_TRUE(build_target(*config, started->registry, *started->target, &message)) << message;
  return started;
}

template <size_t kSize>
bool all_zero(const std::array<uint8_t, kSize>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t byte) { return byte == 0; });
}

TEST(NamespaceIds, TheSameConfigGivesTheSameIdentityAtEveryStart) {
  auto first = start(kConfig);
  auto second = start(kConfig);
  ASSERT_TRUE(first && second);
  // The bdevs' own UUIDs are random, new at each start...
  ASSERT_NE(first->registry.find("Malloc0")->uuid(), second->registry.find("Malloc0")->uuid());
  ASSERT_TRUE(first->registry.find("Malloc0")->uuid_generated());
  // ...the namespaces' identifiers are not.
  for (const uint32_t nsid : {1u, 2u}) {
    const NamespaceInfo& before = first->ns(kNqn, nsid);
    const NamespaceInfo& after = second->ns(kNqn, nsid);
    EXPECT_EQ(before.uuid, after.uuid) << "nsid " << nsid;
    EXPECT_EQ(before.nguid, after.nguid) << "nsid " << nsid;
    EXPECT_NE(before.uuid, first->registry.find(before.bdev)->uuid()) << "not the bdev's";
    // The NGUID, configured nowhere, is the derived UUID's 16 bytes.
    EXPECT_EQ(before.nguid, before.uuid) << "nsid " << nsid;
    EXPECT_TRUE(all_zero(before.eui64)) << "no EUI-64 is made up";
  }
  EXPECT_EQ(first->ns("nqn.2026-01.io.example:ids2", 1).uuid,
            second->ns("nqn.2026-01.io.example:ids2", 1).uuid);
  first->target.reset();
  second->target.reset();
}

TEST(NamespaceIds, TheDerivedUuidIsVersion5OfTheDocumentedName) {
  auto started = start(kConfig);
  ASSERT_TRUE(started);
  const bdev::Uuid uuid = started->ns(kNqn, 1).uuid;
  EXPECT_EQ(uuid[6] >> 4, 5) << "version 5: name-based, SHA-1";
  EXPECT_EQ(uuid[8] & 0xc0, 0x80) << "variant: RFC 4122";
  // "<subnqn>/<nsid>/<bdev name>" under the project's name space ID; pinned, because a change
  // here changes the identity of every namespace hosts already know. Python:
  // uuid.uuid5(uuid.UUID("caeb27ae-9690-4892-83fc-6c7a2bfd288f"),
  //            "nqn.2026-01.io.example:ids1/1/Malloc0") = 2b251e5e-6482-58b6-9fc0-7ead1118de4a
  constexpr bdev::Uuid kExpected = {0x2b, 0x25, 0x1e, 0x5e, 0x64, 0x82, 0x58, 0xb6,
                                    0x9f, 0xc0, 0x7e, 0xad, 0x11, 0x18, 0xde, 0x4a};
  EXPECT_EQ(uuid, kExpected);
  EXPECT_EQ(derived_namespace_uuid(kNqn, 1, "Malloc0"), kExpected);
  constexpr bdev::Uuid kProjectNameSpace = {0xca, 0xeb, 0x27, 0xae, 0x96, 0x90, 0x48, 0x92,
                                            0x83, 0xfc, 0x6c, 0x7a, 0x2b, 0xfd, 0x28, 0x8f};
  EXPECT_EQ(uuid, uuid_v5(kProjectNameSpace, std::string(kNqn) + "/1/Malloc0"));
  started->target.reset();
}

TEST(NamespaceIds, AnotherNsidNqnOrBdevNameGivesAnotherUuid) {
  auto started = start(kConfig);
  ASSERT_TRUE(started);
  const bdev::Uuid malloc_ns1 = started->ns(kNqn, 1).uuid;
  EXPECT_NE(malloc_ns1, started->ns(kNqn, 2).uuid) << "another bdev (and NSID)";
  EXPECT_NE(malloc_ns1, started->ns("nqn.2026-01.io.example:ids2", 1).uuid)
      << "the same bdev and NSID in another subsystem";
  // Each of the three alone.
  const bdev::Uuid base = derived_namespace_uuid(kNqn, 1, "Malloc0");
  EXPECT_NE(base, derived_namespace_uuid(kNqn, 2, "Malloc0"));
  EXPECT_NE(base, derived_namespace_uuid("nqn.2026-01.io.example:ids3", 1, "Malloc0"));
  EXPECT_NE(base, derived_namespace_uuid(kNqn, 1, "Malloc1"));
  // The separators keep the pieces apart: NSID 11 of "...1" is not NSID 1 of "...11".
  EXPECT_NE(derived_namespace_uuid("nqn.2026-01.io.example:a1", 11, "M"),
            derived_namespace_uuid("nqn.2026-01.io.example:a11", 1, "M"));
  started->target.reset();
}

TEST(NamespaceIds, ConfiguredIdentifiersWin) {
  auto started = start(kConfig);
  ASSERT_TRUE(started);
  // A bdev "uuid" is the namespace's (as before), and then no NGUID is made up.
  const NamespaceInfo& fixed = started->ns(kNqn, 3);
  EXPECT_EQ(fixed.uuid, kConfiguredBdevUuid);
  EXPECT_FALSE(started->registry.find("Fixed0")->uuid_generated());
  EXPECT_TRUE(all_zero(fixed.nguid));
  // A namespace "uuid" wins over everything, and then no NGUID is made up either.
  const NamespaceInfo& own_uuid = started->ns(kNqn, 4);
  EXPECT_EQ(own_uuid.uuid, kConfiguredNsUuid);
  EXPECT_TRUE(all_zero(own_uuid.nguid));
  // A namespace "nguid" is reported as configured; its UUID is still derived.
  const NamespaceInfo& own_nguid = started->ns(kNqn, 5);
  EXPECT_EQ(own_nguid.nguid, kConfiguredNguid);
  EXPECT_EQ(own_nguid.uuid, derived_namespace_uuid(kNqn, 5, "Null0"));
  started->target.reset();
}

TEST(NamespaceIds, TheRpcPathGivesWhatTheConfigFileGives) {
  // nvmf_tgt's namespace_add: parse_namespace_config, then build_namespace, with the NSID
  // left to the target (the lowest free one, 1 here).
  auto from_file = start(kConfig);
  auto from_rpc = start(R"({
    "bdevs": [ { "type": "malloc", "name": "Malloc0", "num_blocks": 64 } ],
    "subsystems": [ { "nqn": "nqn.2026-01.io.example:ids1", "allow_any_host": true } ] })");
  ASSERT_TRUE(from_file && from_rpc);
  std::string message;
  auto parsed = parse_namespace_config(R"({"bdev": "Malloc0"})", "params", 32, &message);
  ASSERT_TRUE(parsed) << message;
  auto added = build_namespace(*parsed, kNqn, from_rpc->registry, *from_rpc->target, "", &message);
  ASSERT_TRUE(added) << message;
  EXPECT_EQ(*added, 1u);
  EXPECT_EQ(from_rpc->ns(kNqn, 1).uuid, from_file->ns(kNqn, 1).uuid);
  EXPECT_EQ(from_rpc->ns(kNqn, 1).nguid, from_file->ns(kNqn, 1).nguid);
  from_file->target.reset();
  from_rpc->target.reset();
}

class NamespaceIdsOnTheWireTest : public TargetTest {};

TEST_F(NamespaceIdsOnTheWireTest, IdentifyReportsTheDerivedUuidAndNguid) {
  std::string message;
  auto config = parse_target_config(kConfig, &message);
  ASSERT_TRUE(config) << message;
  bdev::BdevRegistry registry;
  ASSERT_TRUE(build_target(*config, registry, *target_, &message)) << message;
  FakeQueue& admin = connect_admin(nullptr, kNqn);
  enable(admin);
  const Completion done =
      run(admin, spec::make_identify(0, spec::cns::namespace_id_descriptor_list, 1), {}, 4096);
  ASSERT_TRUE(done.ok());
  spec::NamespaceIdentifiers ids;
  ASSERT_TRUE(spec::decode_ns_id_descriptor_list(done.data.data(), done.data.size(), &ids));
  const bdev::Uuid expected = derived_namespace_uuid(kNqn, 1, "Malloc0");
  ASSERT_TRUE(ids.has_uuid && ids.has_nguid);
  EXPECT_EQ(0, std::memcmp(ids.uuid, expected.data(), 16));
  EXPECT_EQ(0, std::memcmp(ids.nguid, expected.data(), 16));
  const auto ns = as<spec::IdentifyNamespace>(
      run(admin, spec::make_identify(0, spec::cns::namespace_data, 1), {}, 4096).data);
  EXPECT_EQ(0, std::memcmp(ns.nguid, expected.data(), 16));
  teardown_queues();
  target_.reset();  // namespaces go before the registry's bdevs
}

}  // namespace
}  // namespace nvmf::target::testing
