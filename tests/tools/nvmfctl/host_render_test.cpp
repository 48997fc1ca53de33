// nvmfctl discover / id-ctrl / id-ns output (nvme-cli's layout) on made-up library data, and
// the exit status of a failed connect from the library's message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli.h"
#include "host_render.h"
#include "spec/discovery.h"

namespace nvmf::ctl {
namespace {

host::DiscoveryEntry entry(const char* nqn, uint16_t portid) {
  host::DiscoveryEntry e;
  e.trtype = spec::trtype::rdma;
  e.adrfam = spec::adrfam::ipv4;
  e.subtype = spec::subsystem_type::nvm;
  e.portid = portid;
  e.cntlid = 0xFFFF;
  e.trsvcid = "4420";
  e.traddr = "10.0.0.1";
  e.subnqn = nqn;
  return e;
}

TEST(DiscoveryLog, TextIsNvmeClisLayout) {
  std::vector<host::DiscoveryEntry> entries = {entry("nqn.2026-11.io.example:a", 1),
                                               entry("nqn.2014-08.org.nvmexpress.discovery", 2)};
  entries[1].subtype = spec::subsystem_type::current_discovery;
  EXPECT_EQ(discovery_log_text(entries),
            "\n"
            "Discovery Log Number of Records 2\n"
            "=====Discovery Log Entry 0======\n"
            "trtype:  rdma\n"
            "adrfam:  ipv4\n"
            "subtype: nvme subsystem\n"
            "portid:  1\n"
            "trsvcid: 4420\n"
            "subnqn:  nqn.2026-11.io.example:a\n"
            "traddr:  10.0.0.1\n"
            "=====Discovery Log Entry 1======\n"
            "trtype:  rdma\n"
            "adrfam:  ipv4\n"
            "subtype: current discovery subsystem\n"
            "portid:  2\n"
            "trsvcid: 4420\n"
            "subnqn:  nqn.2014-08.org.nvmexpress.discovery\n"
            "traddr:  10.0.0.1\n");
  EXPECT_EQ(discovery_log_text({}), "\nDiscovery Log Number of Records 0\n");
}

TEST(DiscoveryLog, Json) {
  const Json json = discovery_log_json({entry("nqn.2026-11.io.example:a", 1)});
  EXPECT_EQ(json, Json::parse(R"({"records": [{"trtype": "rdma", "adrfam": "ipv4",
      "subtype": "nvme subsystem", "portid": 1, "trsvcid": "4420",
      "subnqn": "nqn.2026-11.io.example:a", "traddr": "10.0.0.1"}]})"));
  EXPECT_EQ(discovery_log_json({}), Json::parse(R"({"records": []})"));
}

TEST(DiscoveryLog, Names) {
  EXPECT_STREQ(trtype_name(spec::trtype::tcp), "tcp");
  EXPECT_STREQ(trtype_name(99), "unrecognized");
  EXPECT_STREQ(adrfam_name(spec::adrfam::ipv6), "ipv6");
  EXPECT_STREQ(subtype_name(spec::subsystem_type::discovery_referral),
               "discovery subsystem referral");
  host::DiscoveryEntry no_address = entry("nqn.a:b", 1);
  no_address.traddr = "";
  EXPECT_NE(discovery_log_text({no_address}).find("adrfam:  \n"), std::string::npos);
}

host::ControllerData controller_data() {
  host::ControllerData data;
  data.cntlid = 1;
  data.vid = 0;
  data.serial_number = "NVMFMALLOC0001";
  data.model_number = "nvmf-rdma malloc";
  data.firmware_revision = "0.1.0";
  data.subnqn = "nqn.2026-11.io.nvmf-rdma:malloc0";
  data.cap = 0;                       // MPSMIN 0: 4 KiB pages
  data.vs = 0x10400;                  // NVMe 1.4
  data.max_transfer_bytes = 131072;   // 4 KiB << 5
  data.in_capsule_data_bytes = 4096;  // IOCCSZ 260
  data.namespace_count = 32;
  data.aerl = 3;
  return data;
}

TEST(IdCtrl, TextIsNvmeClisKeyValueLines) {
  EXPECT_EQ(id_ctrl_text(controller_data()),
            "NVME Identify Controller:\n"
            "vid       : 0\n"
            "sn        : NVMFMALLOC0001\n"
            "mn        : nvmf-rdma malloc\n"
            "fr        : 0.1.0\n"
            "mdts      : 5\n"
            "cntlid    : 0x1\n"
            "ver       : 0x10400\n"
            "aerl      : 3\n"
            "nn        : 32\n"
            "subnqn    : nqn.2026-11.io.nvmf-rdma:malloc0\n"
            "ioccsz    : 260\n");
}

TEST(IdCtrl, Json) {
  EXPECT_EQ(id_ctrl_json(controller_data()), Json::parse(R"({"vid": 0, "sn": "NVMFMALLOC0001",
      "mn": "nvmf-rdma malloc", "fr": "0.1.0", "mdts": 5, "cntlid": 1, "ver": 66560,
      "aerl": 3, "nn": 32, "subnqn": "nqn.2026-11.io.nvmf-rdma:malloc0", "ioccsz": 260})"));
}

TEST(IdCtrl, MdtsAndIoccszBackFromTheLibrarysValues) {
  host::ControllerData data = controller_data();
  data.max_transfer_bytes = 0;  // no limit reported
  data.in_capsule_data_bytes = 0;
  EXPECT_EQ(mdts_of(data), 0);
  EXPECT_EQ(ioccsz_of(data), 0u);
  data.cap = uint64_t{2} << 48;  // MPSMIN 2: 16 KiB pages
  data.max_transfer_bytes = (16384u << 3);
  EXPECT_EQ(mdts_of(data), 3);
  data.in_capsule_data_bytes = 16 * 16 - 64;  // IOCCSZ 16
  EXPECT_EQ(ioccsz_of(data), 16u);
}

TEST(IdNs, TextAndJson) {
  const std::array<uint8_t, 16> uuid = {0x2f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08,
                                        0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x00};
  std::array<uint8_t, 16> nguid{};
  nguid[0] = 0xab;
  nguid[15] = 0x01;
  const host::Namespace ns(2, 4096, 1024, uuid, nguid);
  EXPECT_EQ(id_ns_text(ns),
            "NVME Identify Namespace 2:\n"
            "nsze    : 0x400\n"
            "lbads   : 12 (4096-byte blocks, the LBA format in use)\n"
            "nguid   : ab000000000000000000000000000001\n"
            "uuid    : 2f0e0d0c-0b0a-0908-0706-050403020100\n");
  EXPECT_EQ(id_ns_json(ns), Json::parse(R"({"nsid": 2, "nsze": 1024, "lbads": 12,
      "block_size": 4096, "nguid": "ab000000000000000000000000000001",
      "uuid": "2f0e0d0c-0b0a-0908-0706-050403020100"})"));
  const host::Namespace small(1, 512, 8, {}, {});
  EXPECT_NE(id_ns_text(small).find("lbads   : 9 (512-byte blocks"), std::string::npos);
}

TEST(ConnectFailureStatus, BeforeTheRdmaConnectionIsUpIsUnreachable) {
  EXPECT_EQ(connect_failure_status("cannot start connecting to 10.0.0.9:4420: not_found "
                                   "(ENOENT: No such file or directory): rdma_resolve_addr"),
            exit_status::unreachable);
  for (const char* reason :
       {"target unreachable (no listener)", "target unreachable (timed out)", "connect timed out",
        "connection rejected", "connect error", "disconnected while connecting"}) {
    EXPECT_EQ(
        connect_failure_status(std::string("cannot connect queue 0 to 10.0.0.1:4420: ") + reason),
        exit_status::unreachable)
        << reason;
  }
}

TEST(ConnectFailureStatus, ATargetThatAnsweredAndRefusedIsFailed) {
  EXPECT_EQ(connect_failure_status("cannot connect queue 0 to 10.0.0.1:4420: invalid HRQSIZE"),
            exit_status::failed);
  EXPECT_EQ(connect_failure_status("cannot connect queue 0 to 10.0.0.1:4420: no resources"),
            exit_status::failed);
  EXPECT_EQ(connect_failure_status("Fabrics Connect of queue 0 to nqn.a:b as nqn.h:1 refused: "
                                   "Connect Invalid Host"),
            exit_status::failed);
  EXPECT_EQ(connect_failure_status("Identify Controller failed: Internal Error"),
            exit_status::failed);
}

}  // namespace
}  // namespace nvmf::ctl
