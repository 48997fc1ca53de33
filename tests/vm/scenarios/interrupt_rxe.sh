#!/bin/bash
# VM scenario 6, interrupt mode: the target sleeps when there is nothing to do. nvmf_tgt runs
# in interrupt mode with two reactors (perf_rxe uses one) and the two subsystems of
# lib/nvmf_tgt.sh (malloc, and uring on a guest tmpfs) on rxe0. nvmf_perf --verify runs against
# it with three memory-registration policies (global with 4 KiB in-capsule writes, sagi, and
# deferred; 8 KiB 50/50 random), each with zero errors; the target's CPU share during each run
# is printed. Then nvmf_tgt's CPU time (utime + stime of all its threads, /proc/PID/stat) is
# measured over 5 s of idleness, three times, and each must stay below 5% of one CPU:
#   1. before any host connected;
#   2. after the runs, every host gone;
#   3. with a host connected but idle: the Linux kernel's host (nvme connect, admin queue and
#      one I/O queue per guest CPU, keep-alives), since nvmf_perf cannot connect and idle.
# As a check of the measurement itself, nvmf_tgt is then restarted in poll mode and must burn
# more than half a CPU idle. Passes when all runs are clean, the three idle figures are below
# 5% and the poll figure above 50%, nvmf_tgt logged no error and stopped cleanly both times,
# and the kernel logged no nvme/rdma trouble.
# Only the target's mode is exercised here; nvmf_perf's own --mode interrupt runs in
# side_by_side_rxe (label bench) and against the sim in tests/tools/nvmf_perf_test.sh.
#   interrupt_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN (1)]]]   (binaries: default from NVMF_BUILD_DIR)
# Runs inside the guest only (vm-run.sh interrupt_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "interrupt_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = interrupt_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh interrupt_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-1}"   # lib/perf.sh says why 1 s
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"
command -v nvme >/dev/null || fail "nvme (nvme-cli) not installed on the host (scripts/install-deps.sh installs it)"
here="$(cd "$(dirname "$0")" && pwd)"

# shellcheck source=lib/rxe.sh
source "$here/lib/rxe.sh"
# shellcheck source=lib/perf.sh
source "$here/lib/perf.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$here/lib/nvmf_tgt.sh"
# shellcheck source=lib/kmsg.sh
source "$here/lib/kmsg.sh"
# shellcheck source=lib/cpu.sh
source "$here/lib/cpu.sh"
modprobe nvme-rdma

readonly IDLE_SECONDS=5 IDLE_LIMIT=5 POLL_SECONDS=3 POLL_FLOOR=50
logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
files="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"   # the uring bdev's file lives here
kmsg_mark
figures=""

# idle WHAT: nvmf_tgt's CPU over IDLE_SECONDS must stay below IDLE_LIMIT% of one CPU.
idle() {
  step "idle, $1: nvmf_tgt's CPU time over ${IDLE_SECONDS} s"
  cpu_measure "$TGT_PID" "$IDLE_SECONDS"
  echo "nvmf_tgt, idle, $1: $CPU_TEXT"
  figures+="idle, $1: $CPU_TEXT"$'\n'
  cpu_below "$CPU_PCT" "$IDLE_LIMIT" ||
    fail "nvmf_tgt in interrupt mode used $CPU_PCT% of a CPU idle ($1); expected below $IDLE_LIMIT%"
}
# run NAME NQN ARGS...: perf_run, with nvmf_tgt's CPU share during the run printed.
run() {
  local before after pct wall ticks _
  before="$(cpu_sample "$TGT_PID")"
  perf_run "$@"
  after="$(cpu_sample "$TGT_PID")"
  read -r pct wall ticks _ <<<"$(cpu_between "$before" "$after")"
  echo "nvmf_tgt during $1: $pct% of one CPU ($ticks ticks in $wall s, nvmf_perf's start and stop included)"
  figures+="busy, $1: $pct% of one CPU"$'\n'
}

tgt_write_config "$logs/nvmf_tgt.json" "$files"
step "nvmf_tgt: $MALLOC_NQN (malloc) and $FILE_NQN (uring on tmpfs), interrupt mode, 2 reactors"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 2
grep -q "interrupt mode" "$TGT_LOG" || fail "nvmf_tgt does not say it runs in interrupt mode"
idle "no host yet"

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { tail -n 20 "$TGT_LOG"; }
run malloc-incapsule "$MALLOC_NQN" -w randrw -M 70 -q 16 -o 4096 --memreg global --verify
run malloc-sagi "$MALLOC_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg sagi --verify
run file-deferred "$FILE_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg deferred --verify
idle "after the runs, no host connected"

step "kernel host: nvme connect -t rdma -a $ADDR -s 4420 -n $MALLOC_NQN, then no I/O"
timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$MALLOC_NQN" || fail "nvme connect failed"
disk=""
for _ in $(seq 1 100); do
  for dir in /sys/block/nvme*; do
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$MALLOC_NQN" ] && disk="$(basename "$dir")"
  done
  [ -n "$disk" ] && [ -b "/dev/$disk" ] && break
  sleep 0.1
done
{ [ -n "$disk" ] && [ -b "/dev/$disk" ]; } || fail "no namespace block device after nvme connect"
nvme list
sleep 2   # the partition scan's reads are done; from here on only keep-alives
idle "kernel host connected ($disk), no I/O"
step "nvme disconnect -n $MALLOC_NQN"
timeout 60 nvme disconnect -n "$MALLOC_NQN" || fail "nvme disconnect failed"

step "stopping nvmf_tgt"
tgt_stop
tgt_check_log

step "contrast: nvmf_tgt in poll mode, 1 reactor, no host: CPU over ${POLL_SECONDS} s"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt-poll.log" --mode poll --reactors 1
cpu_measure "$TGT_PID" "$POLL_SECONDS"
echo "nvmf_tgt, poll mode, idle: $CPU_TEXT"
figures+="poll mode, idle (contrast): $CPU_TEXT"$'\n'
cpu_below "$CPU_PCT" "$POLL_FLOOR" &&
  fail "nvmf_tgt in poll mode used only $CPU_PCT% of a CPU idle: a polling reactor should spin (is the measurement right?)"
tgt_stop
tgt_check_log

umount "$files"
kmsg_check interrupt_rxe
printf 'interrupt_rxe: results\n%s' "$PERF_SUMMARY"
printf 'interrupt_rxe: nvmf_tgt CPU time\n%s' "$figures"
echo "interrupt_rxe: PASS: $PERF_RUNS verified nvmf_perf runs against nvmf_tgt in interrupt mode (2 reactors); idle below $IDLE_LIMIT% of a CPU with no host, after the runs and with the kernel host connected; poll mode spins (contrast)"
