// Target side of "Data transfer" in the NVMe RDMA binding: turns a command's SGL1 (and, for a
// Last Segment, the descriptor list inside the capsule) into a checked description of where
// the data is. Every length and offset comes from the wire, so every check is overflow-safe:
// no `offset + length` is ever computed before it is known not to wrap.
// Pure function; the request state machine calls it once per command.
#pragma once

#include <cstdint>

#include "spec/nvme.h"
#include "spec/sgl.h"
#include "spec/status.h"

namespace nvmf::transport_rdma {

// Most keyed descriptors in one command (Identify Controller MSDBD; SPDK uses 16). The target
// core's configuration limit (target::kSglDescriptorsMax) is the same number.
inline constexpr uint32_t kKeyedDescriptorsMax = 16;

struct SglLimits {
  uint32_t max_io_size = 1048576;        // largest data transfer of one command (MDTS)
  uint32_t in_capsule_data_size = 4096;  // bytes after the SQE the target's buffers hold
  uint32_t max_keyed_descriptors = kKeyedDescriptorsMax;  // MSDBD
};

struct KeyedBlock {
  uint64_t address = 0;
  uint32_t length = 0;
  uint32_t key = 0;
};

struct ParsedSgl {
  enum class Kind : uint8_t {
    none,        // the command moves no data (or a zero length)
    keyed,       // one or more keyed blocks: RDMA READ (host->controller) or WRITE
    in_capsule,  // data already in the capsule at in_capsule_offset
  };
  Kind kind = Kind::none;
  uint32_t total_length = 0;
  bool invalidate_key = false;  // the host asked for SEND_WITH_INV of invalidate_rkey
  uint32_t invalidate_rkey = 0;
  uint32_t in_capsule_offset = 0;
  uint32_t keyed_count = 0;
  KeyedBlock keyed[kKeyedDescriptorsMax];  // only the first keyed_count are meaningful

  // Back to "no data" without touching `keyed`: a parse per command would otherwise zero its
  // 256 bytes each time, and nothing reads past keyed_count.
  void clear() noexcept {
    kind = Kind::none;
    total_length = 0;
    invalidate_key = false;
    invalidate_rkey = 0;
    in_capsule_offset = 0;
    keyed_count = 0;
  }
};

// `capsule_data` / `capsule_data_length`: the bytes that arrived after the 64-byte SQE (0 for
// a command without in-capsule data). Returns success, or the NVMe status to answer with:
//   invalid_opcode                the opcode's direction bits say both ways (no such command)
//   invalid_field                 PSDT is not "SGL"; in-capsule data on a command that reads
//   sgl_descriptor_type_invalid   a type/subtype the RDMA binding does not allow (Data Block
//                                 Address, Segment, Bit Bucket, vendor...), a keyed subtype
//                                 other than Address/Invalidate, a non-keyed entry in a list
//   sgl_offset_invalid            in-capsule offset beyond the capsule's data, or a Last
//                                 Segment list outside it
//   data_sgl_length_invalid       total beyond max_io_size, in-capsule length past the data
//                                 that arrived, a list whose length is not n x 16 bytes
//   (command specific) ...        none
// `xfer` is spec::data_transfer::* of the opcode; for `none` the SGL is not looked at.
spec::Status parse_command_sgl(const spec::Sqe& sqe, uint8_t xfer, const uint8_t* capsule_data,
                               uint32_t capsule_data_length, const SglLimits& limits,
                               ParsedSgl* out) noexcept;

}  // namespace nvmf::transport_rdma
