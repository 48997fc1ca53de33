// The kernel's NBD driver as nvmf_hostd's DeviceExporter: NBD_CMD_CONNECT over netlink with
// one socket per I/O reactor (src/nbd/netlink.h), the request size capped through sysfs so
// the kernel never sends a read or write larger than the daemon's queues take.
#pragma once

#include <memory>

#include "exporter.h"
#include "nbd/netlink.h"

namespace nvmf::hostd {

class NbdExporter final : public DeviceExporter {
 public:
  // Fails when the nbd module is not loaded ("modprobe nbd").
  static Result<std::unique_ptr<NbdExporter>> open(std::string* message);

  Result<ExportedDevice> attach(const DeviceGeometry& geometry, std::vector<int> kernel_fds,
                                std::string* message) override;
  Result<void> flush(const ExportedDevice& device, std::string* message) override;
  Result<void> detach(const ExportedDevice& device, std::string* message) override;

 private:
  explicit NbdExporter(std::unique_ptr<nbd::Netlink> netlink) : netlink_(std::move(netlink)) {}
  std::unique_ptr<nbd::Netlink> netlink_;
};

}  // namespace nvmf::hostd
