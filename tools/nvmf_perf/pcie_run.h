// nvmf_perf's PCIe path (-r 'trtype:PCIe traddr:...'): a local NVMe controller through the
// userspace driver (src/nvme_pcie) instead of a fabric. The function comes from VFIO
// (nvme_pcie::VfioEnvironment: DPDK's EAL started on first use, hugepage DMA memory), or with
// traddr:model from the in-process controller model (src/nvme_pcie/model), so the path runs
// on a machine without a device. One Controller, one IoQueue per worker, buffers from the
// controller's DMA memory (no copies); the controller polls its admin queue on its own
// recovery thread, so the main thread only prints the progress line.
#pragma once

#include "options.h"

namespace nvmf::perf {

// Exit status as run(): 0 clean, 1 I/O errors / verify failures / the device could not be
// opened or brought up (the driver's reason printed), 2 a setting the controller cannot honor.
int run_pcie(const Settings& settings);

}  // namespace nvmf::perf
