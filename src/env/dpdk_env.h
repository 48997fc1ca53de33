// The DPDK memory backend: starts DPDK's EAL (only when created) and hands out memory from
// rte_memzone with the IOVAs the userspace PCIe driver (src/nvme_pcie) programs into NVMe
// queues and PRPs. Library target nvmf_env_dpdk, separate from nvmf_env so that programs that
// never create this backend (the initiator library) do not link DPDK at all.
//
// No DPDK header appears here: DPDK stays private to dpdk_env.cpp.
//
// EAL is once per process. create() starts it; while that backend lives, a second create()
// returns already_exists (share the first backend instead; EAL is not reference-counted).
// The destructor calls rte_eal_cleanup(); DPDK cannot restart EAL afterwards, nor after a
// failed rte_eal_init(), so later create() calls return bad_state. If the application started
// EAL itself, create() returns already_exists too: this layer never adopts a foreign EAL.
//
// Threads: create() makes the calling thread DPDK's main lcore (EAL pins it to that core
// while starting; opts.keep_caller_affinity restores the caller's CPU set afterwards). Call
// create() and the destructor from the same thread. allocate() and region destruction may run
// on any thread (rte_memzone takes its own lock); they are setup-path calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "env/memory.h"

namespace nvmf::env {

enum class IovaMode {
  automatic,  // DPDK decides (VA with VFIO+IOMMU or without physical addresses, else PA)
  pa,         // --iova-mode=pa: physical addresses (needs root and hugepages)
  va,         // --iova-mode=va: virtual addresses (needs VFIO with an IOMMU for devices)
};
const char* iova_mode_name(IovaMode mode) noexcept;  // "auto", "pa", "va"

struct DpdkOpts {
  // -l: the cores EAL may use. "" means the first CPU the calling thread may run on. Name one
  // core: this layer launches nothing on EAL worker lcores (reactors are our own threads).
  std::string core_list;
  int main_lcore = -1;   // --main-lcore; -1: DPDK takes the first core of core_list
  bool no_huge = false;  // --no-huge: anonymous memory, no IOVA-as-PA (tests, CI)
  bool no_pci = false;   // --no-pci: no PCI bus scan (tests)
  // --in-memory: no hugepage files, no shared config, no secondary processes. DPDK 22.11
  // refuses it together with --no-huge (which forces legacy memory): use no_shconf there.
  bool in_memory = true;
  bool no_shconf = false;  // --no-shconf: no shared config files (implied by in_memory)
  // --file-prefix: names the runtime directory /var/run/dpdk/<prefix> and hugepage files, so
  // processes side by side do not collide. "" means "nvmf_<pid>".
  std::string file_prefix;
  size_t memory_mb = 0;  // -m: memory to preallocate; 0 for DPDK's default (64 with no_huge)
  // --log-level for DPDK's own messages, which are forwarded to our log as component "dpdk".
  // Quiet by default: DPDK's info level prints a dozen lines per start.
  LogLevel log_level = LogLevel::error;
  IovaMode iova_mode = IovaMode::automatic;
  bool telemetry = false;  // --no-telemetry unless true (its socket thread is of no use here)
  // Undo EAL's pinning of the calling thread to the main lcore once EAL is up, so threads the
  // caller starts later do not all inherit one core.
  bool keep_caller_affinity = true;
  std::vector<std::string> extra_args;  // appended verbatim, e.g. {"--vfio-intr=msix"}

  std::string to_json() const;
};

// Options for unit tests on a machine without hugepages, VFIO or PCI devices: --no-huge
// --no-pci --no-shconf, a per-process file prefix ("nvmf_test_<pid>"), quiet logs.
DpdkOpts dpdk_test_opts();

// The argv that create() passes to rte_eal_init (without argv[0]). Errors: invalid_argument
// for options DPDK would reject only after printing its usage text (malformed core list or
// file prefix, in_memory with no_huge).
Result<std::vector<std::string>> dpdk_eal_args(const DpdkOpts& opts);

class DpdkMemoryBackend final : public MemoryBackend {
 public:
  // Starts EAL. Errors: invalid_argument (opts), already_exists (EAL running in this
  // process), bad_state (EAL already stopped or failed here: DPDK cannot restart it), and
  // rte_eal_init() failures as an Error whose os_errno is rte_errno: no_memory for missing
  // hugepages (EACCES) or memory (ENOMEM), invalid_argument for arguments DPDK rejects, others
  // by errno. DPDK's rte_errno text and its own messages are logged; never an abort.
  static Result<std::unique_ptr<DpdkMemoryBackend>> create(const DpdkOpts& opts);

  // rte_eal_cleanup() and removal of the (empty) runtime directory. Every region must be gone.
  ~DpdkMemoryBackend() override;

  // An rte_memzone of size_bytes rounded up to 4 KiB, IOVA-contiguous when DPDK can give
  // that (always in IOVA-as-VA mode), zeroed. Errors: invalid_argument, no_memory (detail
  // names memory_mb / nr_hugepages, or the memzone limit).
  Result<DmaRegion> allocate(size_t size_bytes, size_t alignment_bytes) noexcept override;
  const char* name() const noexcept override { return "dpdk"; }
  bool hugepages_in_use() const noexcept override { return !opts_.no_huge; }
  size_t regions_in_use() const noexcept override {
    return regions_in_use_.load(std::memory_order_relaxed);
  }

  // The IOVA mode EAL settled on (never automatic): what the PCIe driver puts in PRPs.
  IovaMode iova_mode() const noexcept;

  // rte_vfio_is_enabled("vfio_pci"): the vfio-pci module is loaded and DPDK set up VFIO. When
  // false, vfio_dma_map() answers not_supported. See also vfio_probe() in vfio.h (no EAL).
  bool vfio_enabled() const noexcept;

  // Maps memory DPDK does not own (e.g. a posix region, IOVA = VA) into DPDK's default VFIO
  // container, so devices bound through DPDK can DMA to it; DPDK's own memory is mapped by
  // DPDK already. The region must be IOVA-contiguous and stay alive until unmapped.
  // Errors: not_supported (VFIO not enabled, IOVA-as-PA mode, non-contiguous region),
  // io_error with rte_errno in os_errno.
  Result<void> vfio_dma_map(const DmaRegion& region) noexcept;
  Result<void> vfio_dma_unmap(const DmaRegion& region) noexcept;

  // Opens a PCI function bound to vfio-pci through rte_vfio_setup_device(): its IOMMU group
  // joins DPDK's default container, which maps every EAL memory segment for DMA (so regions
  // from allocate() are reachable at their iova()), and the VFIO device fd comes back for
  // the PCIe driver's own register and config-space access. Setup path.
  // Errors: not_supported (VFIO not enabled in DPDK), not_found (no such function, or not
  // bound to vfio-pci; the log says which), io_error.
  Result<int> vfio_open_device(const std::string& pci_address) noexcept;
  // rte_vfio_release_device(): closes the fd and lets the group go.
  void vfio_close_device(const std::string& pci_address, int device_fd) noexcept;

  const DpdkOpts& opts() const noexcept { return opts_; }
  // The EAL arguments in use, for logs and the dump of the configuration.
  const std::vector<std::string>& eal_args() const noexcept { return eal_args_; }

 protected:
  void release(void* addr, size_t size_bytes, void* handle) noexcept override;
  uint64_t translate_iova(const void* p) const noexcept override;

 private:
  explicit DpdkMemoryBackend(const DpdkOpts& opts);

  DpdkOpts opts_;
  std::vector<std::string> eal_args_;
  std::atomic<size_t> regions_in_use_{0};
  std::atomic<uint64_t> next_zone_id_{0};
};

}  // namespace nvmf::env
