// Addresses and identities of nvmf/host.h: TransportId parsing (SPDK's string form) and its
// error messages, to_string() round trips, port(), memreg policy names, UUID text, the host
// identity read from (or generated without) /etc/nvme, and DiscoveryEntry -> TransportId.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "nvmf/host.h"

namespace nvmf::host {
namespace {

// Parses text that must be valid.
TransportId parse_ok(std::string_view text) {
  std::string message;
  auto trid = TransportId::parse(text, &message);
  EXPECT_TRUE(trid) << text << ": " << message;
  return trid ? *trid : TransportId{};
}

// Parses text that must be refused; returns the message.
std::string parse_error(std::string_view text) {
  std::string message;
  auto trid = TransportId::parse(text, &message);
  EXPECT_FALSE(trid) << text;
  if (!trid) {
    EXPECT_EQ(trid.error().code, Errc::invalid_argument);
  }
  EXPECT_FALSE(message.empty()) << text;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  return message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// TransportId::parse

TEST(TransportId, ParsesTheSpdkForm) {
  const TransportId trid = parse_ok(
      "trtype:RDMA adrfam:IPv4 traddr:10.0.0.1 trsvcid:4421 subnqn:nqn.2026-01.io.example:disk1");
  EXPECT_EQ(trid.trtype, "RDMA");
  EXPECT_EQ(trid.adrfam, "IPv4");
  EXPECT_EQ(trid.traddr, "10.0.0.1");
  EXPECT_EQ(trid.trsvcid, "4421");
  EXPECT_EQ(trid.port(), 4421);
  EXPECT_EQ(trid.subnqn, "nqn.2026-01.io.example:disk1");
}

TEST(TransportId, DefaultsEverythingButTraddr) {
  const TransportId trid = parse_ok("traddr:192.168.1.2");
  EXPECT_EQ(trid.trtype, "RDMA");
  EXPECT_EQ(trid.adrfam, "IPv4");
  EXPECT_EQ(trid.traddr, "192.168.1.2");
  EXPECT_EQ(trid.trsvcid, "4420");
  EXPECT_EQ(trid.port(), 4420);
  EXPECT_EQ(trid.subnqn, kDiscoveryNqn);
}

TEST(TransportId, KeysAndKnownValuesAreCaseInsensitive) {
  const TransportId trid = parse_ok("TrType:rdma ADRFAM:ipv6 TRADDR:fe80::1 TrSvcId:4420");
  EXPECT_EQ(trid.trtype, "RDMA");  // stored in the canonical case
  EXPECT_EQ(trid.adrfam, "IPv6");
  EXPECT_EQ(trid.traddr, "fe80::1");  // values other than trtype/adrfam as given
}

TEST(TransportId, AcceptsEqualsAndAnyWhitespace) {
  const TransportId trid =
      parse_ok("  trtype=RDMA\ttraddr=10.0.0.1\n trsvcid=4420   subnqn=nqn.2014-08.org.a:b=c  ");
  EXPECT_EQ(trid.traddr, "10.0.0.1");
  EXPECT_EQ(trid.subnqn, "nqn.2014-08.org.a:b=c");  // only the first separator splits
}

TEST(TransportId, ValuesKeepTheirColons) {
  const TransportId trid = parse_ok(
      "adrfam:IPv6 traddr:2001:db8::5 subnqn:nqn.2014-08.org.nvmexpress:uuid:"
      "0f8fad5b-d9cb-469f-a165-70867728950e");
  EXPECT_EQ(trid.traddr, "2001:db8::5");
  EXPECT_EQ(trid.subnqn, "nqn.2014-08.org.nvmexpress:uuid:0f8fad5b-d9cb-469f-a165-70867728950e");
}

TEST(TransportId, RefusesBadInputNamingTheKey) {
  EXPECT_TRUE(contains(parse_error(""), "traddr is required"));
  EXPECT_TRUE(contains(parse_error("trtype:RDMA"), "traddr is required"));
  EXPECT_TRUE(contains(parse_error("traddr:1.2.3.4 hostaddr:5.6.7.8"), "unknown key 'hostaddr'"));
  EXPECT_TRUE(contains(parse_error("traddr:1.2.3.4 traddr:5.6.7.8"), "traddr given twice"));
  EXPECT_TRUE(contains(parse_error("traddr:1.2.3.4 TRADDR=5.6.7.8"), "TRADDR given twice"));
  EXPECT_TRUE(contains(parse_error("traddr 1.2.3.4"), "expected key:value, got 'traddr'"));
  EXPECT_TRUE(contains(parse_error(":x traddr:1.2.3.4"), "expected key:value, got ':x'"));
  EXPECT_TRUE(contains(parse_error("traddr:"), "empty value for traddr"));
  EXPECT_TRUE(
      contains(parse_error("trtype:TCP traddr:1.2.3.4"), "trtype 'TCP' not supported (only RDMA)"));
  EXPECT_TRUE(contains(parse_error("adrfam:IB traddr:1.2.3.4"),
                       "adrfam 'IB' not supported (IPv4 or IPv6)"));
  for (const char* port : {"0", "65536", "-1", "44x", "x", "+4420", "0x10", "99999999999"}) {
    const std::string text = std::string("traddr:1.2.3.4 trsvcid:") + port;
    EXPECT_TRUE(contains(parse_error(text),
                         "trsvcid '" + std::string(port) + "' is not a port number (1..65535)"))
        << port;
  }
  EXPECT_TRUE(contains(parse_error("traddr:1.2.3.4 subnqn:disk1"), "subnqn 'disk1' is not an NQN"));
  EXPECT_TRUE(
      contains(parse_error("traddr:1.2.3.4 subnqn:nqn.2014-08.org." + std::string(220, 'a')),
               "is not an NQN"));
}

TEST(TransportId, PortBoundsAreAccepted) {
  EXPECT_EQ(parse_ok("traddr:1.2.3.4 trsvcid:1").port(), 1);
  EXPECT_EQ(parse_ok("traddr:1.2.3.4 trsvcid:65535").port(), 65535);
}

TEST(TransportId, WorksWithoutAMessageBuffer) {
  auto trid = TransportId::parse("bogus", nullptr);
  ASSERT_FALSE(trid);
  EXPECT_EQ(trid.error().code, Errc::invalid_argument);
}

TEST(TransportId, ToStringRoundTrips) {
  const TransportId trid =
      parse_ok("traddr:2001:db8::5 adrfam:ipv6 trsvcid:4421 subnqn:nqn.2026-01.io.example:disk1");
  EXPECT_EQ(trid.to_string(),
            "trtype:RDMA adrfam:IPv6 traddr:2001:db8::5 trsvcid:4421 "
            "subnqn:nqn.2026-01.io.example:disk1");
  const TransportId again = parse_ok(trid.to_string());
  EXPECT_EQ(again.trtype, trid.trtype);
  EXPECT_EQ(again.adrfam, trid.adrfam);
  EXPECT_EQ(again.traddr, trid.traddr);
  EXPECT_EQ(again.trsvcid, trid.trsvcid);
  EXPECT_EQ(again.subnqn, trid.subnqn);
}

TEST(TransportId, PortOfAHandMadeIdWithABadServiceIsZero) {
  TransportId trid;
  trid.trsvcid = "http";
  EXPECT_EQ(trid.port(), 0);
  trid.trsvcid = "70000";
  EXPECT_EQ(trid.port(), 0);
  trid.trsvcid = "";
  EXPECT_EQ(trid.port(), 0);
}

// ---------------------------------------------------------------------------------------
// Memreg policies

TEST(MemregPolicy, NamesRoundTrip) {
  for (MemregPolicy policy : {MemregPolicy::global, MemregPolicy::unsafe, MemregPolicy::sagi,
                              MemregPolicy::max, MemregPolicy::deferred}) {
    MemregPolicy parsed = MemregPolicy::global;
    ASSERT_TRUE(memreg_policy_parse(memreg_policy_name(policy), &parsed))
        << memreg_policy_name(policy);
    EXPECT_EQ(parsed, policy);
  }
  EXPECT_STREQ(memreg_policy_name(MemregPolicy::global), "global");
  EXPECT_STREQ(memreg_policy_name(MemregPolicy::unsafe), "unsafe");
  EXPECT_STREQ(memreg_policy_name(MemregPolicy::sagi), "sagi");
  EXPECT_STREQ(memreg_policy_name(MemregPolicy::max), "max");
  EXPECT_STREQ(memreg_policy_name(MemregPolicy::deferred), "deferred");
}

TEST(MemregPolicy, ParseRefusesOtherNames) {
  MemregPolicy policy = MemregPolicy::sagi;
  for (const char* text : {"", "Global", "safe", "global ", "maximum"}) {
    EXPECT_FALSE(memreg_policy_parse(text, &policy)) << text;
  }
  EXPECT_EQ(policy, MemregPolicy::sagi);  // untouched on failure
}

// ---------------------------------------------------------------------------------------
// UUIDs

TEST(Uuid, FormatsLowercase8_4_4_4_12) {
  const std::array<uint8_t, 16> uuid = {0x0F, 0x8F, 0xAD, 0x5B, 0xD9, 0xCB, 0x46, 0x9F,
                                        0xA1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0E};
  EXPECT_EQ(uuid_to_string(uuid), "0f8fad5b-d9cb-469f-a165-70867728950e");
  EXPECT_EQ(uuid_to_string({}), "00000000-0000-0000-0000-000000000000");
}

TEST(Uuid, ParsesEitherCaseAndRoundTrips) {
  std::array<uint8_t, 16> uuid{};
  ASSERT_TRUE(uuid_parse("0F8FAD5B-D9CB-469F-A165-70867728950E", &uuid));
  EXPECT_EQ(uuid[0], 0x0F);
  EXPECT_EQ(uuid[4], 0xD9);
  EXPECT_EQ(uuid[15], 0x0E);
  EXPECT_EQ(uuid_to_string(uuid), "0f8fad5b-d9cb-469f-a165-70867728950e");
}

TEST(Uuid, RefusesMalformedText) {
  std::array<uint8_t, 16> uuid{};
  uuid[0] = 0x42;
  for (const char* text :
       {"", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5b-d9cb-469f-a165-70867728950e0",
        "0f8fad5bd9cb-469f-a165-70867728950e0", "0f8fad5b-d9cb-469f-a165_70867728950e",
        "0g8fad5b-d9cb-469f-a165-70867728950e", " 0f8fad5b-d9cb-469f-a165-70867728950e"}) {
    EXPECT_FALSE(uuid_parse(text, &uuid)) << text;
  }
  EXPECT_EQ(uuid[0], 0x42);  // untouched on failure
}

// ---------------------------------------------------------------------------------------
// Host identity

// mkdtemp under the temp directory, removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "nvmf_host_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  void write(const std::string& name, const std::string& contents) const {
    std::ofstream(std::filesystem::path(path_) / name) << contents;
  }

 private:
  std::string path_;
};

constexpr const char* kUuidPrefix = "nqn.2014-08.org.nvmexpress:uuid:";

TEST(HostIdentity, ReadsHostnqnAndHostidFiles) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  dir.write("hostnqn",
            "  nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555\n"
            "second line ignored\n");
  dir.write("hostid", "0F8FAD5B-D9CB-469F-A165-70867728950E\n");
  const HostIdentity identity = default_host_identity(dir.path());
  EXPECT_EQ(identity.hostnqn,
            "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555");
  // The hostid file wins over the UUID in the NQN.
  EXPECT_EQ(uuid_to_string(identity.hostid), "0f8fad5b-d9cb-469f-a165-70867728950e");
}

TEST(HostIdentity, HostidDefaultsToTheUuidOfTheHostnqn) {
  TempDir dir;
  dir.write("hostnqn", "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555");
  const HostIdentity identity = default_host_identity(dir.path());
  EXPECT_EQ(uuid_to_string(identity.hostid), "11111111-2222-3333-4444-555555555555");
}

TEST(HostIdentity, AMalformedHostidFileIsIgnored) {
  TempDir dir;
  dir.write("hostnqn", "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555");
  dir.write("hostid", "not-a-uuid\n");
  const HostIdentity identity = default_host_identity(dir.path());
  EXPECT_EQ(uuid_to_string(identity.hostid), "11111111-2222-3333-4444-555555555555");
}

TEST(HostIdentity, ANonUuidHostnqnGetsARandomHostid) {
  TempDir dir;
  dir.write("hostnqn", "nqn.2026-01.io.example:host1\n");
  const HostIdentity first = default_host_identity(dir.path());
  const HostIdentity second = default_host_identity(dir.path());
  EXPECT_EQ(first.hostnqn, "nqn.2026-01.io.example:host1");
  EXPECT_NE(first.hostid, (std::array<uint8_t, 16>{}));
  EXPECT_NE(first.hostid, second.hostid);
  EXPECT_EQ(first.hostid[6] >> 4, 4);  // version 4
}

TEST(HostIdentity, WithoutFilesGeneratesAUuidNqnWhoseUuidIsTheHostid) {
  TempDir dir;
  const HostIdentity identity = default_host_identity(dir.path());
  ASSERT_EQ(identity.hostnqn.rfind(kUuidPrefix, 0), 0u) << identity.hostnqn;
  EXPECT_EQ(identity.hostnqn.substr(strlen(kUuidPrefix)), uuid_to_string(identity.hostid));
  EXPECT_EQ(identity.hostid[6] >> 4, 4);       // version 4 (random)
  EXPECT_EQ(identity.hostid[8] & 0xC0, 0x80);  // RFC 4122 variant
  // A missing directory behaves the same, and each call draws a new UUID.
  const HostIdentity other = default_host_identity(dir.path() + "/missing");
  EXPECT_NE(other.hostid, identity.hostid);
  EXPECT_EQ(other.hostnqn.substr(strlen(kUuidPrefix)), uuid_to_string(other.hostid));
}

TEST(HostIdentity, AnEmptyHostnqnFileCountsAsMissing) {
  TempDir dir;
  dir.write("hostnqn", " \n");
  dir.write("hostid", "0f8fad5b-d9cb-469f-a165-70867728950e");
  const HostIdentity identity = default_host_identity(dir.path());
  EXPECT_EQ(identity.hostnqn.rfind(kUuidPrefix, 0), 0u) << identity.hostnqn;
  EXPECT_EQ(uuid_to_string(identity.hostid), "0f8fad5b-d9cb-469f-a165-70867728950e");
}

TEST(HostIdentity, RandomUuidsDiffer) {
  TempDir dir;
  std::set<std::string> seen;
  for (int i = 0; i < 32; ++i) seen.insert(default_host_identity(dir.path()).hostnqn);
  EXPECT_EQ(seen.size(), 32u);
}

// ---------------------------------------------------------------------------------------
// DiscoveryEntry

TEST(DiscoveryEntry, RdmaIpv4EntryBecomesAConnectableTrid) {
  DiscoveryEntry entry;
  entry.trtype = 1;
  entry.adrfam = 1;
  entry.subtype = 2;
  entry.traddr = "10.0.0.1";
  entry.trsvcid = "4420";
  entry.subnqn = "nqn.2026-01.io.example:disk1";
  const TransportId trid = entry.trid();
  EXPECT_EQ(trid.to_string(),
            "trtype:RDMA adrfam:IPv4 traddr:10.0.0.1 trsvcid:4420 "
            "subnqn:nqn.2026-01.io.example:disk1");
  EXPECT_EQ(trid.port(), 4420);
  const TransportId reparsed = parse_ok(trid.to_string());
  EXPECT_EQ(reparsed.subnqn, entry.subnqn);
}

TEST(DiscoveryEntry, Ipv6AndWirePaddingIsTrimmed) {
  DiscoveryEntry entry;
  entry.trtype = 1;
  entry.adrfam = 2;
  entry.traddr = "fe80::1" + std::string(25, ' ');  // TRADDR is space padded on the wire
  entry.trsvcid = "4421" + std::string(28, ' ');
  entry.subnqn = std::string("nqn.2026-01.io.example:disk2") + std::string(3, '\0');
  const TransportId trid = entry.trid();
  EXPECT_EQ(trid.adrfam, "IPv6");
  EXPECT_EQ(trid.traddr, "fe80::1");
  EXPECT_EQ(trid.trsvcid, "4421");
  EXPECT_EQ(trid.port(), 4421);
  EXPECT_EQ(trid.subnqn, "nqn.2026-01.io.example:disk2");
}

TEST(DiscoveryEntry, OtherTransportsAreNamedAndRefusedByParse) {
  DiscoveryEntry entry;
  entry.trtype = 3;
  entry.adrfam = 1;
  entry.traddr = "10.0.0.1";
  entry.trsvcid = "4420";
  entry.subnqn = "nqn.2026-01.io.example:disk1";
  EXPECT_EQ(entry.trid().trtype, "TCP");
  EXPECT_TRUE(contains(parse_error(entry.trid().to_string()), "trtype 'TCP' not supported"));
  entry.trtype = 200;
  entry.adrfam = 9;
  EXPECT_EQ(entry.trid().trtype, "200");
  EXPECT_EQ(entry.trid().adrfam, "9");
}

}  // namespace
}  // namespace nvmf::host
