#!/bin/bash
# VM scenario: the Linux kernel's NVMe/RDMA host against nvmf_tgt while the target is changed
# live over JSON-RPC (`nvmfctl tgt`), with fio writing and verifying (crc32c) on namespace 1
# all along. Each step is a set of checks (tests/tools/check.sh); the scenario fails if any did.
#  1. nvmf_tgt on rxe0 with one malloc namespace; `nvme connect --reconnect-delay 1
#     --ctrl-loss-tmo 30`; fio (4 KiB random writes, verify_backlog, time based) starts.
#  2. bdev_create + namespace_add NSID 2: the host's nvmeXn2 appears (Namespace Attribute
#     Changed event, Changed Namespace List) with the bdev's size, the controller stays the
#     same one, live, and the kernel logs no reset or reconnect; dd writes and reads back 64 KiB.
#  3. namespace_remove NSID 2: nvmeXn2 goes, again without a reconnect; bdev_delete.
#  4. subsystem_delete: the host loses the controller (state leaves "live"); subsystem_create,
#     namespace_add (the same bdev, so the same UUID), subsystem_allow_any_host and, last,
#     listener_add: the host reconnects within its ctrl-loss-tmo ("Successfully reconnected"),
#     keeps the same controller and namespace, and fio's writes reach the bdev again.
#  5. While fio runs: Identify MDTS is 8 (1 MiB) and the kernel's max_hw_sectors_kb at least
#     513; the kernel host's passthrough of 1025 x 512-byte blocks (524800 bytes): `nvme write`
#     / `nvme read` (--block-count 1024, zero based), `nvme io-passthru` read (opcode 0x02) and
#     write (0x01), and a 1 MiB `nvme write` / `nvme read` (2048 blocks), each compared byte for
#     byte. (With MDTS 5 the kernel refuses these with EINVAL before sending anything.)
#  6. fio ends with status 0, no error in its JSON, and its writes verified by reads.
#  7. save_config to a file (max_io_size 1048576 in it); nvme disconnect; SIGTERM; nvmf_tgt -c
#     that file: subsystem_list and bdev_list are the same as before, without `controllers` (the
#     connected hosts: the host was connected before, not after) and the bdevs' `channels` (the
#     reactors' open I/O channels at that moment); the host connects again, MDTS is 8, and a
#     1025-block write reads back.
# Then nvmf_tgt stops cleanly having logged no error, and the kernel logged no trouble after
# the reconnect of step 4.
#   rpc_live_rxe.sh [NVMF_TGT [NVMFCTL]]   (defaults: NVMF_BUILD_DIR/tools/nvmf_tgt, .../nvmfctl)
# Runs inside the guest only (vm-run.sh rpc_live_rxe).
set -uo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "rpc_live_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = rpc_live_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh rpc_live_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
ctl="${2:-$NVMF_BUILD_DIR/tools/nvmfctl}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$ctl" ] || fail "not built: $ctl"
for tool in nvme fio jq dd cmp; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs it)"
done

here="$(dirname "$0")"
# shellcheck source=../../tools/check.sh
source "$here/../../tools/check.sh"   # check, check_summary, expect, wait_for and $work (removed on exit)
# shellcheck source=lib/rxe.sh
source "$here/lib/rxe.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$here/lib/nvmf_tgt.sh"
# shellcheck source=lib/kmsg.sh
source "$here/lib/kmsg.sh"
modprobe nvme-rdma

readonly NQN=nqn.2026-11.io.nvmf-vm:live0 SN=NVMFVMLIVE01 MN="nvmf-vm live"
readonly BLOCKS=131072     # Malloc0: 64 MiB of 512-byte blocks
readonly NS2_BLOCKS=16384  # Malloc1: 8 MiB
readonly PASSTHRU_LBA=40960  # 20 MiB: beyond fio's 8 MiB
logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
sock="$work/nvmf_tgt.sock"
fio_pid=""

cleanup() {
  [ -n "$fio_pid" ] && kill -9 "$fio_pid" 2>/dev/null
  nvme disconnect -n "$NQN" >/dev/null 2>&1
  [ -n "${TGT_PID:-}" ] && kill -9 "$TGT_PID" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# rpc METHOD ARGS...: nvmfctl tgt on our socket, output kept in logs/rpc.log.
rpc() {
  echo "\$ nvmfctl tgt $*" >>"$logs/rpc.log"
  "$ctl" tgt --socket "$sock" "$@" 2>&1 | tee -a "$logs/rpc.log"
}

# The kernel host's view, from sysfs (no udev in the guest; devtmpfs makes the /dev nodes).
ctrl_of_nqn() {   # the controller nvmeN the host holds for $NQN; empty if none
  local dir
  for dir in /sys/class/nvme/nvme*; do
    [ "$(cat "$dir/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$dir"; return; }
  done
  true
}
disk_of_nsid() {  # the block device nvmeXnY of NSID $1 of $NQN; empty if none
  local dir name
  for dir in /sys/block/nvme*; do
    name="$(basename "$dir")"
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
    [ "$(cat "$dir/nsid" 2>/dev/null)" = "$1" ] && { echo "$name"; return; }
  done
  true
}
ctrl_state() { cat "/sys/class/nvme/$1/state" 2>/dev/null || echo gone; }
is_live() { [ "$(ctrl_state "$ctrl")" = live ]; }
not_live() { [ "$(ctrl_state "$ctrl")" != live ]; }
has_disk() { local d; d="$(disk_of_nsid "$1")"; [ -n "$d" ] && [ -b "/dev/$d" ]; }
no_disk() { [ -z "$(disk_of_nsid "$1")" ]; }
kmsg_since() { dmesg | tail -n "+$((KMSG_START + 1))"; }
no_reconnect_since_mark() { ! kmsg_since | grep -q -i -E 'reconnect|resetting|reset controller'; }
fio_running() { kill -0 "$fio_pid" 2>/dev/null; }
bdev_writes() {   # write commands bdev $1 has completed, from the target's stats
  "$ctl" tgt --socket "$sock" -o json stats |
    jq -r --arg name "$1" 'first(.bdevs[] | select(.name == $name) | .ops.write)'
}
same_ctrl() { [ "$(ctrl_of_nqn)" = "$ctrl" ]; }

connect() {
  timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$NQN" --reconnect-delay 1 --ctrl-loss-tmo 30 ||
    fail "nvme connect -t rdma -a $ADDR -s 4420 -n $NQN failed"
  wait_for 10 has_disk 1 || fail "no block device for namespace 1 of $NQN 10 s after nvme connect"
  ctrl="$(ctrl_of_nqn)"
  disk1="$(disk_of_nsid 1)"
  [ -n "$ctrl" ] || fail "no controller of $NQN in /sys/class/nvme after nvme connect"
  nvme list
  echo "controller /dev/$ctrl ($(ctrl_state "$ctrl")), namespace 1 /dev/$disk1"
}

cat >"$logs/nvmf_tgt.json" <<EOF
{
  "transports": [ { "type": "rdma" } ],
  "bdevs": [ { "type": "malloc", "name": "Malloc0", "block_size": 512, "num_blocks": $BLOCKS } ],
  "subsystems": [
    { "nqn": "$NQN", "serial_number": "$SN", "model_number": "$MN", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] }
  ]
}
EOF
kmsg_mark

# ---- 1 ----
step "1. nvmf_tgt ($NQN, Malloc0) with --rpc-socket; kernel host connects; fio with verify starts"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 2 --rpc-socket "$sock"
expect "the RPC socket answers" rpc subsystem_list >/dev/null
connect
expect "controller $ctrl is live after connect" is_live
# fio must run through steps 2 to 5 (step 4 checks that it still runs after the reconnect),
# however long a loaded host makes them: it runs until step 6 creates its trigger file (fio
# then stops its job as at the end of its run time, status 0); the run time is only a cap.
fio_stop="$work/fio.stop"
echo "  fio: 4 KiB random writes at QD 4 over the first 8 MiB, verify_backlog 256, until step 6"
fio --name=live --filename="/dev/$disk1" --ioengine=libaio --direct=1 --rw=randwrite --bs=4k \
  --iodepth=4 --offset=0 --size=8m --time_based --runtime=600 --verify=crc32c \
  --verify_backlog=256 --verify_fatal=1 --randseed=7 --output-format=json \
  --trigger-file="$fio_stop" --aux-path="$work" \
  --output="$logs/fio-live.json" >"$logs/fio-live.out" 2>&1 &
fio_pid=$!
sleep 3
expect "fio runs on /dev/$disk1" fio_running

# ---- 2 ----
step "2. bdev_create Malloc1 + namespace_add NSID 2: the host sees nvmeXn2 without reconnecting"
expect "bdev_create Malloc1" rpc bdev_create --type malloc --name Malloc1 --block_size 512 --num_blocks "$NS2_BLOCKS"
expect "namespace_add NSID 2" rpc namespace_add --nqn "$NQN" --bdev Malloc1 --nsid 2
t0="$(cut -d' ' -f1 /proc/uptime)"
if expect "namespace 2 appears on the host within 30 s" wait_for 30 has_disk 2; then
  disk2="$(disk_of_nsid 2)"
  echo "  /dev/$disk2 after $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime) s"
  expect "/dev/$disk2 has $NS2_BLOCKS sectors" test "$(cat "/sys/block/$disk2/size")" -eq "$NS2_BLOCKS"
  head -c 65536 /dev/urandom >"$work/ns2.bin"
  dd if="$work/ns2.bin" of="/dev/$disk2" bs=64k count=1 seek=3 oflag=direct status=none
  check "dd write to /dev/$disk2" $? "dd of=/dev/$disk2 failed"
  dd if="/dev/$disk2" of="$work/ns2.back" bs=64k count=1 skip=3 iflag=direct status=none
  check "dd read from /dev/$disk2" $? "dd if=/dev/$disk2 failed"
  expect "64 KiB written to namespace 2 read back the same" cmp "$work/ns2.bin" "$work/ns2.back"
fi
expect "the host kept controller $ctrl" same_ctrl
expect "controller $ctrl is live" is_live
expect "no reset or reconnect in the kernel log" no_reconnect_since_mark
expect "fio still runs" fio_running

# ---- 3 ----
step "3. namespace_remove NSID 2: nvmeXn2 goes, without a reconnect"
expect "namespace_remove NSID 2" rpc namespace_remove --nqn "$NQN" --nsid 2
expect "namespace 2 leaves the host within 30 s" wait_for 30 no_disk 2
expect "namespace 1 stays" has_disk 1
expect "bdev_delete Malloc1" rpc bdev_delete --name Malloc1
expect "the host kept controller $ctrl" same_ctrl
expect "controller $ctrl is live" is_live
expect "no reset or reconnect in the kernel log" no_reconnect_since_mark
expect "fio still runs" fio_running

# ---- 4 ----
step "4. subsystem_delete and re-create: the host reconnects within its ctrl-loss-tmo, fio goes on"
kmsg_mark
expect "subsystem_delete" rpc subsystem_delete --nqn "$NQN"
rpc -o json subsystem_list >"$work/list-deleted.json"
expect "subsystem_list no longer lists $NQN" bash -c "! grep -q '\"$NQN\"' '$work/list-deleted.json'"
expect "the host's controller leaves the live state within 10 s" wait_for 10 not_live
echo "  controller $ctrl: $(ctrl_state "$ctrl")"
sleep 2   # a reconnect attempt or two against the missing subsystem (delay 1 s)
# The listener last: until then the host finds nothing at $ADDR:4420 (subsystem_delete closed
# the listener), so it cannot connect to a subsystem without its namespace or its host rule.
expect "subsystem_create" rpc subsystem_create --nqn "$NQN" --serial_number "$SN" --model_number "$MN" --allow_any_host false
expect "namespace_add Malloc0 as NSID 1" rpc namespace_add --nqn "$NQN" --bdev Malloc0 --nsid 1
expect "subsystem_allow_any_host" rpc subsystem_allow_any_host --nqn "$NQN" --allow true
expect "listener_add $ADDR:4420" rpc listener_add --nqn "$NQN" --traddr "$ADDR" --trsvcid 4420 --adrfam ipv4
t0="$(cut -d' ' -f1 /proc/uptime)"
expect "controller $ctrl is live again within 28 s (ctrl-loss-tmo 30)" wait_for 28 is_live
echo "  live after $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime) s"
expect "the kernel says it reconnected" wait_for 5 bash -c "dmesg | tail -n +$((KMSG_START + 1)) | grep -q 'Successfully reconnected'"
kmsg_since | grep -i -E 'reconnect|connect|reset' | tail -8
expect "the host kept controller $ctrl" same_ctrl
expect "namespace 1 is still /dev/$disk1" test "$(disk_of_nsid 1)" = "$disk1"
writes="$(bdev_writes Malloc0)"
sleep 3
expect "fio still runs after the reconnect" fio_running
writes_after="$(bdev_writes Malloc0)"
expect "fio's writes reach Malloc0 after the reconnect ($writes, then $writes_after)" \
  test "$writes_after" -gt "$writes"
kmsg_mark   # the reconnect's lines are expected; from here on the kernel must log no trouble

# ---- 5 ----
# While fio still writes (if it does: its run ends when it ends), away from its 8 MiB.
step "5. MDTS 8; the kernel host's passthrough of 1025 x 512 B (524800 bytes) and of 1 MiB"
nvme id-ctrl "/dev/$ctrl" >"$logs/id-ctrl.txt"
mdts="$(awk '$1 == "mdts" { print $3 }' "$logs/id-ctrl.txt")"
expect "Identify MDTS is 8 (1 MiB), not $mdts" test "$mdts" = 8
max_kb="$(cat "/sys/block/$disk1/queue/max_hw_sectors_kb")"
echo "  /sys/block/$disk1/queue/max_hw_sectors_kb: $max_kb"
expect "the kernel's max_hw_sectors_kb ($max_kb) holds 1025 blocks" test "$max_kb" -ge 513
dev="/dev/$disk1"
lba=$PASSTHRU_LBA
head -c 524800 /dev/urandom >"$work/a.bin"
expect "nvme write 1025 blocks (--block-count 1024, 524800 bytes)" \
  nvme write "$dev" --start-block="$lba" --block-count=1024 --data-size=524800 --data="$work/a.bin"
expect "nvme read 1025 blocks" \
  nvme read "$dev" --start-block="$lba" --block-count=1024 --data-size=524800 --data="$work/a.back"
expect "nvme read returns what nvme write wrote" cmp "$work/a.bin" "$work/a.back"
dd if="$dev" of="$work/a.dd" bs=512 count=1025 skip="$lba" iflag=direct status=none
expect "the block layer reads the same 1025 blocks" cmp "$work/a.bin" "$work/a.dd"
nsid="$(cat "/sys/block/$disk1/nsid")"
nvme io-passthru "$dev" --opcode=0x02 --namespace-id="$nsid" --data-len=524800 --read \
  --cdw10="$lba" --cdw11=0 --cdw12=1024 --raw-binary >"$work/a.pt" 2>"$work/pt.err"
check "nvme io-passthru read (opcode 0x02, 524800 bytes)" $? "$(cat "$work/pt.err")"
expect "io-passthru read returns the 524800 bytes written" cmp "$work/a.bin" "$work/a.pt"
lba2=$((PASSTHRU_LBA + 2048))
head -c 524800 /dev/urandom >"$work/b.bin"
expect "nvme io-passthru write (opcode 0x01, 524800 bytes)" \
  nvme io-passthru "$dev" --opcode=0x01 --namespace-id="$nsid" --data-len=524800 --write \
  --cdw10="$lba2" --cdw11=0 --cdw12=1024 --input-file="$work/b.bin"
expect "nvme read of what io-passthru wrote" \
  nvme read "$dev" --start-block="$lba2" --block-count=1024 --data-size=524800 --data="$work/b.back"
expect "io-passthru write landed byte for byte" cmp "$work/b.bin" "$work/b.back"
lba3=$((PASSTHRU_LBA + 4096))
head -c 1048576 /dev/urandom >"$work/c.bin"
expect "nvme write 1 MiB (2048 blocks, MDTS)" \
  nvme write "$dev" --start-block="$lba3" --block-count=2047 --data-size=1048576 --data="$work/c.bin"
expect "nvme read 1 MiB" \
  nvme read "$dev" --start-block="$lba3" --block-count=2047 --data-size=1048576 --data="$work/c.back"
expect "1 MiB read back the same" cmp "$work/c.bin" "$work/c.back"

# ---- 6 ----
step "6. fio ends: status 0, no errors, verified"
expect "fio still runs at step 6" fio_running
touch "$fio_stop"
wait "$fio_pid"
rc=$?
fio_pid=""
check "fio exits 0" "$rc" "fio exited $rc: $(tail -5 "$logs/fio-live.out")"
# jq, not python3, for the JSON checks: under TCG a python3 start costs 2-3 s of a vCPU.
jq -r '.jobs[0] | .write as $w | .read as $r
  | "  fio: \(.job_runtime / 100 | round / 10) s, error \(.error), writes \($w.total_ios) "
  + "(\($w.io_bytes / 1048576 | floor) MiB, \($w.iops | round) IOPS, clat p99 "
  + "\(($w.clat_ns.percentile["99.000000"] // 0) / 100000 | round / 10) ms), "
  + "verify reads \($r.total_ios) (\($r.io_bytes / 1048576 | floor) MiB)"' "$logs/fio-live.json"
jq -e '.jobs[0] | .error == 0 and .write.total_ios > 0 and .read.total_ios > 0' \
  "$logs/fio-live.json" >/dev/null
check "fio's JSON: error 0, writes done and verified by reads" $? "see $logs/fio-live.json"
expect "fio printed no verify failure" bash -c "! grep -q -i 'verify' '$logs/fio-live.out'"

# ---- 7 ----
step "7. save_config, SIGTERM, nvmf_tgt -c the saved file: the same subsystems and bdevs"
rpc -o json subsystem_list >"$logs/subsystems-before.json"
rpc -o json bdev_list >"$logs/bdevs-before.json"
expect "save_config --path" rpc save_config --path "$logs/saved.json" >/dev/null
expect "the saved configuration has max_io_size 1048576" \
  jq -e '.transports[0].max_io_size == 1048576' "$logs/saved.json"
timeout 60 nvme disconnect -n "$NQN"
check "nvme disconnect" $? "nvme disconnect -n $NQN failed"
tgt_stop
tgt_check_log
first_log="$TGT_LOG"
tgt_start "$tgt" "$logs/saved.json" "$logs/nvmf_tgt-restarted.log" --mode interrupt --reactors 2 --rpc-socket "$sock"
rpc -o json subsystem_list >"$logs/subsystems-after.json"
rpc -o json bdev_list >"$logs/bdevs-after.json"
# same_lists BEFORE AFTER KEY: the two lists are equal (and not empty) once each entry drops KEY.
same_lists() {
  local strip='map(del(.[$drop]))'
  jq -e --arg drop "$3" --slurpfile after "$2" \
    "($strip) as \$a | (\$after[0] | $strip) as \$b | \$a == \$b and (\$a | length) > 0" "$1" >/dev/null && return
  jq -S --arg drop "$3" "$strip" "$1" "$2"
  return 1
}
expect "subsystem_list after the restart = before (without controllers)" \
  same_lists "$logs/subsystems-before.json" "$logs/subsystems-after.json" controllers
expect "bdev_list after the restart = before (without channels)" \
  same_lists "$logs/bdevs-before.json" "$logs/bdevs-after.json" channels
connect
nvme id-ctrl "/dev/$ctrl" >"$logs/id-ctrl-restarted.txt"
mdts="$(awk '$1 == "mdts" { print $3 }' "$logs/id-ctrl-restarted.txt")"
expect "the restarted target's MDTS is 8, not $mdts" test "$mdts" = 8
dev="/dev/$disk1"
expect "nvme write 1025 blocks to the restarted target" \
  nvme write "$dev" --start-block="$lba" --block-count=1024 --data-size=524800 --data="$work/b.bin"
expect "nvme read 1025 blocks from the restarted target" \
  nvme read "$dev" --start-block="$lba" --block-count=1024 --data-size=524800 --data="$work/b.again"
expect "the restarted target returns them" cmp "$work/b.bin" "$work/b.again"

step "nvme disconnect, stop nvmf_tgt"
timeout 60 nvme disconnect -n "$NQN"
check "nvme disconnect" $? "nvme disconnect -n $NQN failed"
tgt_stop
tgt_check_log
TGT_PID=""
kmsg_check rpc_live_rxe
echo "first nvmf_tgt's log: $first_log"
check_summary rpc_live_rxe || fail "$failures of $((passes + failures)) checks failed (FAIL lines above)"
echo "rpc_live_rxe: PASS: $passes checks: a namespace added and removed live, the subsystem deleted and re-created under verified fio with the host reconnecting, save_config restarting the same target, and the kernel host's 1025-block and 1 MiB passthrough"
