#include "env/memory.h"

#include <cassert>

#include "common/log.h"

// The env layer's log component, shared by every file of src/env.
NVMF_LOG_COMPONENT(env);

namespace nvmf::env {

void DmaRegion::reset() noexcept {
  if (addr_ == nullptr) return;
  MemoryBackend* backend = backend_;
  void* addr = addr_;
  const size_t size_bytes = size_bytes_;
  void* handle = handle_;
  // Empty first, so a region is never freed twice even if release() logs and re-enters.
  backend_ = nullptr;
  addr_ = nullptr;
  size_bytes_ = 0;
  page_size_bytes_ = 0;
  hugepages_ = false;
  iova_contiguous_ = true;
  iova_base_ = kBadIova;
  handle_ = nullptr;
  backend->untrack(addr);
  backend->release(addr, size_bytes, handle);
}

void DmaRegion::take(DmaRegion& other) noexcept {
  backend_ = other.backend_;
  addr_ = other.addr_;
  size_bytes_ = other.size_bytes_;
  page_size_bytes_ = other.page_size_bytes_;
  hugepages_ = other.hugepages_;
  iova_contiguous_ = other.iova_contiguous_;
  iova_base_ = other.iova_base_;
  handle_ = other.handle_;
  other.backend_ = nullptr;
  other.addr_ = nullptr;
  other.size_bytes_ = 0;
  other.page_size_bytes_ = 0;
  other.hugepages_ = false;
  other.iova_contiguous_ = true;
  other.iova_base_ = kBadIova;
  other.handle_ = nullptr;
}

uint64_t DmaRegion::iova(const void* p) const noexcept {
  // The one-past-the-end address is allowed: it is how callers compute the end of a range.
  const auto offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(addr_);
  assert(addr_ != nullptr && offset <= size_bytes_ && "address outside the DMA region");
  if (addr_ == nullptr || offset > size_bytes_) return kBadIova;
  if (iova_contiguous_) return iova_base_ + offset;
  return backend_->translate_iova(p);
}

DmaRegion MemoryBackend::make_region(const RegionInfo& info) noexcept {
  DmaRegion region;
  region.backend_ = this;
  region.addr_ = info.addr;
  region.size_bytes_ = info.size_bytes;
  region.page_size_bytes_ = info.page_size_bytes;
  region.hugepages_ = info.hugepages;
  region.iova_contiguous_ = info.iova_contiguous;
  region.iova_base_ = info.iova_base;
  region.handle_ = info.handle;
  track(info);
  return region;
}

void MemoryBackend::track(const RegionInfo& info) noexcept {
  std::lock_guard<std::mutex> lock(tracked_mutex_);
  for (size_t i = 0; i < kTrackedRegionsMax; ++i) {
    TrackedRegion& slot = tracked_[i];
    if (slot.base.load(std::memory_order_relaxed) != 0) continue;
    slot.size_bytes.store(info.size_bytes, std::memory_order_relaxed);
    slot.iova_base.store(info.iova_base, std::memory_order_relaxed);
    slot.page_size_bytes.store(info.page_size_bytes, std::memory_order_relaxed);
    slot.iova_contiguous.store(info.iova_contiguous, std::memory_order_relaxed);
    slot.base.store(reinterpret_cast<uintptr_t>(info.addr), std::memory_order_release);
    if (i + 1 > tracked_high_water_.load(std::memory_order_relaxed)) {
      tracked_high_water_.store(i + 1, std::memory_order_release);
    }
    return;
  }
  if (!tracked_overflow_logged_) {
    tracked_overflow_logged_ = true;
    NVMF_WARNLOG(env, "%s memory: more than %zu regions at once; iova_of() does not see the "
                      "newer ones (PCIe I/O from them is bounced)",
                 name(), kTrackedRegionsMax);
  }
}

void MemoryBackend::untrack(void* addr) noexcept {
  std::lock_guard<std::mutex> lock(tracked_mutex_);
  const size_t high_water = tracked_high_water_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < high_water; ++i) {
    if (tracked_[i].base.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(addr)) {
      tracked_[i].base.store(0, std::memory_order_release);
      return;
    }
  }
}

uint64_t MemoryBackend::iova_of(const void* p, size_t length_bytes) const noexcept {
  if (length_bytes == 0) length_bytes = 1;
  const auto address = reinterpret_cast<uintptr_t>(p);
  const size_t high_water = tracked_high_water_.load(std::memory_order_acquire);
  for (size_t i = 0; i < high_water; ++i) {
    const TrackedRegion& slot = tracked_[i];
    const uintptr_t base = slot.base.load(std::memory_order_acquire);
    if (base == 0) continue;
    const size_t size_bytes = slot.size_bytes.load(std::memory_order_relaxed);
    const uintptr_t offset = address - base;  // wraps for an address below base
    if (offset >= size_bytes || length_bytes > size_bytes - offset) continue;
    if (slot.iova_contiguous.load(std::memory_order_relaxed)) {
      return slot.iova_base.load(std::memory_order_relaxed) + offset;
    }
    // Not contiguous (IOVA-as-PA over scattered pages): only a range inside one page of the
    // region has a single IOVA.
    const size_t page = slot.page_size_bytes.load(std::memory_order_relaxed);
    if (page == 0 || offset / page != (offset + length_bytes - 1) / page) return kBadIova;
    return translate_iova(p);
  }
  return kBadIova;
}

}  // namespace nvmf::env
