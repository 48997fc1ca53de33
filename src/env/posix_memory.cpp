#include "env/posix_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/util.h"

NVMF_LOG_COMPONENT_DECLARE(env);

namespace nvmf::env {

namespace {

constexpr const char* kHugepagesOnMmapFailed =
    "mmap MAP_HUGETLB failed: reserve more with /proc/sys/vm/nr_hugepages or set hugepages=off";
constexpr const char* kHugepagesOnNoneFree =
    "hugepages=on but HugePages_Free is 0 in /proc/meminfo: reserve some with "
    "/proc/sys/vm/nr_hugepages or set hugepages=auto|off";
constexpr const char* kNotEnoughAvailable =
    "not enough MemAvailable in /proc/meminfo for a populated mapping: ask for less memory "
    "(queue depth, buffer count) or free some";
constexpr const char* kMmapFailed =
    "mmap failed: out of memory or address space (check ulimit -v and vm.overcommit_memory, "
    "or ask for less memory)";

const char* errno_text(int os_errno, char* buffer, size_t size) noexcept {
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  return strerror_r(os_errno, buffer, size);
}

// Parses "<value> kB" after a "Field:" label. 0 when the label is missing.
size_t meminfo_field(const char* text, const char* label, bool kilobytes) noexcept {
  const char* at = strstr(text, label);
  if (at == nullptr) return 0;
  at += strlen(label);
  char* end = nullptr;
  unsigned long long value = strtoull(at, &end, 10);
  if (end == at) return 0;
  return static_cast<size_t>(kilobytes ? value * 1024ULL : value);
}

bool checked_align_up(size_t value, size_t alignment, size_t* result) noexcept {
  if (value > SIZE_MAX - (alignment - 1)) return false;
  *result = static_cast<size_t>(align_up(value, alignment));
  return true;
}

}  // namespace

const char* hugepage_mode_name(HugepageMode mode) noexcept {
  switch (mode) {
    case HugepageMode::automatic:
      return "auto";
    case HugepageMode::on:
      return "on";
    case HugepageMode::off:
      return "off";
  }
  return "?";
}

bool hugepage_mode_parse(const char* text, HugepageMode* mode) noexcept {
  for (HugepageMode candidate : {HugepageMode::automatic, HugepageMode::on, HugepageMode::off}) {
    if (strcmp(text, hugepage_mode_name(candidate)) == 0) {
      *mode = candidate;
      return true;
    }
  }
  return false;
}

std::string PosixMemoryOpts::to_json() const {
  std::string json = "{\"hugepages\":\"";
  json += hugepage_mode_name(hugepages);
  json += "\",\"populate\":";
  json += populate ? "true" : "false";
  json += ",\"check_available_memory\":";
  json += check_available_memory ? "true" : "false";
  json += ",\"meminfo_path\":\"";
  json += meminfo_path;  // a path: no quotes or backslashes expected
  json += "\"}";
  return json;
}

MeminfoSnapshot read_meminfo(const char* path) noexcept {
  MeminfoSnapshot snapshot;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return snapshot;
  // /proc/meminfo is about 1.5 KiB; the fields we need are in its first half.
  char text[8192];
  size_t length = 0;
  while (length < sizeof(text) - 1) {
    ssize_t n = read(fd, text + length, sizeof(text) - 1 - length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    length += static_cast<size_t>(n);
  }
  close(fd);
  text[length] = '\0';
  snapshot.readable = length > 0;
  snapshot.hugepages_total = meminfo_field(text, "HugePages_Total:", false);
  snapshot.hugepages_free = meminfo_field(text, "HugePages_Free:", false);
  snapshot.hugepage_size_bytes = meminfo_field(text, "Hugepagesize:", true);
  snapshot.mem_available_bytes = meminfo_field(text, "MemAvailable:", true);
  return snapshot;
}

Result<std::unique_ptr<PosixMemoryBackend>> PosixMemoryBackend::create(
    const PosixMemoryOpts& opts) {
  const MeminfoSnapshot meminfo = read_meminfo(opts.meminfo_path.c_str());
  const bool hugepages_free = meminfo.hugepages_free > 0 && meminfo.hugepage_size_bytes > 0;
  const auto normal_page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bool use_hugepages = false;
  switch (opts.hugepages) {
    case HugepageMode::off:
      break;
    case HugepageMode::on:
      if (!hugepages_free) {
        NVMF_ERRLOG(env, "%s (read from %s: %zu free of %zu)", kHugepagesOnNoneFree,
                    opts.meminfo_path.c_str(), meminfo.hugepages_free, meminfo.hugepages_total);
        return Unexpected(Errc::no_memory, kHugepagesOnNoneFree, ENOMEM);
      }
      use_hugepages = true;
      break;
    case HugepageMode::automatic:
      use_hugepages = hugepages_free;
      if (!use_hugepages) {
        NVMF_NOTICELOG(env,
                       "no hugepages reserved (HugePages_Free 0 in %s): using normal %zu-byte "
                       "pages; reserve some with /proc/sys/vm/nr_hugepages for fewer TLB misses",
                       opts.meminfo_path.c_str(), normal_page);
      }
      break;
  }
  const size_t page = use_hugepages ? meminfo.hugepage_size_bytes : normal_page;
  if (!is_power_of_two(page)) {
    return Unexpected(Errc::invalid_argument, "page size from /proc/meminfo is not a power of two");
  }
  std::unique_ptr<PosixMemoryBackend> backend(
      new PosixMemoryBackend(opts, use_hugepages, page));  // setup-path
  NVMF_INFOLOG(env, "posix memory backend: %s pages of %zu bytes",
               use_hugepages ? "huge" : "normal", page);
  return backend;
}

PosixMemoryBackend::PosixMemoryBackend(const PosixMemoryOpts& opts, bool hugepages,
                                       size_t page_size_bytes)
    : opts_(opts),
      hugepages_(hugepages),
      page_size_bytes_(page_size_bytes),
      normal_page_size_bytes_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {}

PosixMemoryBackend::~PosixMemoryBackend() {
  assert(regions_in_use() == 0 && "a DmaRegion outlives its posix backend");
}

void* PosixMemoryBackend::map_aligned(size_t size_bytes, size_t alignment_bytes,
                                      size_t page_size_bytes, int extra_flags) noexcept {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | extra_flags;
  if (alignment_bytes <= page_size_bytes) {
    void* addr = mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    return addr == MAP_FAILED ? nullptr : addr;
  }
  // mmap only guarantees page alignment: map the slack too, then unmap head and tail. Both
  // are page multiples because alignment and page size are powers of two.
  const size_t slack = alignment_bytes - page_size_bytes;
  if (size_bytes > SIZE_MAX - slack) {
    errno = ENOMEM;
    return nullptr;
  }
  // Populate only what is kept: map the slack without MAP_POPULATE, then fault in the rest.
  void* raw =
      mmap(nullptr, size_bytes + slack, PROT_READ | PROT_WRITE, flags & ~MAP_POPULATE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const auto aligned = static_cast<uintptr_t>(align_up(start, alignment_bytes));
  const size_t head = aligned - start;
  const size_t tail = slack - head;
  if (head > 0) munmap(raw, head);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size_bytes), tail);
  void* addr = reinterpret_cast<void*>(aligned);
  if ((flags & MAP_POPULATE) != 0) {
    // MADV_POPULATE_WRITE (Linux 5.14) faults pages in without writing them; fall back to
    // touching one byte per page, which anonymous zero pages make harmless.
#ifdef MADV_POPULATE_WRITE
    if (madvise(addr, size_bytes, MADV_POPULATE_WRITE) == 0) return addr;
#endif
    for (size_t offset = 0; offset < size_bytes; offset += page_size_bytes) {
      static_cast<volatile char*>(addr)[offset] = 0;
    }
  }
  return addr;
}

Result<DmaRegion> PosixMemoryBackend::allocate(size_t size_bytes, size_t alignment_bytes) noexcept {
  if (size_bytes == 0) return Unexpected(Errc::invalid_argument, "allocate: size_bytes is 0");
  if (alignment_bytes != 0 && !is_power_of_two(alignment_bytes)) {
    return Unexpected(Errc::invalid_argument, "allocate: alignment_bytes is not a power of two");
  }
  const int populate = opts_.populate ? MAP_POPULATE : 0;
  char errno_buffer[128];

  if (hugepages_) {
    size_t rounded = 0;
    if (!checked_align_up(size_bytes, page_size_bytes_, &rounded)) {
      return Unexpected(Errc::invalid_argument, "allocate: size_bytes overflows when rounded");
    }
    void* addr = map_aligned(rounded, alignment_bytes, page_size_bytes_, MAP_HUGETLB | populate);
    if (addr != nullptr) {
      regions_in_use_.fetch_add(1, std::memory_order_relaxed);
      bytes_in_use_.fetch_add(rounded, std::memory_order_relaxed);
      return make_region({.addr = addr,
                          .size_bytes = rounded,
                          .page_size_bytes = page_size_bytes_,
                          .hugepages = true,
                          .iova_contiguous = true,
                          .iova_base = reinterpret_cast<uintptr_t>(addr),
                          .handle = nullptr});
    }
    const int os_errno = errno;
    if (opts_.hugepages == HugepageMode::on) {
      NVMF_ERRLOG(env,
                  "mmap MAP_HUGETLB of %zu bytes failed (%s): reserve more with "
                  "/proc/sys/vm/nr_hugepages or set hugepages=off",
                  rounded, errno_text(os_errno, errno_buffer, sizeof(errno_buffer)));
      return Unexpected(Errc::no_memory, kHugepagesOnMmapFailed, os_errno);
    }
    NVMF_NOTICELOG(env,
                   "mmap MAP_HUGETLB of %zu bytes failed (%s): falling back to normal "
                   "pages; reserve more with /proc/sys/vm/nr_hugepages",
                   rounded, errno_text(os_errno, errno_buffer, sizeof(errno_buffer)));
  }

  size_t rounded = 0;
  if (!checked_align_up(size_bytes, normal_page_size_bytes_, &rounded)) {
    return Unexpected(Errc::invalid_argument, "allocate: size_bytes overflows when rounded");
  }
  if (opts_.populate && opts_.check_available_memory) {
    const MeminfoSnapshot meminfo = read_meminfo(opts_.meminfo_path.c_str());
    if (meminfo.readable && meminfo.mem_available_bytes > 0 &&
        rounded > meminfo.mem_available_bytes) {
      NVMF_ERRLOG(env, "refusing a populated mapping of %zu bytes: MemAvailable is %zu bytes",
                  rounded, meminfo.mem_available_bytes);
      return Unexpected(Errc::no_memory, kNotEnoughAvailable, ENOMEM);
    }
  }
  void* addr = map_aligned(rounded, alignment_bytes, normal_page_size_bytes_, populate);
  if (addr == nullptr) {
    const int os_errno = errno;
    NVMF_ERRLOG(env, "mmap of %zu bytes (alignment %zu) failed: %s", rounded, alignment_bytes,
                errno_text(os_errno, errno_buffer, sizeof(errno_buffer)));
    return Unexpected(Errc::no_memory, kMmapFailed, os_errno);
  }
  regions_in_use_.fetch_add(1, std::memory_order_relaxed);
  bytes_in_use_.fetch_add(rounded, std::memory_order_relaxed);
  return make_region({.addr = addr,
                      .size_bytes = rounded,
                      .page_size_bytes = normal_page_size_bytes_,
                      .hugepages = false,
                      .iova_contiguous = true,
                      .iova_base = reinterpret_cast<uintptr_t>(addr),
                      .handle = nullptr});
}

void PosixMemoryBackend::release(void* addr, size_t size_bytes, void* handle) noexcept {
  (void)handle;
  if (munmap(addr, size_bytes) != 0) {
    char errno_buffer[128];
    NVMF_ERRLOG(env, "munmap(%p, %zu) failed: %s", addr, size_bytes,
                errno_text(errno, errno_buffer, sizeof(errno_buffer)));
  }
  regions_in_use_.fetch_sub(1, std::memory_order_relaxed);
  bytes_in_use_.fetch_sub(size_bytes, std::memory_order_relaxed);
}

}  // namespace nvmf::env
