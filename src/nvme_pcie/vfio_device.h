// A real NVMe PCIe function bound to vfio-pci. DPDK does the container and group work
// (DpdkMemoryBackend::vfio_open_device, i.e. rte_vfio_setup_device, whose default container
// already maps all EAL memory); this class does what DPDK has no public API for: BAR0's
// region info and mmap through the device fd, bus mastering in config space, and the VFIO
// "request" notification by which the kernel asks us to let go of a device being removed.
//
// Threads: register access from any thread (MMIO). release() from the controller's
// recovery thread once no queue touches the registers any more.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "env/dpdk_env.h"
#include "nvme_pcie/device.h"

namespace nvmf::nvme_pcie {

class VfioDevice final : public PciDevice {
 public:
  // Errors: not_supported (VFIO not enabled), not_found (no such function / not bound to
  // vfio-pci), io_error (BAR0 missing or too small, mmap or config space access failed).
  static Result<std::unique_ptr<VfioDevice>> open(env::DpdkMemoryBackend& memory,
                                                  const std::string& pci_address);
  ~VfioDevice() override;

  const std::string& address() const noexcept override { return address_; }
  env::MemoryBackend& dma_memory() noexcept override { return memory_; }
  uint64_t dma_address(const void* p, size_t length) const noexcept override {
    return memory_.iova_of(p, length);
  }

  uint32_t read32(uint32_t offset) noexcept override;
  uint64_t read64(uint32_t offset) noexcept override;
  void write32(uint32_t offset, uint32_t value) noexcept override;
  void write64(uint32_t offset, uint64_t value) noexcept override;

  // The eventfd VFIO signals when the kernel wants the device back (hot removal); -1 when the
  // kernel offers none.
  int removal_request_fd() const noexcept override { return request_fd_; }
  // Unmaps BAR0 and closes the device: later reads return all ones, writes are dropped.
  void release() noexcept override;

 private:
  VfioDevice(env::DpdkMemoryBackend& memory, std::string address, int device_fd);
  Result<void> map_bar0();
  Result<void> enable_bus_master();
  void arm_removal_request();

  env::DpdkMemoryBackend& memory_;
  std::string address_;
  int device_fd_ = -1;
  int request_fd_ = -1;
  volatile uint8_t* bar0_ = nullptr;
  size_t bar0_size_bytes_ = 0;
};

}  // namespace nvmf::nvme_pcie
