// The nvme backend: one bdev per namespace of an NVMe controller driven from userspace by
// src/nvme_pcie. Each channel is one I/O queue pair of the controller (polled; one SQ
// doorbell per poll). Data moves by DMA straight to and from the caller's iovecs when they
// lie in memory the device can reach (the target's data buffers, see docs/architecture.md);
// otherwise the driver bounces through its own DMA memory and counts it (copies()).
//
// Controllers are shared by their namespaces: an NvmeControllerPool opens each PCI function
// once, through a DeviceOpener the program registers (nvmf_tgt: VFIO with DPDK memory;
// tests and nvmf_perf --sim: the register-level model).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "bdev/bdev.h"
#include "nvme_pcie/controller.h"

namespace nvmf::bdev {

struct NvmeBdevOpts {
  std::string name{};     // required, unique in a BdevRegistry
  std::string pci{};      // required: the controller's PCI address ("0000:00:04.0")
  uint32_t nsid = 1;      // an active namespace of that controller
  // Per channel, capped by the controller's I/O queue (entries - 1 commands).
  uint32_t queue_depth_max = 128;
  const Clock* clock = &TscClock::instance();  // latency statistics
};

std::string opts_to_json(const NvmeBdevOpts& opts);

class NvmeControllerPool {
 public:
  using DeviceResult = Result<std::unique_ptr<nvme_pcie::PciDevice>>;
  using DeviceOpener = std::function<DeviceResult(const std::string& pci)>;  // setup-path

  NvmeControllerPool(DeviceOpener opener, const nvme_pcie::ControllerOpts& opts);
  // Every bdev and so every controller reference must be gone first.
  ~NvmeControllerPool();

  // One opened controller and the bdevs on its namespaces (nvme_bdev.cpp).
  struct Entry;

  // The controller at `pci`, opened and brought up on first use. Errors: those of the opener
  // and of Controller::create, with the detail naming the step.
  Result<Entry*> attach(const std::string& pci);
  size_t size() const noexcept { return controllers_.size(); }

 private:
  DeviceOpener opener_;
  nvme_pcie::ControllerOpts opts_;
  std::map<std::string, std::unique_ptr<Entry>> controllers_;
};

// Errors: invalid_argument (name, pci or nsid missing / bad: the detail names it), not_found
// (no such active namespace), and the pool's attach() errors.
[[nodiscard]] Result<std::unique_ptr<Bdev>> create_nvme_bdev(const NvmeBdevOpts& opts,
                                                             NvmeControllerPool& pool) noexcept;

// Bytes an nvme bdev's channels copied through bounce buffers so far (0 on the zero-copy
// path); for any bdev of another backend, 0.
uint64_t nvme_bdev_bytes_copied(const Bdev& bdev) noexcept;

}  // namespace nvmf::bdev
