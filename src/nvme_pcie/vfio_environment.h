// What a program needs to open real NVMe devices: DPDK's EAL (hugepage memory with IOVAs,
// VFIO container), started on the first open() only, so a target without nvme bdevs never
// starts DPDK and needs no hugepages. Setup path; one per process (EAL is).
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "env/dpdk_env.h"
#include "nvme_pcie/device.h"

namespace nvmf::nvme_pcie {

class VfioEnvironment {
 public:
  VfioEnvironment() = default;
  ~VfioEnvironment();
  VfioEnvironment(const VfioEnvironment&) = delete;
  VfioEnvironment& operator=(const VfioEnvironment&) = delete;

  // Starts EAL when needed, then opens the function. Errors: no_memory when no hugepages are
  // free (the log line names scripts/setup.sh and /proc/sys/vm/nr_hugepages), the EAL's
  // errors, and VfioDevice::open's.
  Result<std::unique_ptr<PciDevice>> open(const std::string& pci_address);

  // DPDK's memory once started (what the target's RDMA buffers come from, so the devices
  // reach them), else nullptr.
  env::DpdkMemoryBackend* memory() const noexcept { return memory_.get(); }

 private:
  Result<void> start();

  std::unique_ptr<env::DpdkMemoryBackend> memory_;
};

}  // namespace nvmf::nvme_pcie
