#!/usr/bin/env bash
# nvmf_perf as a user runs it, on the in-process sim target: a verified mixed run is clean and
# its --json says so; a plain run works too; -P gives a worker several queue pairs; the work
# per I/O in --json (per_io) is what each key policy posts; the rare-race profile
# (mlx5-2017-rare) and a send fence that does not order key updates fail binds and reconnect
# without losing data, and the JSON says which sim options ran; --memreg-switch-every-ios (by
# count, over -d I/Os) and --memreg-switch-every (by time) cycle the key policies under
# verified load with nothing failed or reconnected; --mode interrupt and
# adaptive (workers that sleep on the queue pairs' event fds) verify clean; the PCIe path on the in-process NVMe controller model
# (-r 'trtype:PCIe traddr:model') verifies with zero copies, also with I/Os the driver splits;
# bad options exit 2 with one line that names the option; a device that cannot be opened exits
# 1 with the driver's reason. Usage: nvmf_perf_test.sh NVMF_PERF
set -uo pipefail
perf="$1"
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

json_get() {  # json_get FILE EXPRESSION (a jq path such as .lat_us.p99)
  if command -v jq >/dev/null 2>&1; then
    jq -r "$2" "$1"
  else
    python3 -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].lstrip(".").split("."):
    value = value[key]
print(value)' "$1" "$2"
  fi
}

# The verified mixed run: 70% reads on a malloc namespace, every read checked.
"$perf" --sim -w randrw -M 70 -q 32 -o 4096 -t 2 --verify --json "$work/out.json" \
  >"$work/verify.log" 2>&1
rc=$?
check "verified randrw exits 0" $rc "status $rc: $(tail -20 "$work/verify.log")"
if [ -s "$work/out.json" ]; then
  keys=$(json_get "$work/out.json" '[keys_unsorted[]] | join(",")' 2>/dev/null ||
         python3 -c 'import json, sys; print(",".join(json.load(open(sys.argv[1]))))' "$work/out.json")
  [[ "$keys" == iops,mibps,lat_us,ios,errors,reconnects,verify_failures* ]]
  check "json keys in order" $? "$keys"
  errors=$(json_get "$work/out.json" .errors)
  verify_failures=$(json_get "$work/out.json" .verify_failures)
  ios=$(json_get "$work/out.json" .ios)
  [ "$errors" = 0 ]
  check "no I/O errors" $? "errors $errors"
  [ "$verify_failures" = 0 ]
  check "no verify failures" $? "verify_failures $verify_failures"
  [ "$ios" -gt 0 ] 2>/dev/null
  check "I/Os completed" $? "ios $ios"
  p99=$(json_get "$work/out.json" .lat_us.p99)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$p99"
  check "latency measured" $? "p99 $p99"
else
  check "json written" 1 "no $work/out.json: $(tail -5 "$work/verify.log")"
fi
grep -q "IOPS" "$work/verify.log"
check "progress lines printed" $? "$(head -5 "$work/verify.log")"
grep -q "^Total" "$work/verify.log"
check "result table printed" $? "$(tail -5 "$work/verify.log")"
grep -q "us CPU per I/O" "$work/verify.log"
check "CPU per I/O printed" $? "$(tail -5 "$work/verify.log")"
if [ -s "$work/out.json" ]; then
  cpu=$(json_get "$work/out.json" .cpu_us_per_io)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$cpu"
  check "CPU per I/O measured (RDMA)" $? "cpu_us_per_io $cpu"
fi

# pcie_run NAME JSON ARGS...: a run of the PCIe path on the controller model that must be
# clean: exit 0, no errors, no verify failures, I/Os done, no byte copied (DMA buffers).
pcie_run() {
  local name="$1" json="$2"
  shift 2
  "$perf" -r 'trtype:PCIe traddr:model' "$@" --json "$json" >"$work/$name.log" 2>&1
  rc=$?
  check "PCIe model $name exits 0" $rc "status $rc: $(tail -20 "$work/$name.log")"
  if [ ! -s "$json" ]; then
    check "PCIe model $name json written" 1 "no $json: $(tail -5 "$work/$name.log")"
    return 1
  fi
  local key value
  for key in errors verify_failures bytes_copied; do
    value=$(json_get "$json" ".$key")
    [ "$value" = 0 ]
    check "PCIe model $name: $key 0" $? "$key $value"
  done
  value=$(json_get "$json" .ios)
  [ "$value" -gt 0 ] 2>/dev/null
  check "PCIe model $name: I/Os completed" $? "ios $value"
  value=$(json_get "$json" .cpu_us_per_io)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$value"
  check "PCIe model $name: CPU per I/O measured" $? "cpu_us_per_io $value"
}

# The PCIe path: the userspace driver on the in-process controller model, every read checked.
pcie_run randrw "$work/pcie.json" -w randrw -M 70 -q 16 -o 4096 -t 2 --verify
grep -q "^PCIe: 0 bytes copied through bounce buffers" "$work/randrw.log"
check "PCIe copies line printed" $? "$(tail -5 "$work/randrw.log")"
# 128 KiB sequential: the model's MDTS (2^5 pages), one command each; 256 KiB: the driver
# splits every I/O in two, and the halves still land where the pattern says.
pcie_run seq128k "$work/pcie128k.json" -w rw -M 50 -q 8 -o 131072 -t 1 --verify
pcie_run seq256k "$work/pcie256k.json" -w rw -M 50 -q 8 -o 262144 -t 1 --verify
if [ -s "$work/pcie256k.json" ]; then
  split=$(json_get "$work/pcie256k.json" .commands_split)
  [ "$split" -gt 0 ] 2>/dev/null
  check "PCIe model 256 KiB I/Os are split" $? "commands_split $split"
fi
# Two workers, two namespaces, each worker with its own I/O queue.
pcie_run two_workers "$work/pcie2.json" -w randwrite -q 8 -c 2 --ns-count 2 -t 1 --verify
grep -q "worker 1 nsid 2" "$work/two_workers.log"
check "PCIe model: both workers and namespaces reported" $? "$(tail -10 "$work/two_workers.log")"

# A function that cannot be opened (no VFIO, no hugepages, or no such device): exit 1 with
# the driver's reason on the last line.
out=$("$perf" -r 'trtype:PCIe traddr:ffff:ff:1f.7' -w read -t 1 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 1 ] && [[ "$(printf '%s\n' "$out" | tail -1)" == *"cannot open ffff:ff:1f.7: "* ]]
check "PCIe device that cannot be opened exits 1" $? "status $rc, stderr: $out"

# A plain run on null namespaces, two of them, sequential writes.
"$perf" --sim -w write -q 8 -o 8192 -t 1 --ns-count 2 >"$work/plain.log" 2>&1
rc=$?
check "sequential write on 2 null namespaces exits 0" $rc "status $rc: $(tail -10 "$work/plain.log")"
grep -q "nsid 2" "$work/plain.log"
check "both namespaces reported" $? "$(tail -10 "$work/plain.log")"

# sim_run NAME ARGS...: a --sim run with --json "$work/NAME.json" that must exit 0 with no I/O
# errors and no verify failures (the I/Os of a failed queue pair are resent after the
# reconnect, so even a run whose binds fail loses nothing). Returns 1 when there is no JSON.
sim_run() {
  local name="$1"
  shift
  "$perf" --sim "$@" --json "$work/$name.json" >"$work/$name.log" 2>&1
  rc=$?
  check "$name exits 0" $rc "status $rc: $(tail -20 "$work/$name.log")"
  if [ ! -s "$work/$name.json" ]; then
    check "$name json written" 1 "no $work/$name.json: $(tail -5 "$work/$name.log")"
    return 1
  fi
  local key value
  for key in errors verify_failures; do
    value=$(json_get "$work/$name.json" ".$key")
    [ "$value" = 0 ]
    check "$name: $key 0" $? "$key $value"
  done
  value=$(json_get "$work/$name.json" .ios)
  [ "$value" -gt 0 ] 2>/dev/null
  check "$name: I/Os completed" $? "ios $value"
}
# json_is NAME EXPRESSION VALUE: a field of $work/NAME.json.
json_is() {
  local value
  value=$(json_get "$work/$1.json" "$2")
  [ "$value" = "$3" ]
  check "$1: $2 is $3" $? "$2 $value"
}
# json_positive NAME EXPRESSION: a count of $work/NAME.json above 0.
json_positive() {
  local value
  value=$(json_get "$work/$1.json" "$2")
  [ "$value" -gt 0 ] 2>/dev/null
  check "$1: $2 above 0" $? "$2 $value"
}

# json_near NAME EXPRESSION VALUE: a per-I/O figure of $work/NAME.json within 0.02 of VALUE
# (the connects, and the last I/Os' drain, are a few work requests over many I/Os).
json_near() {
  local value
  value=$(json_get "$work/$1.json" "$2")
  python3 -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) <= 0.02 else 1)' \
    "$value" "$3"
  check "$1: $2 is $3" $? "$2 $value"
}

# --mode: interrupt (each worker sleeps on its queue pairs' event fds whenever a poll finds
# nothing) and adaptive, verified, with one queue pair and with -P 2 (the worker's own epoll set
# of both fds); the JSON says the mode, the waits slept and woke, the host CPU is measured.
if sim_run mode_interrupt -w randrw -M 70 -q 4 -t 1 --verify --mode interrupt; then
  json_is mode_interrupt .mode interrupt
  json_is mode_interrupt .config.mode interrupt
  json_positive mode_interrupt .host_events.waits
  json_positive mode_interrupt .host_events.arms
  json_is mode_interrupt .reconnects 0
  value=$(json_get "$work/mode_interrupt.json" .host_cpu_us_per_io)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$value"
  check "mode_interrupt: host CPU per I/O measured" $? "host_cpu_us_per_io $value"
fi
grep -q "^mode interrupt: [0-9]* waits" "$work/mode_interrupt.log"
check "mode_interrupt: the waits line printed" $? "$(tail -8 "$work/mode_interrupt.log")"
if sim_run mode_interrupt_p2 -w randrw -M 70 -q 8 -P 2 -t 1 --verify --mode interrupt; then
  json_positive mode_interrupt_p2 .host_events.arms
fi
if sim_run mode_adaptive -w randread -q 1 -t 1 --verify --mode adaptive --adaptive-idle-us 20; then
  json_is mode_adaptive .mode adaptive
  json_is mode_adaptive .config.adaptive_idle_us 20
fi
if sim_run mode_poll -w read -q 4 -t 1; then
  json_is mode_poll .mode poll
fi

# -P: one worker with 4 I/O queue pairs, 16 I/Os dealt 4 to each; every queue connects and
# the JSON and the banner say so.
if sim_run qpairs -w read -c 1 -P 4 -q 16 -t 1 --log-level info; then
  json_is qpairs .config.qpairs_per_worker 4
  json_is qpairs .config.cores 1
fi
connected=$(grep -c "I/O queue [0-9]* connected" "$work/qpairs.log")
[ "$connected" = 4 ]
check "qpairs: 4 I/O queues connected" $? "$connected: $(grep -m5 "connected" "$work/qpairs.log")"
grep -q -- "x 1 workers (-P 4 queue pairs each)" "$work/qpairs.log"
check "qpairs: the banner names -P" $? "$(head -3 "$work/qpairs.log")"
# Verified over 3 queue pairs each of 2 workers: every read still checks.
sim_run qpairs_verify -w randrw -M 70 -c 2 -P 3 -q 12 --verify -t 1
# The seed-001 shape (tools/bench/seed-table.sh): 12 queue pairs of depth 8 on a null
# namespace; the sim target must grant and fit all 12.
if sim_run seed001 -w read -c 1 -P 12 -q 96 -o 4096 --sim-bdev null -t 1; then
  json_is seed001 .config.qpairs_per_worker 12
  json_is seed001 .config.sim_bdev null
fi

# The work per I/O (--json per_io): sagi without remote invalidation binds a window, sends the
# command and invalidates the window with a signaled LOCAL_INV on every read: 3 WRs, 2 of them
# signaled, 3 CQEs (the response's receive, the SEND's, the LOCAL_INV's); global posts the
# SEND alone. max fences nearly every rebind (the LIFO pool hands the window just invalidated
# out again).
if sim_run counts_sagi -w randread --sim-profile mlx5-2017 --sim-remote-invalidate off \
     --memreg sagi -t 1; then
  for expected in send:1 bind_mw:1 local_inv:1 wrs:3 signaled:2 fenced:0 cqes_reaped:3; do
    json_near counts_sagi ".per_io.${expected%%:*}" "${expected#*:}"
  done
  json_positive counts_sagi .host_work.doorbells
  json_positive counts_sagi .sim_work.target.wrs
  value=$(json_get "$work/counts_sagi.json" .per_io.sim_work_steps)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 6 else 1)' "$value"
  check "counts_sagi: sim work steps per I/O >= 6 (3 host WRs, a receive, 3 CQEs ...)" $? "$value"
fi
grep -q "^per I/O: 3.00 WRs (1.00 SEND, 1.00 BIND_MW, 1.00 LOCAL_INV), 2.00 signaled" \
  "$work/counts_sagi.log"
check "counts_sagi: the per-I/O line" $? "$(grep -m1 "per I/O" "$work/counts_sagi.log")"
if sim_run counts_global -w randread -t 1; then
  for expected in send:1 bind_mw:0 local_inv:0 signaled:1 fenced:0 cqes_reaped:2; do
    json_near counts_global ".per_io.${expected%%:*}" "${expected#*:}"
  done
fi

# --sim-payload skip: two workers (two buffer blocks, two marked ranges), 8 KiB reads and
# writes (above the 4 KiB of in-capsule data, so a write's data is an RDMA READ too): every
# I/O's 8 KiB skipped, only the 64-byte capsule and the 16-byte response copied, and the admin
# queue's few KiB over the whole run (a few bytes per I/O; more in a slow sanitizer build). A SEND's payload is always copied: 4 KiB writes carry
# their data in the capsule. With --verify it is refused.
if sim_run payload_skip -w randrw -M 50 -c 2 -q 8 -o 8192 -t 1 --sim-payload skip; then
  json_is payload_skip .config.sim_payload skip
  skipped=$(json_get "$work/payload_skip.json" .per_io.sim_payload_bytes_skipped)
  copied=$(json_get "$work/payload_skip.json" .per_io.sim_payload_bytes_copied)
  python3 -c 'import sys; s, c = map(float, sys.argv[1:]); sys.exit(0 if abs(s - 8192) < 0.5 and 80 <= c < 1024 else 1)' \
    "$skipped" "$copied"
  check "payload_skip: 8192 bytes skipped and 80 (not 1,024) copied per I/O" $? "skipped $skipped copied $copied"
fi
if sim_run payload_copy -w randrw -M 50 -q 8 -t 1; then
  json_is payload_copy .per_io.sim_payload_bytes_skipped 0
fi
"$perf" --sim -w randrw -t 1 --verify --sim-payload skip >"$work/payload_verify.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "cannot be used with --verify" "$work/payload_verify.log"
check "--sim-payload skip with --verify: usage error" $? "status $rc: $(tail -3 "$work/payload_verify.log")"

# The seed's race, rare (mlx5-2017-rare: one bind or LOCAL_INV in 50 lags): the 2017 host
# (unsafe) without remote invalidation, so every read's window is invalidated by a host
# LOCAL_INV. Binds fail with status 6 and the queue reconnects, with the seed's log lines;
# nothing is lost.
if sim_run rare_unsafe -w randread --sim-profile mlx5-2017-rare --sim-race-one-in 50 \
     --sim-remote-invalidate off --memreg unsafe --verify -t 2 --reconnect-delay-ms 200; then
  json_is rare_unsafe .config.sim_profile mlx5-2017-rare
  json_is rare_unsafe .config.sim_race_one_in 50
  json_is rare_unsafe .config.sim.profile mlx5-2017-rare
  json_is rare_unsafe .config.sim.mkey_commit_slow_one_in 50
  json_positive rare_unsafe .mw_bind_errors
  json_positive rare_unsafe .reconnects
fi
grep -q "MEMREG for CID [0-9]* failed with status memory management operation error (6)" \
  "$work/rare_unsafe.log"
check "rare_unsafe: the seed's MEMREG error line" $? "$(grep -m3 -i memreg "$work/rare_unsafe.log")"
grep -q "reconnecting in [0-9.]* seconds" "$work/rare_unsafe.log" &&
  grep -q "Successfully reconnected" "$work/rare_unsafe.log"
check "rare_unsafe: reconnecting / Successfully reconnected" $? \
  "$(grep -m3 -i reconnect "$work/rare_unsafe.log")"

# max under mlx5-2017 where IBV_SEND_FENCE is only the IBTA fence (--sim-send-fence reads):
# the fenced rebind does not wait for the LOCAL_INV's key change, so it fails like unsafe,
# and still loses nothing. Where the fence orders key updates (key-updates, the profile's
# rule), the same run is clean.
if sim_run max_fence_reads -w randread --sim-profile mlx5-2017 --sim-send-fence reads \
     --sim-remote-invalidate off --memreg max --verify -t 2 --reconnect-delay-ms 200; then
  json_is max_fence_reads .config.sim_profile mlx5-2017
  json_is max_fence_reads .config.sim_send_fence reads
  json_is max_fence_reads .config.sim.send_fence reads
  json_positive max_fence_reads .mw_bind_errors
  json_positive max_fence_reads .reconnects
fi
if sim_run max_fence_keys -w randread --sim-profile mlx5-2017 --sim-send-fence key-updates \
     --sim-remote-invalidate off --memreg max --verify -t 1; then
  json_is max_fence_keys .config.sim.send_fence key-updates
  json_is max_fence_keys .mw_bind_errors 0
  json_is max_fence_keys .reconnects 0
  value=$(json_get "$work/max_fence_keys.json" .per_io.fenced)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0.9 else 1)' "$value"
  check "max_fence_keys: nearly every bind fenced" $? "per_io.fenced $value"
fi

# --memreg-switch-every-ios under -d: under verified load on mlx5-2017 without remote
# invalidation (every window invalidated by the host, key changes lagging), each queue pair of
# both workers cycles global -> sagi -> max -> deferred every 1250 I/Os completed on it, over
# -d 20000 I/Os per worker: it drains, switches and resumes with nothing failed, nothing
# reconnected, and the switches and each policy's share of the time reported. The work is
# counted, not timed, so a loaded machine makes the same switches, only slower (-t only caps a
# stuck run): each queue pair asks again once 1250 more of its I/Os completed (a poll may
# overshoot by up to its 32 in flight) until its last 32 I/Os started: 15 times at least.
if sim_run memreg_switch -w randrw -M 50 -q 32 -o 4608 -c 2 --verify --sim-profile mlx5-2017 \
     --sim-remote-invalidate off -d 20000 --memreg-switch-every-ios 1250 -t 120; then
  json_is memreg_switch .reconnects 0
  json_is memreg_switch .qp_errors 0
  json_is memreg_switch .mw_bind_errors 0
  json_is memreg_switch .memreg_switch_failures 0
  json_is memreg_switch .ios 40000
  json_is memreg_switch .config.number_ios 20000
  json_is memreg_switch .config.memreg_switch_every_ios 1250
  value=$(json_get "$work/memreg_switch.json" .memreg_switches)
  [ "$value" -ge 30 ] 2>/dev/null
  check "memreg_switch: 15 switches or more per queue pair" $? "memreg_switches $value"
  json_is memreg_switch .config.memreg global
  for policy in global sagi max deferred; do
    value=$(json_get "$work/memreg_switch.json" ".memreg_time_share.$policy")
    python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$value"
    check "memreg_switch: $policy was used" $? "memreg_time_share.$policy $value"
  done
fi
grep -q "^memreg switches: [0-9]* (0 failed); time per policy: global" "$work/memreg_switch.log"
check "memreg_switch: the switches line" $? "$(grep -m1 "memreg switches" "$work/memreg_switch.log")"
# By time (--memreg-switch-every), a chosen cycle, unsafe in it (the target invalidates, so
# unsafe is safe here too): one switch at least, 0.25 s into a 1 s run.
if sim_run memreg_switch_cycle -w randread -q 16 --verify --memreg-switch-every 0.25 \
     --memreg-switch-policies unsafe,deferred -t 1; then
  json_is memreg_switch_cycle .config.memreg unsafe
  json_is memreg_switch_cycle .reconnects 0
  json_positive memreg_switch_cycle .memreg_switches
fi

# --help is not an error.
"$perf" --help >"$work/help.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q -- "--verify" "$work/help.log"
check "--help exits 0" $? "status $rc"
grep -q -- "-d,--number-ios" "$work/help.log" && grep -q -- "--memreg-switch-every-ios" "$work/help.log"
check "--help names -d and --memreg-switch-every-ios" $? "$(grep -c -- "-ios" "$work/help.log")"

# Bad usage: exit 2, one line on stderr, the option named.
bad() {  # bad NAME EXPECTED-TEXT ARGS...
  local name="$1" text="$2"
  shift 2
  out=$("$perf" "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *"$text"* ]]
  check "bad usage: $name" $? "status $rc, stderr: $out"
}
bad "unknown flag" "--frobnicate" --sim -w read --frobnicate
bad "bad workload" "-w" --sim -w readwrite -t 1
bad "no workload" "-w" --sim -t 1
bad "no target" "--sim" -w read -t 1
bad "null cannot verify" "discards writes" --sim -w randrw --verify --sim-bdev null -t 1
bad "io size not whole blocks" "-o" --sim -w read -o 1000 -t 1
bad "read percent on reads" "-M" --sim -w randread -M 70 -t 1
bad "bad memreg" "--memreg" --sim -w read --memreg fastest -t 1
bad "bad sim send fence" "--sim-send-fence" --sim -w read --sim-send-fence strong -t 1
bad "race rate on another profile" "--sim-race-one-in applies to --sim-profile mlx5-2017-rare only" \
  --sim -w read --sim-profile mlx5-2017 --sim-race-one-in 50 -t 1
bad "race rate 0" "--sim-race-one-in" --sim -w read --sim-profile mlx5-2017-rare \
  --sim-race-one-in 0 -t 1
bad "no queue pairs" "-P: 0 is not within 1..127" --sim -w read -P 0 -t 1
bad "more queue pairs than I/Os" "-P 12: -q 8 x 1 namespaces gives a worker 8 I/Os" \
  --sim -w read -q 8 -P 12 -t 1
bad "PCIe takes no -P" "-P applies to RDMA targets" -r "trtype:PCIe traddr:model" -w read -P 2 -t 1
bad "an unknown --mode" "--mode: 'spin' is not one of" --sim -w read --mode spin -t 1
bad "PCIe takes no --mode" "--mode applies to RDMA targets" -r "trtype:PCIe traddr:model" -w read --mode interrupt -t 1
bad "switch every 0" "--memreg-switch-every: 0 is not a positive number" \
  --sim -w read --memreg-switch-every 0 -t 1
bad "switch every longer than the run" "--memreg-switch-every 3 never switches in a run of -t 2" \
  --sim -w read --memreg-switch-every 3 -t 2
bad "switch every with --memreg" "--memreg and --memreg-switch-every exclude each other" \
  --sim -w read --memreg sagi --memreg-switch-every 0.5 -t 1
bad "switch policies without every" "--memreg-switch-policies needs --memreg-switch-every" \
  --sim -w read --memreg-switch-policies global,sagi -t 1
bad "unknown switch policy" "'fastest' is not one of global, unsafe, sagi, max or deferred" \
  --sim -w read --memreg-switch-every 0.5 --memreg-switch-policies global,fastest -t 1
bad "one switch policy" "give two policies or more" \
  --sim -w read --memreg-switch-every 0.5 --memreg-switch-policies sagi -t 1
bad "empty switch policy" "an empty policy name" \
  --sim -w read --memreg-switch-every 0.5 --memreg-switch-policies global,,sagi -t 1
bad "switch policy after itself" "sagi follows itself" \
  --sim -w read --memreg-switch-every 0.5 --memreg-switch-policies sagi,global,sagi -t 1
bad "PCIe takes no memreg switching" "--memreg-switch-every applies to RDMA targets" \
  -r "trtype:PCIe traddr:model" -w read --memreg-switch-every 0.5 -t 1
bad "bad trid" "-r" -r "trtype:TCP traddr:10.0.0.1" -w read -t 1
bad "unwritable json" "--json" --sim -w read -t 1 --json /nonexistent-dir/out.json
bad "bad PCI address" "DDDD:BB:DD.F" -r "trtype:PCIe traddr:01:00.0" -w read -t 1
bad "PCIe excludes --sim" "--sim" --sim -r "trtype:PCIe traddr:model" -w read -t 1
bad "PCIe takes no --memreg" "--memreg" -r "trtype:PCIe traddr:model" -w read --memreg sagi -t 1
bad "unwritable json (PCIe)" "--json" -r "trtype:PCIe traddr:model" -w read -t 1 \
  --json /nonexistent-dir/out.json

check_summary "nvmf_perf"
