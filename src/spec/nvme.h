// NVMe queue entries: the 64-byte Submission Queue Entry and the 16-byte Completion Queue Entry
// with its Status Field, plus the admin, NVM and Fabrics opcodes. Command-specific views
// (Connect, Property Get, ...) are separate 64-byte structs in fabrics.h and admin.h; convert
// with to_sqe() / sqe_as<T>(), which are bit copies. Header-only; any thread.
//
// Sources: Base spec "Submission Queue Entry" ("Common Command Format", "Command Dword 0"),
// "Completion Queue Entry" ("Common Completion Queue Entry Layout", "Status Field"),
// "Opcodes for Admin Commands"; NVM Command Set spec "Opcodes for NVM Commands", "Read command",
// "Write command", "Dataset Management command"; Fabrics "Fabrics Command" opcode.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "spec/sgl.h"
#include "spec/status.h"
#include "spec/wire.h"

namespace nvmf::spec {

// Opcodes for Admin Commands.
namespace admin_opcode {
inline constexpr uint8_t delete_io_sq = 0x00;
inline constexpr uint8_t create_io_sq = 0x01;
inline constexpr uint8_t get_log_page = 0x02;
inline constexpr uint8_t delete_io_cq = 0x04;
inline constexpr uint8_t create_io_cq = 0x05;
inline constexpr uint8_t identify = 0x06;
inline constexpr uint8_t abort = 0x08;
inline constexpr uint8_t set_features = 0x09;
inline constexpr uint8_t get_features = 0x0A;
inline constexpr uint8_t async_event_request = 0x0C;
inline constexpr uint8_t namespace_management = 0x0D;
inline constexpr uint8_t firmware_commit = 0x10;
inline constexpr uint8_t firmware_image_download = 0x11;
inline constexpr uint8_t device_self_test = 0x14;
inline constexpr uint8_t namespace_attachment = 0x15;
inline constexpr uint8_t keep_alive = 0x18;
inline constexpr uint8_t directive_send = 0x19;
inline constexpr uint8_t directive_receive = 0x1A;
inline constexpr uint8_t virtualization_management = 0x1C;
inline constexpr uint8_t nvme_mi_send = 0x1D;
inline constexpr uint8_t nvme_mi_receive = 0x1E;
inline constexpr uint8_t doorbell_buffer_config = 0x7C;
inline constexpr uint8_t fabrics = 0x7F;
inline constexpr uint8_t format_nvm = 0x80;
inline constexpr uint8_t security_send = 0x81;
inline constexpr uint8_t security_receive = 0x82;
inline constexpr uint8_t sanitize = 0x84;
inline constexpr uint8_t get_lba_status = 0x86;
}  // namespace admin_opcode

// Abort's CDW10: SQID in 15:0, the CID to abort in 31:16 (the same on PCIe and fabrics).
constexpr uint32_t abort_cdw10(uint16_t sqid, uint16_t cid) noexcept {
  return (uint32_t{cid} << 16) | sqid;
}
constexpr uint16_t abort_sqid(uint32_t cdw10) noexcept { return static_cast<uint16_t>(cdw10); }
constexpr uint16_t abort_cid(uint32_t cdw10) noexcept {
  return static_cast<uint16_t>(cdw10 >> 16);
}

// Opcodes for NVM Commands (I/O queues).
namespace nvm_opcode {
inline constexpr uint8_t flush = 0x00;
inline constexpr uint8_t write = 0x01;
inline constexpr uint8_t read = 0x02;
inline constexpr uint8_t write_uncorrectable = 0x04;
inline constexpr uint8_t compare = 0x05;
inline constexpr uint8_t write_zeroes = 0x08;
inline constexpr uint8_t dataset_management = 0x09;
inline constexpr uint8_t verify = 0x0C;
inline constexpr uint8_t reservation_register = 0x0D;
inline constexpr uint8_t reservation_report = 0x0E;
inline constexpr uint8_t reservation_acquire = 0x11;
inline constexpr uint8_t reservation_release = 0x15;
inline constexpr uint8_t copy = 0x19;
inline constexpr uint8_t fabrics = 0x7F;  // Fabrics commands are valid on every queue
}  // namespace nvm_opcode

// The Fabrics command opcode (same value on admin and I/O queues).
inline constexpr uint8_t fabrics_opcode = 0x7F;

// Opcode bits 1:0 give the data transfer direction ("Opcodes" figures).
namespace data_transfer {
inline constexpr uint8_t none = 0x0;
inline constexpr uint8_t host_to_controller = 0x1;
inline constexpr uint8_t controller_to_host = 0x2;
inline constexpr uint8_t bidirectional = 0x3;
}  // namespace data_transfer
constexpr uint8_t opcode_data_transfer(uint8_t opcode) noexcept {
  return static_cast<uint8_t>(opcode & 0x3);
}

// PRP or SGL for Data Transfer (PSDT), Command Dword 0 bits 15:14 (byte 1 bits 7:6).
namespace psdt {
inline constexpr uint8_t prp = 0x0;
inline constexpr uint8_t sgl_mptr_contiguous = 0x1;  // what NVMe-oF uses: SGLs, MPTR is a buffer
inline constexpr uint8_t sgl_mptr_segment = 0x2;
}  // namespace psdt

// Fused Operation (FUSE), Command Dword 0 bits 9:8 (byte 1 bits 1:0).
namespace fuse {
inline constexpr uint8_t normal = 0x0;
inline constexpr uint8_t first = 0x1;
inline constexpr uint8_t second = 0x2;
}  // namespace fuse

inline constexpr uint32_t nsid_none = 0;
inline constexpr uint32_t nsid_all = 0xFFFFFFFF;  // broadcast: every attached namespace

// Submission Queue Entry, "Common Command Format" (64 bytes). DPTR is SGL1 on Fabrics.
struct Sqe {
  uint8_t opcode;      // 00: CDW0 7:0
  uint8_t flags;       // 01: CDW0 15:8: FUSE 1:0, PSDT 7:6
  uint16_t cid;        // 02: Command Identifier
  uint32_t nsid;       // 04: Namespace Identifier
  uint32_t cdw2;       // 08
  uint32_t cdw3;       // 12
  uint64_t mptr;       // 16: Metadata Pointer
  SglDescriptor sgl1;  // 24: Data Pointer (SGL Entry 1)
  uint32_t cdw10;      // 40
  uint32_t cdw11;      // 44
  uint32_t cdw12;      // 48
  uint32_t cdw13;      // 52
  uint32_t cdw14;      // 56
  uint32_t cdw15;      // 60

  constexpr uint8_t fuse() const noexcept { return static_cast<uint8_t>(flags & 0x3); }
  constexpr void set_fuse(uint8_t value) noexcept { flags = set_bits(flags, 0, 2, value); }
  constexpr uint8_t psdt() const noexcept { return static_cast<uint8_t>(flags >> 6); }
  constexpr void set_psdt(uint8_t value) noexcept { flags = set_bits(flags, 6, 2, value); }
};
NVMF_SPEC_LAYOUT(Sqe, 64);
NVMF_SPEC_OFFSET(Sqe, opcode, 0);
NVMF_SPEC_OFFSET(Sqe, flags, 1);
NVMF_SPEC_OFFSET(Sqe, cid, 2);
NVMF_SPEC_OFFSET(Sqe, nsid, 4);
NVMF_SPEC_OFFSET(Sqe, cdw2, 8);
NVMF_SPEC_OFFSET(Sqe, cdw3, 12);
NVMF_SPEC_OFFSET(Sqe, mptr, 16);
NVMF_SPEC_OFFSET(Sqe, sgl1, 24);
NVMF_SPEC_OFFSET(Sqe, cdw10, 40);
NVMF_SPEC_OFFSET(Sqe, cdw11, 44);
NVMF_SPEC_OFFSET(Sqe, cdw12, 48);
NVMF_SPEC_OFFSET(Sqe, cdw13, 52);
NVMF_SPEC_OFFSET(Sqe, cdw14, 56);
NVMF_SPEC_OFFSET(Sqe, cdw15, 60);

// A zeroed SQE with opcode, CID and NSID set, and PSDT = SGL as every NVMe-oF command needs.
constexpr Sqe make_sqe(uint8_t opcode, uint16_t cid, uint32_t nsid = nsid_none) noexcept {
  Sqe sqe{};
  sqe.opcode = opcode;
  sqe.cid = cid;
  sqe.nsid = nsid;
  sqe.set_psdt(psdt::sgl_mptr_contiguous);
  return sqe;
}

// Bit copies between the generic SQE and a command-specific 64-byte view.
template <typename Command>
constexpr Sqe to_sqe(const Command& command) noexcept {
  static_assert(sizeof(Command) == sizeof(Sqe) && is_wire_struct_v<Command>);
  return std::bit_cast<Sqe>(command);
}
template <typename Command>
constexpr Command sqe_as(const Sqe& sqe) noexcept {
  static_assert(sizeof(Command) == sizeof(Sqe) && is_wire_struct_v<Command>);
  return std::bit_cast<Command>(sqe);
}

// Status Field (16 bits, CQE bytes 14..15): P bit 0, SC 8:1, SCT 11:9, CRD 13:12, M 14, DNR 15.
constexpr uint16_t encode_status_field(const Status& status, bool phase) noexcept {
  uint16_t field = 0;
  field = set_bit(field, 0, phase);
  field = set_bits(field, 1, 8, status.sc);
  field = set_bits(field, 9, 3, status.sct);
  field = set_bits(field, 12, 2, status.crd);
  field = set_bit(field, 14, status.more);
  field = set_bit(field, 15, status.dnr);
  return field;
}

constexpr Status decode_status_field(uint16_t field) noexcept {
  Status status;
  status.sc = static_cast<uint8_t>(get_bits(field, 1, 8));
  status.sct = static_cast<uint8_t>(get_bits(field, 9, 3));
  status.crd = static_cast<uint8_t>(get_bits(field, 12, 2));
  status.more = get_bit(field, 14);
  status.dnr = get_bit(field, 15);
  return status;
}

constexpr bool status_field_phase(uint16_t field) noexcept { return get_bit(field, 0); }

// Completion Queue Entry, "Common Completion Queue Entry Layout" (16 bytes).
struct Cqe {
  uint32_t cdw0;    // 00: command specific result
  uint32_t cdw1;    // 04: command specific (upper half of a 64-bit Property Get value)
  uint16_t sqhd;    // 08: SQ Head Pointer
  uint16_t sqid;    // 10: SQ Identifier
  uint16_t cid;     // 12: Command Identifier
  uint16_t status;  // 14: Status Field incl. Phase Tag, see encode_status_field()

  constexpr bool phase() const noexcept { return status_field_phase(status); }
  constexpr Status decoded_status() const noexcept { return decode_status_field(status); }
  constexpr void set_status(const Status& value, bool phase_tag = false) noexcept {
    status = encode_status_field(value, phase_tag);
  }
};
NVMF_SPEC_LAYOUT(Cqe, 16);
NVMF_SPEC_OFFSET(Cqe, cdw0, 0);
NVMF_SPEC_OFFSET(Cqe, cdw1, 4);
NVMF_SPEC_OFFSET(Cqe, sqhd, 8);
NVMF_SPEC_OFFSET(Cqe, sqid, 10);
NVMF_SPEC_OFFSET(Cqe, cid, 12);
NVMF_SPEC_OFFSET(Cqe, status, 14);

template <typename Response>
constexpr Cqe to_cqe(const Response& response) noexcept {
  static_assert(sizeof(Response) == sizeof(Cqe) && is_wire_struct_v<Response>);
  return std::bit_cast<Cqe>(response);
}
template <typename Response>
constexpr Response cqe_as(const Cqe& cqe) noexcept {
  static_assert(sizeof(Response) == sizeof(Cqe) && is_wire_struct_v<Response>);
  return std::bit_cast<Response>(cqe);
}

// --- NVM command dwords ("Read command", "Write command", "Write Zeroes command", ...) ---
// CDW10/11: Starting LBA. CDW12: NLB 15:0 (0's based), PRINFO 29:26, FUA 30, LR 31.

constexpr uint64_t rw_starting_lba(const Sqe& sqe) noexcept {
  return (uint64_t{sqe.cdw11} << 32) | sqe.cdw10;
}
// Number of logical blocks (NLB is 0's based, so 1..65536).
constexpr uint32_t rw_block_count(const Sqe& sqe) noexcept {
  return static_cast<uint32_t>(get_bits(sqe.cdw12, 0, 16)) + 1;
}
constexpr bool rw_fua(const Sqe& sqe) noexcept { return get_bit(sqe.cdw12, 30); }
constexpr bool rw_limited_retry(const Sqe& sqe) noexcept { return get_bit(sqe.cdw12, 31); }

inline constexpr uint32_t rw_block_count_max = 65536;  // NLB is a 16-bit 0's based field

constexpr void rw_set_range(Sqe& sqe, uint64_t starting_lba, uint32_t block_count) noexcept {
  assert(block_count >= 1 && block_count <= rw_block_count_max);
  sqe.cdw10 = static_cast<uint32_t>(starting_lba);
  sqe.cdw11 = static_cast<uint32_t>(starting_lba >> 32);
  sqe.cdw12 = set_bits(sqe.cdw12, 0, 16, block_count - 1);
}
constexpr void rw_set_fua(Sqe& sqe, bool on) noexcept { sqe.cdw12 = set_bit(sqe.cdw12, 30, on); }

// Dataset Management: CDW10 NR 7:0 (number of ranges, 0's based), CDW11 AD bit 2 (deallocate).
constexpr uint32_t dsm_range_count(const Sqe& sqe) noexcept {
  return static_cast<uint32_t>(get_bits(sqe.cdw10, 0, 8)) + 1;
}
constexpr bool dsm_deallocate(const Sqe& sqe) noexcept { return get_bit(sqe.cdw11, 2); }

// Dataset Management Range, "Dataset Management - Range Definition" (16 bytes).
struct DsmRange {
  uint32_t context_attributes;  // 00
  uint32_t block_count;         // 04: Length in logical blocks (1's based)
  uint64_t starting_lba;        // 08
};
NVMF_SPEC_LAYOUT(DsmRange, 16);
NVMF_SPEC_OFFSET(DsmRange, block_count, 4);
NVMF_SPEC_OFFSET(DsmRange, starting_lba, 8);

}  // namespace nvmf::spec
