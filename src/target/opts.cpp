#include "target/opts.h"

#include <nlohmann/json.hpp>

#include "common/util.h"

namespace nvmf::target {

namespace {
// CAP.MPSMIN = 0: the memory page the host describes data in is 4 KiB.
constexpr uint32_t kMinPageBytes = 4096;
// The limit for in-capsule data; larger capsules need bigger receive buffers than
// SPDK or Linux ever post.
constexpr uint32_t kInCapsuleDataMax = 16384;
// NVMe queue sizes are 16-bit and 0's based (65536 entries), but over RDMA the host states
// its queue's size in the CM request's HRQSIZE, a 16-bit count (NVMe/RDMA binding, "RDMA_CM_
// REQUEST Private Data"), and the transport's limits are 16-bit: 65535 is the real ceiling.
constexpr uint32_t kQueueEntriesMax = 65535;
// An hour: a longer teardown timeout is a unit mistake (seconds taken for milliseconds).
constexpr uint32_t kTeardownTimeoutMaxMs = 3600 * 1000;
}  // namespace

Result<void> TargetOpts::validate() const noexcept {
  if (max_queue_depth < 2 || max_queue_depth > kQueueEntriesMax) {
    return Unexpected(Errc::invalid_argument, "max_queue_depth must be within [2, 65535]");
  }
  if (max_admin_queue_depth < 2 || max_admin_queue_depth > kQueueEntriesMax) {
    return Unexpected(Errc::invalid_argument, "max_admin_queue_depth must be within [2, 65535]");
  }
  // 2 = an admin queue and one I/O queue; 65535 = the 16-bit QID space minus FFFFh.
  if (max_qpairs_per_ctrlr < 2 || max_qpairs_per_ctrlr > 65535) {
    return Unexpected(Errc::invalid_argument, "max_qpairs_per_ctrlr must be within [2, 65535]");
  }
  if (in_capsule_data_size % 16 != 0 || in_capsule_data_size > kInCapsuleDataMax) {
    return Unexpected(Errc::invalid_argument,
                      "in_capsule_data_size must be a multiple of 16 within [0, 16384]");
  }
  if (max_io_size < kMinPageBytes || max_io_size % kMinPageBytes != 0 ||
      !is_power_of_two(max_io_size / kMinPageBytes)) {
    return Unexpected(Errc::invalid_argument,
                      "max_io_size must be 4096 times a power of two (MDTS is a power of two)");
  }
  // MSDBD can say up to 255, but the RDMA transport carries at most 16 keyed descriptors per
  // command (transport_rdma::kKeyedDescriptorsMax, SPDK's figure): never advertise more.
  if (max_sgl_descriptors < 1 || max_sgl_descriptors > kSglDescriptorsMax) {
    return Unexpected(Errc::invalid_argument, "max_sgl_descriptors must be within [1, 16]");
  }
  // KAS is a 16-bit count of 100 ms units.
  if (keep_alive_granularity_ms < 100 || keep_alive_granularity_ms % 100 != 0 ||
      keep_alive_granularity_ms / 100 > 0xFFFF) {
    return Unexpected(Errc::invalid_argument,
                      "keep_alive_granularity_ms must be a multiple of 100 ms, at least 100");
  }
  if (discovery_keep_alive_timeout_ms == 0) {
    return Unexpected(Errc::invalid_argument, "discovery_keep_alive_timeout_ms must not be 0");
  }
  if (max_namespaces_default < 1 || max_namespaces_default > 1024) {
    return Unexpected(Errc::invalid_argument, "max_namespaces_default must be within [1, 1024]");
  }
  if (teardown_timeout_ms > kTeardownTimeoutMaxMs) {
    return Unexpected(Errc::invalid_argument, "teardown_timeout_ms must be within [0, 3600000]");
  }
  return {};
}

uint8_t TargetOpts::mdts() const noexcept {
  uint32_t pages = max_io_size / kMinPageBytes;
  uint8_t log2 = 0;
  while (pages > 1) {
    pages >>= 1;
    ++log2;
  }
  return log2;
}

std::string TargetOpts::to_json() const {
  nlohmann::ordered_json json;  // setup-path
  json["max_queue_depth"] = max_queue_depth;
  json["max_admin_queue_depth"] = max_admin_queue_depth;
  json["max_qpairs_per_ctrlr"] = max_qpairs_per_ctrlr;
  json["in_capsule_data_size"] = in_capsule_data_size;
  json["max_io_size"] = max_io_size;
  json["max_sgl_descriptors"] = max_sgl_descriptors;
  json["keep_alive_granularity_ms"] = keep_alive_granularity_ms;
  json["discovery_keep_alive_timeout_ms"] = discovery_keep_alive_timeout_ms;
  json["max_namespaces_default"] = max_namespaces_default;
  json["teardown_timeout_ms"] = teardown_timeout_ms;
  return json.dump();
}

}  // namespace nvmf::target
