#!/bin/bash
# VM scenario: the PCIe/VFIO plumbing that a userspace NVMe driver needs, on QEMU's emulated
# NVMe controllers (vm-run.sh --nvme 2 --qmp: q35 + intel-iommu, 1b36:0010 at
# NVMF_VM_NVME_PCI). Both controllers appear with the kernel's nvme driver and a namespace;
# scripts/setup.sh config with PCI_ALLOWED=<first> moves the first, and only it, to vfio-pci
# (/dev/vfio/<group>), reserves and mounts hugepages and prints exactly that; a second config
# changes nothing; the VFIO API works on the group (container, type1v2 IOMMU, device fd,
# config space, BAR0, DMA map); setup.sh reset puts the first back on nvme (its /dev/nvme?n1
# returns) and the hugepages back as they were; last, device_del of the second controller
# through the QMP request protocol (lib/qmp.sh) removes it from the guest's PCI bus.
#   vfio_setup.sh        (runs inside the guest only: tests/vm/vm-run.sh --nvme 2 --qmp vfio_setup)
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "vfio_setup: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = vfio_setup ] || fail "runs inside the VM guest: tests/vm/vm-run.sh --nvme 2 --qmp vfio_setup"
[ "${NVMF_VM_NVME:-0}" -ge 2 ] || fail "needs two NVMe controllers: boot with NVMF_VM_NVME=2 (vm-run.sh --nvme 2)"

# shellcheck source=lib/vfio.sh
source "$(dirname "$0")/lib/vfio.sh"
# shellcheck source=lib/qmp.sh
source "$(dirname "$0")/lib/qmp.sh"

read -r -a pci <<<"$NVMF_VM_NVME_PCI"
read -r -a ids <<<"$NVMF_VM_NVME_IDS"
first="${pci[0]}" second="${pci[1]}"
huge="$(grep -m 1 '^HugePages_Total' /proc/meminfo | awk '{ print $2 }')"
# expect_line TEXT LINE: LINE, exactly, is one of TEXT's lines.
expect_line() { grep -qxF -- "$2" <<<"$1" || fail "expected the line '$2' in:
$1"; }
hugepages() { cat /proc/sys/vm/nr_hugepages; }
hugetlbfs_mounted() { awk '$3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts; }
pci_gone() { [ ! -e "$(vfio_sysfs "$1")" ]; }

step "IOMMU: intel_iommu=on, IOMMU groups, interrupt remapping"
grep -qw intel_iommu=on /proc/cmdline || fail "intel_iommu=on is not on the kernel command line"
[ -n "$(ls /sys/kernel/iommu_groups)" ] || fail "no IOMMU groups: the intel-iommu is not active"
grep -q 'DMAR-IR: Enabled IRQ remapping' <<<"$(dmesg)" || fail "no interrupt remapping (DMAR-IR) in the kernel log: vfio_iommu_type1 would refuse the group"

step "both controllers on the PCI bus: $first and $second, 1b36:0010, class 0x010802"
for addr in "$first" "$second"; do
  dev="$(vfio_sysfs "$addr")"
  [ -d "$dev" ] || fail "no PCI device $addr (the guest has: $(ls /sys/bus/pci/devices | tr '\n' ' '))"
  ids_seen="$(cat "$dev/vendor") $(cat "$dev/device") $(cat "$dev/class")"
  [ "$ids_seen" = "0x1b36 0x0010 0x010802" ] || fail "$addr is '$ids_seen', not QEMU's NVMe controller (0x1b36 0x0010 0x010802)"
  echo "$addr: $ids_seen, IOMMU group $(vfio_group "$addr")"
done
[ "$(vfio_group "$first")" != "$(vfio_group "$second")" ] || fail "both controllers in IOMMU group $(vfio_group "$first")"

step "modprobe nvme + vfio-pci (no udev in the guest): both controllers on nvme with a namespace"
vfio_prepare
for k in 0 1; do
  addr="${pci[$k]}"
  [ "$(vfio_driver "$addr")" = nvme ] || fail "$addr is on $(vfio_driver "$addr"), not nvme"
  [ "$(vfio_serial "$addr")" = "nvmf-vm-$k" ] || fail "$addr has serial '$(vfio_serial "$addr")', not nvmf-vm-$k"
  ns="$(vfio_namespaces "$addr" | head -n 1)"
  bytes=$(( $(cat "/sys/block/$ns/size") * 512 ))
  [ "$bytes" -eq $((NVMF_VM_NVME_SIZE_MB * 1024 * 1024)) ] || fail "$addr: $ns has $bytes bytes, not $NVMF_VM_NVME_SIZE_MB MiB"
  echo "$addr: nvme, serial nvmf-vm-$k, /dev/$ns ($NVMF_VM_NVME_SIZE_MB MiB)"
done
[ -b /dev/nvme0n1 ] || fail "no /dev/nvme0n1"
second_ns="$(vfio_namespaces "$second" | head -n 1)"
"$SETUP_SH" status

step "in use: $second's $second_ns mounted, so setup.sh config refuses to take it"
mkdir -p /mnt/nvme-busy
mkfs.ext4 -q -F "/dev/$second_ns" || fail "mkfs.ext4 /dev/$second_ns"
mount "/dev/$second_ns" /mnt/nvme-busy || fail "mount /dev/$second_ns"
out="$(PCI_ALLOWED="$second" NRHUGE=0 "$SETUP_SH" config 2>&1)" || { echo "$out"; fail "setup.sh config (nothing to take) failed"; }
echo "$out"
expect_line "$out" "$first (1b36 0010): skipped: not in PCI_ALLOWED"
expect_line "$out" "$second (1b36 0010): skipped: in use ($second_ns is mounted on /mnt/nvme-busy)"
expect_line "$out" "nothing changed"
[ "$(vfio_driver "$second")" = nvme ] || fail "$second left nvme while mounted"
umount /mnt/nvme-busy || fail "umount /mnt/nvme-busy"

step "setup.sh config with PCI_ALLOWED=$first NRHUGE=64 (hugepages before: $huge)"
hugetlbfs_mounted && fail "hugetlbfs is mounted before setup.sh config: the check of its mount would prove nothing"
vfio_bind "$first" 64
group="$VFIO_GROUP"
out="$VFIO_SETUP_OUT"
expect_line "$out" "$first (1b36 0010): nvme -> vfio-pci, group /dev/vfio/$group"
expect_line "$out" "$second (1b36 0010): skipped: not in PCI_ALLOWED"
expect_line "$out" "hugepages: $huge -> 64 (2048 kB each)"
expect_line "$out" "hugetlbfs: mounted on /dev/hugepages"
expect_line "$out" "undo: $SETUP_SH reset"
[ "$(grep -c . <<<"$out")" -eq 5 ] || fail "setup.sh config printed more than its five lines"
[ "$(hugepages)" -eq 64 ] || fail "nr_hugepages is $(hugepages), not 64 as printed"
grep -q '^HugePages_Total: *64$' /proc/meminfo || fail "/proc/meminfo: $(grep HugePages_Total /proc/meminfo)"
hugetlbfs_mounted || fail "no hugetlbfs mount after setup.sh config"
[ "$(cat "$(vfio_sysfs "$first")/driver_override")" = vfio-pci ] || fail "$first: driver_override is not vfio-pci"
[ -z "$(vfio_namespaces "$first")" ] || fail "$first is on vfio-pci but still has $(vfio_namespaces "$first")"
[ "$(vfio_driver "$second")" = nvme ] || fail "$second left nvme ($(vfio_driver "$second")): PCI_ALLOWED not honoured"
[ -b "/dev/$second_ns" ] || fail "$second's /dev/$second_ns is gone"
grep -qx "device $first nvme" /run/nvmf-setup.state || fail "the state file does not record $first on nvme: $(cat /run/nvmf-setup.state)"

step "setup.sh config again: nothing changes"
out="$(PCI_ALLOWED="$first" NRHUGE=64 "$SETUP_SH" config 2>&1)" || { echo "$out"; fail "second setup.sh config failed"; }
echo "$out"
expect_line "$out" "$first (1b36 0010): already on vfio-pci, group /dev/vfio/$group (unchanged)"
expect_line "$out" "nothing changed"

step "the VFIO API on /dev/vfio/$group (what DPDK's EAL does first)"
probe="$(vfio_probe "$first" 2>&1)" || { echo "$probe"; fail "VFIO API check on $first failed"; }
echo "$probe"
expect_line "$probe" "vfio: config space 1b36:0010"
expect_line "$probe" "vfio: probe of $first ok"
"$SETUP_SH" status

step "setup.sh reset: $first back on nvme, hugepages back to $huge"
vfio_unbind "$first"
out="$VFIO_SETUP_OUT"
ns="$(vfio_namespaces "$first" | head -n 1)"
expect_line "$out" "$first (1b36 0010): vfio-pci -> nvme ($ns)"
expect_line "$out" "hugepages: 64 -> $huge (2048 kB each; $huge before config)"
expect_line "$out" "hugetlbfs: unmounted /dev/hugepages"
[ -b "/dev/$ns" ] || fail "no block device /dev/$ns after reset"
[ "$(hugepages)" -eq "$huge" ] || fail "nr_hugepages is $(hugepages) after reset, not $huge"
hugetlbfs_mounted && fail "hugetlbfs still mounted after reset"
[ ! -e /run/nvmf-setup.state ] || fail "reset left the state file: $(cat /run/nvmf-setup.state)"
[ ! -e "/dev/vfio/$group" ] || fail "/dev/vfio/$group still there after reset"
override="$(cat "$(vfio_sysfs "$first")/driver_override")"
[ "$override" = "(null)" ] || [ -z "$override" ] || fail "$first: driver_override is still '$override'"
dd if="/dev/$ns" of=/dev/null bs=4096 count=16 status=none || fail "cannot read /dev/$ns after reset"

if [ "${NVMF_VM_QMP:-0}" = 1 ]; then
  step "device_del ${ids[1]} (at $second) through the QMP request protocol"
  answer="$(qmp_device_del "${ids[1]}" 90)" || { echo "$answer"; fail "device_del ${ids[1]} failed"; }
  echo "host: $answer"
  vfio_wait 30 pci_gone "$second" || fail "$second still in /sys/bus/pci/devices 30 s after DEVICE_DELETED"
  [ ! -e "/dev/$second_ns" ] || fail "/dev/$second_ns still there after the unplug"
  out="$("$SETUP_SH" status)"
  echo "$out"
  grep -q "^$second " <<<"$out" && fail "setup.sh status still lists $second"
  grep -q "^$first .* nvme " <<<"$out" || fail "setup.sh status lost $first"
  answer="$(qmp_device_del no-such-device 30)" && fail "device_del of an unknown id answered ok: $answer"
  echo "host (unknown id, as expected): $answer"
else
  step "device_del: skipped (booted without NVMF_VM_QMP=1)"
fi

step "kernel log: no oops, BUG or warning"
bad="$(dmesg | grep -E 'BUG:|Oops|WARNING:|Call Trace|DMAR: DRHD: handling fault|DMAR: \[DMA' || true)"
[ -z "$bad" ] || fail "the kernel logged trouble: $bad"

echo "vfio_setup: PASS: $first nvme -> vfio-pci -> nvme through scripts/setup.sh (group $group, 64 hugepages and back), VFIO API ok$([ "${NVMF_VM_QMP:-0}" != 1 ] || echo ", $second unplugged by QMP device_del")"
