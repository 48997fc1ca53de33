// Addresses and identities of nvmf/host.h: TransportId parsing (SPDK's string form) and its
// error messages, to_string() round trips, port(), memreg policy names, UUID text, the host
// identity read from (or generated without) /etc/nvme, resolve_host_identity's precedence and
// saving, and DiscoveryEntry -> TransportId.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

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

// resolve_host_identity: nvme-cli's precedence, and the saving of what it generated.

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int mode_of(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<int>(info.st_mode & 07777) : -1;
}

constexpr const char* kFileNqn =
    "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555";
constexpr const char* kFileId = "0f8fad5b-d9cb-469f-a165-70867728950e";

HostIdentity given(const std::string& hostnqn, const std::string& hostid = "") {
  HostIdentity identity;
  identity.hostnqn = hostnqn;
  if (!hostid.empty()) {
    EXPECT_TRUE(uuid_parse(hostid, &identity.hostid)) << hostid;
  }
  return identity;
}

TEST(ResolveHostIdentity, GivenWinsOverFilesAndNothingIsWritten) {
  TempDir dir;
  dir.write("hostnqn", std::string(kFileNqn) + "\n");
  dir.write("hostid", std::string(kFileId) + "\n");
  std::string warning = "stale";
  const HostIdentity identity = resolve_host_identity(
      given("nqn.2026-01.io.example:h", "2f0e0d0c-0b0a-0908-0706-050403020100"), dir.path(), true,
      &warning);
  EXPECT_EQ(identity.hostnqn, "nqn.2026-01.io.example:h");
  EXPECT_EQ(uuid_to_string(identity.hostid), "2f0e0d0c-0b0a-0908-0706-050403020100");
  EXPECT_EQ(warning, "");
  EXPECT_EQ(read_file(dir.path() + "/hostnqn"), std::string(kFileNqn) + "\n");
  const std::string missing = dir.path() + "/missing";
  resolve_host_identity(given("nqn.2026-01.io.example:h", kFileId), missing, true, nullptr);
  EXPECT_EQ(mode_of(missing), -1) << "nothing to save: no directory made";
}

TEST(ResolveHostIdentity, FilesWhenNothingIsGiven) {
  TempDir dir;
  dir.write("hostnqn", std::string(kFileNqn) + "\n");
  dir.write("hostid", std::string(kFileId) + "\n");
  const HostIdentity identity = resolve_host_identity(HostIdentity{}, dir.path(), true, nullptr);
  EXPECT_EQ(identity.hostnqn, kFileNqn);
  EXPECT_EQ(uuid_to_string(identity.hostid), kFileId);
  // A given NQN with the hostid file.
  const HostIdentity mixed =
      resolve_host_identity(given("nqn.2026-01.io.example:h"), dir.path(), false, nullptr);
  EXPECT_EQ(mixed.hostnqn, "nqn.2026-01.io.example:h");
  EXPECT_EQ(uuid_to_string(mixed.hostid), kFileId);
}

TEST(ResolveHostIdentity, GeneratedIsSavedAndFoundNextTime) {
  TempDir dir;
  const std::string etc = dir.path() + "/etc/nvme";
  std::string warning = "stale";
  const HostIdentity first = resolve_host_identity(HostIdentity{}, etc, true, &warning);
  EXPECT_EQ(warning, "");
  ASSERT_EQ(first.hostnqn.rfind(kUuidPrefix, 0), 0u) << first.hostnqn;
  EXPECT_EQ(first.hostnqn.substr(strlen(kUuidPrefix)), uuid_to_string(first.hostid));
  EXPECT_EQ(first.hostid[6] >> 4, 4);  // version 4 (random)
  EXPECT_EQ(read_file(etc + "/hostnqn"), first.hostnqn + "\n");
  EXPECT_EQ(read_file(etc + "/hostid"), uuid_to_string(first.hostid) + "\n");
  EXPECT_EQ(mode_of(etc + "/hostnqn"), 0644);
  EXPECT_EQ(mode_of(etc + "/hostid"), 0644);
  EXPECT_EQ(mode_of(etc), 0755);
  EXPECT_EQ(mode_of(dir.path() + "/etc"), 0755);
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(etc)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 2u) << "no temporary file left behind";
  const HostIdentity second = resolve_host_identity(HostIdentity{}, etc, true, nullptr);
  EXPECT_EQ(second.hostnqn, first.hostnqn);
  EXPECT_EQ(second.hostid, first.hostid);
  // The library's default reads the same files.
  const HostIdentity library = default_host_identity(etc);
  EXPECT_EQ(library.hostnqn, first.hostnqn);
  EXPECT_EQ(library.hostid, first.hostid);
}

TEST(ResolveHostIdentity, WithoutSaveNothingIsWrittenAndEachCallDraws) {
  TempDir dir;
  const HostIdentity first = resolve_host_identity(HostIdentity{}, dir.path(), false, nullptr);
  const HostIdentity second = resolve_host_identity(HostIdentity{}, dir.path(), false, nullptr);
  EXPECT_NE(first.hostid, second.hostid);
  EXPECT_EQ(mode_of(dir.path() + "/hostnqn"), -1);
  EXPECT_EQ(mode_of(dir.path() + "/hostid"), -1);
}

TEST(ResolveHostIdentity, EachPieceDerivedFromTheOtherAndOnlyThatOneSaved) {
  TempDir nqn_only;
  nqn_only.write("hostnqn", std::string(kFileNqn) + "\n");
  HostIdentity identity = resolve_host_identity(HostIdentity{}, nqn_only.path(), true, nullptr);
  EXPECT_EQ(uuid_to_string(identity.hostid), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(read_file(nqn_only.path() + "/hostid"), "11111111-2222-3333-4444-555555555555\n");

  TempDir id_only;
  id_only.write("hostid", std::string(kFileId) + "\n");
  identity = resolve_host_identity(HostIdentity{}, id_only.path(), true, nullptr);
  EXPECT_EQ(identity.hostnqn, std::string(kUuidPrefix) + kFileId);
  EXPECT_EQ(read_file(id_only.path() + "/hostnqn"), std::string(kUuidPrefix) + kFileId + "\n");

  // A given NQN without a UUID: a random host ID, saved; the given NQN is not.
  TempDir neither;
  identity =
      resolve_host_identity(given("nqn.2026-01.io.example:h"), neither.path(), true, nullptr);
  EXPECT_EQ(identity.hostnqn, "nqn.2026-01.io.example:h");
  EXPECT_NE(identity.hostid, (std::array<uint8_t, 16>{}));
  EXPECT_EQ(read_file(neither.path() + "/hostid"), uuid_to_string(identity.hostid) + "\n");
  EXPECT_EQ(mode_of(neither.path() + "/hostnqn"), -1);
}

TEST(ResolveHostIdentity, AnUnusableFileIsLeftAloneWithAWarning) {
  TempDir dir;
  dir.write("hostnqn", std::string(kFileNqn) + "\n");
  dir.write("hostid", "not-a-uuid\n");
  std::string warning;
  const HostIdentity identity = resolve_host_identity(HostIdentity{}, dir.path(), true, &warning);
  EXPECT_EQ(uuid_to_string(identity.hostid), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(read_file(dir.path() + "/hostid"), "not-a-uuid\n");
  EXPECT_EQ(warning, dir.path() +
                         "/hostid holds no host ID: left as it is, "
                         "11111111-2222-3333-4444-555555555555 used this time");
}

TEST(ResolveHostIdentity, AFailureToSaveIsAWarning) {
  TempDir dir;
  dir.write("file", "x");
  std::string warning;
  const HostIdentity identity =
      resolve_host_identity(HostIdentity{}, dir.path() + "/file/nvme", true, &warning);
  ASSERT_EQ(identity.hostnqn.rfind(kUuidPrefix, 0), 0u) << "still an identity";
  EXPECT_EQ(warning, "cannot save the host identity: cannot create " + dir.path() +
                         "/file/nvme: Not a directory");
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
