// Fuzz target: the RDMA CM connect request's private data as the target's listener checks it
// (transport_rdma::evaluate_connect_request), with the limits from the input: the target's
// options and what a device reports (max_qp_wr, max_qp_init_rd_atom), and the host's IRD.
//
// Input: [limits: max_queue_depth u16, max_admin_queue_depth u16, max_qpairs_per_ctrlr u16,
//         device_max_qp_wr u32, device_max_qp_init_rd_atom u32, max_read_depth u32]
//        [host responder resources u8] [private data: the rest]
// Properties: an accepted queue's depth is at least 2 and within every limit (ours for its
// kind, HRQSIZE, HSQSIZE + 1, the device's send queue), its QID below max_qpairs_per_ctrlr,
// its READ depth 1..min(IRD, max_read_depth, the device's); the accept's CRQSIZE is that
// depth. A reject names a status and a reason. Nothing past the private data is read.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_input.h"
#include "spec/rdma_cm.h"
#include "transport_rdma/connect_params.h"

using nvmf::fuzz::Input;
namespace spec = nvmf::spec;
namespace rdma = nvmf::transport_rdma;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  nvmf::fuzz::drop_log_lines();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  rdma::ConnectLimits limits;
  limits.max_queue_depth = in.take<uint16_t>();
  limits.max_admin_queue_depth = in.take<uint16_t>();
  limits.max_qpairs_per_ctrlr = in.take<uint16_t>();
  limits.device_max_qp_wr = in.take<uint32_t>();
  limits.device_max_qp_init_rd_atom = in.take<uint32_t>();
  limits.max_read_depth = in.take<uint32_t>();
  const uint8_t ird = in.byte();
  // The private data in an allocation of exactly its size (none at all for an empty one).
  std::vector<uint8_t> private_data = in.take_vector(in.remaining());
  const void* pointer = private_data.empty() ? nullptr : private_data.data();

  const rdma::ConnectDecision decision =
      rdma::evaluate_connect_request(pointer, private_data.size(), ird, limits);
  FUZZ_CHECK(decision.reason != nullptr && decision.reason[0] != '\0');
  if (!decision.accept) {
    FUZZ_CHECK(decision.reject_status >= spec::rdma_cm_reject::invalid_private_data_length &&
               decision.reject_status <= spec::rdma_cm_reject::invalid_cntlid);
    const spec::RdmaCmReject reject = rdma::make_reject(decision.reject_status);
    FUZZ_CHECK(reject.recfmt == spec::rdma_cm_recfmt && reject.sts == decision.reject_status);
    return 0;
  }

  FUZZ_CHECK(private_data.size() >= sizeof(spec::RdmaCmRequest));
  spec::RdmaCmRequest request;
  std::memcpy(&request, private_data.data(), sizeof(request));
  FUZZ_CHECK(request.recfmt == spec::rdma_cm_recfmt);
  FUZZ_CHECK(decision.qid == request.qid && decision.host_cntlid == request.cntlid);
  FUZZ_CHECK(decision.qid < limits.max_qpairs_per_ctrlr);
  const uint32_t ours = decision.qid == 0 ? limits.max_admin_queue_depth : limits.max_queue_depth;
  const uint32_t depth = decision.queue_depth;
  FUZZ_CHECK(depth >= 2);
  FUZZ_CHECK(depth <= ours);
  FUZZ_CHECK(depth <= request.hrqsize && depth <= uint32_t{request.hsqsize} + 1);
  if (limits.device_max_qp_wr != 0) {
    // Every request needs a response SEND and at most one data WR.
    FUZZ_CHECK(uint64_t{depth} * rdma::kSendWrsPerRequest <= limits.device_max_qp_wr);
  }
  FUZZ_CHECK(decision.crqsize == decision.queue_depth);
  FUZZ_CHECK(decision.read_depth >= 1 && decision.read_depth <= ird);
  FUZZ_CHECK(decision.read_depth <= limits.max_read_depth);
  if (limits.device_max_qp_init_rd_atom != 0) {
    FUZZ_CHECK(decision.read_depth <= limits.device_max_qp_init_rd_atom);
  }
  const spec::RdmaCmAccept accept = rdma::make_accept(decision);
  FUZZ_CHECK(accept.recfmt == spec::rdma_cm_recfmt && accept.crqsize == decision.crqsize);
  return 0;
}
