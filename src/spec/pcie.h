// What NVMe over PCIe adds to the common formats: the registers beyond the Fabrics properties
// (AQA, ASQ, ACQ, doorbells), Physical Region Page entries, and the Create / Delete I/O
// Completion and Submission Queue commands. Header-only; any thread.
//
// Sources: NVMe over PCIe Transport spec "Controller Registers" (AQA, ASQ, ACQ, "SQyTDBL",
// "CQyHDBL"), "Physical Region Page Entry and List"; Base spec "Create I/O Completion Queue
// command", "Create I/O Submission Queue command", "Delete I/O ... Queue command",
// "Controller Capabilities" (DSTRD, MPSMIN), "Controller Configuration" (MPS, IOSQES, IOCQES).
#pragma once

#include <cstdint>
#include <cstring>

#include "spec/fabrics.h"
#include "spec/nvme.h"
#include "spec/wire.h"

namespace nvmf::spec::pcie {

// Register offsets in BAR0 that exist on PCIe only (CAP, VS, CC, CSTS, NSSR are in
// spec::property_offset).
namespace reg {
inline constexpr uint32_t aqa = 0x24;              // Admin Queue Attributes (4 bytes)
inline constexpr uint32_t asq = 0x28;              // Admin SQ Base Address (8 bytes)
inline constexpr uint32_t acq = 0x30;              // Admin CQ Base Address (8 bytes)
inline constexpr uint32_t doorbell_base = 0x1000;  // SQ0TDBL; the rest follow at the stride
}  // namespace reg

// The size BAR0 must at least have: registers plus the admin queue's two doorbells.
inline constexpr uint32_t bar0_size_min = 0x1000 + 8;

// Doorbell stride: 2^(2 + CAP.DSTRD) bytes between doorbells.
constexpr uint32_t doorbell_stride_bytes(uint64_t cap) noexcept {
  return 4u << cap_dstrd(cap);
}
// Offset of queue `qid`'s SQ Tail Doorbell and CQ Head Doorbell.
constexpr uint32_t sq_tail_doorbell(uint16_t qid, uint32_t stride_bytes) noexcept {
  return reg::doorbell_base + (2u * qid) * stride_bytes;
}
constexpr uint32_t cq_head_doorbell(uint16_t qid, uint32_t stride_bytes) noexcept {
  return reg::doorbell_base + (2u * qid + 1u) * stride_bytes;
}

// AQA: ASQS 11:0 and ACQS 27:16, both 0's based.
constexpr uint32_t make_aqa(uint32_t sq_entries, uint32_t cq_entries) noexcept {
  return ((cq_entries - 1) << 16) | (sq_entries - 1);
}
constexpr uint32_t aqa_sq_entries(uint32_t aqa) noexcept { return (aqa & 0xFFF) + 1; }
constexpr uint32_t aqa_cq_entries(uint32_t aqa) noexcept { return ((aqa >> 16) & 0xFFF) + 1; }
inline constexpr uint32_t admin_queue_entries_max = 4096;  // AQA fields are 12 bits

// The memory page size the host selects in CC.MPS: 2^(12 + MPS). The driver always uses 4 KiB
// (MPS 0) and refuses a controller whose CAP.MPSMIN is larger.
inline constexpr uint32_t memory_page_size_bytes = 4096;
inline constexpr uint8_t io_sq_entry_size_log2 = 6;  // 64-byte SQEs (CC.IOSQES)
inline constexpr uint8_t io_cq_entry_size_log2 = 4;  // 16-byte CQEs (CC.IOCQES)

// --- PRPs ("Physical Region Page Entry and List") ---
// PRP1 may carry an offset into its page; every further entry is page-aligned. A transfer
// that fits two pages uses PRP1 and PRP2 as entries; longer ones put PRP2 at a PRP list, whose
// last entry points at the next list page when more entries follow.
inline constexpr uint32_t prp_entries_per_page = memory_page_size_bytes / sizeof(uint64_t);

// The SQE's DPTR as two PRP entries (bytes 24..39).
inline uint64_t sqe_prp1(const Sqe& sqe) noexcept {
  uint64_t value;
  std::memcpy(&value, &sqe.sgl1, sizeof(value));
  return value;
}
inline uint64_t sqe_prp2(const Sqe& sqe) noexcept {
  uint64_t value;
  std::memcpy(&value, reinterpret_cast<const uint8_t*>(&sqe.sgl1) + 8, sizeof(value));
  return value;
}
inline void sqe_set_prps(Sqe& sqe, uint64_t prp1, uint64_t prp2) noexcept {
  sqe.set_psdt(psdt::prp);
  std::memcpy(&sqe.sgl1, &prp1, sizeof(prp1));
  std::memcpy(reinterpret_cast<uint8_t*>(&sqe.sgl1) + 8, &prp2, sizeof(prp2));
}

// A zeroed SQE for a PCIe controller: PSDT = PRP (make_sqe() sets SGL for Fabrics).
constexpr Sqe make_pcie_sqe(uint8_t opcode, uint16_t cid, uint32_t nsid = nsid_none) noexcept {
  Sqe sqe{};
  sqe.opcode = opcode;
  sqe.cid = cid;
  sqe.nsid = nsid;
  return sqe;
}

// --- Create / Delete I/O queues ---
// Create I/O CQ: PRP1 = queue base (physically contiguous, PC = 1); CDW10 QID 15:0, QSIZE
// 31:16 (0's based); CDW11 PC bit 0, IEN bit 1, IV 31:16.
// Create I/O SQ: PRP1 = base; CDW10 as above; CDW11 PC bit 0, QPRIO 2:1, CQID 31:16.
inline Sqe make_create_io_cq(uint16_t cid, uint16_t qid, uint32_t entries, uint64_t base_iova,
                                bool interrupts_enabled = false) noexcept {
  Sqe sqe = make_pcie_sqe(admin_opcode::create_io_cq, cid);
  sqe.cdw10 = (uint32_t{entries - 1} << 16) | qid;
  sqe.cdw11 = 1u | (interrupts_enabled ? 2u : 0u);
  std::memcpy(&sqe.sgl1, &base_iova, sizeof(base_iova));
  return sqe;
}
inline Sqe make_create_io_sq(uint16_t cid, uint16_t qid, uint32_t entries, uint64_t base_iova,
                                uint16_t cqid) noexcept {
  Sqe sqe = make_pcie_sqe(admin_opcode::create_io_sq, cid);
  sqe.cdw10 = (uint32_t{entries - 1} << 16) | qid;
  sqe.cdw11 = 1u | (uint32_t{cqid} << 16);
  std::memcpy(&sqe.sgl1, &base_iova, sizeof(base_iova));
  return sqe;
}
constexpr Sqe make_delete_io_queue(uint8_t opcode, uint16_t cid, uint16_t qid) noexcept {
  Sqe sqe = make_pcie_sqe(opcode, cid);
  sqe.cdw10 = qid;
  return sqe;
}
constexpr uint16_t create_queue_qid(const Sqe& sqe) noexcept {
  return static_cast<uint16_t>(sqe.cdw10 & 0xFFFF);
}
constexpr uint32_t create_queue_entries(const Sqe& sqe) noexcept { return (sqe.cdw10 >> 16) + 1; }
constexpr bool create_queue_contiguous(const Sqe& sqe) noexcept { return (sqe.cdw11 & 1u) != 0; }
constexpr uint16_t create_sq_cqid(const Sqe& sqe) noexcept {
  return static_cast<uint16_t>(sqe.cdw11 >> 16);
}

// Abort: CDW10 SQID 15:0, CID 31:16. CQE DW0 bit 0 = 1: the command was not aborted.
constexpr Sqe make_abort(uint16_t cid, uint16_t sqid, uint16_t cid_to_abort) noexcept {
  Sqe sqe = make_pcie_sqe(admin_opcode::abort, cid);
  sqe.cdw10 = abort_cdw10(sqid, cid_to_abort);
  return sqe;
}

}  // namespace nvmf::spec::pcie
