#!/bin/bash
# VM scenario, the seed's topology: hosts reading and writing NVMe SSDs on our target over
# RDMA. QEMU's two NVMe controllers go to vfio-pci (scripts/setup.sh); nvmf_tgt serves them as
# nvme bdevs (our userspace driver, DPDK memory, zero copy) in one subsystem over soft-RoCE.
#  - the Linux kernel's nvme-rdma host: nvme connect, both namespaces appear with the devices'
#    size; fio 4 KiB random with verify=crc32c and 2 jobs per disk: 0/100 (writes, verified),
#    70/30 and 100/0 (verify_only re-reads the 0/100 data) on each namespace;
#  - nvmf_perf --verify, 4 KiB, 0/100, 70/30 and 100/0 mixes;
#  - hot removal of the second controller (QEMU device_del) while fio writes with verify on
#    the first: the connected kernel host loses namespace 2 through a namespace-changed event
#    without a reconnect, fio on namespace 1 passes, and the target keeps running;
#  - on SIGTERM nvmf_tgt reports 0 bytes copied through bounce buffers for each nvme bdev;
#  - before that, with the devices on vfio-pci but no hugepages reserved, nvmf_tgt stops with
#    one line that names scripts/setup.sh.
#   pcie_target_rxe.sh [NVMF_TGT [NVMF_PERF]]
# Runs inside the guest only (vm-run.sh --nvme 2 --qmp pcie_target_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "pcie_target_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = pcie_target_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh --nvme 2 --qmp pcie_target_rxe"
[ "${NVMF_VM_NVME:-0}" -ge 2 ] || fail "needs two NVMe controllers (vm-run.sh --nvme 2)"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"
for tool in nvme fio jq blkdiscard; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs it)"
done

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/vfio.sh
source "$(dirname "$0")/lib/vfio.sh"
# shellcheck source=lib/qmp.sh
source "$(dirname "$0")/lib/qmp.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"
# shellcheck source=lib/perf.sh
source "$(dirname "$0")/lib/perf.sh"
modprobe nvme-rdma

readonly NQN=nqn.2026-11.io.nvmf-vm:ssd
logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
read -r -a pci <<<"$NVMF_VM_NVME_PCI"
read -r -a ids <<<"$NVMF_VM_NVME_IDS"
blocks=$((NVMF_VM_NVME_SIZE_MB * 1024 * 1024 / 512))

cat >"$logs/nvmf_tgt.json" <<EOF
{
  "transports": [ { "type": "rdma" } ],
  "bdevs": [
    { "type": "nvme", "name": "Nvme0n1", "pci": "${pci[0]}", "nsid": 1 },
    { "type": "nvme", "name": "Nvme1n1", "pci": "${pci[1]}", "nsid": 1 }
  ],
  "subsystems": [
    { "nqn": "$NQN", "serial_number": "NVMFVMSSD01", "model_number": "nvmf-vm nvme",
      "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Nvme0n1" }, { "nsid": 2, "bdev": "Nvme1n1" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] }
  ]
}
EOF
step "devices on vfio-pci but no hugepages: nvmf_tgt stops with one line naming the fix"
vfio_prepare
PCI_ALLOWED="${pci[*]}" NRHUGE=0 "$SETUP_SH" config || fail "scripts/setup.sh config (no hugepages) failed"
[ "$(cat /proc/sys/vm/nr_hugepages)" -eq 0 ] || fail "hugepages reserved although NRHUGE=0"
rc=0
out="$("$tgt" -c "$logs/nvmf_tgt.json" --check-config 2>&1)" || rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "nvmf_tgt --check-config without hugepages exited $rc, not 1"
grep -qF "no free hugepages for the PCIe driver's DMA memory: run 'scripts/setup.sh'" <<<"$out" ||
  fail "nvmf_tgt did not name scripts/setup.sh for the missing hugepages"

step "scripts/setup.sh config: ${pci[*]} on vfio-pci, 256 hugepages"
PCI_ALLOWED="${pci[*]}" NRHUGE=256 "$SETUP_SH" config || fail "scripts/setup.sh config failed"
[ "$(cat /proc/sys/vm/nr_hugepages)" -eq 256 ] || fail "256 hugepages not reserved"

step "nvmf_tgt: $NQN with namespaces on ${pci[0]} and ${pci[1]} (interrupt mode, 2 reactors)"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 2
grep -E "nvme_pcie|DPDK" "$TGT_LOG" || true

# disks: the kernel host's namespace block devices of $NQN, "nvmeXnY" a line, by NSID.
disks() {
  local dir name
  for dir in /sys/block/nvme*; do
    name="$(basename "$dir")"
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$NQN" ] && echo "$(cat "$dir/nsid") $name"
  done | sort -n | awk '{ print $2 }'
}
disk_count() { disks | wc -l; }
two_disks() { [ "$(disk_count)" -eq 2 ]; }
one_disk() { [ "$(disk_count)" -eq 1 ]; }

step "kernel host: nvme connect -t rdma -a $ADDR -s 4420 -n $NQN"
timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$NQN" || fail "nvme connect failed"
vfio_wait 20 two_disks || fail "the kernel host sees $(disk_count) namespaces of $NQN, not 2"
mapfile -t disk <<<"$(disks)"
ctrl="$(basename "$(readlink -f "/sys/block/${disk[0]}/device")")"
nvme list
for d in "${disk[@]}"; do
  size="$(cat "/sys/block/$d/size")"
  [ "$size" -eq "$blocks" ] || fail "/dev/$d has $size sectors, the device $blocks"
done

# fio_job NAME DISK RW EXTRA...: 2 jobs of 4 MiB each at their own offsets, QD 4, crc32c.
fio_job() {
  local name="$1" d="$2" rw="$3"
  shift 3
  timeout 600 fio --name="$name" --filename="/dev/$d" --ioengine=libaio --direct=1 --bs=4k \
    --iodepth=4 --numjobs=2 --size=4m --offset=0 --offset_increment=8m --rw="$rw" \
    --randseed=42 --verify=crc32c --verify_fatal=1 --group_reporting "$@" \
    --output="$logs/fio-$name.txt" || { cat "$logs/fio-$name.txt"; fail "fio $name on /dev/$d failed"; }
  grep -E 'err=|READ:|WRITE:' "$logs/fio-$name.txt"
  grep -q 'err= 0' "$logs/fio-$name.txt" || fail "fio $name on /dev/$d reports an error"
}
for i in 0 1; do
  d="${disk[$i]}"
  step "kernel host, namespace $((i + 1)) (/dev/$d): fio 4 KiB random 0/100, 70/30, 100/0 with verify"
  fio_job "n$((i + 1))-w100" "$d" randwrite --do_verify=1
  fio_job "n$((i + 1))-r70" "$d" randrw --rwmixread=70 --do_verify=1
  fio_job "n$((i + 1))-w100" "$d" randwrite --verify_only=1   # 100/0: reads what 0/100 wrote
done

# 2 s per run: a few thousand verified I/Os through the driver to the controllers under TCG.
PERF="$perf" PERF_SECONDS=2 PERF_LOGS="$logs"
# nvmf_perf --verify expects blocks it never wrote to read back as zeroes: the kernel host
# zeroes both namespaces first (Write Zeroes through the target to the devices).
for mix in 70 0 100; do
  for d in "${disk[@]}"; do
    timeout 300 blkdiscard -z "/dev/$d" || fail "blkdiscard -z /dev/$d (Write Zeroes) failed"
  done
  perf_run "perf-M$mix" "$NQN" -w randrw -M "$mix" -q 16 -o 4096 --verify
done
printf '%s' "$PERF_SUMMARY"

step "hot removal of ${pci[1]} (QEMU ${ids[1]}) while fio writes with verify on /dev/${disk[0]}"
timeout 600 fio --name=during-removal --filename="/dev/${disk[0]}" --ioengine=libaio --direct=1 \
  --bs=4k --iodepth=4 --size=16m --rw=randwrite --verify=crc32c --verify_fatal=1 --do_verify=1 \
  --output="$logs/fio-during-removal.txt" &
fio_pid=$!
sleep 2
qmp_device_del "${ids[1]}" 120 || fail "QEMU did not delete ${ids[1]}: the target did not let the device go"
vfio_wait 30 one_disk || fail "the kernel host still sees $(disk_count) namespaces 30 s after the removal"
[ "$(disks)" = "${disk[0]}" ] || fail "the remaining namespace is $(disks), not ${disk[0]}"
[ "$(basename "$(readlink -f "/sys/block/${disk[0]}/device")")" = "$ctrl" ] || fail "the host's controller changed"
wait "$fio_pid" || { cat "$logs/fio-during-removal.txt"; fail "fio on /dev/${disk[0]} failed across the removal"; }
grep -q 'err= 0' "$logs/fio-during-removal.txt" || fail "fio across the removal reports an error"
grep -q "namespace 2 removed: bdev 'Nvme1n1' is gone" "$TGT_LOG" || fail "nvmf_tgt did not log the namespace's removal"
kill -0 "$TGT_PID" || fail "nvmf_tgt died at the removal"
reconnects="$(dmesg | grep -c -i reconnect || true)"
[ "$reconnects" -eq 0 ] || fail "the kernel host reconnected ($reconnects lines)"

step "nvme disconnect, stop nvmf_tgt"
timeout 60 nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
tgt_stop
for name in Nvme0n1 Nvme1n1; do
  grep -q "bdev $name: 0 bytes copied through bounce buffers" "$TGT_LOG" ||
    fail "$name: not zero copy ($(grep "bdev $name:" "$TGT_LOG" || echo 'no account in the log'))"
done
# Errors are expected only from the removal of the second device.
unexpected="$(grep -i error "$TGT_LOG" | grep -v -E "${pci[1]}|Nvme1n1" || true)"
[ -z "$unexpected" ] || fail "nvmf_tgt logged errors: $unexpected"
echo "pcie_target_rxe: PASS: kernel host fio verify 0/100, 70/30, 100/0 on 2 NVMe namespaces, nvmf_perf --verify x3 ($PERF_RUNS runs), hot removal under I/O with the host kept, 0 bytes copied"
