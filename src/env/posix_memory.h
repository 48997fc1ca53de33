// The posix memory backend: anonymous mmap, with MAP_HUGETLB when hugepages are reserved.
//
// This is the default for the initiator library and for a target without PCIe devices: RDMA
// registers virtual memory, so no IOVA translation and no DPDK are needed, and there is no
// hugepage pre-step. It never starts DPDK's EAL, so it can live in an application that runs
// its own DPDK or none.
//
// Threads: create() and allocate() may be called from any thread (mmap is thread-safe and the
// counters are atomic). The backend must outlive its regions.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "common/result.h"
#include "env/memory.h"

namespace nvmf::env {

enum class HugepageMode {
  automatic,  // hugepages when /proc/meminfo shows free ones, normal pages otherwise (notice)
  on,         // hugepages or an error that names /proc/sys/vm/nr_hugepages
  off,        // normal pages only
};

const char* hugepage_mode_name(HugepageMode mode) noexcept;  // "auto", "on", "off"
// Parses "auto", "on" or "off"; false for anything else.
bool hugepage_mode_parse(const char* text, HugepageMode* mode) noexcept;

struct PosixMemoryOpts {
  HugepageMode hugepages = HugepageMode::automatic;
  // Pre-fault the pages at allocation (MAP_POPULATE), so the first I/O does not page-fault
  // and RDMA registration does not have to fault them in either.
  bool populate = true;
  // Refuse (no_memory) a populated allocation larger than MemAvailable instead of letting
  // MAP_POPULATE wake the OOM killer. Containers with a cgroup limit below MemAvailable are
  // not covered: the check reads /proc/meminfo only.
  bool check_available_memory = true;
  // Where HugePages_Free, Hugepagesize and MemAvailable are read. A seam for tests.
  std::string meminfo_path = "/proc/meminfo";

  // {"hugepages":"auto","populate":true,...}
  std::string to_json() const;
};

// What /proc/meminfo says about memory (sizes in bytes; 0 when a field is missing).
struct MeminfoSnapshot {
  bool readable = false;
  size_t hugepages_total = 0;
  size_t hugepages_free = 0;
  size_t hugepage_size_bytes = 0;
  size_t mem_available_bytes = 0;
};
MeminfoSnapshot read_meminfo(const char* path) noexcept;

class PosixMemoryBackend final : public MemoryBackend {
 public:
  // Decides between hugepages and normal pages from opts.hugepages and /proc/meminfo.
  // Errors: no_memory when hugepages=on and none are free (detail names nr_hugepages).
  static Result<std::unique_ptr<PosixMemoryBackend>> create(const PosixMemoryOpts& opts);

  ~PosixMemoryBackend() override;

  // Rounds size_bytes up to page_size_bytes() (the hugepage size when hugepages are in use).
  // With hugepages=auto a failed MAP_HUGETLB falls back to normal pages for that allocation
  // (notice in the log); with hugepages=on it is an error naming the knob.
  Result<DmaRegion> allocate(size_t size_bytes, size_t alignment_bytes) noexcept override;
  const char* name() const noexcept override { return "posix"; }
  bool hugepages_in_use() const noexcept override { return hugepages_; }
  size_t regions_in_use() const noexcept override {
    return regions_in_use_.load(std::memory_order_relaxed);
  }

  size_t page_size_bytes() const noexcept { return page_size_bytes_; }
  size_t bytes_in_use() const noexcept { return bytes_in_use_.load(std::memory_order_relaxed); }
  const PosixMemoryOpts& opts() const noexcept { return opts_; }

 protected:
  void release(void* addr, size_t size_bytes, void* handle) noexcept override;

 private:
  PosixMemoryBackend(const PosixMemoryOpts& opts, bool hugepages, size_t page_size_bytes);

  // mmap of `size_bytes` aligned to `alignment_bytes`; nullptr (errno set) on failure.
  static void* map_aligned(size_t size_bytes, size_t alignment_bytes, size_t page_size_bytes,
                           int extra_flags) noexcept;

  PosixMemoryOpts opts_;
  bool hugepages_ = false;
  size_t page_size_bytes_ = 0;
  size_t normal_page_size_bytes_ = 0;
  std::atomic<size_t> regions_in_use_{0};
  std::atomic<size_t> bytes_in_use_{0};
};

}  // namespace nvmf::env
