// Is VFIO usable on this host? A read-only probe of /dev and /sys for the PCIe driver
// (src/nvme_pcie, which does the VFIO ioctls itself) and for tests that need to skip.
// No DPDK and no ioctls here: it only looks at files, so any thread may call it.
#pragma once

#include <string>

namespace nvmf::env {

struct VfioStatus {
  bool container_present = false;     // <dev>/vfio/vfio exists (the vfio module is loaded)
  bool iommu_groups_present = false;  // <sys>/kernel/iommu_groups has at least one group
  bool vfio_pci_loaded = false;       // <sys>/bus/pci/drivers/vfio-pci exists (vfio-pci loaded)

  // VFIO with an IOMMU: what the PCIe driver needs (no-IOMMU mode is not supported).
  bool available() const noexcept { return container_present && iommu_groups_present; }
  // Why not, naming the fix; "" when available().
  const char* reason() const noexcept;
};

// Probes under the given roots ("/sys" and "/dev" on a real system; a temporary tree in tests).
VfioStatus vfio_probe(const std::string& sys_root = "/sys", const std::string& dev_root = "/dev");

inline bool vfio_available() { return vfio_probe().available(); }

}  // namespace nvmf::env
