#include "nvme_pcie/vfio_environment.h"

#include "common/log.h"
#include "env/posix_memory.h"
#include "env/vfio.h"
#include "nvme_pcie/vfio_device.h"

NVMF_LOG_COMPONENT_DECLARE(nvme_pcie);

namespace nvmf::nvme_pcie {

VfioEnvironment::~VfioEnvironment() = default;

Result<void> VfioEnvironment::start() {
  const env::VfioStatus vfio = env::vfio_probe();
  if (!vfio.available()) {
    NVMF_ERRLOG(nvme_pcie, "VFIO is not usable: %s", vfio.reason());
    return Unexpected(Errc::not_supported, "VFIO not usable");
  }
  const env::MeminfoSnapshot meminfo = env::read_meminfo("/proc/meminfo");
  if (meminfo.hugepages_free == 0) {
    NVMF_ERRLOG(nvme_pcie, "no free hugepages for the PCIe driver's DMA memory: run "
                           "'scripts/setup.sh' (or 'echo 512 > /proc/sys/vm/nr_hugepages')");
    return Unexpected(Errc::no_memory, "no free hugepages");
  }
  env::DpdkOpts opts;
  // VFIO with an IOMMU: IOVA = virtual address, so a buffer's device address is its pointer
  // and every memzone is IOVA-contiguous.
  opts.iova_mode = env::IovaMode::va;
  opts.no_pci = true;  // DPDK drives no device here; the driver opens its own
  opts.in_memory = true;
  auto memory = env::DpdkMemoryBackend::create(opts);
  if (!memory) return Unexpected(memory.error());
  memory_ = std::move(*memory);
  NVMF_NOTICELOG(nvme_pcie, "DPDK started for the PCIe driver (IOVA mode %s, EAL %s)",
                 env::iova_mode_name(memory_->iova_mode()),
                 memory_->vfio_enabled() ? "with VFIO" : "without VFIO");
  return {};
}

Result<std::unique_ptr<PciDevice>> VfioEnvironment::open(const std::string& pci_address) {
  if (!memory_) {
    if (auto started = start(); !started) return Unexpected(started.error());
  }
  auto device = VfioDevice::open(*memory_, pci_address);
  if (!device) return Unexpected(device.error());
  return std::unique_ptr<PciDevice>(std::move(*device));
}

}  // namespace nvmf::nvme_pcie
