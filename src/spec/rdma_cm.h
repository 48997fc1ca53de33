// NVMe/RDMA connection establishment: the private data carried by RDMA_CM REQUEST (host ->
// target), ACCEPT (target -> host) and REJECT (target -> host), and the reject status codes.
// One RDMA_CM connection = one NVMe queue pair; QID 0 is the admin queue. Header-only; any
// thread.
//
// Sources: NVMe RDMA Transport spec "RDMA_CM_REQUEST Private Data Format", "RDMA_CM_ACCEPT
// Private Data Format", "RDMA_CM_REJECT Private Data Format" and its "RDMA_CM_REJECT Status
// Codes" figure; CNTLID in the request and reject status 09h as in newer revisions (SPDK and
// current Linux know them; older Linux hosts leave CNTLID zero as reserved).
#pragma once

#include <cstdint>

#include "spec/wire.h"

namespace nvmf::spec {

inline constexpr uint16_t rdma_cm_recfmt = 0;           // the only record format
inline constexpr uint16_t rdma_cm_service_port = 4420;  // IANA port for NVMe/RDMA (RDMA_IP_CM)

// RDMA_CM_REQUEST private data (32 bytes). HSQSIZE is 0's based, HRQSIZE is not: the host
// asks for HRQSIZE >= HSQSIZE + 1 so every command can get its response.
struct RdmaCmRequest {
  uint16_t recfmt;         // 0: Record Format, 0
  uint16_t qid;            // 2: Queue ID, 0 = admin
  uint16_t hrqsize;        // 4: Host Receive Queue Size (entries)
  uint16_t hsqsize;        // 6: Host Send Queue Size, 0's based (Connect SQSIZE)
  uint16_t cntlid;         // 8: Controller ID for I/O queues (reserved in older revisions)
  uint8_t reserved10[22];  // 10
};
NVMF_SPEC_LAYOUT(RdmaCmRequest, 32);
NVMF_SPEC_OFFSET(RdmaCmRequest, recfmt, 0);
NVMF_SPEC_OFFSET(RdmaCmRequest, qid, 2);
NVMF_SPEC_OFFSET(RdmaCmRequest, hrqsize, 4);
NVMF_SPEC_OFFSET(RdmaCmRequest, hsqsize, 6);
NVMF_SPEC_OFFSET(RdmaCmRequest, cntlid, 8);
NVMF_SPEC_OFFSET(RdmaCmRequest, reserved10, 10);

// RDMA_CM_ACCEPT private data (32 bytes).
struct RdmaCmAccept {
  uint16_t recfmt;        // 0: Record Format, 0
  uint16_t crqsize;       // 2: Controller Receive Queue Size (entries)
  uint8_t reserved4[28];  // 4
};
NVMF_SPEC_LAYOUT(RdmaCmAccept, 32);
NVMF_SPEC_OFFSET(RdmaCmAccept, recfmt, 0);
NVMF_SPEC_OFFSET(RdmaCmAccept, crqsize, 2);

// RDMA_CM_REJECT private data (4 bytes).
struct RdmaCmReject {
  uint16_t recfmt;  // 0: Record Format, 0
  uint16_t sts;     // 2: Status, see rdma_cm_reject
};
NVMF_SPEC_LAYOUT(RdmaCmReject, 4);
NVMF_SPEC_OFFSET(RdmaCmReject, recfmt, 0);
NVMF_SPEC_OFFSET(RdmaCmReject, sts, 2);

// RDMA_CM_REJECT Status Codes.
namespace rdma_cm_reject {
inline constexpr uint16_t invalid_private_data_length = 0x01;
inline constexpr uint16_t invalid_recfmt = 0x02;
inline constexpr uint16_t invalid_qid = 0x03;
inline constexpr uint16_t invalid_hsqsize = 0x04;
inline constexpr uint16_t invalid_hrqsize = 0x05;
inline constexpr uint16_t no_resources = 0x06;
inline constexpr uint16_t invalid_ird = 0x07;
inline constexpr uint16_t invalid_ord = 0x08;
inline constexpr uint16_t invalid_cntlid = 0x09;
}  // namespace rdma_cm_reject

// A static name of a reject status for logs; never null.
inline const char* rdma_cm_reject_name(uint16_t sts) noexcept {
  switch (sts) {
    case rdma_cm_reject::invalid_private_data_length:
      return "invalid private data length";
    case rdma_cm_reject::invalid_recfmt:
      return "invalid RECFMT";
    case rdma_cm_reject::invalid_qid:
      return "invalid QID";
    case rdma_cm_reject::invalid_hsqsize:
      return "invalid HSQSIZE";
    case rdma_cm_reject::invalid_hrqsize:
      return "invalid HRQSIZE";
    case rdma_cm_reject::no_resources:
      return "no resources";
    case rdma_cm_reject::invalid_ird:
      return "invalid IRD";
    case rdma_cm_reject::invalid_ord:
      return "invalid ORD";
    case rdma_cm_reject::invalid_cntlid:
      return "invalid CNTLID";
    default:
      return "unknown reject status";
  }
}

constexpr RdmaCmRequest make_rdma_cm_request(uint16_t qid, uint16_t hrqsize, uint16_t hsqsize,
                                             uint16_t cntlid = 0) noexcept {
  RdmaCmRequest request{};
  request.recfmt = rdma_cm_recfmt;
  request.qid = qid;
  request.hrqsize = hrqsize;
  request.hsqsize = hsqsize;
  request.cntlid = cntlid;
  return request;
}

constexpr RdmaCmAccept make_rdma_cm_accept(uint16_t crqsize) noexcept {
  RdmaCmAccept accept{};
  accept.recfmt = rdma_cm_recfmt;
  accept.crqsize = crqsize;
  return accept;
}

constexpr RdmaCmReject make_rdma_cm_reject(uint16_t sts) noexcept {
  RdmaCmReject reject{};
  reject.recfmt = rdma_cm_recfmt;
  reject.sts = sts;
  return reject;
}

}  // namespace nvmf::spec
