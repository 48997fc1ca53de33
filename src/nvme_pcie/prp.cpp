#include "nvme_pcie/prp.h"

namespace nvmf::nvme_pcie {
namespace {

constexpr uint64_t kPageMask = spec::pcie::memory_page_size_bytes - 1;

Result<void> check_alignment(const PrpSegment* segments, unsigned segment_count) noexcept {
  if (segment_count == 0) return Unexpected(Errc::invalid_argument, "no data segment");
  if ((segments[0].iova & 0x3) != 0) {
    return Unexpected(Errc::invalid_argument, "PRP1 must be dword aligned");
  }
  for (unsigned i = 0; i < segment_count; ++i) {
    const PrpSegment& segment = segments[i];
    if (segment.length_bytes == 0) return Unexpected(Errc::invalid_argument, "empty segment");
    if (i > 0 && (segment.iova & kPageMask) != 0) {
      return Unexpected(Errc::invalid_argument, "a later segment does not start on a page");
    }
    if (i + 1 < segment_count && ((segment.iova + segment.length_bytes) & kPageMask) != 0) {
      return Unexpected(Errc::invalid_argument, "a segment before the last does not end on a page");
    }
  }
  return {};
}

// Writes entries into list pages in order, chaining a page to the next when it fills up with
// entries still to come.
class ListWriter {
 public:
  ListWriter(const PrpListPage* pages, uint32_t page_count, uint32_t entries_total) noexcept
      : pages_(pages), page_count_(page_count), remaining_(entries_total) {}

  bool add(uint64_t entry) noexcept {
    if (slot_ == spec::pcie::prp_entries_per_page - 1 && remaining_ > 1) {
      // Last slot of a page with more than one entry to go: it becomes the chain pointer.
      if (page_ + 1 >= page_count_) return false;
      pages_[page_].entries[slot_] = pages_[page_ + 1].iova;
      ++page_;
      slot_ = 0;
    }
    pages_[page_].entries[slot_++] = entry;
    --remaining_;
    return true;
  }
  uint32_t pages_used() const noexcept { return page_ + 1; }

 private:
  const PrpListPage* pages_;
  uint32_t page_count_;
  uint32_t remaining_;
  uint32_t page_ = 0;
  uint32_t slot_ = 0;
};

}  // namespace

Result<void> build_prps(const PrpSegment* segments, unsigned segment_count,
                        const PrpListPage* list_pages, uint32_t list_page_count,
                        PrpPointers* out) noexcept {
  if (auto aligned = check_alignment(segments, segment_count); !aligned) return aligned;
  // Entries: the first segment's start, then every page boundary inside the transfer.
  uint32_t entries = 0;
  for (unsigned i = 0; i < segment_count; ++i) {
    const uint64_t start = segments[i].iova & ~kPageMask;
    const uint64_t end = segments[i].iova + segments[i].length_bytes;
    entries += static_cast<uint32_t>((end - start + kPageMask) / spec::pcie::memory_page_size_bytes);
  }
  *out = PrpPointers{};
  out->prp1 = segments[0].iova;
  if (entries == 1) return {};
  const uint32_t pages_needed = prp_list_pages_for(entries);
  if (pages_needed > list_page_count) {
    return Unexpected(Errc::out_of_range, "transfer needs more PRP list pages than reserved");
  }
  ListWriter writer(list_pages, list_page_count, entries - 1);
  uint64_t second_entry = 0;
  uint32_t written = 0;
  for (unsigned i = 0; i < segment_count; ++i) {
    const uint64_t end = segments[i].iova + segments[i].length_bytes;
    uint64_t page = (segments[i].iova & ~kPageMask) + (i == 0 ? spec::pcie::memory_page_size_bytes : 0);
    for (; page < end; page += spec::pcie::memory_page_size_bytes) {
      if (++written == 1) second_entry = page;
      if (entries > 2 && !writer.add(page)) {
        return Unexpected(Errc::out_of_range, "PRP list pages ran out");
      }
    }
  }
  if (entries == 2) {
    out->prp2 = second_entry;
  } else {
    out->prp2 = list_pages[0].iova;
    out->list_pages_used = writer.pages_used();
  }
  return {};
}

}  // namespace nvmf::nvme_pcie
