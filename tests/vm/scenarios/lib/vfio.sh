# Sourced by VM scenarios booted with NVMF_VM_NVME=N (vm-run.sh --nvme N): the guest's NVMe
# controllers (NVMF_VM_NVME_PCI) handed to vfio-pci and back through scripts/setup.sh, so
# setup.sh runs for real; hugepages for DPDK; a check of the VFIO API itself.
# Needs step() and fail() from the caller. The guest has no udev: nothing loads nvme or
# vfio-pci by itself, vfio_prepare does.
SETUP_SH="${NVMF_REPO:?}/scripts/setup.sh"

# vfio_prepare: load nvme and vfio-pci, wait until every controller is on nvme with a block
# device (nvmeXnY) in /dev.
vfio_prepare() {
  local addr
  modprobe nvme || fail "modprobe nvme"
  modprobe vfio-pci || fail "modprobe vfio-pci"
  for addr in ${NVMF_VM_NVME_PCI:?booted without NVMF_VM_NVME}; do
    vfio_wait 10 vfio_has_namespace "$addr" || fail "$addr: no namespace block device 10 s after modprobe nvme (driver $(vfio_driver "$addr"))"
  done
}

vfio_sysfs() { echo "/sys/bus/pci/devices/$1"; }
# vfio_driver ADDR: the driver the device is bound to, or "none".
vfio_driver() {
  local link
  if link="$(readlink "$(vfio_sysfs "$1")/driver")"; then basename "$link"; else echo none; fi
}
# vfio_group ADDR: the device's IOMMU group number (fails without an IOMMU).
vfio_group() {
  local link
  link="$(readlink "$(vfio_sysfs "$1")/iommu_group")" || return 1
  basename "$link"
}
# vfio_namespaces ADDR: the controller's block devices (nvme0n1 ...), one a line.
vfio_namespaces() {
  local ns
  for ns in "$(vfio_sysfs "$1")"/nvme/nvme*/nvme*n*; do
    [ -e "$ns" ] || continue
    ns="$(basename "$ns")"
    [[ "$ns" =~ ^nvme[0-9]+n[0-9]+$ ]] && [ -b "/dev/$ns" ] && echo "$ns"
  done
  return 0
}
vfio_has_namespace() { [ -n "$(vfio_namespaces "$1")" ]; }
# vfio_serial ADDR: the NVMe serial number (vm-run.sh gives controller K nvmf-vm-K).
vfio_serial() { cat "$(vfio_sysfs "$1")"/nvme/nvme*/serial 2>/dev/null | tr -d ' '; }
# vfio_wait SECONDS TEST...: true once TEST is, polling every 0.2 s.
vfio_wait() {
  local tries=$(($1 * 5))
  shift
  until "$@"; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    sleep 0.2
  done
}

# vfio_bind ADDR [NRHUGE (64)]: scripts/setup.sh config for ADDR alone; its output in
# VFIO_SETUP_OUT (and on stdout). Fails the scenario unless ADDR ends on vfio-pci with
# /dev/vfio/GROUP present; sets VFIO_GROUP.
vfio_bind() {
  VFIO_SETUP_OUT="$(PCI_ALLOWED="$1" NRHUGE="${2:-64}" "$SETUP_SH" config 2>&1)" ||
    { echo "$VFIO_SETUP_OUT"; fail "setup.sh config for $1 failed"; }
  echo "$VFIO_SETUP_OUT"
  [ "$(vfio_driver "$1")" = vfio-pci ] || fail "$1 is on $(vfio_driver "$1"), not vfio-pci, after setup.sh config"
  VFIO_GROUP="$(vfio_group "$1")" || fail "$1 has no IOMMU group"
  [ -c "/dev/vfio/$VFIO_GROUP" ] || fail "no character device /dev/vfio/$VFIO_GROUP for $1"
}
# vfio_unbind ADDR: scripts/setup.sh reset for ADDR; its output in VFIO_SETUP_OUT. Fails the
# scenario unless ADDR is back on nvme with a namespace block device.
vfio_unbind() {
  VFIO_SETUP_OUT="$(PCI_ALLOWED="$1" "$SETUP_SH" reset 2>&1)" ||
    { echo "$VFIO_SETUP_OUT"; fail "setup.sh reset for $1 failed"; }
  echo "$VFIO_SETUP_OUT"
  [ "$(vfio_driver "$1")" = nvme ] || fail "$1 is on $(vfio_driver "$1"), not nvme, after setup.sh reset"
  vfio_wait 10 vfio_has_namespace "$1" || fail "$1 is on nvme again but no /dev/nvme?n? appeared"
}

# vfio_hugepages N: at least N 2-MiB hugepages reserved and hugetlbfs mounted on
# /dev/hugepages (DPDK's EAL finds hugepages through a hugetlbfs mount), without binding
# anything (setup.sh config does both for a scenario that binds).
vfio_hugepages() {
  local now
  now="$(cat /proc/sys/vm/nr_hugepages)"
  [ "$now" -ge "$1" ] || echo "$1" >/proc/sys/vm/nr_hugepages
  now="$(cat /proc/sys/vm/nr_hugepages)"
  [ "$now" -ge "$1" ] || fail "asked for $1 hugepages, the kernel reserved $now"
  if ! awk '$3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts; then
    mkdir -p /dev/hugepages
    mount -t hugetlbfs nodev /dev/hugepages || fail "mount hugetlbfs on /dev/hugepages"
  fi
}

# vfio_probe ADDR: what DPDK's VFIO layer does first, done by hand (python3, standard
# library): open /dev/vfio/vfio, put the device's group in the container, VFIO_SET_IOMMU
# type1v2 (needs interrupt remapping: QEMU's intel-iommu,intremap=on), get the device fd,
# read the PCI vendor:device from the config region, map BAR0 and read the NVMe version
# register, then VFIO_IOMMU_MAP_DMA / UNMAP_DMA 2 MiB. Prints one line per step.
vfio_probe() {
  python3 - "$1" "$(vfio_group "$1")" <<'EOF'
import ctypes, fcntl, mmap, os, struct, sys
addr, group = sys.argv[1], sys.argv[2]
V = 0x3B00 + 100   # _IO(VFIO_TYPE ';', VFIO_BASE + n)
GET_API, CHECK_EXT, SET_IOMMU, GROUP_STATUS, GROUP_SET_CONTAINER = V, V + 1, V + 2, V + 3, V + 4
GET_DEVICE_FD, DEVICE_INFO, REGION_INFO, MAP_DMA, UNMAP_DMA = V + 6, V + 7, V + 8, V + 13, V + 14
TYPE1V2, CONFIG_REGION = 3, 7
libc = ctypes.CDLL(None, use_errno=True)
container = os.open("/dev/vfio/vfio", os.O_RDWR)
print(f"vfio: API version {fcntl.ioctl(container, GET_API)}, "
      f"type1v2 {'supported' if fcntl.ioctl(container, CHECK_EXT, TYPE1V2) else 'MISSING'}")
fd = os.open(f"/dev/vfio/{group}", os.O_RDWR)
status = bytearray(struct.pack("II", 8, 0))
fcntl.ioctl(fd, GROUP_STATUS, status)
if not struct.unpack("II", status)[1] & 1:
    sys.exit(f"vfio: group {group} is not viable (another device of it is on a host driver)")
fcntl.ioctl(fd, GROUP_SET_CONTAINER, struct.pack("i", container))
fcntl.ioctl(container, SET_IOMMU, TYPE1V2)
print(f"vfio: group {group} in a container, VFIO_SET_IOMMU type1v2 ok")
dev = libc.ioctl(fd, GET_DEVICE_FD, ctypes.c_char_p(addr.encode()))
if dev < 0:
    raise OSError(ctypes.get_errno(), f"VFIO_GROUP_GET_DEVICE_FD {addr}")
info = bytearray(struct.pack("IIII", 16, 0, 0, 0))
fcntl.ioctl(dev, DEVICE_INFO, info)
print(f"vfio: device {addr}: {struct.unpack('IIII', info)[2]} regions, {struct.unpack('IIII', info)[3]} irq types")
def region(index):
    buf = bytearray(struct.pack("IIIIQQ", 32, 0, index, 0, 0, 0))
    fcntl.ioctl(dev, REGION_INFO, buf)
    return struct.unpack("IIIIQQ", buf)[4:]   # size, offset
size, offset = region(CONFIG_REGION)
vendor, device = struct.unpack("<HH", os.pread(dev, 4, offset))
print(f"vfio: config space {vendor:04x}:{device:04x}")
size, offset = region(0)
bar = mmap.mmap(dev, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
vs = struct.unpack_from("<I", bar, 8)[0]
print(f"vfio: BAR0 {size} bytes mapped, NVMe version register {vs >> 16}.{(vs >> 8) & 0xff}.{vs & 0xff}")
buf = mmap.mmap(-1, 2 << 20)
vaddr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
fcntl.ioctl(container, MAP_DMA, struct.pack("IIQQQ", 32, 3, vaddr, 1 << 30, 2 << 20))
fcntl.ioctl(container, UNMAP_DMA, bytearray(struct.pack("IIQQQ", 32, 0, 1 << 30, 2 << 20, 0)))
print("vfio: VFIO_IOMMU_MAP_DMA + UNMAP_DMA of 2 MiB at IOVA 1 GiB ok")
print(f"vfio: probe of {addr} ok")
EOF
}
