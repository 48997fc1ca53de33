#include "nbd_exporter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "common/log.h"
#include "nbd/wire.h"

NVMF_LOG_COMPONENT(hostd_nbd);

namespace nvmf::hostd {

namespace {

std::string errno_text(const char* what, const std::string& path) {
  return std::string(what) + " " + path + ": " + std::strerror(errno);
}

// Discard, write zeroes and flush pass through; FUA is left to the block layer, which
// turns it into a flush after the write (the library has no FUA bit to send).
constexpr uint64_t kServerFlags = nbd::wire::kFlagHasFlags | nbd::wire::kFlagSendFlush |
                                  nbd::wire::kFlagSendTrim | nbd::wire::kFlagSendWriteZeroes |
                                  nbd::wire::kFlagCanMultiConn;

}  // namespace

Result<std::unique_ptr<NbdExporter>> NbdExporter::open(std::string* message) {
  auto netlink = nbd::Netlink::open(message);
  if (!netlink) return Unexpected(netlink.error());
  return std::unique_ptr<NbdExporter>(new NbdExporter(std::move(*netlink)));
}

Result<ExportedDevice> NbdExporter::attach(const DeviceGeometry& geometry,
                                           std::vector<int> kernel_fds, std::string* message) {
  nbd::ConnectParams params;
  params.socket_fds = kernel_fds;
  params.size_bytes = geometry.size_bytes;
  params.block_size_bytes = geometry.block_size_bytes;
  params.server_flags = kServerFlags;
  params.backend_identifier = geometry.identifier;
  auto index = netlink_->connect(params, message);
  // The kernel holds its own references to the sockets now (or failed): ours go either way.
  for (int fd : kernel_fds) close(fd);
  if (!index) return Unexpected(index.error());
  ExportedDevice device;
  device.index = *index;
  device.path = "/dev/nbd" + std::to_string(*index);
  const std::string sysfs = "/sys/block/nbd" + std::to_string(*index) + "/queue/max_sectors_kb";
  std::ofstream limit(sysfs);
  limit << geometry.max_request_bytes / 1024 << "\n";
  limit.close();
  if (!limit) {
    NVMF_WARNLOG(hostd_nbd, "cannot write %s: requests above %u bytes will fail", sysfs.c_str(),
                 geometry.max_request_bytes);
  }
  struct stat st {};
  if (stat(device.path.c_str(), &st) != 0) {
    // No devtmpfs node (a minimal system without udev): make it from sysfs' major:minor.
    std::ifstream dev_file("/sys/block/nbd" + std::to_string(*index) + "/dev");
    unsigned major_number = 0, minor_number = 0;
    char colon = 0;
    if (dev_file >> major_number >> colon >> minor_number) {
      mknod(device.path.c_str(), S_IFBLK | 0660, makedev(major_number, minor_number));
    }
  }
  return device;
}

Result<void> NbdExporter::flush(const ExportedDevice& device, std::string* message) {
  const int fd = ::open(device.path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *message = errno_text("open", device.path);
    return Unexpected(make_system_error(errno, "open"));
  }
  const int synced = fsync(fd);
  const int saved = errno;
  close(fd);
  if (synced != 0) {
    errno = saved;
    *message = errno_text("fsync", device.path);
    return Unexpected(make_system_error(saved, "fsync"));
  }
  return {};
}

Result<void> NbdExporter::detach(const ExportedDevice& device, std::string* message) {
  return netlink_->disconnect(device.index, message);
}

}  // namespace nvmf::hostd
