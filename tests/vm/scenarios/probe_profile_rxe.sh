#!/bin/bash
# VM probe (label bench, never in CI): where the guest's two vCPUs spend their time while the
# kernel host (nvme-rdma + fio, 4 KiB QD32 x 2 jobs, SECONDS) runs against the kernel target
# (nvmet-rdma, null_blk) and against nvmf_tgt (interrupt mode, 2 reactors, null bdev), in one
# boot, each twice, interleaved. Per run: fio's IOPS, and the guest's CPU time by kind
# (/proc/stat: user, system, irq, softirq, idle) in microseconds per I/O, both vCPUs together,
# over SECONDS - 2 of the run, and nvmf_tgt's own share (/proc/PID/stat). Sampling profilers do
# not help here: under TCG perf's cpu-clock samples land almost all in the idle loop (99% of
# them in native_safe_halt even when the guest was busy half of the time).
# With TGT_BEFORE, nvmf_tgt before a change runs too, in the same rounds ("before-intr2").
# For nvmf_tgt also its reactors' iterations, busy iterations and sleeps per I/O (the stats
# RPC, through nvmfctl), and for every run the soft-RoCE devices' counters that moved, per I/O
# (hw_counters: packets, SENDs, RNR NAKs, retries, duplicates). Those two are read just outside
# the CPU window (their reads take time), so their per-I/O figures are a little off (SENDs per
# I/O 1.9-2.6 where 2 are sent); ratios between them (packets per SEND) are not affected.
# Before the window, nvmf_tgt's threads' scheduler states in 30 snapshots (state, where it
# sleeps, which vCPU); over the window, each thread's seconds on a vCPU and waiting for one
# (/proc/PID/task/TID/schedstat): whether the reactors sleep while the host waits, or stay
# runnable and queue for a vCPU that the host's fio and the softirq work hold.
#   probe_profile_rxe.sh [TGT [SECONDS (8) [RW (randwrite) [TGT_BEFORE [ROUNDS (2) [KEYS]]]]]]
#     KEYS: more transport keys for TGT's configuration only, e.g. '"max_srq_depth": 256'
#     TGT default NVMF_BUILD_DIR/tools/nvmf_tgt; RW: fio's --rw (randread, randwrite, randrw)
# Runs inside the guest only (vm-run.sh probe_profile_rxe ...). Prints "PROBE ..." lines.
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "probe_profile_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = probe_profile_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh probe_profile_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
seconds="${2:-8}"
rw="${3:-randwrite}"
tgt_before="${4:-}"
rounds="${5:-2}"
keys="${6:-}"
ctl="${NVMF_BUILD_DIR:?}/tools/nvmfctl"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -z "$tgt_before" ] || [ -x "$tgt_before" ] || fail "not built: $tgt_before"
[ -x "$ctl" ] || fail "not built: $ctl"
((seconds >= 4)) || fail "SECONDS must be at least 4 (perf records SECONDS - 2)"
for tool in nvme fio python3; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host"
done

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"
# shellcheck source=lib/nvme_host.sh
source "$(dirname "$0")/lib/nvme_host.sh"
# shellcheck source=lib/nvmet.sh
source "$(dirname "$0")/lib/nvmet.sh"
modprobe nvme-rdma

readonly OURS_NQN=nqn.2026-11.io.nvmf-vm:profile-ours OURS_PORT=4421
readonly KERNEL_NQN=nqn.2026-11.io.nvmf-vm:profile-kernel KERNEL_PORT=4420
logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
# write_config FILE [KEYS]
write_config() {
  cat >"$1" <<EOF2
{
  "transports": [ { "type": "rdma"${2:+, $2} } ],
  "bdevs": [ { "type": "null", "name": "Null0", "block_size": 4096, "num_blocks": 262144 } ],
  "subsystems": [
    { "nqn": "$OURS_NQN", "serial_number": "NVMFVMPROFILE1", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Null0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "$OURS_PORT" } ] }
  ]
}
EOF2
}
write_config "$logs/nvmf_tgt.json" "$keys"
write_config "$logs/nvmf_tgt-before.json"

readonly RPC_SOCKET=/run/nvmf_tgt-profile.sock

# The soft-RoCE devices' counters (sent and received packets, SENDs and RECVs, RNR NAKs,
# retries, duplicates, sequence errors): "DEVICE/COUNTER VALUE" lines.
hw_counters() {  # one process: under TCG every fork costs milliseconds of the window
  awk 'FNR == 1 { n = split(FILENAME, part, "/"); print part[5] "/" part[n], $1 }' \
    /sys/class/infiniband/*/ports/*/hw_counters/*
}

# sched_times PID: "THREAD-NAME/TID ON-CPU-NS WAITING-NS" of each thread of PID, builtins only.
sched_times() {
  local t c run wait
  for t in /proc/"$1"/task/*; do
    read -r c <"$t/comm" || true
    read -r run wait _ <"$t/schedstat" || true
    echo "$c/${t##*/} $run $wait"
  done
}

# profile NAME PORT NQN [PID]: connect, fio for SECONDS with /proc/stat (and PID's
# /proc/PID/stat and reactor statistics) read around SECONDS - 2 of it, disconnect, report.
profile() {
  local name="$1" trsvcid="$2" nqn="$3" pid="${4:-}" disk fio_pid
  own() { if [ -n "$pid" ]; then cut -d' ' -f14,15 "/proc/$pid/stat"; else echo 0 0; fi; }
  reactors() {  # the stats RPC's answer (JSON), parsed after the run
    if [ -n "$pid" ]; then "$ctl" tgt --socket "$RPC_SOCKET" -o json stats; else echo '{}'; fi
  }
  step "$name: kernel host, fio $rw QD32 x 2 for $seconds s"
  timeout 60 nvme connect -t rdma -a "$ADDR" -s "$trsvcid" -n "$nqn" || fail "nvme connect failed"
  disk="$(nvme_wait_disk "$nqn")"
  [ -n "$disk" ] || fail "no block device after nvme connect"
  fio --name=profile --filename="/dev/$disk" --ioengine=libaio --direct=1 --bs=4k --rw="$rw" \
    --iodepth=32 --numjobs=2 --group_reporting --time_based --runtime="$seconds" \
    --output-format=json --output="$logs/$name.json" &
  fio_pid=$!
  sleep 1
  # nvmf_tgt's threads' states (R running or waiting for a vCPU, S sleeping, and where), 30
  # snapshots with shell builtins only (a fork costs milliseconds under TCG), before the window.
  if [ -n "$pid" ]; then
    local k t c l w up0 up1 f
    read -r up0 _ </proc/uptime
    for ((k = 0; k < 30; k++)); do
      for t in /proc/"$pid"/task/*; do
        read -r c <"$t/comm" || true
        read -r l <"$t/stat" || true
        read -r w <"$t/wchan" || true  # no newline at its end: read fails, w is set
        l="${l##*) }"
        f=($l)  # from field 3 (state) on: field 39 (processor) is f[36]
        echo "$c ${f[0]} ${w:-0} cpu${f[36]}"
      done
    done >"$logs/$name.states"
    read -r up1 _ </proc/uptime
    echo "PROBE $name: nvmf_tgt thread states in 30 snapshots over ${up0}-${up1} s of uptime:" \
      "$(sort "$logs/$name.states" | uniq -c | sort -rn | tr -s ' ' | tr '\n' ';')"
  fi
  # The CPU window is between the two /proc/stat reads; the slower reads (an RPC, awk) stay
  # outside it, so their processes are not charged to the I/O.
  reactors >"$logs/$name.loops0"
  hw_counters >"$logs/$name.hw0"
  { head -1 /proc/stat; own; } >"$logs/$name.stat"
  [ -z "$pid" ] || sched_times "$pid" >"$logs/$name.sched0"
  sleep "$((seconds - 2))"
  { head -1 /proc/stat; own; } >>"$logs/$name.stat"
  if [ -n "$pid" ]; then
    sched_times "$pid" >"$logs/$name.sched1"
    echo "PROBE $name: nvmf_tgt threads over the window, seconds on a vCPU / waiting for one:" \
      "$(awk 'NR == FNR { run[$1] = $2; wait[$1] = $3; next }
              $1 in run { printf "%s %.2f / %.2f; ", $1, ($2 - run[$1]) / 1e9, ($3 - wait[$1]) / 1e9 }' \
           "$logs/$name.sched0" "$logs/$name.sched1")"
  fi
  reactors >"$logs/$name.loops1"
  hw_counters >"$logs/$name.hw1"
  wait "$fio_pid" || fail "$name: fio failed"
  timeout 60 nvme disconnect -n "$nqn" || fail "nvme disconnect failed"
  python3 - "$name" "$logs" "$((seconds - 2))" <<'PY'
import json, os, sys
name, logs, window = sys.argv[1], sys.argv[2], int(sys.argv[3])
jobs = json.load(open(f"{logs}/{name}.json"))["jobs"][0]
iops = jobs["read"]["iops"] + jobs["write"]["iops"]
lines = open(f"{logs}/{name}.stat").read().split("\n")
before, own_before, after, own_after = (
    list(map(int, l.split()[l.startswith("cpu"):])) for l in lines[:4])
delta = [a - b for a, b in zip(after, before)]
own = sum(own_after) - sum(own_before)
hz = os.sysconf("SC_CLK_TCK")
ios = iops * window
kinds = {"user": delta[0] + delta[1], "system": delta[2], "idle": delta[3] + delta[4],
         "irq": delta[5], "softirq": delta[6], "of which nvmf_tgt": own}
per_io = ", ".join(f"{k} {v / hz / ios * 1e6:.0f}" for k, v in kinds.items())
def loop_counts(path):  # iterations, busy iterations, sleeps of all reactors together
    reactors = json.load(open(path)).get("reactors", [])
    return [sum(r[k] for r in reactors) for k in ("iterations", "busy_iterations", "sleeps")]
loops = [a - b for a, b in zip(loop_counts(f"{logs}/{name}.loops1"),
                               loop_counts(f"{logs}/{name}.loops0"))]
reactor = ""
if loops[0]:
    reactor = (f"; reactors per I/O: iterations {loops[0] / ios:.2f}, busy {loops[1] / ios:.2f},"
               f" sleeps {loops[2] / ios:.2f}")
print(f"PROBE {name}: fio {iops:.0f} IOPS; guest CPU us per I/O: {per_io}{reactor}")
def counters(path):
    return {k: int(v) for k, v in (l.split() for l in open(path) if l.strip())}
hw0, hw1 = counters(f"{logs}/{name}.hw0"), counters(f"{logs}/{name}.hw1")
moved = {k: hw1[k] - hw0.get(k, 0) for k in sorted(hw1) if hw1[k] != hw0.get(k, 0)}
print(f"PROBE {name}: soft-RoCE counters per I/O: "
      + (", ".join(f"{k} {v / ios:.2f}" for k, v in moved.items()) or "none moved"))
PY
}

step "kernel target: nvmet-rdma, $KERNEL_NQN on $ADDR:$KERNEL_PORT"
nvmet_export "$KERNEL_NQN" "$ADDR" "$KERNEL_PORT"
# ours NAME BINARY ROUND CONFIG: nvmf_tgt in interrupt mode on 2 reactors, profiled.
ours() {
  tgt_start "$2" "$4" "$logs/nvmf_tgt-$1-$3.log" --mode interrupt --reactors 2 \
    --rpc-socket "$RPC_SOCKET"
  sleep 1
  profile "$1-intr2-$3" "$OURS_PORT" "$OURS_NQN" "$TGT_PID"
  tgt_stop
}
for round in $(seq 1 "$rounds"); do
  profile "kernel-$round" "$KERNEL_PORT" "$KERNEL_NQN"
  ours ours "$tgt" "$round" "$logs/nvmf_tgt.json"
  [ -z "$tgt_before" ] || ours before "$tgt_before" "$round" "$logs/nvmf_tgt-before.json"
done
nvmet_unexport "$KERNEL_NQN"
echo "probe_profile_rxe: PASS"
