#!/bin/bash
# VM scenario: our host against our target on real rdma-core over soft-RoCE, two processes.
# nvmf_tgt (interrupt mode) serves two subsystems on rxe0: a malloc namespace and a uring
# namespace (a file on a guest tmpfs). nvmf_perf runs 50/50 random 8 KiB I/O with every read
# verified against each namespace under each memory-registration policy (global, unsafe, sagi,
# max, deferred; 8 KiB > the 4 KiB in-capsule limit, so reads and writes both use the key or
# window), plus the in-capsule path (4 KiB, 70/30, global) once, and one run whose queue pair
# switches policy every 0.25 s under load (--memreg-switch-every: counted switches, no failure). Under rxe the target answers
# with SEND_WITH_INVALIDATE, so unsafe must pass too. Last, the seed-001 workload
# (../shared/seeds/001_a840c731d0cd7af2.txt: a null device, 12 queues of depth 8, sequential
# 4 KiB reads) against a third subsystem with a null namespace: one worker with 12 I/O queue
# pairs (-P 12), 8 I/Os on each (-q 96), printed as one line `seed001: iops=N mibps=X ...`
# for tools/bench/seed-table.sh (SEED_TABLE_RXE_SEED001=logs/seed001.json). Passes when every
# run did I/O with zero errors, verify failures, reconnects, QP and bind errors, nvmf_tgt
# logged no error and both programs stop cleanly.
#   perf_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN (1)]]]   (binaries: default from NVMF_BUILD_DIR)
# Runs inside the guest only (vm-run.sh perf_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "perf_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = perf_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh perf_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-1}"   # lib/perf.sh says why 1 s
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/perf.sh
source "$(dirname "$0")/lib/perf.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
files="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"   # the uring bdev's file lives here

tgt_write_config "$logs/nvmf_tgt.json" "$files"
# The seed-001 subsystem: a null namespace (1 TiB of 512-byte blocks, nothing stored), deep
# enough for the 96 I/Os of the run.
NULL_NQN=nqn.2026-11.io.nvmf-vm:null0
# (jq, not python3, here and below: under TCG a python3 start costs 2-3 s of a vCPU.)
jq --arg nqn "$NULL_NQN" --arg addr "$ADDR" '
  .bdevs += [{type: "null", name: "Null0", block_size: 512, num_blocks: 2147483648, queue_depth: 256}]
  | .subsystems += [{nqn: $nqn, serial_number: "NVMFVMNULL01", model_number: "nvmf-vm null",
      allow_any_host: true, namespaces: [{nsid: 1, bdev: "Null0"}],
      listeners: [{adrfam: "ipv4", traddr: $addr, trsvcid: "4420"}]}]' \
  "$logs/nvmf_tgt.json" >"$logs/nvmf_tgt.json.tmp" && mv "$logs/nvmf_tgt.json.tmp" "$logs/nvmf_tgt.json" ||
  fail "could not add the null subsystem to $logs/nvmf_tgt.json"
step "nvmf_tgt: $MALLOC_NQN (malloc), $FILE_NQN (uring on tmpfs), $NULL_NQN (null), interrupt mode"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 1

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { tail -n 20 "$TGT_LOG"; }

# The in-capsule path: 4 KiB writes travel in the command capsule (global keys for the reads).
perf_run malloc-incapsule "$MALLOC_NQN" -w randrw -M 70 -q 16 -o 4096 --memreg global --verify
for policy in global unsafe sagi max deferred; do
  perf_run "malloc-$policy" "$MALLOC_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy" --verify
  perf_run "file-$policy" "$FILE_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy" --verify
done

# Live key policy switching over rxe: every 0.25 s the queue pair drains, switches to the next
# safe policy (global -> sagi -> max -> deferred -> global ...) and resumes, under verified I/O.
# perf_run checks zero errors, verify failures, reconnects, QP and bind errors; the JSON must
# count the switches (4 asked for per second: at least 2 per second done) and no failure.
perf_run malloc-memreg-switch "$MALLOC_NQN" -w randrw -M 50 -q 16 -o 8192 --verify \
  --memreg-switch-every 0.25
jq -r '"malloc-memreg-switch: \(.memreg_switches) switches, \(.memreg_switch_failures) failed, time share \(.memreg_time_share)"' \
  "$logs/malloc-memreg-switch.json"
jq -e --argjson seconds "$seconds" '.memreg_switches >= 2 * $seconds and .memreg_switch_failures == 0' \
  "$logs/malloc-memreg-switch.json" >/dev/null || fail "malloc-memreg-switch: too few switches or a failed one"

# seed001: 12 queue pairs of depth 8 on one worker, sequential 4 KiB reads of the null device.
perf_run seed001 "$NULL_NQN" -c 1 -P 12 -q 96 -w read -o 4096
jq -r --arg path "$logs/seed001.json" '.config as $c | "seed001: iops=\(.iops | round) mibps=\(.mibps) "
  + "qpairs=\($c.cores * $c.qpairs_per_worker) qd_per_qpair=\($c.queue_depth / $c.qpairs_per_worker | floor) "
  + "seconds=\($c.time_s) lat_avg_us=\(.lat_us.avg) errors=\(.errors) json=\($path)"' "$logs/seed001.json"

step "stopping nvmf_tgt"
tgt_stop
tgt_check_log
umount "$files"
printf 'perf_rxe: results\n%s' "$PERF_SUMMARY"
# Last, one nvmf_perf table as the program prints it (scripts/quickstart.sh shows the tail).
echo "perf_rxe: nvmf_perf's table of the malloc-incapsule run (4 KiB, 70/30, verified):"
perf_table malloc-incapsule
echo "perf_rxe: PASS: $PERF_RUNS nvmf_perf runs (malloc and uring namespaces verified under every memreg policy; the seed-001 null run) against nvmf_tgt over rxe0"
