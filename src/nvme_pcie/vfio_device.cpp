#include "nvme_pcie/vfio_device.h"

#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "spec/pcie.h"

NVMF_LOG_COMPONENT_DECLARE(nvme_pcie);

namespace nvmf::nvme_pcie {

VfioDevice::VfioDevice(env::DpdkMemoryBackend& memory, std::string address, int device_fd)
    : memory_(memory), address_(std::move(address)), device_fd_(device_fd) {}

Result<std::unique_ptr<VfioDevice>> VfioDevice::open(env::DpdkMemoryBackend& memory,
                                                    const std::string& pci_address) {
  auto fd = memory.vfio_open_device(pci_address);
  if (!fd) return Unexpected(fd.error());
  std::unique_ptr<VfioDevice> device(new VfioDevice(memory, pci_address, *fd));  // setup-path
  if (auto mapped = device->map_bar0(); !mapped) return Unexpected(mapped.error());
  if (auto master = device->enable_bus_master(); !master) return Unexpected(master.error());
  device->arm_removal_request();
  NVMF_INFOLOG(nvme_pcie, "%s: BAR0 %zu KiB mapped, bus mastering on", pci_address.c_str(),
               device->bar0_size_bytes_ / 1024);
  return device;
}

VfioDevice::~VfioDevice() { release(); }

void VfioDevice::release() noexcept {
  if (bar0_ != nullptr) {
    munmap(const_cast<uint8_t*>(bar0_), bar0_size_bytes_);
    bar0_ = nullptr;
  }
  if (request_fd_ >= 0) {
    close(request_fd_);
    request_fd_ = -1;
  }
  if (device_fd_ >= 0) {
    memory_.vfio_close_device(address_, device_fd_);
    device_fd_ = -1;
  }
}

Result<void> VfioDevice::map_bar0() {
  vfio_region_info info{};
  info.argsz = sizeof(info);
  info.index = VFIO_PCI_BAR0_REGION_INDEX;
  if (ioctl(device_fd_, VFIO_DEVICE_GET_REGION_INFO, &info) != 0) {
    return Unexpected(make_system_error(errno, "VFIO_DEVICE_GET_REGION_INFO (BAR0)"));
  }
  if ((info.flags & VFIO_REGION_INFO_FLAG_MMAP) == 0 || info.size < spec::pcie::bar0_size_min) {
    NVMF_ERRLOG(nvme_pcie, "%s: BAR0 is %llu bytes and %s mappable: not an NVMe controller?",
                address_.c_str(), static_cast<unsigned long long>(info.size),
                (info.flags & VFIO_REGION_INFO_FLAG_MMAP) ? "is" : "is not");
    return Unexpected(Errc::io_error, "BAR0 missing, too small or not mappable");
  }
  void* mapped = mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, device_fd_,
                      static_cast<off_t>(info.offset));
  if (mapped == MAP_FAILED) return Unexpected(make_system_error(errno, "mmap of BAR0"));
  bar0_ = static_cast<volatile uint8_t*>(mapped);
  bar0_size_bytes_ = info.size;
  return {};
}

// PCI Command register, Bus Master Enable (and Memory Space): the device may now DMA.
Result<void> VfioDevice::enable_bus_master() {
  vfio_region_info info{};
  info.argsz = sizeof(info);
  info.index = VFIO_PCI_CONFIG_REGION_INDEX;
  if (ioctl(device_fd_, VFIO_DEVICE_GET_REGION_INFO, &info) != 0) {
    return Unexpected(make_system_error(errno, "VFIO_DEVICE_GET_REGION_INFO (config)"));
  }
  const auto command_offset = static_cast<off_t>(info.offset + PCI_COMMAND);
  uint16_t command = 0;
  if (pread(device_fd_, &command, sizeof(command), command_offset) != sizeof(command)) {
    return Unexpected(make_system_error(errno, "reading the PCI command register"));
  }
  command |= PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY;
  if (pwrite(device_fd_, &command, sizeof(command), command_offset) != sizeof(command)) {
    return Unexpected(make_system_error(errno, "writing the PCI command register"));
  }
  return {};
}

// VFIO_PCI_REQ_IRQ_INDEX: the kernel signals this eventfd when it wants the device back (its
// removal waits until we close the device fd).
void VfioDevice::arm_removal_request() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return;
  alignas(vfio_irq_set) uint8_t buffer[sizeof(vfio_irq_set) + sizeof(int)] = {};
  auto* irq_set = reinterpret_cast<vfio_irq_set*>(buffer);
  irq_set->argsz = sizeof(buffer);
  irq_set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
  irq_set->index = VFIO_PCI_REQ_IRQ_INDEX;
  irq_set->start = 0;
  irq_set->count = 1;
  std::memcpy(irq_set->data, &fd, sizeof(fd));
  if (ioctl(device_fd_, VFIO_DEVICE_SET_IRQS, irq_set) != 0) {
    NVMF_INFOLOG(nvme_pcie, "%s: no VFIO removal request notification (%s)", address_.c_str(),
                 std::strerror(errno));
    close(fd);
    return;
  }
  request_fd_ = fd;
}

uint32_t VfioDevice::read32(uint32_t offset) noexcept {
  if (bar0_ == nullptr) return ~uint32_t{0};
  return *reinterpret_cast<volatile uint32_t*>(bar0_ + offset);
}

// Two 32-bit reads, low half first: not every controller accepts 64-bit MMIO (QEMU does; the
// spec lets hosts split 64-bit registers).
uint64_t VfioDevice::read64(uint32_t offset) noexcept {
  const uint64_t low = read32(offset);
  const uint64_t high = read32(offset + 4);
  return low | (high << 32);
}

void VfioDevice::write32(uint32_t offset, uint32_t value) noexcept {
  if (bar0_ == nullptr) return;
  *reinterpret_cast<volatile uint32_t*>(bar0_ + offset) = value;
}

void VfioDevice::write64(uint32_t offset, uint64_t value) noexcept {
  write32(offset, static_cast<uint32_t>(value));
  write32(offset + 4, static_cast<uint32_t>(value >> 32));
}

}  // namespace nvmf::nvme_pcie
