#include "transport_rdma/sgl_parse.h"

#include <cstring>

#include "common/util.h"

namespace nvmf::transport_rdma {

namespace {
using spec::SglKind;
namespace sc = spec::sc_generic;

constexpr spec::Status bad(uint8_t code) noexcept { return spec::generic_status(code, true); }

spec::Status parse_keyed(const spec::SglDescriptor& sgl, const SglLimits& limits,
                         ParsedSgl* out) noexcept {
  const uint32_t length = sgl.keyed_length();
  if (length > limits.max_io_size) return bad(sc::data_sgl_length_invalid);
  out->invalidate_key = sgl_kind(sgl) == SglKind::keyed_invalidate;
  if (out->invalidate_key) out->invalidate_rkey = sgl.key();
  out->total_length = length;
  if (length == 0) {
    out->kind = ParsedSgl::Kind::none;
    return spec::status_success;
  }
  out->kind = ParsedSgl::Kind::keyed;
  out->keyed_count = 1;
  out->keyed[0] = KeyedBlock{sgl.address, length, sgl.key()};
  return spec::status_success;
}

spec::Status parse_in_capsule(const spec::SglDescriptor& sgl, uint8_t xfer,
                              uint32_t capsule_data_length, const SglLimits& limits,
                              ParsedSgl* out) noexcept {
  // In-capsule data can only carry data to the controller.
  if (xfer != spec::data_transfer::host_to_controller) return bad(sc::invalid_field);
  const uint64_t offset = sgl.address;
  const uint32_t length = sgl.length();
  // ICDOFF is 0 on RDMA: data starts right after the SQE and the offset counts from there.
  if (offset > capsule_data_length || offset > limits.in_capsule_data_size) {
    return bad(sc::sgl_offset_invalid);
  }
  if (!range_within(offset, length, capsule_data_length) || length > limits.max_io_size) {
    return bad(sc::data_sgl_length_invalid);
  }
  out->total_length = length;
  out->in_capsule_offset = static_cast<uint32_t>(offset);
  out->kind = length == 0 ? ParsedSgl::Kind::none : ParsedSgl::Kind::in_capsule;
  return spec::status_success;
}

// Out of line: its loop needs registers that the one-descriptor path (every 4 KiB I/O) would
// otherwise save and restore on each call of parse_command_sgl().
[[gnu::noinline]] spec::Status parse_last_segment(const spec::SglDescriptor& sgl,
                                                  const uint8_t* capsule_data,
                                                  uint32_t capsule_data_length,
                                                  const SglLimits& limits,
                                                  ParsedSgl* out) noexcept {
  const uint64_t offset = sgl.address;
  const uint32_t list_length = sgl.length();
  if (list_length == 0 || list_length % spec::sgl_descriptor_size != 0) {
    return bad(sc::data_sgl_length_invalid);
  }
  if (!range_within(offset, list_length, capsule_data_length) || capsule_data == nullptr) {
    return bad(sc::sgl_offset_invalid);
  }
  const uint32_t count = list_length / spec::sgl_descriptor_size;
  if (count > limits.max_keyed_descriptors || count > kKeyedDescriptorsMax) {
    return bad(sc::data_sgl_length_invalid);
  }
  // 64-bit sum: 16 descriptors of at most 2^24 - 1 bytes cannot wrap it.
  uint64_t total = 0;
  bool invalidate = false;
  for (uint32_t i = 0; i < count; ++i) {
    spec::SglDescriptor entry;
    std::memcpy(&entry, capsule_data + offset + i * spec::sgl_descriptor_size, sizeof(entry));
    const SglKind kind = sgl_kind(entry);
    if (kind != SglKind::keyed_address && kind != SglKind::keyed_invalidate) {
      return bad(sc::sgl_descriptor_type_invalid);
    }
    // One key to invalidate per command: the binding sends one SEND_WITH_INV, so every
    // descriptor that asks for it must name the same key.
    if (kind == SglKind::keyed_invalidate) {
      if (invalidate && entry.key() != out->invalidate_rkey) return bad(sc::invalid_field);
      invalidate = true;
      out->invalidate_rkey = entry.key();
    }
    out->keyed[i] = KeyedBlock{entry.address, entry.keyed_length(), entry.key()};
    total += entry.keyed_length();
  }
  if (total > limits.max_io_size) return bad(sc::data_sgl_length_invalid);
  out->kind = total == 0 ? ParsedSgl::Kind::none : ParsedSgl::Kind::keyed;
  out->keyed_count = count;
  out->total_length = static_cast<uint32_t>(total);
  out->invalidate_key = invalidate;
  return spec::status_success;
}
}  // namespace

spec::Status parse_command_sgl(const spec::Sqe& sqe, uint8_t xfer, const uint8_t* capsule_data,
                               uint32_t capsule_data_length, const SglLimits& limits,
                               ParsedSgl* out) noexcept {
  out->clear();
  if (xfer == spec::data_transfer::none) return spec::status_success;
  // No NVMe command moves data both ways: an opcode with direction bits 11b does not exist
  // (SPDK answers the same, before looking at the SGL).
  if (xfer == spec::data_transfer::bidirectional) return bad(sc::invalid_opcode);
  if (sqe.psdt() != spec::psdt::sgl_mptr_contiguous) return bad(sc::invalid_field);
  if (capsule_data == nullptr) capsule_data_length = 0;

  switch (sgl_kind(sqe.sgl1)) {
    case SglKind::keyed_address:
    case SglKind::keyed_invalidate:
      return parse_keyed(sqe.sgl1, limits, out);
    case SglKind::in_capsule:
      return parse_in_capsule(sqe.sgl1, xfer, capsule_data_length, limits, out);
    case SglKind::last_segment_offset:
      return parse_last_segment(sqe.sgl1, capsule_data, capsule_data_length, limits, out);
    case SglKind::segment_offset:      // chained segments: not in the RDMA binding
    case SglKind::data_block_address:  // PCIe host memory
    case SglKind::unsupported:
      break;
  }
  return bad(sc::sgl_descriptor_type_invalid);
}

}  // namespace nvmf::transport_rdma
