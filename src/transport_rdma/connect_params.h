// Target side of the NVMe/RDMA connection handshake: checks a CM connect request's private
// data (NVMe RDMA Transport Specification, "RDMA_CM_REQUEST Private Data") and negotiates the
// queue depth and RDMA READ depth the target accepts with, or names the reject status.
// Pure functions: unit-tested without a device; the listener calls them on CONNECT_REQUEST.
#pragma once

#include <cstddef>
#include <cstdint>

#include "spec/rdma_cm.h"

namespace nvmf::transport_rdma {

// What the target and its device allow. Defaults are SPDK's RDMA transport defaults
// (lib/nvmf/rdma.c), which hosts are tuned against.
struct ConnectLimits {
  uint16_t max_queue_depth = 128;           // I/O queue entries
  uint16_t max_admin_queue_depth = 128;     // admin queue entries
  uint16_t max_qpairs_per_ctrlr = 128;      // admin + I/O; QID must be below it
  uint32_t device_max_qp_wr = 0;            // the device's max_qp_wr (0 = no device limit)
  uint32_t device_max_qp_init_rd_atom = 0;  // RDMA READs we may issue at once (0 = no limit)
  uint32_t max_read_depth = 16;             // our own cap on outstanding RDMA READs per qpair
};

// Every request needs one send WR for the response and, at most, one data WR (READ or WRITE),
// so a send queue of 2 x depth never overflows; the device's max_qp_wr bounds depth by that.
inline constexpr uint32_t kSendWrsPerRequest = 2;

struct ConnectDecision {
  bool accept = false;
  uint16_t reject_status = 0;  // spec::rdma_cm_reject::* when !accept
  uint16_t qid = 0;
  uint16_t host_cntlid = 0;  // CNTLID the host put in the request (0 / reserved if older host)
  uint16_t queue_depth = 0;  // negotiated entries: min(our max, device, HRQSIZE, HSQSIZE + 1)
  uint16_t crqsize = 0;      // what the accept's CRQSIZE carries (= queue_depth)
  uint8_t read_depth = 0;    // RDMA READs we may issue at once = accept's initiator_depth
  const char* reason = "";   // a static string for the log line of a reject
};

// `private_data`/`length` as the CM delivered them (rdma_cm reports the CM maximum length, so
// only a length below 32 is wrong). `host_responder_resources` is the RDMA READ depth the host
// offered to serve for us (its IRD); 0 means we could never read its data: invalid IRD.
ConnectDecision evaluate_connect_request(const void* private_data, size_t length,
                                         uint8_t host_responder_resources,
                                         const ConnectLimits& limits) noexcept;

// Accept and reject private data, ready for the CM call.
spec::RdmaCmAccept make_accept(const ConnectDecision& decision) noexcept;
spec::RdmaCmReject make_reject(uint16_t status) noexcept;

}  // namespace nvmf::transport_rdma
