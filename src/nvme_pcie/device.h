// What the NVMe PCIe driver needs of one PCIe function: its BAR0 registers, and memory the
// device can DMA to. Two implementations: VfioDevice (vfio_device.h: a real function bound to
// vfio-pci, BAR0 mmapped, DMA memory from DPDK) and ModelController (model/model_controller.h:
// a register-level NVMe controller in this process, for tests and nvmf_perf --sim).
//
// Register access is a virtual call: the driver touches registers only at bring-up, reset and
// once per poll per queue (the doorbell), so the call costs nothing measurable, and a model can
// see every write as it happens. Completion queues are polled in DMA memory, never through
// this interface.
//
// Threads: read32/write32/read64/write64 may be called from any thread; each queue's doorbell
// is written by the one thread that owns the queue. Accesses are not ordered against each
// other by this interface beyond what a real BAR gives (MMIO stores are posted in order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "env/memory.h"

namespace nvmf::nvme_pcie {

class RegisterIo {
 public:
  virtual ~RegisterIo() = default;
  // Reads of a removed device return all ones, as PCIe does; the driver treats a CSTS of
  // 0xFFFFFFFF as surprise removal.
  virtual uint32_t read32(uint32_t offset) noexcept = 0;
  virtual uint64_t read64(uint32_t offset) noexcept = 0;
  virtual void write32(uint32_t offset, uint32_t value) noexcept = 0;
  virtual void write64(uint32_t offset, uint64_t value) noexcept = 0;
};

// One NVMe function: registers plus DMA memory. The driver allocates its queues, PRP lists
// and identify buffers from dma_memory(); DmaRegion::iova() gives what goes into registers,
// SQEs and PRPs.
class PciDevice : public RegisterIo {
 public:
  // "0000:00:04.0" for a real function; a name for a model.
  virtual const std::string& address() const noexcept = 0;
  // Memory the device can reach. Must outlive every region allocated from it.
  virtual env::MemoryBackend& dma_memory() noexcept = 0;
  // The IOVA of [p, p + length) if the device can DMA to it (the range lies in memory mapped
  // for this device), else env::kBadIova. Data-path call: no allocation, no lock, no system
  // call. The driver bounces data through its own memory when this says kBadIova.
  virtual uint64_t dma_address(const void* p, size_t length) const noexcept = 0;

  // An fd that becomes readable when the platform asks for the device back (VFIO's request
  // notification on hot removal), or -1. The controller then fails its I/O and calls
  // release().
  virtual int removal_request_fd() const noexcept { return -1; }
  // Gives the device up: later reads return all ones, writes are dropped. Called once no
  // queue touches the registers any more.
  virtual void release() noexcept {}
};

}  // namespace nvmf::nvme_pcie
