// How nvmf_hostd turns a namespace into a kernel block device. The daemon hands the exporter
// the kernel's ends of one socket pair per I/O reactor; the exporter makes /dev/nbdN over
// them (NbdExporter: the NBD driver's netlink interface) or, in tests, hands them to the test
// that plays the kernel (tests/tools/nvmf_hostd).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace nvmf::hostd {

struct DeviceGeometry {
  uint64_t size_bytes = 0;
  uint32_t block_size_bytes = 512;
  uint32_t max_request_bytes = 0;  // largest read/write the daemon's queues take
  std::string identifier;          // "SUBNQN/nsid N": shown by the NBD driver when it can
};

struct ExportedDevice {
  int index = -1;    // NBD index
  std::string path;  // "/dev/nbd0"
};

class DeviceExporter {
 public:
  virtual ~DeviceExporter() = default;
  // Creates a block device served over `kernel_fds` (the exporter owns them from here, on
  // success and on failure). Requests may arrive before this returns.
  virtual Result<ExportedDevice> attach(const DeviceGeometry& geometry, std::vector<int> kernel_fds,
                                        std::string* message) = 0;
  // Writes back what the kernel holds for the device (its page cache), so that nothing an
  // application was told is written is lost by the detach that follows.
  virtual Result<void> flush(const ExportedDevice& device, std::string* message) = 0;
  // Removes the device: the kernel sends a disconnect on each socket and closes them.
  virtual Result<void> detach(const ExportedDevice& device, std::string* message) = 0;
};

}  // namespace nvmf::hostd
