#!/bin/bash
# VM scenario: nvmf_hostd and nvmfctl, our host exporting NVMe-oF namespaces as kernel block
# devices through the NBD driver, over soft-RoCE. Against our nvmf_tgt (malloc and uring
# namespaces) and against the kernel's nvmet-rdma (a file namespace), each: `nvmfctl connect`
# prints /dev/nbdN; `nvmfctl list` shows it; fio with verify=crc32c on the raw device;
# mkfs.ext4 (a whole-device discard), mount, write a file, remount, read it back (cmp); fio
# verify on a file in the file system; `nvmfctl disconnect` removes the device (its size goes
# to 0) and the controller (the target sees no controller). Then the target going away:
# with data written on the uring namespace, nvmf_tgt is killed with SIGKILL and restarted
# while a write is in flight; nvmf_hostd logs the reconnect schedule, reconnects, the write
# completes, and everything written reads back. nvmf_hostd stops cleanly on SIGTERM.
#   hostd_rxe.sh [NVMF_TGT NVMF_HOSTD NVMFCTL]   (default: NVMF_BUILD_DIR/tools/...)
# Runs inside the guest only (vm-run.sh hostd_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "hostd_rxe: FAIL: $*"; [ -n "${HOSTD_LOG:-}" ] && tail -30 "$HOSTD_LOG"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = hostd_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh hostd_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
hostd="${2:-${NVMF_BUILD_DIR:?}/tools/nvmf_hostd/nvmf_hostd}"
ctl="${3:-${NVMF_BUILD_DIR:?}/tools/nvmfctl}"
for binary in "$tgt" "$hostd" "$ctl"; do [ -x "$binary" ] || fail "not built: $binary"; done
for tool in fio mkfs.ext4 blockdev jq; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs it)"
done

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"
# shellcheck source=lib/kmsg.sh
source "$(dirname "$0")/lib/kmsg.sh"
# shellcheck source=lib/blockdev.sh
source "$(dirname "$0")/lib/blockdev.sh"

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
work="$(mktemp -d)"
files="$(mktemp -d)"
mnt="$(mktemp -d)"
mount -t tmpfs -o size=200m tmpfs "$files"   # the uring bdev's file and nvmet's file
readonly SOCK=/var/tmp/nvmf_hostd.sock KERNEL_NQN=nqn.2014-08.io.nvmf-vm:kernel-file KERNEL_PORT=4421
kmsg_mark

modprobe nbd nbds_max=8 || fail "modprobe nbd failed"
[ -b /dev/nbd0 ] || fail "no /dev/nbd0 after modprobe nbd"

tgt_write_config "$logs/nvmf_tgt.json" "$files"
step "nvmf_tgt: $MALLOC_NQN (malloc) and $FILE_NQN (uring on tmpfs), 2 reactors"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 2

step "nvmf_hostd --rpc-socket $SOCK --reactors 2"
HOSTD_LOG="$logs/nvmf_hostd.log"
"$hostd" --rpc-socket "$SOCK" --reactors 2 --log-level info >"$HOSTD_LOG" 2>&1 &
HOSTD_PID=$!
for _ in $(seq 1 100); do grep -q "ready:" "$HOSTD_LOG" && break; sleep 0.1; done
grep -q "ready:" "$HOSTD_LOG" || fail "nvmf_hostd did not report ready"

# connect NQN PORT [ARGS...]: nvmfctl connect; sets DEV to the one device it printed.
connect() {
  local nqn="$1" port="$2"
  shift 2
  step "nvmfctl connect -t rdma -a $ADDR -s $port -n $nqn $*"
  DEV="$(timeout 60 "$ctl" connect --socket "$SOCK" -t rdma -a "$ADDR" -s "$port" -n "$nqn" "$@")" ||
    fail "$nqn: nvmfctl connect failed: $DEV"
  echo "$DEV"
  [[ "$DEV" =~ ^/dev/nbd[0-9]+$ ]] || fail "$nqn: nvmfctl connect should print one /dev/nbdN, not '$DEV'"
  [ -b "$DEV" ] || fail "$nqn: $DEV is not a block device"
}

# disconnect NQN DEV: nvmfctl disconnect by device; the device is empty afterwards and the
# daemon lists no controller.
disconnect() {
  step "$1: nvmfctl disconnect -d $2"
  timeout 60 "$ctl" disconnect --socket "$SOCK" -d "$2" | tee "$logs/disconnect.txt" ||
    fail "$1: nvmfctl disconnect failed"
  grep -q "disconnected 1 controller" "$logs/disconnect.txt" ||
    fail "$1: nvmfctl disconnect should say it disconnected 1 controller"
  local size
  size="$(cat "/sys/block/$(basename "$2")/size")"
  [ "$size" = 0 ] || fail "$1: $2 still has $size sectors after disconnect"
  "$ctl" list --socket "$SOCK" -o json >"$logs/list-after.json"
  jq -e '.controllers | length == 0' "$logs/list-after.json" >/dev/null || fail "$1: nvmfctl list still shows a controller after disconnect"
}

# exercise TAG NQN PORT BYTES: the block device's life, verified at each step.
exercise() {
  local tag="$1" nqn="$2" port="$3" bytes="$4"
  connect "$nqn" "$port"
  local dev="$DEV"
  "$ctl" list --socket "$SOCK" | tee "$logs/$tag-list.txt"
  grep -q "$dev" "$logs/$tag-list.txt" || fail "$nqn: nvmfctl list does not show $dev"
  [ "$(blockdev --getsize64 "$dev")" = "$bytes" ] ||
    fail "$nqn: $dev has $(blockdev --getsize64 "$dev") bytes, the namespace $bytes"

  step "$nqn: fio on $dev: 4 KiB random and 128 KiB sequential writes, verify=crc32c"
  fio_verify "$tag" rand4k "$dev" randwrite 4k 16 0 8m
  fio_verify "$tag" seq128k "$dev" write 128k 4 16m 16m

  step "$nqn: mkfs.ext4 $dev, mount, write 8 MiB, remount, read back, fio verify on a file"
  ext4_round_trip "$tag" "$dev" "$mnt" "$work"
  fio_verify "$tag" fs "$mnt/fio.dat" randrw 8k 8 0 4m
  umount "$mnt" || fail "$nqn: second umount failed"
  disconnect "$nqn" "$dev"
}

exercise malloc "$MALLOC_NQN" 4420 $((MALLOC_BS * MALLOC_BLOCKS))

step "nvmet-rdma: $KERNEL_NQN (a file on tmpfs) on $ADDR:$KERNEL_PORT"
modprobe nvmet
modprobe nvmet-rdma
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
nvmet=/sys/kernel/config/nvmet
truncate -s 64M "$files/kernel.img"
mkdir "$nvmet/subsystems/$KERNEL_NQN"
echo 1 >"$nvmet/subsystems/$KERNEL_NQN/attr_allow_any_host"
mkdir "$nvmet/subsystems/$KERNEL_NQN/namespaces/1"
echo -n "$files/kernel.img" >"$nvmet/subsystems/$KERNEL_NQN/namespaces/1/device_path"
echo 1 >"$nvmet/subsystems/$KERNEL_NQN/namespaces/1/buffered_io"   # tmpfs has no O_DIRECT
echo 1 >"$nvmet/subsystems/$KERNEL_NQN/namespaces/1/enable"
mkdir "$nvmet/ports/1"
echo rdma >"$nvmet/ports/1/addr_trtype"
echo ipv4 >"$nvmet/ports/1/addr_adrfam"
echo "$ADDR" >"$nvmet/ports/1/addr_traddr"
echo "$KERNEL_PORT" >"$nvmet/ports/1/addr_trsvcid"
ln -s "$nvmet/subsystems/$KERNEL_NQN" "$nvmet/ports/1/subsystems/$KERNEL_NQN"
exercise kernel "$KERNEL_NQN" "$KERNEL_PORT" $((64 << 20))
rm "$nvmet/ports/1/subsystems/$KERNEL_NQN"
rmdir "$nvmet/ports/1"
echo 0 >"$nvmet/subsystems/$KERNEL_NQN/namespaces/1/enable"
rmdir "$nvmet/subsystems/$KERNEL_NQN/namespaces/1" "$nvmet/subsystems/$KERNEL_NQN"
kmsg_check hostd_rxe

step "the target goes away: $FILE_NQN, SIGKILL and restart of nvmf_tgt under a write"
connect "$FILE_NQN" 4420 -c 1 -l 60
dev="$DEV"
head -c 4M /dev/urandom >"$work/before"
head -c 4M /dev/urandom >"$work/during"
dd if="$work/before" of="$dev" bs=1M oflag=direct status=none || fail "write before the kill failed"
kill -9 "$TGT_PID"
wait "$TGT_PID" 2>/dev/null || true
# A write the kernel hands to nvmf_hostd while the target is down: held, sent after the reconnect.
dd if="$work/during" of="$dev" bs=1M seek=4 oflag=direct status=none &
dd_pid=$!
sleep 3
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt-restarted.log" --mode interrupt --reactors 2
for _ in $(seq 1 300); do grep -q "Successfully reconnected" "$HOSTD_LOG" && break; sleep 0.1; done
grep -E "reconnecting in|Successfully reconnected" "$HOSTD_LOG" || true
grep -q -E "reconnecting in [0-9.]+ s, attempt [0-9]+ of [0-9]+, [0-9]+ s before the controller is lost" "$HOSTD_LOG" ||
  fail "nvmf_hostd did not log its reconnect schedule"
grep -q "Successfully reconnected" "$HOSTD_LOG" || fail "nvmf_hostd did not reconnect after the target came back"
timeout 60 tail --pid="$dd_pid" -f /dev/null || fail "the write held across the restart did not finish"
wait "$dd_pid" || fail "the write held across the restart failed"
echo 3 >/proc/sys/vm/drop_caches
dd if="$dev" of="$work/read" bs=1M count=8 iflag=direct status=none || fail "read back failed"
cat "$work/before" "$work/during" | cmp - "$work/read" || fail "what was written before and during the restart does not read back"
disconnect "$FILE_NQN" "$dev"

step "stopping nvmf_hostd and nvmf_tgt"
kill -TERM "$HOSTD_PID"
rc=0
timeout 30 tail --pid="$HOSTD_PID" -f /dev/null || fail "nvmf_hostd still running 30 s after SIGTERM"
wait "$HOSTD_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "nvmf_hostd exited $rc after SIGTERM"
grep -q "stopped" "$HOSTD_LOG" || fail "nvmf_hostd: no clean stop in its log"
tgt_stop
umount "$files"
echo "hostd_rxe: PASS: nvmfctl connect gave /dev/nbdN for our malloc namespace and for nvmet-rdma's; fio verify, ext4 and a remount read-back passed on each; disconnect removed them; a write held across a SIGKILL and restart of nvmf_tgt completed and read back"
