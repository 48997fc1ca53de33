// TargetOpts: the knobs of the target core, with SPDK's RDMA transport defaults (see
// /work/shared/design/notes/anchors.md section 1). Some of them are transport limits that the
// core must know to answer the host truthfully (CAP.MQES, MDTS, IOCCSZ, MSDBD); the transport
// reads the same struct so both sides agree. Setup path only; plain data, any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace nvmf::target {

// Keyed descriptors one command may carry at most (the RDMA transport's SGL parser).
inline constexpr uint32_t kSglDescriptorsMax = 16;

struct TargetOpts {
  // Entries of an I/O submission queue, at most. CAP.MQES = this - 1 (0's based). 128 = SPDK.
  uint32_t max_queue_depth = 128;
  // Entries of an admin submission queue, at most (Connect SQSIZE + 1 on QID 0). 128 = SPDK's
  // max_aq_depth; the Linux host asks for 32.
  uint32_t max_admin_queue_depth = 128;
  // Queue pairs per controller including the admin queue: 128 = 127 I/O queues (SPDK).
  uint32_t max_qpairs_per_ctrlr = 128;
  // Bytes of data a command capsule may carry after the SQE (IOCCSZ = (64 + this) / 16).
  // 4096 = SPDK's default; a multiple of 16, at most 16 KiB (the limit).
  uint32_t in_capsule_data_size = 4096;
  // Largest transfer of one command. MDTS = log2(max_io_size / 4 KiB): CAP.MPSMIN is 4 KiB, so
  // it must be a power of two times 4 KiB. 1 MiB (MDTS 8) = the Linux target's
  // NVMET_RDMA_MAX_MDTS, not SPDK's 128 KiB: the Linux host caps max_hw_sectors by MDTS, so with
  // 128 KiB its passthrough of more than 256 512-byte blocks (nvme read/write/io-passthru) fails
  // with EINVAL before a command is sent.
  uint32_t max_io_size = 1048576;
  // SGL data block descriptors per command (Identify MSDBD), 1..kSglDescriptorsMax; the RDMA
  // transport refuses longer lists. 16 = SPDK RDMA (multi-SGL).
  uint32_t max_sgl_descriptors = 16;
  // Keep Alive Support (KAS) granularity: KATO values are rounded up to a multiple of it.
  // 1000 ms = the Linux target's KAS of 10 (units of 100 ms).
  uint32_t keep_alive_granularity_ms = 1000;
  // KATO a discovery controller gets when the host's Connect asks for none (0): the fabrics
  // spec lets a transport fix a discovery activity timeout "e.g. 2 minutes", so stale
  // discovery controllers of vanished hosts go away. 120000 = SPDK and Linux.
  uint32_t discovery_keep_alive_timeout_ms = 120000;
  // Namespaces per subsystem when the subsystem's own option is 0 (Identify NN). 32 = SPDK.
  uint32_t max_namespaces_default = 32;
  // How long the teardown of a queue pair (host disconnect, lost connection, keep-alive
  // timeout) waits for its commands still inside a bdev before it goes without them: their
  // memory and data buffers stay lent to the bdev and their completions are dropped when they
  // come. 0: do not wait. 10 s: well past a healthy device's worst latency (so normal teardowns
  // free everything in order), well inside the 30 s a host gives a command; SPDK and the Linux
  // target wait for ever, so one stuck device hangs every disconnect from it.
  uint32_t teardown_timeout_ms = 10000;

  // Checks ranges and relations. Errors: invalid_argument with the field name in the detail.
  Result<void> validate() const noexcept;
  // Maximum Data Transfer Size field of Identify Controller (power of two of 4 KiB pages).
  uint8_t mdts() const noexcept;
  // The options as one JSON object (setup path), keys named as the fields.
  std::string to_json() const;
};

}  // namespace nvmf::target
