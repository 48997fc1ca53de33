#!/bin/bash
# VM benchmark scenario (label bench, not vm: ctest -L bench, never in CI): the two NVMe/RDMA
# hosts against the two targets over soft-RoCE, side by side in ONE guest boot, so that the
# ratios between them mean something (under TCG absolute figures move by 2x from boot to boot).
#
# Targets (each serving a 1 GiB namespace of 4 KiB blocks that discards writes):
#   kernel   nvmet + nvmet-rdma through configfs, null_blk namespace, port $ADDR:4420
#   poll     our nvmf_tgt, null bdev, --mode poll, 1 reactor, port $ADDR:4421
#   intr     our nvmf_tgt, null bdev, --mode interrupt, 1 reactor, port $ADDR:4421
#   intr2    our nvmf_tgt, null bdev, --mode interrupt, 2 reactors, port $ADDR:4421 (the kernel
#            host's two I/O queues, one per vCPU, each on a reactor of its own). Unpinned:
#            pinned one per vCPU (--cpumask 0x3, 1435265..4944914) a single fio job's queue
#            shares its vCPU with its reactor, and randread QD8 x 1 fell to 0.72-0.96 of the
#            kernel pair (docs/performance.md)
# Hosts:
#   kernel     nvme-rdma (nvme connect) + fio, ioengine=libaio, direct=1 on /dev/nvmeXnY
#   ours       nvmf_perf -r ... (one worker thread, polling)
#   ours-intr  nvmf_perf -r ... --mode interrupt, in fio's shape: -c 2 -q 32 for the QD32 x 2
#              workloads (two workers, each its own I/O queue, sleeping on the queue's event
#              fd when it has nothing to reap), -c 1 -q 8 for QD8 x 1
# Rounds: ROUNDS (2) rounds, each running every host against every target, the targets in
# the order kernel, poll, intr, intr2 in odd rounds and backwards in even ones, so that drift
# during the boot (under TCG a set-up's IOPS move by tens of percent within minutes) favours
# no target; the table gives each pairing's mean over the rounds and every round's figure.
# Workloads (4 KiB, SECONDS each, in every round):
#   randread QD32 x 2 jobs    fio --numjobs=2 --iodepth=32;   nvmf_perf -c 1 -q 64
#   randrw 70/30 QD32 x 2     fio --numjobs=2 --iodepth=32;   nvmf_perf -c 1 -q 64 -M 70
#   randwrite QD32 x 2        fio --numjobs=2 --iodepth=32;   nvmf_perf -c 1 -q 64
#   randread QD8 x 1          fio --numjobs=1 --iodepth=8;    nvmf_perf -c 1 -q 8
# Polling, nvmf_perf runs one worker at the same total queue depth (64) rather than -c 2: a
# polling worker takes a vCPU, and two of them would take both of the guest's vCPUs (three
# spinning threads with a polling target). In interrupt mode it runs fio's shape: rxe does a
# queue's packet work in softirq on the vCPU that posted, so one worker keeps the kernel
# target's work on one vCPU (guest busy = wall) while fio's two jobs spread it over two.
# CPU time (seconds of CPU over the run, clock ticks of 10 ms):
#   target CPU  ours: nvmf_tgt's utime+stime (/proc/PID/stat) over the run; the kernel target:
#               the guest's sys+irq+softirq time (/proc/stat) over the run minus the host
#               process's own sys time, so it also holds rxe's packet work for both sides and
#               the kernel host's completion path (softirq): an upper bound
#   host CPU    fio's or nvmf_perf's usr+sys, from the waiting subshell's cutime+cstime
#   guest busy  all non-idle time of both vCPUs (/proc/stat); at most 2 x wall
# Prints a markdown table at the end (also results/logs/side_by_side.md; every run in
# results.tsv). Fails only when a run fails or does no I/O; the figures are measured, not judged.
#   side_by_side_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS (3) [ROUNDS (2)]]]]
#   (binaries: default from NVMF_BUILD_DIR)
# Runs inside the guest only: `vm-run.sh side_by_side_rxe` (one guest, both sides), or
# `vm-pair.sh side_by_side_rxe` (two guests, one vCPU each: the targets in the "target" guest,
# the hosts in the "host" guest, soft-RoCE over a virtio-net link between them; lib/pair.sh).
# In the pair the host guest runs every host against a target once the target guest has
# posted it ready (a file in /nvmf-pair), and asks the target guest for its CPU figures before
# and after each run (over TCP: the target guest polls nothing); there target CPU is the
# target guest's non-idle time for every target (the target, rxe's packet work and whatever
# else that guest does, as on a target machine), and guest busy is both guests' (at most 2 x
# wall with one vCPU each).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "side_by_side_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = side_by_side_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh side_by_side_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-3}"
rounds="${4:-2}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || fail "SECONDS: '$seconds' is not a whole number >= 1"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "ROUNDS: '$rounds' is not a whole number >= 1"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"
for tool in nvme fio python3; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs it)"
done
is_role() { [ -z "$PAIR_ROLE" ] || [ "$PAIR_ROLE" = "$1" ]; }   # this guest runs that side

PAIR_ROLE="${NVMF_VM_PAIR_ROLE:-}"   # empty: one guest runs both sides
if [ -z "$PAIR_ROLE" ]; then
  # shellcheck source=lib/rxe.sh
  source "$(dirname "$0")/lib/rxe.sh"
else
  # shellcheck source=lib/pair.sh
  source "$(dirname "$0")/lib/pair.sh"
fi
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"
# shellcheck source=lib/nvme_host.sh
source "$(dirname "$0")/lib/nvme_host.sh"
# shellcheck source=lib/nvmet.sh
source "$(dirname "$0")/lib/nvmet.sh"
! is_role host || modprobe nvme-rdma

readonly KNQN=nqn.2014-08.io.nvmf-vm:bench-null OURNQN=nqn.2026-11.io.nvmf-vm:bench-null
readonly KPORT=4420 OURPORT=4421
readonly BLOCKS=262144   # x 4 KiB = 1 GiB, both targets
logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
results="$logs/results.tsv"
: >"$results"

# --- measurement -------------------------------------------------------------------------
TGT_PID_NOW=""   # the running nvmf_tgt's pid, empty for the kernel target
ROUND=1          # the round being run (results.tsv's last column)
proc_cpu() {     # PID -> utime+stime in ticks
  local stat
  read -r stat <"/proc/$1/stat"
  stat="${stat##*) }"   # from field 3 (state) on: utime is word 12, stime 13
  awk '{ print $12 + $13 }' <<<"$stat"
}
guest_cpu() {    # -> "SYS+IRQ+SOFTIRQ BUSY" of all vCPUs in ticks
  awk '$1 == "cpu" { print $4 + $7 + $8, $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat
}
# target_here: "NVMF_TGT SYS+IRQ+SOFTIRQ BUSY" in ticks, of the guest the target runs in (the
# first 0 for the kernel target).
target_here() {
  local p=0
  [ -z "$TGT_PID_NOW" ] || p="$(proc_cpu "$TGT_PID_NOW")"
  echo "$p $(guest_cpu)"
}
# The pair's target guest answers the host guest's sample requests over TCP, not by files in
# the shared folder: a loop looking for files there would run all along beside the target,
# and each of its wake-ups is a switch between processes, which costs our target (a process)
# 50-95 us under TCG and nvmet nothing. serve_host's server sleeps in accept() instead.
readonly SAMPLE_PORT=4499
# pair_ask REQUEST: one line to the target guest's server, its one-line answer in PAIR_ANSWER.
pair_ask() {
  local fd
  exec {fd}<>"/dev/tcp/$TARGET_ADDR/$SAMPLE_PORT" || fail "cannot reach the target guest's sample server"
  echo "$1" >&"$fd"
  read -r -t 60 PAIR_ANSWER <&"$fd" || fail "no answer from the target guest to '$1'"
  exec {fd}>&-
}
# target_cpu: TARGET_CPU=(target_here of the target's guest); in the pair's host guest, asked.
target_cpu() {
  if [ "$PAIR_ROLE" != host ]; then
    read -r -a TARGET_CPU <<<"$(target_here)"
  else
    pair_ask sample
    read -r -a TARGET_CPU <<<"$PAIR_ANSWER"
  fi
  [ "${#TARGET_CPU[@]}" -eq 3 ] || fail "target CPU sample '${TARGET_CPU[*]}' is not three numbers"
}
# serve_host NAME: the pair's target guest posts NAME (the target is up), then answers the host
# guest's "sample" requests (target_here's figures) until it says "done" (10 min at most).
serve_host() {
  local listening=/run/sample-server.up server
  rm -f "$listening"
  # Each sample is the shell's own target_here, run by the server (a bash start between runs,
  # each side of the window alike): one definition of the figures.
  export -f target_here proc_cpu guest_cpu
  TGT_PID_NOW="${TGT_PID_NOW:-}" python3 - "$TARGET_ADDR" "$SAMPLE_PORT" "$listening" <<'PY' &
import socket, subprocess, sys
addr, port, listening = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def target_here():
    return subprocess.run(["bash", "-c", "target_here"], capture_output=True, text=True,
                          check=True).stdout.strip()
server = socket.create_server((addr, port))
server.settimeout(600)
open(listening, "w").close()
while True:
    conn, _ = server.accept()
    with conn:
        request = conn.makefile().readline().strip()
        if request == "sample":
            conn.sendall((target_here() + "\n").encode())
        elif request == "done":
            conn.sendall(b"ok\n")
            break
        else:
            conn.sendall(b"unknown request\n")
PY
  server=$!
  for _ in $(seq 1 300); do
    [ ! -e "$listening" ] || break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  [ -e "$listening" ] || fail "the sample server did not start"
  pair_post "$1"
  wait "$server" || fail "the sample server failed (no \"done\" from the host guest in 10 min?)"
}

# measure WORKLOAD HOST TARGET KIND JSON CMD...: runs CMD (fio or nvmf_perf writing JSON) and
# appends one line to $results: workload host target iops tgt_cpu host_cpu busy wall round.
measure() {
  local workload="$1" host="$2" target="$3" kind="$4" json="$5"
  shift 5
  local t0 t1 g0 g1 s0 s1 rc=0 child
  target_cpu
  s0=("${TARGET_CPU[@]}")
  read -r -a g0 <<<"$(guest_cpu)"
  t0="$(date +%s.%N)"
  # The subshell waits for CMD, then reads its own cutime and cstime (words 14, 15 from state).
  read -r -a child <<<"$( (timeout $((seconds + 60)) "$@" >"$json.out" 2>&1 || echo "rc=$?" >&2
             read -r stat <"/proc/$BASHPID/stat"; stat="${stat##*) }"
             awk '{ print $14, $15 }' <<<"$stat") 2>"$json.rc")" || rc=$?
  [ "${#child[@]}" -eq 2 ] || rc=1
  t1="$(date +%s.%N)"
  read -r -a g1 <<<"$(guest_cpu)"
  target_cpu
  s1=("${TARGET_CPU[@]}")
  if [ -s "$json.rc" ] || [ "$rc" -ne 0 ]; then
    cat "$json.out" "$json.rc"
    fail "$workload, $host host -> $target target: the run failed"
  fi
  python3 - "$kind" "$json" "$workload" "$host" "$target" "$t0" "$t1" "${s0[@]}" "${s1[@]}" \
    "${g0[1]}" "${g1[1]}" "${child[@]}" "$ROUND" "${PAIR_ROLE:+pair}" >>"$results" <<'PY' ||
import json, sys
kind, path, workload, host, target = sys.argv[1:6]
t0, t1 = float(sys.argv[6]), float(sys.argv[7])
p0, sys0, tbusy0, p1, sys1, tbusy1, busy0, busy1, cut, cst = (int(x) for x in sys.argv[8:18])
round_, pair = sys.argv[18], sys.argv[19] == "pair"
hz = 100.0
if kind == "fio":
    job = json.load(open(path))["jobs"][0]
    if job["error"]:
        sys.exit(f"fio error {job['error']}")
    iops = job["read"]["iops"] + job["write"]["iops"]
else:
    r = json.load(open(path))
    if r["errors"] or r["qp_errors"] or r["reconnects"] or r["mw_bind_errors"]:
        sys.exit(f"nvmf_perf trouble: {r}")
    iops = r["iops"]
if iops <= 0:
    sys.exit("no I/O")
if pair:                 # the whole target guest's non-idle time, whichever target
    tgt = (tbusy1 - tbusy0) / hz
elif target != "kernel":
    tgt = (p1 - p0) / hz
else:                    # the guest's kernel time less what is charged to the host process
    tgt = max(0, (sys1 - sys0) - cst) / hz
busy = busy1 - busy0 + (tbusy1 - tbusy0 if pair else 0)   # in the pair: both guests
print(f"{workload}\t{host}\t{target}\t{iops:.0f}\t{tgt:.2f}\t{(cut + cst) / hz:.2f}\t"
      f"{busy / hz:.2f}\t{t1 - t0:.1f}\t{round_}")
PY
    { cat "$json.out"; fail "$workload, $host host -> $target target: no usable result (above)"; }
  tail -n 1 "$results"
}

# The four workloads: NAME FIO_ARGS | PERF_ARGS
readonly WORKLOADS=(rr32x2 mix32x2 wr32x2 rr8x1)
fio_args() {
  case "$1" in
    rr32x2) echo "--rw=randread --iodepth=32 --numjobs=2" ;;
    mix32x2) echo "--rw=randrw --rwmixread=70 --iodepth=32 --numjobs=2" ;;
    wr32x2) echo "--rw=randwrite --iodepth=32 --numjobs=2" ;;
    rr8x1) echo "--rw=randread --iodepth=8 --numjobs=1" ;;
  esac
}
perf_args() {  # perf_args WORKLOAD MODE
  local shape="-q 64 -c 1"
  [ "$2" = interrupt ] && shape="-q 32 -c 2"
  case "$1" in
    rr32x2) echo "-w randread $shape" ;;
    mix32x2) echo "-w randrw -M 70 $shape" ;;
    wr32x2) echo "-w randwrite $shape" ;;
    rr8x1) echo "-w randread -q 8 -c 1" ;;
  esac
}

# kernel_host TARGET PORT NQN: nvme connect, fio for each workload, nvme disconnect.
kernel_host() {
  local target="$1" port="$2" nqn="$3" disk w
  step "kernel host -> $target target: nvme connect -t rdma -a $ADDR -s $port -n $nqn"
  timeout 60 nvme connect -t rdma -a "$ADDR" -s "$port" -n "$nqn" || fail "nvme connect to $target failed"
  disk="$(nvme_wait_disk "$nqn")"
  [ -n "$disk" ] || fail "no namespace block device after nvme connect to $target"
  for w in "${WORKLOADS[@]}"; do
    step "kernel host -> $target target: $w: fio $(fio_args "$w") (/dev/$disk, ${seconds}s)"
    # shellcheck disable=SC2046
    measure "$w" kernel "$target" fio "$logs/$w-kernel-$target-$ROUND.json" \
      fio --name="$w" --filename="/dev/$disk" --ioengine=libaio --direct=1 --bs=4k \
        $(fio_args "$w") --group_reporting --time_based --runtime="$seconds" \
        --output-format=json --output="$logs/$w-kernel-$target-$ROUND.json"
  done
  timeout 60 nvme disconnect -n "$nqn" || fail "nvme disconnect from $target failed"
}

# our_host TARGET PORT NQN: nvmf_perf for each workload, its worker polling (host "ours"),
# then sleeping when idle (--mode interrupt, host "ours-intr").
our_host() {
  local target="$1" port="$2" nqn="$3" w mode host
  local trid="trtype:RDMA adrfam:IPv4 traddr:$ADDR trsvcid:$port subnqn:$nqn"
  for mode in poll interrupt; do
    host=ours
    [ "$mode" = interrupt ] && host=ours-intr
    for w in "${WORKLOADS[@]}"; do
      step "our host ($mode) -> $target target: $w: nvmf_perf -r '$trid' $(perf_args "$w" "$mode") --mode $mode -o 4096 -t $seconds"
      # shellcheck disable=SC2046
      measure "$w" "$host" "$target" perf "$logs/$w-$host-$target-$ROUND.json" \
        "$perf" -r "$trid" $(perf_args "$w" "$mode") --mode "$mode" -o 4096 -t "$seconds" \
        --json "$logs/$w-$host-$target-$ROUND.json"
    done
  done
}

# hosts_against TARGET PORT NQN: every host against the target just brought up, here or, in
# the pair's target guest, in the host guest (this one answers its sample requests meanwhile).
hosts_against() {
  if [ "$PAIR_ROLE" = target ]; then
    step "round $ROUND: $1 target ready: the host guest runs the hosts"
    serve_host "ready.$ROUND.$1"
  else
    kernel_host "$@"
    our_host "$@"
  fi
}

# --- the targets ---------------------------------------------------------------------------
# kernel_target: nvmet up, both hosts, nvmet down.
kernel_target() {
  step "round $ROUND: kernel target: nvmet-rdma through configfs, $KNQN (null_blk, 4 KiB, 1 GiB), port $ADDR:$KPORT"
  nvmet_export "$KNQN" "$ADDR" "$KPORT"
  hosts_against kernel "$KPORT" "$KNQN"
  step "round $ROUND: kernel target: tearing down"
  nvmet_unexport "$KNQN"
}

cat >"$logs/nvmf_tgt.json" <<EOF
{
  "transports": [ { "type": "rdma" } ],
  "bdevs": [ { "type": "null", "name": "Null0", "block_size": 4096, "num_blocks": $BLOCKS } ],
  "subsystems": [
    { "nqn": "$OURNQN", "serial_number": "NVMFVMBENCH01", "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Null0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "$OURPORT" } ] }
  ]
}
EOF
# idle_threads: "thread ticks" for each thread of the running nvmf_tgt.
idle_threads() {
  local task stat
  for task in /proc/"$TGT_PID"/task/*; do
    read -r stat <"$task/stat" || continue
    awk -v t="$(basename "$task")" '{ print t, $12 + $13 }' <<<"${stat##*) }"
  done
}
# idle_cost LABEL: nvmf_tgt's CPU per thread over about 2 s of wall time, idle.
idle_cost() {
  local idle0 idle1 t0 t1
  idle0="$(idle_threads)" t0="$(date +%s.%N)"
  sleep 2
  idle1="$(idle_threads)" t1="$(date +%s.%N)"
  python3 - "$1" "$t0" "$t1" "$idle0" "$idle1" <<'PY'
import sys
mode, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
a = dict(l.split() for l in sys.argv[4].splitlines())
b = dict(l.split() for l in sys.argv[5].splitlines())
per = {t: (int(b[t]) - int(a.get(t, 0))) / 100.0 for t in b}
busy = ", ".join(f"thread {t} {v:.2f} s" for t, v in sorted(per.items()) if v > 0) or "no thread"
print(f"nvmf_tgt --mode {mode} idle: {sum(per.values()):.2f} s of CPU in {t1 - t0:.2f} s of "
      f"wall time ({len(per)} threads; {busy})")
PY
}
# our_target poll|intr|intr2: nvmf_tgt up (its idle cost in round 1), both hosts, down.
our_target() {
  local target="$1" mode reactors
  case "$target" in
    poll) mode=poll reactors="--reactors 1" ;;
    intr) mode=interrupt reactors="--reactors 1" ;;
    intr2) mode=interrupt reactors="--reactors 2" ;;
  esac
  step "round $ROUND: our target: nvmf_tgt --mode $mode $reactors, $OURNQN (null bdev, 4 KiB, 1 GiB), port $ADDR:$OURPORT"
  # shellcheck disable=SC2086 # $reactors is two words: an option and its value
  tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt-$target-$ROUND.log" --mode "$mode" $reactors
  TGT_PID_NOW="$TGT_PID"
  sleep 1
  [ "$ROUND" != 1 ] || idle_cost "$mode $reactors"
  hosts_against "$target" "$OURPORT" "$OURNQN"
  step "round $ROUND: our target ($mode, $reactors): stopping"
  tgt_stop
  tgt_check_log
  TGT_PID_NOW=""
}

for ((ROUND = 1; ROUND <= rounds; ROUND++)); do
  order=(kernel poll intr intr2)
  ((ROUND % 2)) || order=(intr2 intr poll kernel)
  for target in "${order[@]}"; do
    if [ "$PAIR_ROLE" = host ]; then   # the target guest brings it up and down
      port="$OURPORT" nqn="$OURNQN"
      [ "$target" != kernel ] || port="$KPORT" nqn="$KNQN"
      step "round $ROUND: waiting for the target guest's $target target"
      pair_wait "ready.$ROUND.$target" 600 0.2
      kernel_host "$target" "$port" "$nqn"
      our_host "$target" "$port" "$nqn"
      pair_ask done
    elif [ "$target" = kernel ]; then
      kernel_target
    else
      our_target "$target"
    fi
  done
done
if [ "$PAIR_ROLE" = target ]; then
  echo "side_by_side_rxe: PASS: the target guest served $((rounds * 4)) targets (the table is in the host guest's log)"
  exit 0
fi

# --- the table ----------------------------------------------------------------------------
python3 - "$results" "$seconds" "$rounds" "${PAIR_ROLE:+pair}" >"$logs/side_by_side.md" <<'PY'
import statistics, sys
runs = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
seconds, rounds, pair = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "pair"
names = {"rr32x2": "randread QD32 x 2", "mix32x2": "randrw 70/30 QD32 x 2",
         "wr32x2": "randwrite QD32 x 2", "rr8x1": "randread QD8 x 1"}
hosts = {"kernel": "kernel (fio)", "ours": "ours (nvmf_perf), poll",
         "ours-intr": "ours (nvmf_perf), interrupt"}
targets = {"kernel": "kernel (nvmet, null_blk)", "poll": "ours, poll", "intr": "ours, interrupt",
           "intr2": "ours, interrupt, 2 reactors"}
# (workload, host, target) -> [(round, iops, tgt_cpu, host_cpu, busy, wall)]
pairs = {}
for w, h, t, iops, tcpu, hcpu, busy, wall, rnd in runs:
    pairs.setdefault((w, h, t), []).append(
        (int(rnd), float(iops), float(tcpu), float(hcpu), float(busy), float(wall)))
mean = {k: statistics.mean(r[1] for r in v) for k, v in pairs.items()}
print(f"{rounds} round{'s' if rounds > 1 else ''} of {seconds} s runs, 4 KiB I/O, the targets in "
      "alternating order; IOPS: the mean of the rounds (each round's in `rounds`); CPU in "
      "seconds per run (wall), the mean of the rounds; guest busy is both vCPUs' non-idle time.\n")
print("| workload | host | target | IOPS | vs kernel/kernel | rounds | target CPU s "
      "| host CPU s | guest busy s | wall s |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
order = {w: i for i, w in enumerate(names)}
hord = {h: i for i, h in enumerate(hosts)}
tord = {t: i for i, t in enumerate(targets)}
for (w, h, t), rs in sorted(pairs.items(), key=lambda kv: (order[kv[0][0]], hord[kv[0][1]],
                                                         tord[kv[0][2]])):
    base = mean.get((w, "kernel", "kernel"))
    ratio = f"{mean[(w, h, t)] / base:.2f}" if base else "-"
    each = " / ".join(f"{r[1]:,.0f}" for r in sorted(rs))
    tmark = "*" if t == "kernel" and not pair else ""
    avg = [statistics.mean(r[i] for r in rs) for i in range(2, 6)]
    print(f"| {names[w]} | {hosts[h]} | {targets[t]} | {mean[(w, h, t)]:,.0f} | {ratio} | {each} "
          f"| {avg[0]:.2f}{tmark} | {avg[1]:.2f} | {avg[2]:.2f} | {avg[3]:.1f} |")
if pair:
    print("\nTwo guests, one vCPU each (tests/vm/vm-pair.sh): the targets in one, the hosts in the "
          "other. Target CPU: the target guest's non-idle time, for every target (the target "
          "process or nvmet, rxe's packet work, the rest of that guest); guest busy: both "
          "guests' non-idle time.")
else:
    print("\n\\* kernel target: the guest's sys+irq+softirq time less the host process's own sys "
          "time, so it also counts rxe's packet work for both sides (an upper bound).")
PY
step "results"
echo "side_by_side_rxe: table (also in $logs/side_by_side.md):"
cat "$logs/side_by_side.md"
echo "side_by_side_rxe: PASS: $(wc -l <"$results") runs"
