// Memory that RDMA can register and devices can DMA to, behind one small interface.
//
// A MemoryBackend hands out DmaRegions: page-aligned, pinned-by-touch (populated) ranges that
// free themselves through their backend when destroyed. Two backends exist:
//   - PosixMemoryBackend (posix_memory.h): mmap, MAP_HUGETLB when hugepages are reserved.
//     Never starts DPDK, so the initiator library can live in any application.
//   - DpdkMemoryBackend (dpdk_env.h, target nvmf_env_dpdk): starts DPDK's EAL, memory from
//     rte_memzone with real IOVAs for the userspace PCIe driver.
//
// Threads: allocate() and region destruction are setup-path calls (system calls, locks inside
// DPDK) and may run on any thread. DmaRegion accessors are plain reads, callable from the
// thread that owns the region. A backend must outlive every region it handed out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "common/result.h"

namespace nvmf::env {

// The IOVA returned for an address outside a region (same value as DPDK's RTE_BAD_IOVA).
inline constexpr uint64_t kBadIova = ~uint64_t{0};

class MemoryBackend;

// One allocation from a MemoryBackend. RAII and move-only; a default-constructed or moved-from
// region is empty (addr() == nullptr) and frees nothing.
class DmaRegion {
 public:
  DmaRegion() noexcept = default;
  DmaRegion(const DmaRegion&) = delete;
  DmaRegion& operator=(const DmaRegion&) = delete;
  DmaRegion(DmaRegion&& other) noexcept { take(other); }
  DmaRegion& operator=(DmaRegion&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  ~DmaRegion() { reset(); }

  // Frees the memory now (idempotent); the region becomes empty.
  void reset() noexcept;

  bool empty() const noexcept { return addr_ == nullptr; }
  explicit operator bool() const noexcept { return addr_ != nullptr; }

  void* addr() const noexcept { return addr_; }
  // The usable size: the request rounded up to the backend's granularity (the page size).
  size_t size_bytes() const noexcept { return size_bytes_; }
  // The size of the pages backing the region (4 KiB, or the hugepage size).
  size_t page_size_bytes() const noexcept { return page_size_bytes_; }
  bool hugepages() const noexcept { return hugepages_; }
  // True when iova(p) == iova(addr()) + (p - addr()) across the whole region, so one
  // mapping (one IOMMU entry, one PRP base) describes it.
  bool iova_contiguous() const noexcept { return iova_contiguous_; }
  // The backend that allocated the region (nullptr when empty).
  MemoryBackend* backend() const noexcept { return backend_; }

  bool contains(const void* p, size_t length_bytes = 1) const noexcept {
    const auto offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(addr_);
    // Unsigned wrap makes an address below addr_ a huge offset, which fails the check.
    return addr_ != nullptr && offset <= size_bytes_ && length_bytes <= size_bytes_ - offset;
  }

  // The address a device uses for `p` (p in [addr(), addr() + size_bytes()]): the virtual
  // address for posix memory (RDMA registers virtual memory), the IOVA DPDK programmed into
  // the IOMMU (or the physical address in IOVA-as-PA mode) for DPDK memory. Asserts in debug
  // builds and returns kBadIova for an address outside the region. One add for contiguous
  // regions; a backend call only for DPDK regions that are not IOVA-contiguous.
  uint64_t iova(const void* p) const noexcept;

 private:
  friend class MemoryBackend;

  void take(DmaRegion& other) noexcept;

  MemoryBackend* backend_ = nullptr;
  void* addr_ = nullptr;
  size_t size_bytes_ = 0;
  size_t page_size_bytes_ = 0;
  bool hugepages_ = false;
  bool iova_contiguous_ = true;  // iova(p) == iova_base_ + (p - addr_)
  uint64_t iova_base_ = kBadIova;
  void* handle_ = nullptr;  // backend-private (the rte_memzone for DPDK)
};

// The narrow interface every consumer (memreg, bdev, transports) sees.
class MemoryBackend {
 public:
  MemoryBackend() = default;
  MemoryBackend(const MemoryBackend&) = delete;
  MemoryBackend& operator=(const MemoryBackend&) = delete;
  virtual ~MemoryBackend() = default;

  // Allocates size_bytes (rounded up to the page size) aligned to alignment_bytes (a power of
  // two; 0 means the page size; larger than a page is allowed). The memory is zeroed and
  // populated. Errors: invalid_argument (size 0, bad alignment, size overflow), no_memory (the
  // detail names the knob: hugepage reservation, memory_mb, ...; the failure is also logged).
  virtual Result<DmaRegion> allocate(size_t size_bytes, size_t alignment_bytes) noexcept = 0;

  virtual const char* name() const noexcept = 0;
  // True when allocations are expected to come from hugepages.
  virtual bool hugepages_in_use() const noexcept = 0;

  // Regions handed out and not yet freed (for leak checks and statistics).
  virtual size_t regions_in_use() const noexcept = 0;

  // The device address of [p, p + length_bytes) when the range lies inside one live region of
  // this backend and is IOVA-contiguous there, else kBadIova. Any thread, lock-free (a scan
  // of at most kTrackedRegionsMax entries): the PCIe driver calls it per data segment to
  // decide between zero copy and a bounce buffer. A region must not be freed while another
  // thread may still look up addresses inside it (its I/O is over by then). Regions beyond
  // kTrackedRegionsMax at once are not found (logged once): they still work, but bounce.
  uint64_t iova_of(const void* p, size_t length_bytes) const noexcept;
  static constexpr size_t kTrackedRegionsMax = 512;

 protected:
  struct RegionInfo {
    void* addr = nullptr;
    size_t size_bytes = 0;
    size_t page_size_bytes = 0;
    bool hugepages = false;
    bool iova_contiguous = true;
    uint64_t iova_base = kBadIova;
    void* handle = nullptr;
  };
  // Backends build regions through this, so DmaRegion's constructor stays private. It also
  // enters the region in the table iova_of() reads.
  DmaRegion make_region(const RegionInfo& info) noexcept;

  // Frees what make_region() described. Called exactly once per region.
  virtual void release(void* addr, size_t size_bytes, void* handle) noexcept = 0;
  // Per-address translation for regions that are not IOVA-contiguous.
  virtual uint64_t translate_iova(const void* p) const noexcept {
    (void)p;
    return kBadIova;
  }

 private:
  friend class DmaRegion;

  // iova_of()'s table. A slot is live while base != 0; the writer (under tracked_mutex_)
  // stores the other fields before publishing base with release order.
  struct TrackedRegion {
    std::atomic<uintptr_t> base{0};
    std::atomic<size_t> size_bytes{0};
    std::atomic<uint64_t> iova_base{kBadIova};
    std::atomic<size_t> page_size_bytes{0};
    std::atomic<bool> iova_contiguous{true};
  };
  void track(const RegionInfo& info) noexcept;
  void untrack(void* addr) noexcept;

  std::mutex tracked_mutex_;
  std::atomic<size_t> tracked_high_water_{0};  // slots [0, high water) may be live
  bool tracked_overflow_logged_ = false;
  TrackedRegion tracked_[kTrackedRegionsMax];
};

}  // namespace nvmf::env
