// The host queue's wr_id packing: every field survives at its largest value, in particular a
// window index beyond 16 bits (a deferred pool of 2 x 65536 windows).
#include "transport_rdma/host_wr_id.h"

#include <gtest/gtest.h>

namespace nvmf::transport_rdma::host_wr {
namespace {

TEST(HostWrId, EveryFieldRoundTripsAtItsLargestValue) {
  const uint32_t last_window = 2 * memreg::kKeyPolicyDepthMax - 1;  // 131071: needs 17 bits
  const uint64_t wr_id = make_wr_id(kKindLocalInv, kSeqMask, last_window, 0xFFFF);
  EXPECT_EQ(wr_kind(wr_id), kKindLocalInv);
  EXPECT_EQ(wr_seq(wr_id), kSeqMask);
  EXPECT_EQ(wr_window(wr_id), last_window);
  EXPECT_EQ(wr_cid(wr_id), 0xFFFFu);
}

TEST(HostWrId, FieldsDoNotBleedIntoEachOther) {
  const uint64_t wr_id = make_wr_id(kKindRecv, 0, 70000, 5);
  EXPECT_EQ(wr_kind(wr_id), kKindRecv);
  EXPECT_EQ(wr_seq(wr_id), 0u);
  EXPECT_EQ(wr_window(wr_id), 70000u);
  EXPECT_EQ(wr_cid(wr_id), 5u);
  EXPECT_EQ(wr_window(make_wr_id(kKindBind, 0x123456, 0, 0)), 0u);
  EXPECT_EQ(wr_seq(make_wr_id(kKindBind, 0x123456, kWindowMask, 0xFFFF)), 0x123456u);
}

}  // namespace
}  // namespace nvmf::transport_rdma::host_wr
