// PRP construction ("Physical Region Page Entry and List"): turns a transfer, given as device
// address segments, into PRP1, PRP2 and as many PRP list pages as it needs. Pure functions over
// caller memory: no allocation, any thread.
//
// What PRPs can express: the first segment may start anywhere dword-aligned; every later
// segment must start on a 4 KiB page boundary and every segment but the last must end on one
// (so the data is a run of whole pages with a ragged first and last page). Anything else
// answers invalid_argument and the caller bounces the data through one contiguous buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.h"
#include "spec/pcie.h"

namespace nvmf::nvme_pcie {

struct PrpSegment {
  uint64_t iova = 0;
  uint32_t length_bytes = 0;
};

// One PRP list page: where the driver writes it, and the address the device reads it at.
struct PrpListPage {
  uint64_t* entries = nullptr;  // spec::pcie::prp_entries_per_page entries, page-aligned
  uint64_t iova = 0;
};

struct PrpPointers {
  uint64_t prp1 = 0;
  uint64_t prp2 = 0;
  uint32_t list_pages_used = 0;
};

// Pages a transfer of `length_bytes` can touch at most (a ragged start adds one).
constexpr uint32_t prp_pages_max(uint32_t length_bytes) noexcept {
  return (length_bytes + spec::pcie::memory_page_size_bytes - 1) /
             spec::pcie::memory_page_size_bytes +
         1;
}

// List pages needed for `entries` PRP entries: PRP1 takes the first; one more fits in PRP2;
// beyond that PRP2 points at a list whose pages hold 511 entries plus a pointer to the next
// page, and the last page holds up to 512.
constexpr uint32_t prp_list_pages_for(uint32_t entries) noexcept {
  if (entries <= 2) return 0;
  uint32_t in_lists = entries - 1;
  uint32_t pages = 1;
  while (in_lists > spec::pcie::prp_entries_per_page) {
    in_lists -= spec::pcie::prp_entries_per_page - 1;
    ++pages;
  }
  return pages;
}

// Fills *out from `segments`. Errors: invalid_argument (empty, zero-length segment, an
// alignment PRPs cannot express), out_of_range (more list pages needed than `list_page_count`).
Result<void> build_prps(const PrpSegment* segments, unsigned segment_count,
                        const PrpListPage* list_pages, uint32_t list_page_count,
                        PrpPointers* out) noexcept;

}  // namespace nvmf::nvme_pcie
