#!/bin/bash
# VM scenario: our userspace NVMe PCIe driver (src/nvme_pcie) on QEMU's NVMe controllers,
# through vfio-pci with DPDK memory. scripts/setup.sh hands both controllers to vfio-pci and
# reserves hugepages; the driver's VFIO tests then run on them and every one must run (none
# skipped) and pass: identify, verified I/O on four queues of four threads, a controller reset
# under I/O that loses nothing, and hot removal of the second controller (QEMU device_del
# through the QMP request protocol) under I/O: outstanding reads fail once with a status, new
# ones fail, and the driver lets the kernel take the device back.
#   pcie_driver.sh [TEST_BINARY [GTEST_ARGS...]]   (default: NVMF_BUILD_DIR/tests/unit/nvme_pcie/nvme_pcie_vfio_tests)
# Runs inside the guest only (vm-run.sh --nvme 2 --qmp pcie_driver).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "pcie_driver: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = pcie_driver ] || fail "runs inside the VM guest: tests/vm/vm-run.sh --nvme 2 --qmp pcie_driver"
[ "${NVMF_VM_NVME:-0}" -ge 2 ] || fail "needs two NVMe controllers (vm-run.sh --nvme 2)"
[ -n "${NVMF_VM_QMP_DIR:-}" ] || fail "needs the QMP request protocol (vm-run.sh --qmp)"
binary="${1:-${NVMF_BUILD_DIR:?}/tests/unit/nvme_pcie/nvme_pcie_vfio_tests}"
[ $# -eq 0 ] || shift   # the rest goes to the test binary (e.g. --gtest_filter=...)
[ -x "$binary" ] || fail "test binary not built: $binary (ninja nvme_pcie_vfio_tests)"

# shellcheck source=lib/vfio.sh
source "$(dirname "$0")/lib/vfio.sh"

read -r -a pci <<<"$NVMF_VM_NVME_PCI"
read -r -a ids <<<"$NVMF_VM_NVME_IDS"
vfio_prepare
kmsg_start="$(dmesg | wc -l)"
step "scripts/setup.sh config: ${pci[0]} and ${pci[1]} to vfio-pci, 256 hugepages"
PCI_ALLOWED="${pci[*]}" NRHUGE=256 "$SETUP_SH" config || fail "scripts/setup.sh config failed"
for addr in "${pci[0]}" "${pci[1]}"; do
  [ "$(vfio_driver "$addr")" = vfio-pci ] || fail "$addr is on $(vfio_driver "$addr") after setup.sh"
done

step "$binary on ${pci[*]}"
log="$(mktemp)"
start=$(date +%s)
rc=0
NVMF_TEST_PCI="${pci[*]}" NVMF_TEST_NVME_SIZE_MB="$NVMF_VM_NVME_SIZE_MB" \
  NVMF_TEST_REMOVE_ID="${ids[1]}" "$binary" --gtest_color=no "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
step "tests took $(( $(date +%s) - start ))s, exit $rc"

ran="$(grep -cE '^\[       OK \] ' "$log" || true)"
skipped="$(grep -E '^\[  SKIPPED \] [A-Za-z_0-9]+\.' "$log" | sort -u || true)"
failed="$(grep -E '^\[  FAILED  \] [A-Za-z_0-9]+\.' "$log" | sort -u || true)"
[ -z "$failed" ] || fail "failed tests:"$'\n'"$failed"
[ "$rc" -eq 0 ] || fail "test binary exited $rc"
[ -z "$skipped" ] || fail "tests skipped in the guest (they must run on QEMU's controllers):"$'\n'"$skipped"
[ "$ran" -ge 4 ] || fail "only $ran tests ran"
pci_gone() { [ ! -e "$(vfio_sysfs "$1")" ]; }
vfio_wait 10 pci_gone "${pci[1]}" || fail "${pci[1]} is still on the PCI bus after device_del"
# A driver that programs a wrong IOVA shows up here as a DMAR fault, a hang as a hung task.
kernel="$(dmesg | tail -n "+$((kmsg_start + 1))")"
printf -- '--- kernel log during the tests:\n%s\n---\n' "$kernel"
bad="$(grep -E 'DMAR:.*[Ff]ault|BUG|Oops|Call Trace|hung task' <<<"$kernel" || true)"
[ -z "$bad" ] || fail "the kernel logged trouble: $bad"
echo "pcie_driver: PASS: $ran tests passed on ${pci[*]}, none skipped; ${pci[1]} hot-removed"
