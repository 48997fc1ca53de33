#include "env/vfio.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstring>

namespace nvmf::env {

namespace {

bool path_exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

bool directory_has_entries(const std::string& path) {
  DIR* directory = opendir(path.c_str());
  if (directory == nullptr) return false;
  bool found = false;
  while (dirent* entry = readdir(directory)) {
    if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
      found = true;
      break;
    }
  }
  closedir(directory);
  return found;
}

}  // namespace

const char* VfioStatus::reason() const noexcept {
  if (!container_present) return "no /dev/vfio/vfio: modprobe vfio-pci";
  if (!iommu_groups_present) {
    return "no IOMMU groups in /sys/kernel/iommu_groups: enable the IOMMU (intel_iommu=on or "
           "amd_iommu=on, and -device intel-iommu in QEMU)";
  }
  return "";
}

VfioStatus vfio_probe(const std::string& sys_root, const std::string& dev_root) {
  VfioStatus status;
  status.container_present = path_exists(dev_root + "/vfio/vfio");
  status.iommu_groups_present = directory_has_entries(sys_root + "/kernel/iommu_groups");
  status.vfio_pci_loaded = path_exists(sys_root + "/bus/pci/drivers/vfio-pci");
  return status;
}

}  // namespace nvmf::env
