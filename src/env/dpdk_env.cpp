// The only file of the project that includes DPDK headers (with src/env's tests).
#include <rte_config.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_vfio.h>  // includes <linux/vfio.h> for struct vfio_device_info

#include <sched.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/util.h"
#include "env/dpdk_env.h"

NVMF_LOG_COMPONENT_DECLARE(env);
// DPDK's own log lines ("EAL: ..."), forwarded from rte_log's stream.
NVMF_LOG_COMPONENT(dpdk);

namespace nvmf::env {

namespace {

// EAL's life in this process. DPDK can start EAL once: after rte_eal_cleanup(), and after
// most rte_eal_init() failures, a second rte_eal_init() fails or misbehaves (its option
// parser keeps state), so failed and stopped are final.
enum class EalState : int { idle, starting, running, failed, stopped };
std::atomic<EalState> g_eal_state{EalState::idle};

// Granularity of DPDK regions: the normal page, so small queues do not each take a hugepage
// (memzones share hugepages) and every region is page-aligned for PRPs.
constexpr size_t kDpdkRegionAlignmentBytes = 4096;

// --- DPDK log -> our log ------------------------------------------------------------------

FILE* g_dpdk_log_stream = nullptr;

LogLevel from_rte_level(int rte_level) noexcept {
  if (rte_level <= static_cast<int>(RTE_LOG_ERR)) return LogLevel::error;
  if (rte_level == static_cast<int>(RTE_LOG_WARNING)) return LogLevel::warn;
  if (rte_level == static_cast<int>(RTE_LOG_NOTICE)) return LogLevel::notice;
  if (rte_level == static_cast<int>(RTE_LOG_INFO)) return LogLevel::info;
  return LogLevel::debug;
}

unsigned to_rte_level(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::error:
      return RTE_LOG_ERR;
    case LogLevel::warn:
      return RTE_LOG_WARNING;
    case LogLevel::notice:
      return RTE_LOG_NOTICE;
    case LogLevel::info:
      return RTE_LOG_INFO;
    case LogLevel::debug:
      return RTE_LOG_DEBUG;
  }
  return RTE_LOG_ERR;
}

// fopencookie write hook: rte_vlog() formats into the FILE and flushes once per message.
ssize_t dpdk_log_write(void*, const char* buffer, size_t size) {
  size_t length = size;
  while (length > 0 && (buffer[length - 1] == '\n' || buffer[length - 1] == '\r')) --length;
  if (length == 0) return static_cast<ssize_t>(size);
  const LogLevel level = from_rte_level(rte_log_cur_msg_loglevel());
  if (log_enabled(nvmf_log_component_dpdk, level)) {
    log_write(nvmf_log_component_dpdk, level, __FILE__, __LINE__, "%.*s", static_cast<int>(length),
              buffer);
  }
  return static_cast<ssize_t>(size);
}

void redirect_dpdk_log() noexcept {
  if (g_dpdk_log_stream != nullptr) return;
  cookie_io_functions_t functions{};
  functions.write = dpdk_log_write;
  g_dpdk_log_stream = fopencookie(nullptr, "w", functions);
  if (g_dpdk_log_stream == nullptr) return;  // DPDK keeps logging to its default stream
  setvbuf(g_dpdk_log_stream, nullptr, _IOLBF, 0);
  rte_openlog_stream(g_dpdk_log_stream);
}

void restore_dpdk_log() noexcept {
  if (g_dpdk_log_stream == nullptr) return;
  rte_openlog_stream(nullptr);
  fclose(g_dpdk_log_stream);
  g_dpdk_log_stream = nullptr;
}

// --- option checks -------------------------------------------------------------------------

bool is_core_list(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!(c >= '0' && c <= '9') && c != ',' && c != '-') return false;
  }
  return true;
}

bool is_file_prefix(const std::string& text) {
  if (text.empty() || text.size() > 64) return false;
  for (char c : text) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return text != "." && text != "..";
}

// The first CPU the calling thread may run on: EAL's default (all detected cores) would make
// it spawn a worker thread per core.
int first_allowed_cpu() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return 0;
}

// /var/run/dpdk/<prefix> outlives rte_eal_cleanup() and failed starts. Remove it when empty
// (rmdir fails harmlessly otherwise) so per-process test prefixes do not pile up.
void remove_runtime_dir(const char* path) noexcept {
  if (path != nullptr && path[0] != '\0') rmdir(path);
}

Error init_error(int rte_error) noexcept {
  switch (rte_error) {
    case EACCES:
      return Error(Errc::no_memory,
                   "rte_eal_init failed: no usable hugepages (reserve some with "
                   "/proc/sys/vm/nr_hugepages and mount hugetlbfs, run as root, or set no_huge)",
                   rte_error);
    case ENOMEM:
      return Error(Errc::no_memory,
                   "rte_eal_init failed: out of memory (reserve more hugepages with "
                   "/proc/sys/vm/nr_hugepages or lower memory_mb)",
                   rte_error);
    case EINVAL:
      return Error(Errc::invalid_argument,
                   "rte_eal_init failed: DPDK rejected the EAL arguments (see the log)", rte_error);
    case EALREADY:
      return Error(Errc::already_exists,
                   "DPDK EAL is already running in this process (started outside nvmf)", rte_error);
    default:
      return Error(errno_to_errc(rte_error),
                   "rte_eal_init failed (the log has DPDK's rte_errno text)", rte_error);
  }
}

}  // namespace

const char* iova_mode_name(IovaMode mode) noexcept {
  switch (mode) {
    case IovaMode::automatic:
      return "auto";
    case IovaMode::pa:
      return "pa";
    case IovaMode::va:
      return "va";
  }
  return "?";
}

std::string DpdkOpts::to_json() const {
  auto quoted = [](const std::string& text) { return "\"" + text + "\""; };
  auto boolean = [](bool value) { return std::string(value ? "true" : "false"); };
  std::string json = "{";
  json += "\"core_list\":" + quoted(core_list);
  json += ",\"main_lcore\":" + std::to_string(main_lcore);
  json += ",\"no_huge\":" + boolean(no_huge);
  json += ",\"no_pci\":" + boolean(no_pci);
  json += ",\"in_memory\":" + boolean(in_memory);
  json += ",\"no_shconf\":" + boolean(no_shconf);
  json += ",\"file_prefix\":" + quoted(file_prefix);
  json += ",\"memory_mb\":" + std::to_string(memory_mb);
  json += ",\"log_level\":" + quoted(log_level_name(log_level));
  json += ",\"iova_mode\":" + quoted(iova_mode_name(iova_mode));
  json += ",\"telemetry\":" + boolean(telemetry);
  json += ",\"keep_caller_affinity\":" + boolean(keep_caller_affinity);
  json += ",\"extra_args\":[";
  for (size_t i = 0; i < extra_args.size(); ++i) {
    if (i > 0) json += ",";
    json += quoted(extra_args[i]);  // EAL arguments: no quotes or backslashes expected
  }
  json += "]}";
  return json;
}

DpdkOpts dpdk_test_opts() {
  DpdkOpts opts;
  opts.no_huge = true;
  opts.no_pci = true;
  opts.in_memory = false;  // refused with no_huge by DPDK 22.11
  opts.no_shconf = true;
  opts.file_prefix = "nvmf_test_" + std::to_string(getpid());
  opts.log_level = LogLevel::error;
  return opts;
}

Result<std::vector<std::string>> dpdk_eal_args(const DpdkOpts& opts) {
  if (opts.in_memory && opts.no_huge) {
    return Unexpected(Errc::invalid_argument,
                      "DpdkOpts: in_memory cannot be combined with no_huge in DPDK 22.11 "
                      "(no_huge forces legacy memory); use no_shconf instead");
  }
  if (!opts.core_list.empty() && !is_core_list(opts.core_list)) {
    return Unexpected(Errc::invalid_argument,
                      "DpdkOpts: core_list must look like 0 or 0-3 or 0,2,4");
  }
  if (!opts.file_prefix.empty() && !is_file_prefix(opts.file_prefix)) {
    return Unexpected(Errc::invalid_argument,
                      "DpdkOpts: file_prefix must be 1-64 characters of [A-Za-z0-9_.-]");
  }
  if (opts.main_lcore < -1) {
    return Unexpected(Errc::invalid_argument, "DpdkOpts: main_lcore must be -1 or a core id");
  }

  std::vector<std::string> args;
  args.push_back("-l");
  args.push_back(opts.core_list.empty() ? std::to_string(first_allowed_cpu()) : opts.core_list);
  if (opts.main_lcore >= 0) args.push_back("--main-lcore=" + std::to_string(opts.main_lcore));
  if (opts.no_huge) args.push_back("--no-huge");
  if (opts.no_pci) args.push_back("--no-pci");
  if (opts.in_memory) args.push_back("--in-memory");
  if (opts.no_shconf) args.push_back("--no-shconf");
  args.push_back("--file-prefix=" + (opts.file_prefix.empty() ? "nvmf_" + std::to_string(getpid())
                                                              : opts.file_prefix));
  if (opts.memory_mb > 0) {
    args.push_back("-m");
    args.push_back(std::to_string(opts.memory_mb));
  }
  args.push_back("--log-level=" + std::to_string(to_rte_level(opts.log_level)));
  if (opts.iova_mode != IovaMode::automatic) {
    args.push_back(std::string("--iova-mode=") + iova_mode_name(opts.iova_mode));
  }
  if (!opts.telemetry) args.push_back("--no-telemetry");
  for (const std::string& extra : opts.extra_args) args.push_back(extra);
  return args;
}

DpdkMemoryBackend::DpdkMemoryBackend(const DpdkOpts& opts) : opts_(opts) {}

Result<std::unique_ptr<DpdkMemoryBackend>> DpdkMemoryBackend::create(const DpdkOpts& opts) {
  auto args = dpdk_eal_args(opts);
  if (!args) {
    NVMF_ERRLOG(env, "%s", args.error().detail);
    return Unexpected(args.error());
  }

  EalState expected = EalState::idle;
  if (!g_eal_state.compare_exchange_strong(expected, EalState::starting)) {
    if (expected == EalState::running || expected == EalState::starting) {
      return Unexpected(Errc::already_exists,
                        "DPDK EAL is already running in this process: share the existing "
                        "DpdkMemoryBackend");
    }
    return Unexpected(Errc::bad_state,
                      "DPDK EAL already stopped or failed in this process and cannot be "
                      "started again");
  }
  // An EAL the application started itself has lcores; leave it (and its log stream) alone.
  if (rte_lcore_count() > 0) {
    g_eal_state.store(EalState::idle);
    return Unexpected(init_error(EALREADY));
  }

  std::unique_ptr<DpdkMemoryBackend> backend(new DpdkMemoryBackend(opts));  // setup-path
  backend->eal_args_ = std::move(*args);

  // rte_eal_init permutes argv (getopt) and may keep pointers into it: the strings live in
  // the backend; the pointer array only during the call.
  std::vector<char*> argv;
  static char program_name[] = "nvmf";
  argv.push_back(program_name);
  std::string joined;
  for (std::string& arg : backend->eal_args_) {
    argv.push_back(arg.data());
    joined += ' ';
    joined += arg;
  }
  argv.push_back(nullptr);

  if (log_get_level(nvmf_log_component_dpdk) < opts.log_level) {
    log_set_level("dpdk", opts.log_level);
  }
  cpu_set_t caller_cpus;
  CPU_ZERO(&caller_cpus);
  const bool have_caller_cpus = sched_getaffinity(0, sizeof(caller_cpus), &caller_cpus) == 0;

  redirect_dpdk_log();
  NVMF_INFOLOG(env, "starting DPDK EAL:%s", joined.c_str());
  rte_errno = 0;
  const int rc = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  const int rte_error = rte_errno;
  if (opts.keep_caller_affinity && have_caller_cpus) {
    if (sched_setaffinity(0, sizeof(caller_cpus), &caller_cpus) != 0) {
      NVMF_WARNLOG(env, "could not restore the caller's CPU affinity after rte_eal_init");
    }
  }
  if (rc < 0) {
    NVMF_ERRLOG(env, "rte_eal_init failed: %s (rte_errno %d); EAL arguments:%s",
                rte_strerror(rte_error), rte_error, joined.c_str());
    restore_dpdk_log();
    if (rte_error != EALREADY) remove_runtime_dir(rte_eal_get_runtime_dir());
    // EALREADY: an EAL raced us and is untouched; anything else is final (see EalState).
    g_eal_state.store(rte_error == EALREADY ? EalState::idle : EalState::failed);
    backend->eal_args_.clear();
    return Unexpected(init_error(rte_error));
  }
  g_eal_state.store(EalState::running);
  const IovaMode granted = backend->iova_mode();
  if (opts.iova_mode != IovaMode::automatic && granted != opts.iova_mode) {
    NVMF_WARNLOG(env,
                 "asked for IOVA mode %s, DPDK chose %s (no physical addresses without "
                 "hugepages and root)",
                 iova_mode_name(opts.iova_mode), iova_mode_name(granted));
  }
  NVMF_INFOLOG(env, "DPDK EAL up: IOVA mode %s, %s, VFIO %s", iova_mode_name(granted),
               opts.no_huge ? "no hugepages" : "hugepages",
               backend->vfio_enabled() ? "enabled" : "not enabled");
  return backend;
}

DpdkMemoryBackend::~DpdkMemoryBackend() {
  assert(regions_in_use() == 0 && "a DmaRegion outlives its DPDK backend");
  if (g_eal_state.load() != EalState::running) return;
  // Copy the runtime directory's path first: the buffer is EAL's.
  std::string runtime_dir = rte_eal_get_runtime_dir();
  const int rc = rte_eal_cleanup();
  if (rc != 0) NVMF_WARNLOG(env, "rte_eal_cleanup failed: %s", rte_strerror(rte_errno));
  remove_runtime_dir(runtime_dir.c_str());
  restore_dpdk_log();
  g_eal_state.store(EalState::stopped);
}

IovaMode DpdkMemoryBackend::iova_mode() const noexcept {
  switch (rte_eal_iova_mode()) {
    case RTE_IOVA_PA:
      return IovaMode::pa;
    case RTE_IOVA_VA:
      return IovaMode::va;
    default:
      return IovaMode::automatic;  // RTE_IOVA_DC: not decided (no EAL)
  }
}

bool DpdkMemoryBackend::vfio_enabled() const noexcept {
  return rte_vfio_is_enabled("vfio_pci") == 1;
}

Result<int> DpdkMemoryBackend::vfio_open_device(const std::string& pci_address) noexcept {
  if (!vfio_enabled()) {
    return Unexpected(Errc::not_supported,
                      "VFIO is not enabled in DPDK: load vfio-pci (scripts/setup.sh) before start");
  }
  const std::string driver_link = "/sys/bus/pci/devices/" + pci_address + "/driver";
  char target[256] = {};
  const ssize_t length = readlink(driver_link.c_str(), target, sizeof(target) - 1);
  if (length <= 0) {
    NVMF_ERRLOG(env, "%s: no such PCI function, or it has no driver (see scripts/setup.sh)",
                pci_address.c_str());
    return Unexpected(Errc::not_found, "PCI function not found or not bound");
  }
  const char* driver = std::strrchr(target, '/');
  if (driver == nullptr || std::strcmp(driver + 1, "vfio-pci") != 0) {
    NVMF_ERRLOG(env, "%s is bound to %s, not vfio-pci: run scripts/setup.sh", pci_address.c_str(),
                driver == nullptr ? target : driver + 1);
    return Unexpected(Errc::not_found, "PCI function not bound to vfio-pci");
  }
  int device_fd = -1;
  vfio_device_info info{};
  info.argsz = sizeof(info);
  if (rte_vfio_setup_device("/sys/bus/pci/devices", pci_address.c_str(), &device_fd, &info) != 0) {
    NVMF_ERRLOG(env, "rte_vfio_setup_device(%s) failed (see DPDK's messages above)",
                pci_address.c_str());
    return Unexpected(Errc::io_error, "rte_vfio_setup_device failed");
  }
  return device_fd;
}

void DpdkMemoryBackend::vfio_close_device(const std::string& pci_address, int device_fd) noexcept {
  if (rte_vfio_release_device("/sys/bus/pci/devices", pci_address.c_str(), device_fd) != 0) {
    NVMF_WARNLOG(env, "rte_vfio_release_device(%s) failed", pci_address.c_str());
  }
}

Result<DmaRegion> DpdkMemoryBackend::allocate(size_t size_bytes, size_t alignment_bytes) noexcept {
  if (size_bytes == 0) return Unexpected(Errc::invalid_argument, "allocate: size_bytes is 0");
  if (alignment_bytes != 0 && !is_power_of_two(alignment_bytes)) {
    return Unexpected(Errc::invalid_argument, "allocate: alignment_bytes is not a power of two");
  }
  const size_t alignment =
      alignment_bytes > kDpdkRegionAlignmentBytes ? alignment_bytes : kDpdkRegionAlignmentBytes;
  if (size_bytes > SIZE_MAX - kDpdkRegionAlignmentBytes) {
    return Unexpected(Errc::invalid_argument, "allocate: size_bytes overflows when rounded");
  }
  const auto rounded = static_cast<size_t>(align_up(size_bytes, kDpdkRegionAlignmentBytes));
  if (alignment > UINT32_MAX) {
    return Unexpected(Errc::invalid_argument, "allocate: DPDK alignment is limited to 2 GiB");
  }

  char zone_name[RTE_MEMZONE_NAMESIZE];
  snprintf(zone_name, sizeof(zone_name), "nvmf_env_%" PRIu64,
           next_zone_id_.fetch_add(1, std::memory_order_relaxed));
  const bool va_mode = iova_mode() == IovaMode::va;
  bool contiguous = true;
  const rte_memzone* zone = rte_memzone_reserve_aligned(
      zone_name, rounded, SOCKET_ID_ANY, RTE_MEMZONE_IOVA_CONTIG, static_cast<unsigned>(alignment));
  if (zone == nullptr && rte_errno == ENOMEM && !va_mode) {
    // Physically contiguous memory is scarce in IOVA-as-PA mode; devices that take PRP lists
    // cope with a region translated page by page.
    zone = rte_memzone_reserve_aligned(zone_name, rounded, SOCKET_ID_ANY, 0,
                                       static_cast<unsigned>(alignment));
    contiguous = false;
  }
  if (zone == nullptr) {
    const int rte_error = rte_errno;
    NVMF_ERRLOG(env, "rte_memzone_reserve of %zu bytes (alignment %zu) failed: %s", rounded,
                alignment, rte_strerror(rte_error));
    if (rte_error == ENOSPC) {
      return Unexpected(Errc::no_memory,
                        "rte_memzone_reserve failed: no free memzone (RTE_MAX_MEMZONE); free "
                        "regions or allocate fewer, larger ones",
                        rte_error);
    }
    if (rte_error == EINVAL) {
      return Unexpected(Errc::invalid_argument, "rte_memzone_reserve rejected the request",
                        rte_error);
    }
    return Unexpected(Errc::no_memory,
                      "rte_memzone_reserve failed: DPDK memory exhausted (raise memory_mb, "
                      "reserve more hugepages with /proc/sys/vm/nr_hugepages, or ask for less)",
                      ENOMEM);
  }
  // DPDK zeroes memory when it is freed, and fresh pages are zero, but the contract is
  // explicit: a region starts zeroed. This also faults every page in.
  memset(zone->addr, 0, rounded);
  regions_in_use_.fetch_add(1, std::memory_order_relaxed);
  return make_region({.addr = zone->addr,
                      .size_bytes = rounded,
                      .page_size_bytes = static_cast<size_t>(zone->hugepage_sz),
                      .hugepages = !opts_.no_huge,
                      .iova_contiguous = contiguous || va_mode,
                      .iova_base = va_mode ? reinterpret_cast<uintptr_t>(zone->addr)
                                           : static_cast<uint64_t>(zone->iova),
                      .handle = const_cast<rte_memzone*>(zone)});
}

void DpdkMemoryBackend::release(void* addr, size_t size_bytes, void* handle) noexcept {
  (void)addr;
  (void)size_bytes;
  const int rc = rte_memzone_free(static_cast<const rte_memzone*>(handle));
  if (rc != 0) NVMF_ERRLOG(env, "rte_memzone_free failed: %s", rte_strerror(-rc));
  regions_in_use_.fetch_sub(1, std::memory_order_relaxed);
}

uint64_t DpdkMemoryBackend::translate_iova(const void* p) const noexcept {
  const rte_iova_t iova = rte_mem_virt2iova(p);
  return iova == RTE_BAD_IOVA ? kBadIova : static_cast<uint64_t>(iova);
}

Result<void> DpdkMemoryBackend::vfio_dma_map(const DmaRegion& region) noexcept {
  if (!vfio_enabled()) {
    return Unexpected(Errc::not_supported,
                      "VFIO is not enabled in DPDK: load vfio-pci and bind a device to it");
  }
  if (iova_mode() != IovaMode::va || region.empty() || !region.iova_contiguous()) {
    return Unexpected(Errc::not_supported,
                      "vfio_dma_map needs IOVA-as-VA mode and an IOVA-contiguous region");
  }
  const auto vaddr = reinterpret_cast<uintptr_t>(region.addr());
  if (rte_vfio_container_dma_map(RTE_VFIO_DEFAULT_CONTAINER_FD, vaddr, region.iova(region.addr()),
                                 region.size_bytes()) != 0) {
    const int rte_error = rte_errno;
    NVMF_ERRLOG(env, "rte_vfio_container_dma_map(%p, %zu) failed: %s", region.addr(),
                region.size_bytes(), rte_strerror(rte_error));
    return Unexpected(Errc::io_error, "rte_vfio_container_dma_map failed", rte_error);
  }
  return {};
}

Result<void> DpdkMemoryBackend::vfio_dma_unmap(const DmaRegion& region) noexcept {
  if (!vfio_enabled()) {
    return Unexpected(Errc::not_supported,
                      "VFIO is not enabled in DPDK: load vfio-pci and bind a device to it");
  }
  if (region.empty()) return Unexpected(Errc::invalid_argument, "vfio_dma_unmap: empty region");
  const auto vaddr = reinterpret_cast<uintptr_t>(region.addr());
  if (rte_vfio_container_dma_unmap(RTE_VFIO_DEFAULT_CONTAINER_FD, vaddr, region.iova(region.addr()),
                                   region.size_bytes()) != 0) {
    const int rte_error = rte_errno;
    NVMF_ERRLOG(env, "rte_vfio_container_dma_unmap(%p, %zu) failed: %s", region.addr(),
                region.size_bytes(), rte_strerror(rte_error));
    return Unexpected(Errc::io_error, "rte_vfio_container_dma_unmap failed", rte_error);
  }
  return {};
}

}  // namespace nvmf::env
