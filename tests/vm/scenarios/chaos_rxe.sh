#!/bin/bash
# VM scenario: chaos under I/O (issue 14, "Chaos in the VM"). nvmf_tgt serves one uring
# namespace (a file on a guest tmpfs: unlike a malloc bdev it keeps its data when the process
# dies) on rxe0. Each step is a set of checks (tests/tools/check.sh); the scenario fails if any
# did, and fails at once when a step cannot go on.
#  1. The kernel host (`nvme connect --reconnect-delay 1 --ctrl-loss-tmo 30`) with nvmf_tgt
#     killed by SIGKILL and restarted with the same configuration under fio (verify=crc32c):
#     a. fio writes 8 MiB and ends (acknowledged, not read yet);
#     b. fio writes 16 MiB of 4 KiB random writes with verify; once the target has taken 256
#        of them, SIGKILL; 2 s later the same nvmf_tgt -c again. The kernel reconnects
#        ("Successfully reconnected"), keeps its controller and disk, fio finishes without an
#        error and its verify pass reads all 16 MiB back from the restarted target: the writes
#        acknowledged before the kill are checked after the restart;
#     c. fio --verify_only over a.'s 8 MiB passes on the restarted target.
#  2. The kernel host's controller reset and delete during I/O, against the restarted target:
#     a. `nvme reset` while fio writes with verify: the controller is live again with a new
#        association (CNTLID), the target holds only that one, fio goes on (the target sees its
#        writes after the reset), ends with status 0 and verifies;
#     b. `echo 1 > /sys/class/nvme/nvmeX/delete_controller` while fio writes: fio ends with an
#        error (expected) within 60 s, the controller and disk go, the target is still up, holds
#        no controller and logs no error;
#     c. a new `nvme connect` works and fio --verify_only passes over what 1a. and 2a. wrote.
#     nvme disconnect; SIGTERM stops the target cleanly.
#  3. Our host: nvmf_perf --verify (4 KiB 50/50 random, --reconnect-delay-ms 500,
#     --ctrl-loss-timeout-ms 30000) with nvmf_tgt killed by SIGKILL mid-run and restarted. The
#     host must reconnect and end with exit 0, zero errors and verify failures and a balanced
#     account (`account: submitted=S completed=C failed=F inflight=0 ... ok`): the library's
#     controller reset (ControllerOpts::controller_recovery) connects a new admin queue to the
#     restarted target and its I/O queues follow to the new controller ID. With
#     HOST_RECOVERS_CONTROLLER=0 below (a build without the reset) a lost controller is reported
#     as KNOWN GAP and the step checks what it can: the run ends, no verify failure, the account
#     balances.
# Throughout: nvmf_tgt logs no error, and the kernel itself no trouble (kmsg_kernel_clean: the
# nvme host's reconnect and I/O-error lines are expected here); in step 3, where the kernel's
# nvme host has no part, not even those (kmsg_check).
#   chaos_rxe.sh [NVMF_TGT [NVMF_PERF [NVMFCTL]]]   (defaults: NVMF_BUILD_DIR/tools/...)
# Runs inside the guest only (vm-run.sh chaos_rxe).
set -uo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
note() { echo "  [$(cut -d' ' -f1 /proc/uptime)s] $*"; }   # an event within a step
fail() { echo "chaos_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = chaos_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh chaos_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
ctl="${3:-$NVMF_BUILD_DIR/tools/nvmfctl}"
for binary in "$tgt" "$perf" "$ctl"; do [ -x "$binary" ] || fail "not built: $binary"; done
for tool in nvme fio jq; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs it)"
done

# libnvmf_host resets a controller whose admin queue it lost: step 3's controller loss is a
# failure, not a known gap.
readonly HOST_RECOVERS_CONTROLLER=1

here="$(dirname "$0")"
# shellcheck source=../../tools/check.sh
source "$here/../../tools/check.sh"   # check, check_summary, expect, wait_for and $work (removed on exit)
# shellcheck source=lib/rxe.sh
source "$here/lib/rxe.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$here/lib/nvmf_tgt.sh"   # FILE_NQN & co., tgt_start, tgt_stop, tgt_check_log
# shellcheck source=lib/kmsg.sh
source "$here/lib/kmsg.sh"
modprobe nvme-rdma

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
files="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"   # the uring bdev's file: survives nvmf_tgt
sock="$work/nvmf_tgt.sock"
readonly KILL_AFTER_WRITES=256   # the target has taken this many of a run's writes: SIGKILL
fio_pid=""
perf_pid=""

cleanup() {
  [ -n "$fio_pid" ] && kill -9 "$fio_pid" 2>/dev/null
  [ -n "$perf_pid" ] && kill -9 "$perf_pid" 2>/dev/null
  nvme disconnect -n "$FILE_NQN" >/dev/null 2>&1
  [ -n "${TGT_PID:-}" ] && kill -9 "$TGT_PID" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# wait_pid PID SECONDS: 0 once PID has exited; kills it and returns 1 if it still runs then.
wait_pid() {
  wait_for "$2" pid_gone "$1" && return 0
  kill -9 "$1" 2>/dev/null
  return 1
}
pid_gone() { ! kill -0 "$1" 2>/dev/null; }

# ---- the target ----
# The bdev's UUID is pinned: without it every start of nvmf_tgt gives the namespace a new
# random one, and the kernel host, reconnecting to the restarted target, would find the
# namespace's identifiers changed and remove it.
cat >"$logs/nvmf_tgt.json" <<EOF
{
  "transports": [ { "type": "rdma" } ],
  "bdevs": [
    { "type": "uring", "name": "File0", "path": "$files/file0.img", "create_file": true,
      "size_bytes": $((FILE_BS * FILE_BLOCKS)), "block_size": $FILE_BS, "direct_io": "prefer",
      "uuid": "6e766d66-6368-416f-9300-000000000001" }
  ],
  "subsystems": [
    { "nqn": "$FILE_NQN", "serial_number": "$FILE_SN", "model_number": "$FILE_MN",
      "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "File0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] }
  ]
}
EOF
TGT_RUNS=0
TGT_LOGS=()
# start_target: nvmf_tgt -c the configuration above, log nvmf_tgt-N.log (N counts the starts).
start_target() {
  TGT_RUNS=$((TGT_RUNS + 1))
  tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt-$TGT_RUNS.log" \
    --mode interrupt --reactors 2 --rpc-socket "$sock"
  TGT_LOGS+=("$TGT_LOG")
  note "nvmf_tgt start $TGT_RUNS: pid $TGT_PID, log $TGT_LOG"
}
# kill_target: SIGKILL, reaped.
kill_target() {
  kill -9 "$TGT_PID"
  wait "$TGT_PID" 2>/dev/null
  note "nvmf_tgt pid $TGT_PID killed (SIGKILL)"
}
target_alive() { kill -0 "$TGT_PID" 2>/dev/null; }
rpc() { "$ctl" tgt --socket "$sock" "$@"; }
# The stats and lists below are read with awk, not python: they are polled, and a python start
# under TCG takes long enough for fio to write thousands of blocks.
# bdev_ops TYPE...: File0's completed operations of these types (read, write) added up, from
# the running target's stats (each start counts from 0). From the human form:
#   "  File0" / "    ops:" / "      write:        N".
bdev_ops() {
  rpc stats | awk -v types="$*" '
    BEGIN { n = split(types, t, " "); for (i = 1; i <= n; i++) want[t[i] ":"] = 1 }
    /^  [^ ]/ { bdev = $1 }
    /^    [^ ]/ { ops = bdev == "File0" && $1 == "ops:"; next }
    /^      [^ ]/ { if (ops && ($1 in want)) sum += $2; next }
    /^[^ ]/ { ops = 0 }
    END { print sum + 0 }'
}
bdev_errors() {
  rpc stats | awk '/^  [^ ]/ { bdev = $1 } bdev == "File0" && $1 == "errors:" { print $2; exit }'
}
# target_cntlids: the CNTLIDs of the controllers the target holds, space-separated (in
# subsystem_list only controllers have a "cntlid").
target_cntlids() {
  rpc -o json subsystem_list | grep -o '"cntlid": *[0-9]*' | awk '{ printf "%s%s", sep, $2; sep = " " }'
}
no_target_controller() { [ -z "$(target_cntlids)" ]; }
target_holds_only() { [ "$(target_cntlids)" = "$1" ]; }
writes_above() { [ "$(bdev_ops write)" -gt "$1" ]; }
# wait_writes MORE: until File0 has completed MORE writes beyond what it had when called
# (60 s at most); 1 if it did not.
wait_writes() { wait_for 60 writes_above $(($(bdev_ops write) + $1 - 1)); }
# target_log_clean LOG [FROM_LINE]: no line of LOG (from FROM_LINE on) says "error".
target_log_clean() {
  local bad
  bad="$(tail -n "+${2:-1}" "$1" | grep -i 'error')" || return 0
  printf '%s\n' "$bad"
  return 1
}

# ---- the kernel host ----
ctrl_of_nqn() {   # the controller nvmeN the host holds for $FILE_NQN; empty if none
  local dir
  for dir in /sys/class/nvme/nvme*; do
    [ "$(cat "$dir/subsysnqn" 2>/dev/null)" = "$FILE_NQN" ] && { basename "$dir"; return; }
  done
  true
}
disk_of_nqn() {   # its namespace's block device nvmeXnY; empty if none
  local dir name
  for dir in /sys/block/nvme*; do
    name="$(basename "$dir")"
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$FILE_NQN" ] && { echo "$name"; return; }
  done
  true
}
ctrl_state() { cat "/sys/class/nvme/$1/state" 2>/dev/null || echo gone; }
is_live() { [ "$(ctrl_state "$ctrl")" = live ]; }
ctrl_gone() { [ -z "$(ctrl_of_nqn)" ] && [ -z "$(disk_of_nqn)" ]; }
has_disk() { local d; d="$(disk_of_nqn)"; [ -n "$d" ] && [ -b "/dev/$d" ]; }
cntlid() { cat "/sys/class/nvme/$ctrl/cntlid" 2>/dev/null; }
kmsg_since() { dmesg | tail -n "+$((KMSG_START + 1))"; }
kmsg_says() { kmsg_since | grep -q "$1"; }
# No I/O failed up to the block layer and no namespace went away since the mark.
kmsg_no_io_error() {
  local bad
  bad="$(kmsg_since | grep -i -E 'I/O error|identifiers changed|removing|blk_update_request')" || return 0
  printf '%s\n' "$bad"
  return 1
}

connect() {
  timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$FILE_NQN" --reconnect-delay 1 --ctrl-loss-tmo 30 ||
    fail "nvme connect -t rdma -a $ADDR -s 4420 -n $FILE_NQN failed"
  wait_for 10 has_disk || fail "no block device for $FILE_NQN 10 s after nvme connect"
  ctrl="$(ctrl_of_nqn)"
  disk="$(disk_of_nqn)"
  [ -n "$ctrl" ] || fail "no controller of $FILE_NQN in /sys/class/nvme after nvme connect"
  echo "  controller /dev/$ctrl ($(ctrl_state "$ctrl"), CNTLID $(cntlid)), namespace /dev/$disk"
}

# ---- fio ----
# Each job is named by its region of the namespace: the same name and options later with
# --verify_only re-read and check what that job wrote (--randseed: the same offsets).
FIO_COMMON=(--ioengine=libaio --direct=1 --verify=crc32c --verify_fatal=1 --randseed=14
            --output-format=json)
# fio_start NAME ARGS...: fio in the background on /dev/$disk, JSON in logs/fio-NAME.json; sets
# fio_pid.
fio_start() {
  local name="$1"
  shift
  fio --name="$name" --filename="/dev/$disk" "${FIO_COMMON[@]}" "$@" \
    --output="$logs/fio-$name.json" >"$logs/fio-$name.out" 2>&1 &
  fio_pid=$!
  note "fio $name started"
}
# fio_end SECONDS: waits for fio_pid; sets fio_rc (124: still running after SECONDS, killed).
fio_end() {
  if wait_pid "$fio_pid" "$1"; then
    wait "$fio_pid"
    fio_rc=$?
  else
    wait "$fio_pid" 2>/dev/null
    fio_rc=124
  fi
  fio_pid=""
  note "fio ended: status $fio_rc"
}
fio_running() { kill -0 "$fio_pid" 2>/dev/null; }
# fio_done NAME WRITES READS: fio's JSON says error 0, WRITES writes and READS reads (the
# verify pass); prints the figures.
fio_done() {
  jq -r '.jobs[0] | "  fio \(.jobname): error \(.error), \(.write.total_ios) writes, "
    + "\(.read.total_ios) reads, \(.job_runtime / 100 | round / 10) s"' "$logs/fio-$1.json" ||
    { echo "  no fio result in $logs/fio-$1.json"; return 1; }
  jq -e --argjson w "$2" --argjson r "$3" \
    '.jobs[0] | .error == 0 and .write.total_ios == $w and .read.total_ios == $r' \
    "$logs/fio-$1.json" >/dev/null
}
# fio_verify_only NAME READS ARGS...: the job NAME again with --verify_only: READS reads that
# check what it wrote (fio's JSON counts the writes it replays without doing them as writes).
fio_verify_only() {
  local name="$1" reads="$2"
  shift 2
  fio --name="$name" --filename="/dev/$disk" "${FIO_COMMON[@]}" "$@" --verify_only \
    --output="$logs/fio-$name-verify.json" >"$logs/fio-$name-verify.out" 2>&1 ||
    { cat "$logs/fio-$name-verify.out"; return 1; }
  fio_done "$name-verify" "$reads" "$reads"
}
# The jobs (MiB 0-16: acked, 16-32: kill, 32-48: reset, 48-64: delete; 4 KiB blocks).
readonly ACKED=(--rw=write --bs=128k --iodepth=4 --offset=0 --size=8m)
readonly KILL=(--rw=randwrite --bs=4k --iodepth=8 --offset=16m --size=16m)
readonly RESET=(--rw=randwrite --bs=4k --iodepth=8 --offset=32m --size=16m)
readonly DELETE=(--rw=randwrite --bs=4k --iodepth=8 --offset=48m --size=16m)
readonly RANDOM_WRITES=4096   # 16 MiB of 4 KiB
kmsg_mark

# ---- 1 ----
step "1. the kernel host under fio, nvmf_tgt killed with SIGKILL and restarted"
start_target
connect
disk_before="$disk"
fio_start acked "${ACKED[@]}" --do_verify=0
fio_end 120
check "1a. fio acked (8 MiB, no read) exits 0" "$fio_rc" "fio exited $fio_rc: $(tail -3 "$logs/fio-acked.out")"
expect "1a. fio acked: 64 writes acknowledged, no error" fio_done acked 64 0
fio_start kill "${KILL[@]}"
expect "1b. the target took $KILL_AFTER_WRITES of fio kill's writes" wait_writes "$KILL_AFTER_WRITES"
writes_before_kill="$(bdev_ops write)"
expect "1b. fio still runs at the kill" fio_running
expect "1b. the first target logged no error" target_log_clean "$TGT_LOG"
kill_target
sleep 2   # the host finds the target gone and tries a reconnect or two
start_target
t0="$(cut -d' ' -f1 /proc/uptime)"
expect "1b. controller $ctrl is live again within 30 s (ctrl-loss-tmo 30)" wait_for 30 is_live
echo "  live $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime) s after the restart"
expect "1b. the kernel says it reconnected" wait_for 5 kmsg_says "Successfully reconnected"
kmsg_since | grep -i -E 'reconnect|recovery|connect' | tail -6
expect "1b. the host kept controller $ctrl" test "$(ctrl_of_nqn)" = "$ctrl"
expect "1b. the host kept its disk /dev/$disk_before" test "$(disk_of_nqn)" = "$disk_before"
fio_end 180
check "1b. fio kill exits 0 across the restart" "$fio_rc" "fio exited $fio_rc: $(tail -5 "$logs/fio-kill.out")"
expect "1b. fio kill: all $RANDOM_WRITES writes done and read back by its verify pass" \
  fio_done kill "$RANDOM_WRITES" "$RANDOM_WRITES"
writes_after="$(bdev_ops write)"
reads_after="$(bdev_ops read)"
echo "  File0: $writes_before_kill writes before the kill; on the restarted target $writes_after writes, $reads_after reads"
expect "1b. fio wrote to the restarted target (the kill was mid-write)" test "$writes_after" -gt 0
expect "1b. the verify reads (all of fio kill's blocks, those acknowledged before the kill among them) came from the restarted target" \
  test "$reads_after" -ge "$RANDOM_WRITES"
expect "1c. fio --verify_only: the 8 MiB acknowledged before the kill read back" \
  fio_verify_only acked 64 "${ACKED[@]}"
expect "1. no I/O error and no namespace removal in the kernel log" kmsg_no_io_error
expect "1. no kernel trouble" kmsg_kernel_clean "step 1"

# ---- 2 ----
step "2a. nvme reset /dev/$ctrl during fio with verify"
kmsg_mark
fio_start reset "${RESET[@]}"
expect "2a. the target took $KILL_AFTER_WRITES of fio reset's writes" wait_writes "$KILL_AFTER_WRITES"
cntlid_before="$(cntlid)"
expect "2a. nvme reset /dev/$ctrl" timeout 60 nvme reset "/dev/$ctrl"
expect "2a. controller $ctrl is live after the reset" wait_for 30 is_live
cntlid_after="$(cntlid)"
echo "  CNTLID $cntlid_before before the reset, $cntlid_after after"
expect "2a. the reset made a new association (CNTLID $cntlid_before -> $cntlid_after)" \
  test "$cntlid_after" != "$cntlid_before"
expect "2a. the target holds only controller $cntlid_after" wait_for 10 target_holds_only "$cntlid_after"
expect "2a. fio goes on after the reset (more writes reach File0)" wait_for 30 writes_above "$(bdev_ops write)"
fio_end 180
check "2a. fio reset exits 0 across the reset" "$fio_rc" "fio exited $fio_rc: $(tail -5 "$logs/fio-reset.out")"
expect "2a. fio reset: all $RANDOM_WRITES writes done and verified" fio_done reset "$RANDOM_WRITES" "$RANDOM_WRITES"
expect "2a. no I/O error and no namespace removal in the kernel log" kmsg_no_io_error

step "2b. delete_controller of $ctrl during fio"
fio_start delete "${DELETE[@]}"
expect "2b. the target took $KILL_AFTER_WRITES of fio delete's writes" wait_writes "$KILL_AFTER_WRITES"
log_mark=$(($(wc -l <"$TGT_LOG") + 1))
expect "2b. echo 1 > /sys/class/nvme/$ctrl/delete_controller returns within 60 s" \
  timeout 60 bash -c "echo 1 >/sys/class/nvme/$ctrl/delete_controller"
fio_end 60
echo "  fio delete exited $fio_rc: $(grep -h -i -m 3 -E 'error|err=' "$logs/fio-delete.out" "$logs/fio-delete.json" | tr -s ' ' | head -3)"
expect "2b. fio delete ends within 60 s (nothing hangs)" test "$fio_rc" -ne 124
expect "2b. fio delete ends with an error (expected: its device went away)" test "$fio_rc" -ne 0
expect "2b. the controller and its disk are gone within 30 s" wait_for 30 ctrl_gone
expect "2b. the target is still up" target_alive
expect "2b. the target holds no controller" wait_for 10 no_target_controller
expect "2b. the target logged no error" target_log_clean "$TGT_LOG" "$log_mark"
expect "2b. File0 reports no error" test "$(bdev_errors)" = 0

step "2c. a new nvme connect reads back what was acknowledged before"
connect
expect "2c. fio --verify_only: fio reset's 16 MiB (acknowledged before the delete)" \
  fio_verify_only reset "$RANDOM_WRITES" "${RESET[@]}"
expect "2c. fio --verify_only: fio acked's 8 MiB (acknowledged before the kill of step 1)" \
  fio_verify_only acked 64 "${ACKED[@]}"
expect "2c. nvme disconnect" timeout 60 nvme disconnect -n "$FILE_NQN"
expect "2. no kernel trouble" kmsg_kernel_clean "step 2"
tgt_stop
# nvmf_perf --verify expects blocks it never wrote to read as zeroes: a new (sparse) file.
rm -f "$files/file0.img"
for log in "${TGT_LOGS[@]}"; do expect "2. no error in $(basename "$log")" target_log_clean "$log"; done

# ---- 3 ----
step "3. nvmf_perf --verify, nvmf_tgt killed with SIGKILL mid-run and restarted"
kmsg_mark
start_target
first_of_step3=$((${#TGT_LOGS[@]} - 1))
trid="trtype:RDMA adrfam:IPv4 traddr:$ADDR trsvcid:4420 subnqn:$FILE_NQN"
perf_log="$logs/perf.log"
echo "  nvmf_perf -r '$trid' -q 16 -o 4096 -w randrw -M 50 -t 12 --verify --reconnect-delay-ms 500 --ctrl-loss-timeout-ms 30000"
# 12 s of I/O, then at most the drain (30 s) with the loss timeout (30 s from the kill) in it.
timeout 150 "$perf" -r "$trid" -q 16 -o 4096 -w randrw -M 50 -t 12 --verify \
  --reconnect-delay-ms 500 --ctrl-loss-timeout-ms 30000 --json "$logs/perf.json" >"$perf_log" 2>&1 &
perf_pid=$!
expect "3. the target took $KILL_AFTER_WRITES of nvmf_perf's writes" wait_writes "$KILL_AFTER_WRITES"
expect "3. nvmf_perf still runs at the kill" kill -0 "$perf_pid"
kill_target
sleep 2
start_target
wait "$perf_pid"
perf_rc=$?
perf_pid=""
grep -v -E '^\[ *[0-9]+ s\]' "$perf_log"   # all but the per-second lines
expect "3. nvmf_perf ends by itself (no timeout)" test "$perf_rc" -ne 124
# perf_figures: "IOS ERRORS VERIFY_FAILURES RECONNECTS" from its JSON ("none" without one).
perf_figures="$(jq -r '"\(.ios) \(.errors) \(.verify_failures) \(.reconnects)"' "$logs/perf.json" 2>/dev/null)" ||
  perf_figures=none
[[ "$perf_figures" =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]] || perf_figures=none
echo "  nvmf_perf exited $perf_rc; ios errors verify_failures reconnects: $perf_figures"
read -r perf_ios perf_errors perf_verify_failures perf_reconnects <<<"$perf_figures"
account="$(grep -m 1 '^account: ' "$perf_log")"
expect "3. nvmf_perf did I/O (JSON ios $perf_ios)" test "${perf_ios:-none}" != none -a "${perf_ios:-0}" != 0
expect "3. nvmf_perf printed its account line" test -n "$account"
# account_balanced LINE: submitted = completed + failed, nothing in flight, no verify failure,
# and nvmf_perf's own verdict "ok".
account_balanced() {
  awk '{
    for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2 && kv[2] ~ /^[0-9]+$/) f[kv[1]] = kv[2] + 0
    for (k in need) if (!(k in f)) exit 1
    exit !(f["submitted"] == f["completed"] + f["failed"] && f["inflight"] == 0 &&
           f["verify_failures"] == 0 && $NF == "ok")
  }
  BEGIN { need["submitted"]; need["completed"]; need["failed"]; need["inflight"]; need["verify_failures"] }' <<<"$1"
}
expect "3. the account balances: $account" account_balanced "$account"
expect "3. no verify failure (JSON)" test "${perf_verify_failures:-none}" = 0
reconnected=0
[ "${perf_reconnects:-0}" != none ] && [ "${perf_reconnects:-0}" -gt 0 ] && reconnected=1
# The known gap: the admin queue went with the target and the I/O queues' reconnects were
# refused (their controller does not exist in the new process), so nothing reconnected.
lost_controller=0
if [ "$reconnected" = 0 ] && grep -q "admin queue lost" "$perf_log" &&
  { grep -q "Connect on reconnect refused" "$perf_log" ||
    grep -q "I/O Connect to unknown controller" "$TGT_LOG"; }; then
  lost_controller=1
fi
if [ "$lost_controller" = 1 ] && [ "$HOST_RECOVERS_CONTROLLER" = 0 ]; then
  echo "  KNOWN GAP (issue 14, admin queue recovery): nvmf_perf lost the controller when the target died;" \
    "its I/O queues' reconnects were refused by the restarted target ($(grep -c 'I/O Connect to unknown controller' "$TGT_LOG") refused Connects)," \
    "their I/Os failed at the loss timeout: exit $perf_rc, $perf_errors failed I/Os; $account"
else
  expect "3. nvmf_perf exits 0" test "$perf_rc" = 0
  expect "3. nvmf_perf reconnected (JSON reconnects $perf_reconnects)" test "$reconnected" = 1
  expect "3. no I/O failed (JSON errors $perf_errors)" test "${perf_errors:-none}" = 0
  expect "3. nvmf_perf's I/O reached the restarted target" test "$(bdev_ops read write)" -gt 0
fi
expect "3. the restarted target is up" target_alive
expect "3. the target holds no controller after nvmf_perf" wait_for 10 no_target_controller
tgt_stop
for log in "${TGT_LOGS[@]:$first_of_step3}"; do expect "3. no error in $(basename "$log")" target_log_clean "$log"; done
# kmsg_check fails the script; in a subshell its failure is one check.
kmsg_quiet() { (kmsg_check "$1"); }
expect "3. no trouble at all in the kernel log (the kernel's nvme host was not involved)" \
  kmsg_quiet "step 3"
TGT_PID=""

umount "$files"
check_summary chaos_rxe || fail "$failures of $((passes + failures)) checks failed (FAIL lines above)"
gap=""
[ "$lost_controller" = 1 ] && gap=" (step 3 with the known gap: nvmf_perf lost the controller, see KNOWN GAP above)"
echo "chaos_rxe: PASS: $passes checks: the kernel host reconnected across a SIGKILL and restart of nvmf_tgt with fio's acknowledged writes verified after it, survived nvme reset under verified fio, and a delete_controller under fio left the target up and the data readable; nvmf_perf --verify across a SIGKILL and restart$gap"
