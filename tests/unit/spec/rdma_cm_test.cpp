// NVMe/RDMA CM private data: REQUEST, ACCEPT, REJECT bytes and reject status names.
#include "spec/rdma_cm.h"

#include <gtest/gtest.h>

#include <string_view>

#include "byte_image.h"

namespace nvmf::spec {
namespace {

using test::ByteImage;
using test::bytes_of;
using test::SameBytes;

TEST(SpecRdmaCm, RequestExactBytes) {
  // A Linux-style admin queue request: HRQSIZE 32, HSQSIZE 31 (0's based).
  const RdmaCmRequest admin = make_rdma_cm_request(0, 32, 31);
  ByteImage expected_admin(32);
  expected_admin.at(0, {0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x1F, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(admin), expected_admin));

  // An I/O queue request that names its controller.
  const RdmaCmRequest io = make_rdma_cm_request(0x0102, 128, 127, 0x0A0B);
  ByteImage expected_io(32);
  expected_io.at(0, {0x00, 0x00, 0x02, 0x01, 0x80, 0x00, 0x7F, 0x00, 0x0B, 0x0A});
  EXPECT_TRUE(SameBytes(bytes_of(io), expected_io));
}

TEST(SpecRdmaCm, RequestDecodesFromWireBytes) {
  ByteImage raw(32);
  raw.at(0, {0x00, 0x00, 0x03, 0x00, 0x00, 0x01, 0xFF, 0x00});  // old host: CNTLID reserved (0)
  const RdmaCmRequest request = test::from_bytes<RdmaCmRequest>(raw.bytes());
  EXPECT_EQ(request.recfmt, rdma_cm_recfmt);
  EXPECT_EQ(request.qid, 3);
  EXPECT_EQ(request.hrqsize, 256);
  EXPECT_EQ(request.hsqsize, 255);
  EXPECT_EQ(request.cntlid, 0);
}

TEST(SpecRdmaCm, AcceptExactBytes) {
  const RdmaCmAccept accept = make_rdma_cm_accept(128);
  ByteImage expected(32);
  expected.at(0, {0x00, 0x00, 0x80, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(accept), expected));
}

TEST(SpecRdmaCm, RejectExactBytes) {
  const RdmaCmReject reject = make_rdma_cm_reject(rdma_cm_reject::invalid_hsqsize);
  ByteImage expected(4);
  expected.at(0, {0x00, 0x00, 0x04, 0x00});
  EXPECT_TRUE(SameBytes(bytes_of(reject), expected));
  EXPECT_TRUE(SameBytes(bytes_of(make_rdma_cm_reject(rdma_cm_reject::no_resources)),
                        ByteImage(4).at(2, {0x06})));
}

TEST(SpecRdmaCm, EveryRejectStatusHasItsName) {
  struct Case {
    uint16_t sts;
    std::string_view name;
  };
  const Case cases[] = {
      {0x01, "invalid private data length"},
      {0x02, "invalid RECFMT"},
      {0x03, "invalid QID"},
      {0x04, "invalid HSQSIZE"},
      {0x05, "invalid HRQSIZE"},
      {0x06, "no resources"},
      {0x07, "invalid IRD"},
      {0x08, "invalid ORD"},
      {0x09, "invalid CNTLID"},
  };
  for (const Case& c : cases) EXPECT_EQ(rdma_cm_reject_name(c.sts), c.name) << c.sts;
  EXPECT_EQ(rdma_cm_reject::invalid_private_data_length, 1);
  EXPECT_EQ(rdma_cm_reject::invalid_ord, 8);
  EXPECT_STREQ(rdma_cm_reject_name(0), "unknown reject status");
  EXPECT_STREQ(rdma_cm_reject_name(0xFFFF), "unknown reject status");
}

}  // namespace
}  // namespace nvmf::spec
