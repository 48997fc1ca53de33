#!/bin/bash
# VM scenario: the Linux kernel's NVMe/RDMA host (nvme-rdma, nvme-cli, fio) against our target
# over soft-RoCE. nvmf_tgt serves two subsystems on rxe0: a malloc namespace and a uring
# namespace (a file on a guest tmpfs). Checks, for each subsystem: `nvme discover` lists it with
# the right trtype, traddr, trsvcid and subnqn; `nvme connect`; `nvme id-ctrl` and `nvme id-ns`
# say what the configuration says; fio with verify=crc32c over 4 KiB random and 128 KiB
# sequential writes (direct I/O); mkfs.ext4, mount, write a file, remount, read it back (cmp);
# `nvme disconnect` removes the controller. Then nvmf_tgt stops cleanly on SIGTERM having logged
# no error, and the kernel logged no nvme/rdma/block trouble.
#   kernel_host_rxe.sh [NVMF_TGT]   (default: NVMF_BUILD_DIR/tools/nvmf_tgt)
# Runs inside the guest only (vm-run.sh kernel_host_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "kernel_host_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = kernel_host_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh kernel_host_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
[ -x "$tgt" ] || fail "not built: $tgt"
for tool in nvme fio mkfs.ext4 python3 blockdev; do
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
modprobe nvme-rdma

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
work="$(mktemp -d)"
files="$(mktemp -d)"
mnt="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"   # the uring bdev's file lives here
kmsg_mark

tgt_write_config "$logs/nvmf_tgt.json" "$files"
step "nvmf_tgt: $MALLOC_NQN (malloc) and $FILE_NQN (uring on tmpfs), interrupt mode, 2 reactors"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 2

step "nvme discover -t rdma -a $ADDR -s 4420"
timeout 60 nvme discover -t rdma -a "$ADDR" -s 4420 | tee "$logs/discover.txt" ||
  fail "nvme discover failed"
grep -q -E '^Discovery Log Number of Records 2,' "$logs/discover.txt" ||
  fail "the discovery log should hold 2 records"
# One line per entry: "trtype traddr trsvcid subnqn".
awk '/^=====Discovery Log Entry/ { if (n++) print t, a, s, q; t = a = s = q = "" }
     $1 == "trtype:" { t = $2 } $1 == "traddr:" { a = $2 }
     $1 == "trsvcid:" { s = $2 } $1 == "subnqn:" { q = $2 }
     END { if (n) print t, a, s, q }' "$logs/discover.txt" >"$logs/entries.txt"
for nqn in "$MALLOC_NQN" "$FILE_NQN"; do
  grep -q -x "rdma $ADDR 4420 $nqn" "$logs/entries.txt" ||
    fail "no discovery entry 'trtype rdma, traddr $ADDR, trsvcid 4420, subnqn $nqn' in: $(cat "$logs/entries.txt")"
done

# ctrl_of NQN: the controller (nvmeN) the kernel host holds for NQN; empty if none.
ctrl_of() {
  local dir
  for dir in /sys/class/nvme/nvme*; do
    [ -e "$dir/subsysnqn" ] || continue
    [ "$(cat "$dir/subsysnqn")" = "$1" ] && { basename "$dir"; return; }
  done
  true
}
# disk_of NQN: its namespace's block device (nvmeXnY; with native multipath the disk's parent
# is the nvme-subsystem, without it the controller: both have subsysnqn); empty if none.
disk_of() {
  local dir name
  for dir in /sys/block/nvme*; do
    name="$(basename "$dir")"
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$1" ] && { echo "$name"; return; }
  done
  true
}

# exercise TAG NQN SERIAL MODEL BLOCK_SIZE BLOCKS (TAG names its files in logs/)
exercise() {
  local tag="$1" nqn="$2" sn="$3" mn="$4" bs="$5" blocks="$6"
  local ctrl disk _
  step "$nqn: nvme connect -t rdma -a $ADDR -s 4420"
  timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$nqn" || fail "$nqn: nvme connect failed"
  for _ in $(seq 1 100); do
    disk="$(disk_of "$nqn")"
    [ -n "$disk" ] && [ -b "/dev/$disk" ] && break
    sleep 0.1
  done
  ctrl="$(ctrl_of "$nqn")"
  [ -n "$ctrl" ] || fail "$nqn: no controller in /sys/class/nvme after nvme connect"
  { [ -n "$disk" ] && [ -b "/dev/$disk" ]; } || fail "$nqn: no namespace block device after nvme connect"
  nvme list
  echo "controller /dev/$ctrl, namespace /dev/$disk"

  step "$nqn: nvme id-ctrl /dev/$ctrl, nvme id-ns /dev/$disk"
  nvme id-ctrl "/dev/$ctrl" -o json >"$logs/$tag-id-ctrl.json" || fail "$nqn: nvme id-ctrl failed"
  nvme id-ns "/dev/$disk" -o json >"$logs/$tag-id-ns.json" || fail "$nqn: nvme id-ns failed"
  local bytes
  bytes="$(blockdev --getsize64 "/dev/$disk")"
  python3 - "$logs/$tag-id-ctrl.json" "$logs/$tag-id-ns.json" "$nqn" "$sn" "$mn" "$bs" "$blocks" "$bytes" <<'PY' ||
import json, sys
ctrl, ns = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
nqn, sn, mn = sys.argv[3:6]
bs, blocks, size = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
lbaf = ns["lbafs"][ns["flbas"] & 0xF]
print(f"id-ctrl: sn '{ctrl['sn'].strip()}' mn '{ctrl['mn'].strip()}' subnqn {ctrl['subnqn']} "
      f"nn {ctrl['nn']} mdts {ctrl['mdts']} ver {ctrl['ver']:#x}")
print(f"id-ns: nsze {ns['nsze']} ncap {ns['ncap']} nuse {ns['nuse']} flbas {ns['flbas']} "
      f"lba data size 2^{lbaf['ds']}; block device {size} bytes")
checks = [
    ("serial number", ctrl["sn"].strip() == sn),
    ("model number", ctrl["mn"].strip() == mn),
    ("subnqn", ctrl["subnqn"] == nqn),
    ("number of namespaces", ctrl["nn"] >= 1),
    ("NVMe version", ctrl["ver"] >= 0x10300),
    ("nsze", ns["nsze"] == blocks),
    ("ncap", ns["ncap"] == blocks),
    ("LBA data size", 1 << lbaf["ds"] == bs),
    ("block device size", size == bs * blocks),
]
bad = [name for name, ok in checks if not ok]
if bad:
    print("wrong: " + ", ".join(bad))
sys.exit(1 if bad else 0)
PY
    fail "$nqn: identify data is not what the configuration says (above)"

  step "$nqn: fio 4 KiB random writes, verify=crc32c (16 MiB, direct, QD 8)"
  fio_verify "$tag" rand "/dev/$disk" randwrite 4k 8 0 16m
  step "$nqn: fio 128 KiB sequential writes, verify=crc32c (32 MiB, direct, QD 4)"
  fio_verify "$tag" seq "/dev/$disk" write 128k 4 16m 32m

  step "$nqn: mkfs.ext4, mount, write 8 MiB, remount, read back"
  ext4_round_trip "$tag" "/dev/$disk" "$mnt" "$work"
  umount "$mnt" || fail "$nqn: second umount failed"

  step "$nqn: nvme disconnect"
  timeout 60 nvme disconnect -n "$nqn" | tee "$logs/$tag-disconnect.txt" || fail "$nqn: nvme disconnect failed"
  grep -q "disconnected 1 controller" "$logs/$tag-disconnect.txt" ||
    fail "$nqn: nvme disconnect should disconnect 1 controller"
  for _ in $(seq 1 100); do
    [ -z "$(ctrl_of "$nqn")" ] && break
    sleep 0.1
  done
  [ -z "$(ctrl_of "$nqn")" ] || fail "$nqn: the controller is still there after nvme disconnect"
  [ -z "$(disk_of "$nqn")" ] || fail "$nqn: the namespace is still there after nvme disconnect"
}

exercise malloc "$MALLOC_NQN" "$MALLOC_SN" "$MALLOC_MN" "$MALLOC_BS" "$MALLOC_BLOCKS"
exercise file "$FILE_NQN" "$FILE_SN" "$FILE_MN" "$FILE_BS" "$FILE_BLOCKS"

step "stopping nvmf_tgt"
tgt_stop
tgt_check_log
umount "$files"
kmsg_check kernel_host_rxe
echo "kernel_host_rxe: PASS: the kernel host discovered, connected, identified, ran verified fio and ext4 on our malloc and uring namespaces over rxe0, and disconnected cleanly"
