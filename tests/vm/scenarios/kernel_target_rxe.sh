#!/bin/bash
# VM scenario: our host (nvmf_perf) against the Linux kernel's NVMe/RDMA target (nvmet-rdma)
# over soft-RoCE. nvmet is configured through configfs with two subsystems on one RDMA port
# ($ADDR:4420): one with a null_blk namespace, one with a file-backed namespace (a file on a
# guest tmpfs, buffered I/O). The kernel target answers with SEND_WITH_INVALIDATE whenever our
# SGL asks for it, so the rxe remote-invalidate flag quirk and the invalidate-once rule
# (../../../../shared/design/VM.md) apply: invalidating a window twice panics the guest.
# nvmf_perf runs, for each memreg policy (global, unsafe, sagi, max, deferred), 50/50 random
# 8 KiB I/O (above the 4 KiB in-capsule limit: reads and writes use keys) with --verify on the
# file namespace and without on null_blk (it discards writes), plus the in-capsule path
# (4 KiB writes) once on each. Passes when every run did I/O with zero errors and verify
# failures, the kernel logged no nvmet/rdma trouble, and the target tears down cleanly.
#   kernel_target_rxe.sh [NVMF_PERF [SECONDS_PER_RUN (1)]]   (default: NVMF_BUILD_DIR/tools/nvmf_perf)
# Runs inside the guest only (vm-run.sh kernel_target_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "kernel_target_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = kernel_target_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh kernel_target_rxe"
perf="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_perf}"
seconds="${2:-1}"   # lib/perf.sh says why 1 s
[ -x "$perf" ] || fail "not built: $perf"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/perf.sh
source "$(dirname "$0")/lib/perf.sh"
# shellcheck source=lib/kmsg.sh
source "$(dirname "$0")/lib/kmsg.sh"

readonly NULL_NQN=nqn.2014-08.io.nvmf-vm:kernel-null FILE_NQN=nqn.2014-08.io.nvmf-vm:kernel-file
readonly NVMET=/sys/kernel/config/nvmet

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
files="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"
kmsg_mark

step "nvmet-rdma through configfs: $NULL_NQN (null_blk), $FILE_NQN (file on tmpfs), port $ADDR:4420"
modprobe null_blk nr_devices=1 gb=1 bs=4096
modprobe nvmet
modprobe nvmet-rdma
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
[ -d "$NVMET" ] || fail "no $NVMET after modprobe nvmet"
for _ in $(seq 1 50); do [ -b /dev/nullb0 ] && break; sleep 0.1; done
[ -b /dev/nullb0 ] || fail "no /dev/nullb0 after modprobe null_blk"
truncate -s 64M "$files/file0.img"

# subsystem NQN SERIAL DEVICE_PATH [BUFFERED_IO]: a subsystem open to any host, namespace 1.
subsystem() {
  local dir="$NVMET/subsystems/$1"
  mkdir "$dir"
  echo 1 >"$dir/attr_allow_any_host"
  echo "$2" >"$dir/attr_serial"
  mkdir "$dir/namespaces/1"
  echo -n "$3" >"$dir/namespaces/1/device_path"
  [ -z "${4:-}" ] || echo "$4" >"$dir/namespaces/1/buffered_io"   # tmpfs has no O_DIRECT
  echo 1 >"$dir/namespaces/1/enable"
}
subsystem "$NULL_NQN" NVMETNULL01 /dev/nullb0
subsystem "$FILE_NQN" NVMETFILE01 "$files/file0.img" 1
port="$NVMET/ports/1"
mkdir "$port"
echo rdma >"$port/addr_trtype"
echo ipv4 >"$port/addr_adrfam"
echo "$ADDR" >"$port/addr_traddr"
echo 4420 >"$port/addr_trsvcid"
ln -s "$NVMET/subsystems/$NULL_NQN" "$port/subsystems/$NULL_NQN"
ln -s "$NVMET/subsystems/$FILE_NQN" "$port/subsystems/$FILE_NQN"
dmesg | tail -n 5

# For the record (nvmf_perf has no discovery mode): the kernel target's discovery log.
if modprobe nvme-rdma 2>/dev/null && command -v nvme >/dev/null; then
  step "information only: kernel host: nvme discover -t rdma -a $ADDR -s 4420"
  timeout 60 nvme discover -t rdma -a "$ADDR" -s 4420 || echo "(nvme discover exited $?)"
fi

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { dmesg | tail -n 20; }

perf_run null-incapsule "$NULL_NQN" -w randrw -M 70 -q 16 -o 4096 --memreg global
perf_run file-incapsule "$FILE_NQN" -w randrw -M 70 -q 16 -o 4096 --memreg global --verify
for policy in global unsafe sagi max deferred; do
  perf_run "null-$policy" "$NULL_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy"
  perf_run "file-$policy-verify" "$FILE_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy" --verify
done

step "tearing the kernel target down"
rm "$port/subsystems/$NULL_NQN" "$port/subsystems/$FILE_NQN"
rmdir "$port"
for nqn in "$NULL_NQN" "$FILE_NQN"; do
  echo 0 >"$NVMET/subsystems/$nqn/namespaces/1/enable"
  rmdir "$NVMET/subsystems/$nqn/namespaces/1"
  rmdir "$NVMET/subsystems/$nqn"
done
modprobe -r nvmet-rdma nvmet null_blk || fail "cannot unload nvmet-rdma, nvmet, null_blk"
umount "$files"
kmsg_check kernel_target_rxe
printf 'kernel_target_rxe: results\n%s' "$PERF_SUMMARY"
echo "kernel_target_rxe: PASS: $PERF_RUNS nvmf_perf runs (null_blk and verified file namespaces, every memreg policy) against nvmet-rdma over rxe0"
