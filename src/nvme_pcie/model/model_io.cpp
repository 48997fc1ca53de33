// ModelController: NVM commands (Read, Write, Flush, Write Zeroes, Dataset Management) and the
// data path every command shares: PRP entries and lists, SGL descriptors, the IOMMU check.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "common/util.h"
#include "nvme_pcie/model/model_controller.h"
#include "spec/pcie.h"

NVMF_LOG_COMPONENT_DECLARE(nvme_model);

namespace nvmf::nvme_pcie::model {

namespace {

using spec::Sqe;
using spec::Status;

// Bounds an SGL walk, so a segment list that points back at itself ends.
constexpr unsigned kSglDescriptorsMax = 65536;
constexpr uint64_t kStoragePageBytes = 4096;

Status generic(uint8_t code) noexcept { return spec::generic_status(code, true); }

// Zeroes namespace bytes. Whole pages are handed back to the kernel (MADV_DONTNEED on private
// anonymous memory reads back as zeroes), so deallocating a large range costs no writes.
void zero_storage(uint8_t* start, uint64_t length_bytes) noexcept {
  const auto begin = reinterpret_cast<uintptr_t>(start);
  const uint64_t end = begin + length_bytes;
  const uint64_t page_begin = align_up(begin, kStoragePageBytes);
  const uint64_t page_end = align_down(end, kStoragePageBytes);
  if (page_begin >= page_end) {
    std::memset(start, 0, length_bytes);
    return;
  }
  std::memset(start, 0, page_begin - begin);
  if (madvise(reinterpret_cast<void*>(page_begin), page_end - page_begin, MADV_DONTNEED) != 0) {
    std::memset(reinterpret_cast<void*>(page_begin), 0, page_end - page_begin);
  }
  std::memset(reinterpret_cast<void*>(page_end), 0, end - page_end);
}

}  // namespace

ModelController::NamespaceState* ModelController::active_namespace_locked(uint32_t nsid) noexcept {
  for (NamespaceState& ns : namespaces_) {
    if (ns.config.nsid == nsid) return ns.active ? &ns : nullptr;
  }
  return nullptr;
}

uint64_t ModelController::transfer_limit_bytes() const noexcept {
  if (opts_.mdts == 0) return 0;
  // MDTS counts pages of the minimum memory page size (CAP.MPSMIN), whatever CC.MPS says.
  return (uint64_t{4096} << opts_.mpsmin) << opts_.mdts;
}

ModelController::Outcome ModelController::execute_io_locked(const Sqe& sqe) noexcept {
  namespace op = spec::nvm_opcode;
  const uint8_t opcode = sqe.opcode;
  if (opcode != op::read && opcode != op::write && opcode != op::flush &&
      opcode != op::write_zeroes && opcode != op::dataset_management) {
    return Outcome{generic(spec::sc_generic::invalid_opcode)};
  }
  // Flush of every namespace: VWC bits 2:1 = 11b say the model supports it.
  if (opcode == op::flush && sqe.nsid == spec::nsid_all && opts_.volatile_write_cache) {
    return Outcome{};
  }
  NamespaceState* ns = active_namespace_locked(sqe.nsid);
  if (ns == nullptr) return Outcome{generic(spec::sc_generic::invalid_namespace_or_format)};
  switch (opcode) {
    case op::read:
    case op::write:
      return read_write_locked(sqe, *ns);
    case op::write_zeroes:
      return write_zeroes_locked(sqe, *ns);
    case op::dataset_management:
      return dataset_management_locked(sqe, *ns);
    default:
      return Outcome{};  // Flush: the data is in RAM already
  }
}

ModelController::Outcome ModelController::read_write_locked(const Sqe& sqe,
                                                            NamespaceState& ns) noexcept {
  const uint64_t lba = spec::rw_starting_lba(sqe);
  const uint32_t blocks = spec::rw_block_count(sqe);
  const uint64_t length_bytes = uint64_t{blocks} * ns.config.block_size_bytes;
  const uint64_t limit_bytes = transfer_limit_bytes();
  if (limit_bytes != 0 && length_bytes > limit_bytes) {
    return Outcome{generic(spec::sc_generic::invalid_field)};
  }
  if (!range_within(lba, blocks, ns.config.block_count)) {
    return Outcome{generic(spec::sc_generic::lba_out_of_range)};
  }
  uint8_t* device = static_cast<uint8_t*>(ns.storage.addr()) + lba * ns.config.block_size_bytes;
  const bool to_host = sqe.opcode == spec::nvm_opcode::read;
  const Status status =
      transfer_locked(sqe, length_bytes, opts_.sgl_supported, to_host, device, length_bytes);
  if (status.is_success()) (to_host ? stats_.read_bytes : stats_.written_bytes) += length_bytes;
  return Outcome{status};
}

ModelController::Outcome ModelController::write_zeroes_locked(const Sqe& sqe,
                                                              NamespaceState& ns) noexcept {
  // No data moves, so MDTS does not apply.
  const uint64_t lba = spec::rw_starting_lba(sqe);
  const uint32_t blocks = spec::rw_block_count(sqe);
  if (!range_within(lba, blocks, ns.config.block_count)) {
    return Outcome{generic(spec::sc_generic::lba_out_of_range)};
  }
  const uint64_t block_bytes = ns.config.block_size_bytes;
  zero_storage(static_cast<uint8_t*>(ns.storage.addr()) + lba * block_bytes, blocks * block_bytes);
  return Outcome{};
}

ModelController::Outcome ModelController::dataset_management_locked(const Sqe& sqe,
                                                                    NamespaceState& ns) noexcept {
  spec::DsmRange ranges[256];  // NR is 8 bits, 0's based
  const uint32_t count = spec::dsm_range_count(sqe);
  const uint64_t length_bytes = uint64_t{count} * sizeof(spec::DsmRange);
  const Status status = transfer_locked(sqe, length_bytes, opts_.sgl_supported, false,
                                        reinterpret_cast<uint8_t*>(ranges), length_bytes);
  if (!status.is_success()) return Outcome{status};
  if (!spec::dsm_deallocate(sqe)) return Outcome{};  // attributes only: hints, ignored
  for (uint32_t i = 0; i < count; ++i) {             // all or nothing: check every range first
    if (!range_within(ranges[i].starting_lba, ranges[i].block_count, ns.config.block_count)) {
      return Outcome{generic(spec::sc_generic::lba_out_of_range)};
    }
  }
  const uint64_t block_bytes = ns.config.block_size_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    zero_storage(static_cast<uint8_t*>(ns.storage.addr()) + ranges[i].starting_lba * block_bytes,
                 uint64_t{ranges[i].block_count} * block_bytes);
  }
  return Outcome{};
}

// --- Data transfer ---

Status ModelController::transfer_locked(const Sqe& sqe, uint64_t length_bytes, bool allow_sgl,
                                        bool to_host, uint8_t* device,
                                        uint64_t device_bytes) noexcept {
  if (length_bytes == 0) return spec::status_success;
  const uint8_t psdt = sqe.psdt();
  // PSDT 10b differs from 01b only in MPTR, and the model's namespaces carry no metadata.
  const bool sgl = psdt == spec::psdt::sgl_mptr_contiguous || psdt == spec::psdt::sgl_mptr_segment;
  if ((psdt != spec::psdt::prp && !sgl) || (sgl && !allow_sgl)) {
    return generic(spec::sc_generic::invalid_field);
  }
  auto walk = [&](auto&& segment) {
    return sgl ? walk_sgl_locked(sqe, length_bytes, segment)
               : walk_prps_locked(sqe, length_bytes, segment);
  };
  // Pass 1 translates every entry; pass 2 moves the bytes, so a fault moves none.
  const Status status = walk([](uint8_t*, uint64_t) {});
  if (!status.is_success()) return status;
  uint64_t done_bytes = 0;
  return walk([&](uint8_t* host, uint64_t bytes) {
    const uint64_t buffered =
        done_bytes < device_bytes ? std::min(bytes, device_bytes - done_bytes) : 0;
    if (to_host) {
      std::memcpy(host, device + done_bytes, buffered);
      std::memset(host + buffered, 0, bytes - buffered);
    } else {
      std::memcpy(device + done_bytes, host, buffered);
    }
    done_bytes += bytes;
  });
}

// "Physical Region Page Entry and List": PRP1 may start anywhere dword-aligned in a page;
// PRP2 is unused when PRP1's page holds the whole transfer, the second page when two pages
// do, and else a PRP list pointer (qword-aligned, any offset) whose page-aligned entries
// describe the rest; a list page's last entry points at the next list page when more follow.
template <typename SegmentFn>
Status ModelController::walk_prps_locked(const Sqe& sqe, uint64_t length_bytes,
                                         SegmentFn&& segment) noexcept {
  const uint64_t page = page_size_bytes_;
  auto piece = [&](uint64_t iova, uint64_t bytes) {
    uint8_t* host = dma_pointer_locked(iova, bytes);
    if (host != nullptr) segment(host, bytes);
    return host != nullptr;
  };
  const uint64_t prp1 = spec::pcie::sqe_prp1(sqe);
  const uint64_t prp2 = spec::pcie::sqe_prp2(sqe);
  if (prp1 % 4 != 0) return generic(spec::sc_generic::prp_offset_invalid);
  const uint64_t first_bytes = std::min(length_bytes, page - prp1 % page);
  if (!piece(prp1, first_bytes)) return generic(spec::sc_generic::data_transfer_error);
  uint64_t remaining_bytes = length_bytes - first_bytes;
  if (remaining_bytes == 0) return spec::status_success;
  if (remaining_bytes <= page) {
    if (prp2 % page != 0) return generic(spec::sc_generic::prp_offset_invalid);
    return piece(prp2, remaining_bytes) ? spec::status_success
                                        : generic(spec::sc_generic::data_transfer_error);
  }
  if (prp2 % sizeof(uint64_t) != 0) return generic(spec::sc_generic::prp_offset_invalid);
  uint64_t entry_iova = prp2;
  while (remaining_bytes > 0) {
    const uint8_t* entry = dma_pointer_locked(entry_iova, sizeof(uint64_t));
    if (entry == nullptr) return generic(spec::sc_generic::data_transfer_error);
    uint64_t value;
    std::memcpy(&value, entry, sizeof(value));
    // Every entry of a list, the chain pointer included, has a page offset of 0.
    if (value % page != 0) return generic(spec::sc_generic::prp_offset_invalid);
    const bool last_in_page = (entry_iova + sizeof(uint64_t)) % page == 0;
    if (last_in_page && remaining_bytes > page) {
      entry_iova = value;  // the next list page
      continue;
    }
    const uint64_t bytes = std::min(remaining_bytes, page);
    if (!piece(value, bytes)) return generic(spec::sc_generic::data_transfer_error);
    remaining_bytes -= bytes;
    entry_iova += sizeof(uint64_t);
  }
  return spec::status_success;
}

// "Scatter Gather List (SGL)", PCIe subset: SGL1 is a Data Block, or a Segment / Last Segment
// pointing at a list of Data Blocks (a Segment list ends with the next Segment or Last
// Segment). All subtypes must be Address. The blocks must describe exactly the transfer
// (SGLS bit 18, longer SGLs, is not supported).
template <typename SegmentFn>
Status ModelController::walk_sgl_locked(const Sqe& sqe, uint64_t length_bytes,
                                        SegmentFn&& segment) noexcept {
  SglWalk walk;
  walk.remaining_bytes = length_bytes;
  walk.next = sqe.sgl1;
  Status status = spec::status_success;
  if (walk.next.type() == spec::sgl_type::data_block) {
    status = sgl_data_block_locked(walk.next, &walk, segment);
  } else {
    while (status.is_success() && !walk.done) status = sgl_segment_locked(&walk, segment);
  }
  if (!status.is_success()) return status;
  return walk.remaining_bytes == 0 ? spec::status_success
                                   : generic(spec::sc_generic::data_sgl_length_invalid);
}

// Walks the segment list walk->next describes; on return walk->next is the following
// segment, or walk->done is set after a Last Segment.
template <typename SegmentFn>
Status ModelController::sgl_segment_locked(SglWalk* walk, SegmentFn& segment) noexcept {
  const spec::SglDescriptor current = walk->next;
  const uint8_t type = current.type();
  if (type != spec::sgl_type::segment && type != spec::sgl_type::last_segment) {
    return generic(spec::sc_generic::sgl_descriptor_type_invalid);
  }
  const uint32_t list_bytes = current.length();
  if (current.subtype() != spec::sgl_subtype::address || list_bytes == 0 ||
      list_bytes % spec::sgl_descriptor_size != 0) {
    return generic(spec::sc_generic::invalid_sgl_segment_descriptor);
  }
  const uint8_t* list = dma_pointer_locked(current.address, list_bytes);
  if (list == nullptr) return generic(spec::sc_generic::data_transfer_error);
  const uint32_t count = list_bytes / spec::sgl_descriptor_size;
  walk->descriptors += count;
  if (walk->descriptors > kSglDescriptorsMax) {
    return generic(spec::sc_generic::invalid_number_of_sgl_descriptors);
  }
  const bool chained = type == spec::sgl_type::segment;
  for (uint32_t i = 0; i < count; ++i) {
    spec::SglDescriptor d;
    std::memcpy(&d, list + size_t{i} * spec::sgl_descriptor_size, sizeof(d));
    const bool last = i + 1 == count;
    const bool points_at_segment =
        d.type() == spec::sgl_type::segment || d.type() == spec::sgl_type::last_segment;
    if (points_at_segment && chained && last) {
      walk->next = d;
      return spec::status_success;
    }
    // Segment descriptors are only valid as the last entry of a Segment list, and a Segment
    // list must end with one.
    if (points_at_segment || (chained && last)) {
      return generic(spec::sc_generic::invalid_sgl_segment_descriptor);
    }
    if (d.type() != spec::sgl_type::data_block) {
      return generic(spec::sc_generic::sgl_descriptor_type_invalid);
    }
    if (const Status status = sgl_data_block_locked(d, walk, segment); !status.is_success()) {
      return status;
    }
  }
  walk->done = true;
  return spec::status_success;
}

template <typename SegmentFn>
Status ModelController::sgl_data_block_locked(const spec::SglDescriptor& d, SglWalk* walk,
                                              SegmentFn& segment) noexcept {
  const uint32_t bytes = d.length();
  if (d.subtype() != spec::sgl_subtype::address) {
    return generic(spec::sc_generic::sgl_descriptor_type_invalid);
  }
  if (bytes > walk->remaining_bytes) return generic(spec::sc_generic::data_sgl_length_invalid);
  if (bytes == 0) return spec::status_success;  // allowed, moves nothing
  uint8_t* host = dma_pointer_locked(d.address, bytes);
  if (host == nullptr) return generic(spec::sc_generic::data_transfer_error);
  segment(host, bytes);
  walk->remaining_bytes -= bytes;
  return spec::status_success;
}

}  // namespace nvmf::nvme_pcie::model
