#include "transport_rdma/connect_params.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace nvmf::transport_rdma {
namespace {

namespace rej = spec::rdma_cm_reject;

spec::RdmaCmRequest request(uint16_t qid, uint16_t hrqsize, uint16_t hsqsize) {
  spec::RdmaCmRequest req{};
  req.recfmt = 0;
  req.qid = qid;
  req.hrqsize = hrqsize;
  req.hsqsize = hsqsize;
  return req;
}

ConnectDecision evaluate(const spec::RdmaCmRequest& req, uint8_t ird = 16,
                         const ConnectLimits& limits = {}) {
  // rdma_cm reports the CM maximum (56 bytes on a REQ), not what was sent.
  uint8_t buffer[56] = {};
  std::memcpy(buffer, &req, sizeof(req));
  return evaluate_connect_request(buffer, sizeof(buffer), ird, limits);
}

TEST(ConnectParams, KernelHostAdminQueueIsAccepted) {
  // The Linux host: admin HRQSIZE 32, HSQSIZE 31.
  ConnectDecision d = evaluate(request(0, 32, 31));
  ASSERT_TRUE(d.accept) << d.reason;
  EXPECT_EQ(d.qid, 0);
  EXPECT_EQ(d.queue_depth, 32);
  EXPECT_EQ(d.crqsize, 32);
  EXPECT_EQ(d.read_depth, 16);
}

TEST(ConnectParams, DepthIsTheSmallestOfEveryLimit) {
  ConnectLimits limits;
  limits.max_queue_depth = 128;
  EXPECT_EQ(evaluate(request(1, 1024, 1023), 16, limits).reject_status, rej::invalid_hsqsize)
      << "a host asking for more than max_queue_depth is refused, not silently cut";
  EXPECT_EQ(evaluate(request(1, 128, 127), 16, limits).queue_depth, 128);
  EXPECT_EQ(evaluate(request(1, 64, 63), 16, limits).queue_depth, 64);
  limits.device_max_qp_wr = 100;  // 2 WRs per request: 50 requests
  EXPECT_EQ(evaluate(request(1, 128, 127), 16, limits).queue_depth, 50);
  // HRQSIZE larger than needed does not raise the depth above HSQSIZE + 1.
  EXPECT_EQ(evaluate(request(1, 256, 31)).queue_depth, 32);
}

TEST(ConnectParams, ReadDepthIsNegotiated) {
  ConnectLimits limits;
  limits.max_read_depth = 16;
  limits.device_max_qp_init_rd_atom = 8;
  EXPECT_EQ(evaluate(request(1, 32, 31), 4, limits).read_depth, 4);
  EXPECT_EQ(evaluate(request(1, 32, 31), 255, limits).read_depth, 8);
  limits.device_max_qp_init_rd_atom = 0;
  EXPECT_EQ(evaluate(request(1, 32, 31), 255, limits).read_depth, 16);
}

TEST(ConnectParams, ShortOrMissingPrivateDataIsInvalidLength) {
  spec::RdmaCmRequest req = request(1, 32, 31);
  ConnectDecision d = evaluate_connect_request(&req, 31, 16, ConnectLimits{});
  EXPECT_FALSE(d.accept);
  EXPECT_EQ(d.reject_status, rej::invalid_private_data_length);
  d = evaluate_connect_request(nullptr, 56, 16, ConnectLimits{});
  EXPECT_EQ(d.reject_status, rej::invalid_private_data_length);
  EXPECT_TRUE(evaluate_connect_request(&req, sizeof(req), 16, ConnectLimits{}).accept);
}

TEST(ConnectParams, EveryRejectCodeHasItsCause) {
  spec::RdmaCmRequest bad_recfmt = request(1, 32, 31);
  bad_recfmt.recfmt = 1;
  EXPECT_EQ(evaluate(bad_recfmt).reject_status, rej::invalid_recfmt);
  EXPECT_EQ(evaluate(request(128, 32, 31)).reject_status, rej::invalid_qid);
  EXPECT_EQ(evaluate(request(0xFFFF, 32, 31)).reject_status, rej::invalid_qid);
  EXPECT_EQ(evaluate(request(1, 32, 0)).reject_status, rej::invalid_hsqsize)
      << "a one-entry queue can never hold a command";
  EXPECT_EQ(evaluate(request(0, 256, 255)).reject_status, rej::invalid_hsqsize);
  EXPECT_EQ(evaluate(request(1, 16, 31)).reject_status, rej::invalid_hrqsize);
  EXPECT_EQ(evaluate(request(1, 0, 31)).reject_status, rej::invalid_hrqsize);
  EXPECT_EQ(evaluate(request(1, 32, 31), 0).reject_status, rej::invalid_ird);
  ConnectLimits tiny;
  tiny.device_max_qp_wr = 3;
  EXPECT_EQ(evaluate(request(1, 32, 31), 16, tiny).reject_status, rej::no_resources);
  ConnectLimits no_reads;
  no_reads.max_read_depth = 0;
  EXPECT_EQ(evaluate(request(1, 32, 31), 16, no_reads).reject_status, rej::no_resources);
}

TEST(ConnectParams, RejectsCarryAReason) {
  ConnectDecision d = evaluate(request(1, 32, 0));
  EXPECT_FALSE(d.accept);
  EXPECT_NE(std::strlen(d.reason), 0u);
}

TEST(ConnectParams, CntlidIsReportedForNewerHosts) {
  spec::RdmaCmRequest req = request(3, 32, 31);
  req.cntlid = 7;
  EXPECT_EQ(evaluate(req).host_cntlid, 7);
}

TEST(ConnectParams, AcceptAndRejectBytes) {
  ConnectDecision d = evaluate(request(1, 64, 63));
  spec::RdmaCmAccept accept = make_accept(d);
  uint8_t bytes[32];
  std::memcpy(bytes, &accept, sizeof(bytes));
  EXPECT_EQ(bytes[0], 0);
  EXPECT_EQ(bytes[1], 0);
  EXPECT_EQ(bytes[2], 64);
  EXPECT_EQ(bytes[3], 0);
  for (int i = 4; i < 32; ++i) EXPECT_EQ(bytes[i], 0) << i;

  spec::RdmaCmReject reject = make_reject(rej::invalid_hsqsize);
  uint8_t reject_bytes[4];
  std::memcpy(reject_bytes, &reject, sizeof(reject_bytes));
  EXPECT_EQ(reject_bytes[0], 0);
  EXPECT_EQ(reject_bytes[1], 0);
  EXPECT_EQ(reject_bytes[2], 4);
  EXPECT_EQ(reject_bytes[3], 0);
}

}  // namespace
}  // namespace nvmf::transport_rdma
