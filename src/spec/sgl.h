// SGL descriptors: the 16-byte unit that describes where a command's data lives. Over RDMA a
// command carries one descriptor in SQE bytes 24..39 (SGL1): a Keyed SGL Data Block (host
// memory the target reaches with RDMA READ/WRITE), a Data Block with subtype Offset (data in
// the capsule after the SQE), or a Last Segment with subtype Offset (a list of keyed
// descriptors in the capsule). Header-only; any thread.
//
// Sources: Base spec "Scatter Gather List (SGL)" ("SGL Descriptor", "SGL Identifier", "SGL
// Descriptor Type" and "SGL Descriptor Sub Type" figures, "SGL Data Block descriptor", "SGL
// Segment descriptor", "SGL Last Segment descriptor", "Keyed SGL Data Block descriptor").
#pragma once

#include <cassert>
#include <cstdint>

#include "spec/wire.h"

namespace nvmf::spec {

// SGL Descriptor Type: bits 7:4 of the SGL Identifier (byte 15).
namespace sgl_type {
inline constexpr uint8_t data_block = 0x0;
inline constexpr uint8_t bit_bucket = 0x1;
inline constexpr uint8_t segment = 0x2;
inline constexpr uint8_t last_segment = 0x3;
inline constexpr uint8_t keyed_data_block = 0x4;
inline constexpr uint8_t transport_data_block = 0x5;
inline constexpr uint8_t vendor_specific = 0xF;
}  // namespace sgl_type

// SGL Descriptor Sub Type: bits 3:0 of the SGL Identifier.
namespace sgl_subtype {
inline constexpr uint8_t address = 0x0;         // the Address field is a memory address
inline constexpr uint8_t offset = 0x1;          // the Address field is an offset into the capsule
inline constexpr uint8_t transport = 0xA;       // transport specific (TCP)
inline constexpr uint8_t invalidate_key = 0xF;  // keyed only: invalidate the key on completion
}  // namespace sgl_subtype

inline constexpr uint32_t sgl_descriptor_size = 16;
// Keyed descriptors carry a 24-bit length, so one descriptor covers at most 16 MiB - 1.
inline constexpr uint32_t sgl_keyed_length_max = 0xFFFFFF;

// SGL Descriptor (16 bytes). Bytes 8..14 depend on the type:
//   Data Block, Segment, Last Segment, Bit Bucket: Length u32 @8, bytes 12..14 reserved.
//   Keyed SGL Data Block: Length u24 @8, Key u32 @11 (both unaligned, hence the byte array).
struct SglDescriptor {
  uint64_t address;          // 00: memory address, or capsule offset for subtype Offset
  uint8_t type_specific[7];  // 08: length(s) and key, see above
  uint8_t identifier;        // 15: SGL Identifier: type 7:4, subtype 3:0

  constexpr uint8_t type() const noexcept { return static_cast<uint8_t>(identifier >> 4); }
  constexpr uint8_t subtype() const noexcept { return static_cast<uint8_t>(identifier & 0x0F); }
  constexpr void set_identifier(uint8_t type_value, uint8_t subtype_value) noexcept {
    identifier = static_cast<uint8_t>(((type_value & 0x0F) << 4) | (subtype_value & 0x0F));
  }

  // Length of a non-keyed descriptor (Data Block, Segment, Last Segment, Bit Bucket).
  constexpr uint32_t length() const noexcept { return load_le32(type_specific); }
  constexpr void set_length(uint32_t value) noexcept { store_le32(type_specific, value); }

  // Keyed SGL Data Block: 24-bit length and 32-bit remote key.
  constexpr uint32_t keyed_length() const noexcept { return load_le24(type_specific); }
  constexpr void set_keyed_length(uint32_t value) noexcept {
    assert(value <= sgl_keyed_length_max);
    store_le24(type_specific, value);
  }
  constexpr uint32_t key() const noexcept { return load_le32(type_specific + 3); }
  constexpr void set_key(uint32_t value) noexcept { store_le32(type_specific + 3, value); }
};
NVMF_SPEC_LAYOUT(SglDescriptor, 16);
NVMF_SPEC_OFFSET(SglDescriptor, address, 0);
NVMF_SPEC_OFFSET(SglDescriptor, type_specific, 8);
NVMF_SPEC_OFFSET(SglDescriptor, identifier, 15);

// Keyed SGL Data Block: host memory at `address`, reachable with remote key `key`. With
// `invalidate` the subtype is Invalidate Key (Fh): the target may answer with
// SEND_WITH_INVALIDATE carrying `key`. `length` must fit in 24 bits.
constexpr SglDescriptor make_keyed_data_block(uint64_t address, uint32_t length, uint32_t key,
                                              bool invalidate) noexcept {
  SglDescriptor sgl{};
  sgl.address = address;
  sgl.set_keyed_length(length);
  sgl.set_key(key);
  sgl.set_identifier(sgl_type::keyed_data_block,
                     invalidate ? sgl_subtype::invalidate_key : sgl_subtype::address);
  return sgl;
}

// In-capsule data: a Data Block with subtype Offset; `offset` counts from the start of the
// capsule's data area (Identify Controller ICDOFF, 0 on RDMA means right after the SQE).
constexpr SglDescriptor make_in_capsule_data_block(uint64_t offset, uint32_t length) noexcept {
  SglDescriptor sgl{};
  sgl.address = offset;
  sgl.set_length(length);
  sgl.set_identifier(sgl_type::data_block, sgl_subtype::offset);
  return sgl;
}

// A Data Block with subtype Address (PCIe-style host memory; not used over RDMA).
constexpr SglDescriptor make_data_block(uint64_t address, uint32_t length) noexcept {
  SglDescriptor sgl{};
  sgl.address = address;
  sgl.set_length(length);
  sgl.set_identifier(sgl_type::data_block, sgl_subtype::address);
  return sgl;
}

// Last Segment: `length` bytes (a multiple of 16) of descriptors at `address`; over Fabrics the
// subtype is Offset and the descriptors are in the capsule.
constexpr SglDescriptor make_last_segment(uint64_t address, uint32_t length,
                                          uint8_t subtype = sgl_subtype::offset) noexcept {
  SglDescriptor sgl{};
  sgl.address = address;
  sgl.set_length(length);
  sgl.set_identifier(sgl_type::last_segment, subtype);
  return sgl;
}

// Segment: like Last Segment, but its last descriptor points at the next segment.
constexpr SglDescriptor make_segment(uint64_t address, uint32_t length,
                                     uint8_t subtype = sgl_subtype::offset) noexcept {
  SglDescriptor sgl{};
  sgl.address = address;
  sgl.set_length(length);
  sgl.set_identifier(sgl_type::segment, subtype);
  return sgl;
}

// The descriptor shapes an NVMe-oF RDMA target tells apart when it parses SGL1.
enum class SglKind : uint8_t {
  keyed_address,        // type 4, subtype 0: RDMA READ/WRITE to host memory
  keyed_invalidate,     // type 4, subtype F: same, and the host asks for remote invalidate
  in_capsule,           // type 0, subtype 1: data inside the capsule
  last_segment_offset,  // type 3, subtype 1: descriptor list inside the capsule
  segment_offset,       // type 2, subtype 1: descriptor list inside the capsule, chained
  data_block_address,   // type 0, subtype 0: PCIe host memory, invalid over RDMA
  unsupported,          // any other type/subtype combination
};

constexpr SglKind sgl_kind(const SglDescriptor& sgl) noexcept {
  const uint8_t type = sgl.type();
  const uint8_t subtype = sgl.subtype();
  if (type == sgl_type::keyed_data_block) {
    if (subtype == sgl_subtype::address) return SglKind::keyed_address;
    if (subtype == sgl_subtype::invalidate_key) return SglKind::keyed_invalidate;
    return SglKind::unsupported;
  }
  if (type == sgl_type::data_block) {
    if (subtype == sgl_subtype::offset) return SglKind::in_capsule;
    if (subtype == sgl_subtype::address) return SglKind::data_block_address;
    return SglKind::unsupported;
  }
  if (type == sgl_type::last_segment && subtype == sgl_subtype::offset) {
    return SglKind::last_segment_offset;
  }
  if (type == sgl_type::segment && subtype == sgl_subtype::offset) return SglKind::segment_offset;
  return SglKind::unsupported;
}

// The data length a descriptor describes: 24-bit for keyed, 32-bit otherwise.
constexpr uint32_t sgl_data_length(const SglDescriptor& sgl) noexcept {
  return sgl.type() == sgl_type::keyed_data_block ? sgl.keyed_length() : sgl.length();
}

}  // namespace nvmf::spec
