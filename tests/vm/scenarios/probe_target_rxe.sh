#!/bin/bash
# VM probe (label bench, never in CI): the system calls our target makes per I/O of the kernel
# host, before and after a change, in ONE guest boot (under TCG only counts and same-boot
# ratios mean anything). The kernel host (nvme-rdma + fio, randread 4 KiB QD32 x 2 jobs,
# SECONDS each) against nvmf_tgt in interrupt mode on 2 reactors and in poll mode, for TGT and
# TGT_BEFORE in turn, two rounds:
#   - fio's IOPS;
#   - nvmf_tgt's system calls, context switches and the calls by name (perf stat -p), per I/O;
# then, for TGT only, which thread makes which call on which fd (strace -f for 3 s of a run):
# a call that fails with EAGAIN on every iteration shows there.
#   probe_target_rxe.sh [TGT [TGT_BEFORE [SECONDS (6)]]]
#     TGT default NVMF_BUILD_DIR/tools/nvmf_tgt; TGT_BEFORE default TGT (no comparison)
# Runs inside the guest only (vm-run.sh probe_target_rxe ...). Prints "PROBE ..." lines.
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "probe_target_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = probe_target_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh probe_target_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
tgt_before="${2:-$tgt}"
seconds="${3:-6}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$tgt_before" ] || fail "not built: $tgt_before"
for tool in nvme fio perf strace python3; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host"
done

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"
# shellcheck source=lib/nvme_host.sh
source "$(dirname "$0")/lib/nvme_host.sh"
modprobe nvme-rdma
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
echo -1 >/proc/sys/kernel/perf_event_paranoid

readonly NQN=nqn.2026-11.io.nvmf-vm:probe-null PORT=4421 BLOCKS=262144
readonly SYSCALLS=(write read clock_gettime epoll_wait timerfd_settime ioctl futex)
logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
cat >"$logs/nvmf_tgt.json" <<EOF
{
  "transports": [ { "type": "rdma" } ],
  "bdevs": [ { "type": "null", "name": "Null0", "block_size": 4096, "num_blocks": $BLOCKS } ],
  "subsystems": [
    { "nqn": "$NQN", "serial_number": "NVMFVMPROBE01", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Null0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "$PORT" } ] }
  ]
}
EOF

# connect: nvme connect to our target; sets DISK (nvmeXnY).
connect() {
  timeout 60 nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$NQN" || fail "nvme connect failed"
  DISK="$(nvme_wait_disk "$NQN")"
  [ -n "$DISK" ] || fail "no block device after nvme connect"
}
fio_run() {  # fio_run OUTPUT_JSON SECONDS
  fio --name=rr32x2 --filename="/dev/$DISK" --ioengine=libaio --direct=1 --bs=4k --rw=randread \
    --iodepth=32 --numjobs=2 --group_reporting --time_based --runtime="$2" \
    --output-format=json --output="$1"
}
start_target() {  # start_target BINARY CONFIG_NAME LOG
  local mode=poll reactors=1
  [ "$2" = intr2 ] && mode=interrupt reactors=2
  tgt_start "$1" "$logs/nvmf_tgt.json" "$3" --mode "$mode" --reactors "$reactors"
  sleep 1
}

# count NAME BINARY CONFIG: one fio run with perf stat on nvmf_tgt for SECONDS - 1 of it.
count() {
  local name="$1" events ev
  start_target "$2" "$3" "$logs/nvmf_tgt-$name.log"
  connect
  events="context-switches,raw_syscalls:sys_enter"
  for ev in "${SYSCALLS[@]}"; do events+=",syscalls:sys_enter_$ev"; done
  perf stat -x, -o "$logs/$name.csv" -e "$events" -p "$TGT_PID" -- sleep "$((seconds - 1))" &
  local stat_pid=$!
  fio_run "$logs/$name.json" "$seconds"
  wait "$stat_pid" || true
  timeout 60 nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
  tgt_stop
  python3 - "$name" "$logs" "$seconds" <<'PY'
import csv, json, sys
name, logs, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
iops = json.load(open(f"{logs}/{name}.json"))["jobs"][0]["read"]["iops"]
ios = iops * (seconds - 1)  # perf stat ran for seconds - 1 of fio's seconds
parts = [f"PROBE {name}: fio {iops:.0f} IOPS"]
for row in csv.reader(open(f"{logs}/{name}.csv")):
    if len(row) > 2 and row[0] and not row[0].startswith("#"):
        try:
            parts.append(f"{row[2].replace('syscalls:sys_enter_', '')} {float(row[0]) / ios:.3f}")
        except ValueError:
            pass
print(parts[0] + "; per I/O: " + ", ".join(parts[1:]))
PY
}

# attribute CONFIG: strace -f of TGT for 3 s of a run: count by thread, call, fd and result.
attribute() {
  local config="$1" fio_pid
  start_target "$tgt" "$config" "$logs/nvmf_tgt-strace-$config.log"
  connect
  fio_run "$logs/strace-$config.json" 8 &
  fio_pid=$!
  sleep 2
  timeout 3 strace -f -qq -e trace=write,read,clock_gettime -p "$TGT_PID" \
    -o "$logs/strace-$config.txt" || true
  wait "$fio_pid" || true
  timeout 60 nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
  tgt_stop
  grep -v -e 'resumed>' "$logs/strace-$config.txt" |
    sed -E 's/^([0-9]+) +([a-z_]+)\(([^,]+),.*/\1 \2 \3/; s/ <unfinished \.\.\.>$//' |
    awk '{ n[$0]++ } END { for (k in n) print n[k], k }' | sort -rn | head -12 |
    sed "s/^/PROBE strace $config (calls thread call fd|clock): /"
  grep -c 'EAGAIN' "$logs/strace-$config.txt" | sed "s/^/PROBE strace $config: EAGAIN results: /" || true
}

for round in 1 2; do
  for config in intr2 poll; do
    step "round $round, $config: before ($tgt_before), then after ($tgt)"
    count "$config-before-$round" "$tgt_before" "$config"
    count "$config-after-$round" "$tgt" "$config"
  done
done
for config in intr2 poll; do
  step "$config: strace attribution of $tgt"
  attribute "$config"
done
echo "probe_target_rxe: PASS"
