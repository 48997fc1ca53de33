#!/bin/bash
# VM probe (label bench, never in CI): where the guest's two vCPUs spend their time while the
# kernel host (nvme-rdma + fio, 4 KiB QD32 x 2 jobs, SECONDS) runs against the kernel target
# (nvmet-rdma, null_blk) and against nvmf_tgt (interrupt mode, 2 reactors, null bdev), in one
# boot, each twice, interleaved. Per run: fio's IOPS, and the guest's CPU time by kind
# (/proc/stat: user, system, irq, softirq, idle) in microseconds per I/O, both vCPUs together,
# over a window of SECONDS - 2 inside the run (fio runs PRE_WINDOW_S longer, so the snapshots
# before the window and the window itself fall inside it; the I/Os of the window come from
# fio's IOPS log), and nvmf_tgt's own share (/proc/PID/stat). Sampling profilers do
# not help here: `perf record -a` over a 6 s window of this load took over 30 s to finish
# under TCG (with or without call graphs), outliving fio.
# With TGT_BEFORE, nvmf_tgt before a change runs too, in the same rounds ("before-intr2").
# For nvmf_tgt also its reactors' iterations, busy iterations and sleeps per I/O (the stats
# RPC, through nvmfctl), and for every run the soft-RoCE devices' counters that moved, per I/O
# (hw_counters: packets, SENDs, RNR NAKs, retries, duplicates). Those two are read just outside
# the CPU window (their reads take time), so their per-I/O figures run high (SENDs per I/O
# 2.4-2.9 where 2 are sent, at d8c925a); ratios between them (packets per SEND) are not
# affected.
# Before the window, nvmf_tgt's threads' scheduler states in 30 snapshots (state, where it
# sleeps, which vCPU); over the window, each thread's seconds on a vCPU and waiting for one
# (/proc/PID/task/TID/schedstat): whether the reactors sleep while the host waits, or stay
# runnable and queue for a vCPU that the host's fio and the softirq work hold.
#   probe_profile_rxe.sh [TGT [SECONDS (8) [RW (randwrite) [TGT_BEFORE [ROUNDS (2) [KEYS
#                        [REACTORS ("--reactors 2") [REACTORS_BEFORE (REACTORS)
#                        [LAUNCH]]]]]]]]]
#     KEYS: more transport keys for TGT's configuration only, e.g. '"max_srq_depth": 256'
#     REACTORS: nvmf_tgt's reactor options, e.g. "--cpumask 0x3" (pinned); REACTORS_BEFORE:
#     TGT_BEFORE's (TGT_BEFORE may be TGT itself, to compare two reactor set-ups)
#     LAUNCH: a command prefix for TGT only, one that execs what follows (so the PID is
#     nvmf_tgt's), e.g. "nice -n -20" or "chrt --batch 0": the reactors' scheduling
# Also per run: fio's IOPS each second and completion latency, context switches per I/O, the
# scheduler's per-vCPU and load-balancing counters (/proc/schedstat, schedstats turned on),
# and the window's wall-clock seconds ("window epoch"), for vm-run.sh's host view
# (NVMF_VM_HOST_CPU=1: how busy QEMU's vCPU threads were on the host meanwhile).
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
reactor_args="${7:---reactors 2}"
reactor_args_before="${8:-$reactor_args}"
launch="${9:-}"
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
# Seconds fio runs beyond SECONDS: the thread-state and runnable snapshots before the window
# take 3-6 s under TCG, and the window itself can run a few seconds over SECONDS - 2.
readonly PRE_WINDOW_S=15
# A FIFO nobody writes, opened read-write once (so the open does not block): a timed read of
# it is a sleep without a fork.
nap_fifo="$(mktemp -u /run/probe-nap.XXXXXX)"  # not in $logs: 9p has no FIFOs
mkfifo "$nap_fifo"
exec {nap_fd}<>"$nap_fifo"

# The soft-RoCE devices' counters (sent and received packets, SENDs and RECVs, RNR NAKs,
# retries, duplicates, sequence errors): "DEVICE/COUNTER VALUE" lines.
hw_counters() {  # one process: under TCG every fork costs milliseconds of the window
  awk 'FNR == 1 { n = split(FILENAME, part, "/"); print part[5] "/" part[n], $1 }' \
    /sys/class/infiniband/*/ports/*/hw_counters/*
}

# sched_times PID: "THREAD-NAME/TID ON-CPU-NS WAITING-NS VOLUNTARY INVOLUNTARY" of each thread
# of PID (the last two: context switches), builtins only.
sched_times() {
  local t c run wait key value vol invol
  for t in /proc/"$1"/task/*; do
    read -r c <"$t/comm" || true
    read -r run wait _ <"$t/schedstat" || true
    while read -r key value; do
      case "$key" in
        voluntary_ctxt_switches:) vol="$value" ;;
        nonvoluntary_ctxt_switches:) invol="$value" ;;
      esac
    done <"$t/status"
    echo "$c/${t##*/} $run $wait $vol $invol"
  done
}

# The scheduler's per-vCPU and per-domain counters (/proc/schedstat, version 15), builtins only.
copy_schedstat() {
  local l
  while read -r l; do echo "$l"; done </proc/schedstat
}

# profile NAME PORT NQN [PID]: connect, fio for SECONDS + PRE_WINDOW_S with /proc/stat (and
# PID's /proc/PID/stat and reactor statistics) read around a window of SECONDS - 2 inside it,
# disconnect, report.
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
  # fio runs PRE_WINDOW_S longer than SECONDS: the snapshots below come before the window,
  # and the window (SECONDS - 2) must end while fio still runs. Until this was so, the window
  # began 5-6 s into an 8 s run and mostly measured an idle guest after fio had ended.
  fio --name=profile --filename="/dev/$disk" --ioengine=libaio --direct=1 --bs=4k --rw="$rw" \
    --iodepth=32 --numjobs=2 --group_reporting --time_based \
    --runtime="$((seconds + PRE_WINDOW_S))" \
    --output-format=json --output="$logs/$name.json" \
    --write_iops_log="$logs/$name" --log_avg_msec=100 --log_unix_epoch=1 &
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
  # Runnable tasks (/proc/loadavg's 4th field, this shell included) and each vCPU's idle
  # jiffies, 40 snapshots about 50 ms apart (builtins only; the wait is a timed read of a FIFO
  # nobody writes): is a vCPU idle while tasks wait? The polling shell itself fills idle time,
  # so these snapshots find less idle than the window does.
  local i0 lv c0 c1 k2
  for ((k2 = 0; k2 < 40; k2++)); do
    read -r _ _ _ lv _ </proc/loadavg
    while read -r c _ _ _ i0 _; do
      case "$c" in cpu0) c0="$i0" ;; cpu1) c1="$i0" ;; esac
    done </proc/stat
    echo "${lv%/*} $c0 $c1"
    read -r -t 0.05 -u "$nap_fd" || true
  done >"$logs/$name.runnable"
  echo "PROBE $name: runnable tasks (this shell included) and idle jiffies of cpu0/cpu1 since the last snapshot:" \
    "$(awk 'NR > 1 { printf "%d:%d/%d ", $1, $2 - p2, $3 - p3 } { p2 = $2; p3 = $3 }' "$logs/$name.runnable")"
  # The CPU window is between the two /proc/stat reads; the slower reads (an RPC, awk) stay
  # outside it, so their processes are not charged to the I/O.
  reactors >"$logs/$name.loops0"
  hw_counters >"$logs/$name.hw0"
  copy_schedstat >"$logs/$name.schedstat0"
  kill -0 "$fio_pid" 2>/dev/null || fail "$name: fio ended before the window began (raise PRE_WINDOW_S)"
  local window_start=$EPOCHREALTIME
  { grep -E '^(cpu|ctxt) ' /proc/stat; own; echo "$window_start"; } >"$logs/$name.stat"
  [ -z "$pid" ] || sched_times "$pid" >"$logs/$name.sched0"
  sleep "$((seconds - 2))"
  local window_end=$EPOCHREALTIME
  { grep -E '^(cpu|ctxt) ' /proc/stat; own; echo "$window_end"; } >>"$logs/$name.stat"
  kill -0 "$fio_pid" 2>/dev/null || fail "$name: fio ended inside the window (raise PRE_WINDOW_S)"
  echo "PROBE $name: window epoch ${window_start%.*}-${window_end%.*}"
  copy_schedstat >"$logs/$name.schedstat1"
  if [ -n "$pid" ]; then
    sched_times "$pid" >"$logs/$name.sched1"
    echo "PROBE $name: nvmf_tgt threads over the window, seconds on a vCPU / waiting for one," \
      "context switches voluntary / involuntary:" \
      "$(awk 'NR == FNR { run[$1] = $2; wait[$1] = $3; vol[$1] = $4; invol[$1] = $5; next }
              $1 in run { printf "%s %.2f / %.2f, %d / %d; ", $1, ($2 - run[$1]) / 1e9,
                          ($3 - wait[$1]) / 1e9, $4 - vol[$1], $5 - invol[$1] }' \
           "$logs/$name.sched0" "$logs/$name.sched1")"
  fi
  reactors >"$logs/$name.loops1"
  hw_counters >"$logs/$name.hw1"
  wait "$fio_pid" || fail "$name: fio failed"
  timeout 60 nvme disconnect -n "$nqn" || fail "nvme disconnect failed"
  python3 - "$name" "$logs" <<'PY'
import json, os, sys
name, logs = sys.argv[1], sys.argv[2]
jobs = json.load(open(f"{logs}/{name}.json"))["jobs"][0]
iops = jobs["read"]["iops"] + jobs["write"]["iops"]
lat = max((jobs[d]["clat_ns"] for d in ("read", "write") if jobs[d]["total_ios"]),
          key=lambda c: c["max"])
pct = lat.get("percentile", {})
print(f"PROBE {name}: fio completion latency ms: mean {lat['mean'] / 1e6:.1f},"
      + "".join(f" p{p.rstrip('0').rstrip('.')} {pct[p] / 1e6:.1f}," for p in ("50.000000", "99.000000", "99.900000") if p in pct)
      + f" max {lat['max'] / 1e6:.1f}")
lines = open(f"{logs}/{name}.stat").read().split("\n")
before, ctxt_before, own_before, after, ctxt_after, own_after = (
    list(map(int, l.split()[not l[0].isdigit():])) for l in lines[:3] + lines[4:7])
start_s, end_s = float(lines[3]), float(lines[7])
window = end_s - start_s
delta = [a - b for a, b in zip(after, before)]
switches = ctxt_after[0] - ctxt_before[0]
own = sum(own_after) - sum(own_before)
hz = os.sysconf("SC_CLK_TCK")
# I/Os done in the window: fio's IOPS log, one average per job every 100 ms stamped with the
# epoch milliseconds at its end (the block device's own count stays 0 for a multipath head).
samples = []
for job in (1, 2):
    try:
        samples += [(int(l.split(",")[0]) / 1000, int(l.split(",")[1])) for l in open(f"{logs}/{name}_iops.{job}.log")]
    except OSError:
        pass
ios = max(sum(v * 0.1 for t, v in samples if start_s < t <= end_s), 1)
kinds = {"user": delta[0] + delta[1], "system": delta[2], "idle": delta[3], "iowait": delta[4],
         "irq": delta[5], "softirq": delta[6], "of which nvmf_tgt": own}
per_io = ", ".join(f"{k} {v / hz / ios * 1e6:.0f}" for k, v in kinds.items())
def loop_counts(path):  # iterations, busy iterations, sleeps of all reactors together
    reactors = json.load(open(path)).get("reactors", [])
    return [sum(r[k] for r in reactors) for k in ("iterations", "busy_iterations", "sleeps")]
loops = [a - b for a, b in zip(loop_counts(f"{logs}/{name}.loops1"),
                               loop_counts(f"{logs}/{name}.loops0"))]
def bdev_time(path):  # completions and their summed latency (submit to completion), all bdevs
    bdevs = json.load(open(path)).get("bdevs", [])
    return sum(b["completions"] for b in bdevs), sum(b["latency_ns_total"] for b in bdevs)
bdev_ios, bdev_ns = (a - b for a, b in zip(bdev_time(f"{logs}/{name}.loops1"),
                                           bdev_time(f"{logs}/{name}.loops0")))
reactor = ""
if loops[0]:
    reactor = (f"; reactors per I/O: iterations {loops[0] / ios:.2f}, busy {loops[1] / ios:.2f},"
               f" sleeps {loops[2] / ios:.2f}; in the null bdev {bdev_ns / max(bdev_ios, 1) / 1e3:.0f} us"
               " per I/O (submit to completion: the reactor's next iteration)")
per_second = {}
first = min((t for t, v in samples), default=0)
for t, v in samples:
    per_second[int(t - first)] = per_second.get(int(t - first), 0) + v * 0.1
print(f"PROBE {name}: fio IOPS per second: " + " ".join(f"{per_second[k]:.0f}" for k in sorted(per_second)))
print(f"PROBE {name}: fio {iops:.0f} IOPS, {ios / window:.0f} in the window; guest CPU us per I/O: {per_io}{reactor};"
      f" context switches per I/O {switches / ios:.2f}")
def schedstat(path):
    rows = {}
    for l in open(path):
        f = l.split()
        if f and (f[0].startswith("cpu") or f[0].startswith("domain")):
            rows[f[0]] = list(map(int, f[1 + f[0].startswith("domain"):]))
    return rows
s0, s1 = schedstat(f"{logs}/{name}.schedstat0"), schedstat(f"{logs}/{name}.schedstat1")
d = {k: [b - a for a, b in zip(s0[k], s1[k])] for k in s1 if k in s0}
parts = []
for k in sorted(d):
    v = d[k]
    if k.startswith("cpu"):  # yld 0 sched goidle ttwu ttwu_local rq_cpu_time run_delay pcount
        parts.append(f"{k} went idle {v[3] / ios:.2f}, wakeups {v[4] / ios:.2f} (local {v[5] / ios:.2f}),"
                     f" run delay {v[7] / 1e3 / ios:.0f} us")
    elif len(v) >= 36:  # per idle type (idle, busy, newly idle): count balanced failed imb gained hot ...
        lb = "; ".join(f"{t} lb {v[i] / ios:.3f} failed {v[i + 2] / ios:.3f} gained {v[i + 4] / ios:.3f}"
                       for t, i in (("idle", 0), ("busy", 8), ("newidle", 16)))
        parts.append(f"{k} {lb}; wake remote {v[33] / ios:.2f} affine {v[34] / ios:.2f}")
print(f"PROBE {name}: scheduler per I/O: " + " | ".join(parts))
def counters(path):
    return {k: int(v) for k, v in (l.split() for l in open(path) if l.strip())}
hw0, hw1 = counters(f"{logs}/{name}.hw0"), counters(f"{logs}/{name}.hw1")
moved = {k: hw1[k] - hw0.get(k, 0) for k in sorted(hw1) if hw1[k] != hw0.get(k, 0)}
print(f"PROBE {name}: soft-RoCE counters per I/O: "
      + (", ".join(f"{k} {v / ios:.2f}" if v >= ios / 100 else f"{k} {v} in all"
                   for k, v in moved.items()) or "none moved"))
PY
}

# The counters of /proc/schedstat other than run time and delay need schedstats on.
echo 1 >/proc/sys/kernel/sched_schedstats
mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
  [ -e "$d/name" ] && echo "PROBE topology: ${d#/sys/kernel/debug/sched/domains/} $(cat "$d/name") flags $(cat "$d/flags" 2>/dev/null)"
done
echo "PROBE topology: L3 shared by $(cat /sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list 2>/dev/null || echo '?')," \
  "cpu0 core siblings $(cat /sys/devices/system/cpu/cpu0/topology/core_siblings_list)," \
  "migration cost $(cat /sys/kernel/debug/sched/migration_cost_ns 2>/dev/null || echo '?') ns," \
  "idle: driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)" \
  "states $(cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name 2>/dev/null | tr '\n' ' ')," \
  "cpu $(grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2) mwait $(grep -cm1 ' monitor' /proc/cpuinfo)," \
  "cmdline $(cat /proc/cmdline | tr ' ' '\n' | grep -E '^idle=' || echo 'no idle='), dmesg idle: $(dmesg | grep -iE 'idle|mwait' | head -3 | tr '\n' ';')," \
  "vulnerabilities: $(grep -H . /sys/devices/system/cpu/vulnerabilities/* | sed 's|.*/||' | tr '\n' ';')"
step "kernel target: nvmet-rdma, $KERNEL_NQN on $ADDR:$KERNEL_PORT"
nvmet_export "$KERNEL_NQN" "$ADDR" "$KERNEL_PORT"
# ours NAME BINARY ROUND CONFIG REACTORS [LAUNCH]: nvmf_tgt in interrupt mode with REACTORS'
# options (the script's default: 2 reactors), started through LAUNCH, profiled.
ours() {
  # shellcheck disable=SC2086 # REACTORS is a list of options
  TGT_LAUNCH="${6:-}" tgt_start "$2" "$4" "$logs/nvmf_tgt-$1-$3.log" --mode interrupt $5 \
    --rpc-socket "$RPC_SOCKET"
  sleep 1
  profile "$1-intr2-$3" "$OURS_PORT" "$OURS_NQN" "$TGT_PID"
  tgt_stop
}
for round in $(seq 1 "$rounds"); do
  profile "kernel-$round" "$KERNEL_PORT" "$KERNEL_NQN"
  ours ours "$tgt" "$round" "$logs/nvmf_tgt.json" "$reactor_args" "$launch"
  [ -z "$tgt_before" ] ||
    ours before "$tgt_before" "$round" "$logs/nvmf_tgt-before.json" "$reactor_args_before"
done
nvmet_unexport "$KERNEL_NQN"
echo "probe_profile_rxe: PASS"
