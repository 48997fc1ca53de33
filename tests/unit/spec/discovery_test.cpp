// Discovery Log Page header, entry and RDMA TSAS bytes.
#include "spec/discovery.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "byte_image.h"
#include "spec/string_field.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecDiscovery, HeaderExactBytes) {
  DiscoveryLogPageHeader header{};
  header.genctr = 0x0102030405060708;
  header.numrec = 3;
  header.recfmt = 0;
  ByteImage expected(1024);
  expected.at(0, {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x03});
  EXPECT_TRUE(SameBytes(bytes_of(header), expected));
  EXPECT_EQ(discovery_log_page_size(3), 4096u);
  EXPECT_EQ(discovery_log_page_size(0), 1024u);
}

TEST(SpecDiscovery, RdmaTsasExactBytes) {
  const RdmaTsas tsas = make_rdma_tsas(rdma_prtype::roce_v2, 0xFFFF);
  ByteImage expected(256);
  expected.at(0, {0x01, 0x04, 0x01}).at(8, {0xFF, 0xFF});
  EXPECT_TRUE(SameBytes(bytes_of(tsas), expected));

  RdmaTsas iwarp = make_rdma_tsas(rdma_prtype::iwarp);
  EXPECT_EQ(bytes_of(iwarp)[1], 0x05);
  EXPECT_EQ(rdma_prtype::not_specified, 1);
  EXPECT_EQ(rdma_prtype::infiniband, 2);
  EXPECT_EQ(rdma_prtype::roce, 3);
}

TEST(SpecDiscovery, RdmaEntryExactBytes) {
  DiscoveryLogEntry entry{};
  entry.trtype = trtype::rdma;
  entry.adrfam = adrfam::ipv4;
  entry.subtype = subsystem_type::nvm;
  entry.treq = treq::secure_channel_not_required | treq::sq_flow_control_disable_supported;
  entry.portid = 0x0001;
  entry.cntlid = 0xFFFF;
  entry.asqsz = 32;
  entry.eflags = eflags::duplicate_returned_information;
  ASSERT_TRUE(put_nul_padded(entry.trsvcid, "4420"));
  ASSERT_TRUE(put_nul_padded(entry.subnqn, "nqn.2016-06.io.spdk:cnode1"));
  ASSERT_TRUE(put_nul_padded(entry.traddr, "192.168.100.8"));
  set_entry_rdma_tsas(entry, make_rdma_tsas(rdma_prtype::roce_v2));

  ByteImage expected(1024);
  expected.at(0, {0x01, 0x01, 0x02, 0x06, 0x01, 0x00, 0xFF, 0xFF, 0x20, 0x00, 0x01, 0x00})
      .text(32, "4420")
      .text(256, "nqn.2016-06.io.spdk:cnode1")
      .text(512, "192.168.100.8")
      .at(768, {0x01, 0x04, 0x01});
  EXPECT_TRUE(SameBytes(bytes_of(entry), expected));

  const RdmaTsas tsas = entry_rdma_tsas(entry);
  EXPECT_EQ(tsas.qptype, rdma_qptype::reliable_connected);
  EXPECT_EQ(tsas.prtype, rdma_prtype::roce_v2);
  EXPECT_EQ(tsas.cms, rdma_cms::rdma_cm);
  EXPECT_EQ(get_nul_terminated(entry.traddr), "192.168.100.8");
}

TEST(SpecDiscovery, ValueConstantsAndWellKnownNqn) {
  EXPECT_EQ(trtype::rdma, 1);
  EXPECT_EQ(trtype::tcp, 3);
  EXPECT_EQ(adrfam::ipv4, 1);
  EXPECT_EQ(adrfam::ipv6, 2);
  EXPECT_EQ(subsystem_type::discovery_referral, 1);
  EXPECT_EQ(subsystem_type::nvm, 2);
  EXPECT_EQ(subsystem_type::current_discovery, 3);
  EXPECT_EQ(discovery_log_page_id, 0x70);
  EXPECT_EQ(discovery_nqn, "nqn.2014-08.org.nvmexpress.discovery");
  EXPECT_TRUE(nqn_valid(discovery_nqn));
  DiscoveryLogEntry entry{};
  EXPECT_TRUE(put_nul_padded(entry.subnqn, discovery_nqn));
  EXPECT_TRUE(nqn_field_valid(entry.subnqn));
}

TEST(SpecDiscovery, EntriesFollowTheHeaderAt1024ByteStride) {
  std::vector<uint8_t> page(discovery_log_page_size(2), 0);
  DiscoveryLogPageHeader header{};
  header.genctr = 7;
  header.numrec = 2;
  std::memcpy(page.data(), &header, sizeof(header));
  for (uint64_t i = 0; i < 2; ++i) {
    DiscoveryLogEntry entry{};
    entry.trtype = trtype::rdma;
    entry.portid = static_cast<uint16_t>(10 + i);
    std::memcpy(page.data() + discovery_log_header_size + i * discovery_log_entry_size, &entry,
                sizeof(entry));
  }
  EXPECT_EQ(page[8], 2);
  EXPECT_EQ(page[1024 + 0], trtype::rdma);
  EXPECT_EQ(page[1024 + 4], 10);
  EXPECT_EQ(page[2048 + 4], 11);
}

}  // namespace
}  // namespace nvmf::spec
