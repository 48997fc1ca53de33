#include "transport_rdma/connect_params.h"

#include <algorithm>
#include <cstring>

namespace nvmf::transport_rdma {

namespace {
ConnectDecision reject(ConnectDecision decision, uint16_t status, const char* reason) noexcept {
  decision.accept = false;
  decision.reject_status = status;
  decision.reason = reason;
  return decision;
}
}  // namespace

ConnectDecision evaluate_connect_request(const void* private_data, size_t length,
                                         uint8_t host_responder_resources,
                                         const ConnectLimits& limits) noexcept {
  namespace rej = spec::rdma_cm_reject;
  ConnectDecision decision;
  if (private_data == nullptr || length < sizeof(spec::RdmaCmRequest)) {
    return reject(decision, rej::invalid_private_data_length,
                  "private data shorter than the 32-byte NVMe/RDMA request");
  }
  spec::RdmaCmRequest request;
  std::memcpy(&request, private_data, sizeof(request));
  decision.qid = request.qid;
  decision.host_cntlid = request.cntlid;

  if (request.recfmt != spec::rdma_cm_recfmt) {
    return reject(decision, rej::invalid_recfmt, "RECFMT is not 0");
  }
  if (limits.max_qpairs_per_ctrlr == 0 || request.qid >= limits.max_qpairs_per_ctrlr) {
    return reject(decision, rej::invalid_qid, "QID is not below max_qpairs_per_ctrlr");
  }
  const bool admin = request.qid == 0;
  const uint32_t our_max = admin ? limits.max_admin_queue_depth : limits.max_queue_depth;
  // HSQSIZE is 0's based; a queue of one entry can never hold a command (one slot stays empty).
  const uint32_t host_sq_entries = uint32_t{request.hsqsize} + 1;
  if (host_sq_entries < 2 || host_sq_entries > our_max) {
    return reject(decision, rej::invalid_hsqsize,
                  admin ? "HSQSIZE + 1 is below 2 or above max_admin_queue_depth"
                        : "HSQSIZE + 1 is below 2 or above max_queue_depth");
  }
  // The host must be able to receive a response for every command it may have outstanding.
  if (request.hrqsize < host_sq_entries) {
    return reject(decision, rej::invalid_hrqsize, "HRQSIZE is below HSQSIZE + 1");
  }
  if (host_responder_resources == 0) {
    return reject(decision, rej::invalid_ird,
                  "host offers no RDMA READ resources (responder_resources 0)");
  }

  uint32_t depth = std::min<uint32_t>({our_max, request.hrqsize, host_sq_entries});
  if (limits.device_max_qp_wr != 0) {
    uint32_t device_depth = limits.device_max_qp_wr / kSendWrsPerRequest;
    if (device_depth < 2) {
      return reject(decision, rej::no_resources, "device max_qp_wr too small for any queue");
    }
    depth = std::min(depth, device_depth);
  }
  uint32_t read_depth = std::min<uint32_t>(host_responder_resources, limits.max_read_depth);
  if (limits.device_max_qp_init_rd_atom != 0) {
    read_depth = std::min(read_depth, limits.device_max_qp_init_rd_atom);
  }
  if (read_depth == 0) {
    return reject(decision, rej::no_resources, "no RDMA READ depth left (max_read_depth 0)");
  }
  decision.accept = true;
  decision.queue_depth = static_cast<uint16_t>(depth);
  decision.crqsize = static_cast<uint16_t>(depth);
  decision.read_depth = static_cast<uint8_t>(std::min<uint32_t>(read_depth, 255));
  decision.reason = "accepted";
  return decision;
}

spec::RdmaCmAccept make_accept(const ConnectDecision& decision) noexcept {
  spec::RdmaCmAccept accept{};
  accept.recfmt = spec::rdma_cm_recfmt;
  accept.crqsize = decision.crqsize;
  return accept;
}

spec::RdmaCmReject make_reject(uint16_t status) noexcept {
  spec::RdmaCmReject rejection{};
  rejection.recfmt = spec::rdma_cm_recfmt;
  rejection.sts = status;
  return rejection;
}

}  // namespace nvmf::transport_rdma
