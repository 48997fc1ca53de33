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
  return region;
}

}  // namespace nvmf::env
