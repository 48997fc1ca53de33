#!/bin/bash
# VM scenario: our host against our target on real rdma-core over soft-RoCE, two processes.
# nvmf_tgt (interrupt mode) serves two subsystems on rxe0: a malloc namespace and a uring
# namespace (a file on a guest tmpfs). nvmf_perf runs 50/50 random 8 KiB I/O with every read
# verified against each namespace under each memory-registration policy (global, unsafe, sagi,
# max, deferred; 8 KiB > the 4 KiB in-capsule limit, so reads and writes both use the key or
# window), plus the in-capsule path (4 KiB, 70/30, global) once. Under rxe the target answers
# with SEND_WITH_INVALIDATE, so unsafe must pass too. Passes when every run did I/O with zero
# errors, verify failures, reconnects, QP and bind errors, nvmf_tgt logged no error and both
# programs stop cleanly.
#   perf_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN (3)]]]   (binaries: default from NVMF_BUILD_DIR)
# Runs inside the guest only (vm-run.sh perf_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "perf_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = perf_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh perf_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-3}"
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
step "nvmf_tgt: $MALLOC_NQN (malloc) and $FILE_NQN (uring on tmpfs), interrupt mode"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 1

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { tail -n 20 "$TGT_LOG"; }

# The in-capsule path: 4 KiB writes travel in the command capsule (global keys for the reads).
perf_run malloc-incapsule "$MALLOC_NQN" -w randrw -M 70 -q 16 -o 4096 --memreg global --verify
for policy in global unsafe sagi max deferred; do
  perf_run "malloc-$policy" "$MALLOC_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy" --verify
  perf_run "file-$policy" "$FILE_NQN" -w randrw -M 50 -q 16 -o 8192 --memreg "$policy" --verify
done

step "stopping nvmf_tgt"
tgt_stop
tgt_check_log
umount "$files"
printf 'perf_rxe: results\n%s' "$PERF_SUMMARY"
# Last, one nvmf_perf table as the program prints it (scripts/quickstart.sh shows the tail).
echo "perf_rxe: nvmf_perf's table of the malloc-incapsule run (4 KiB, 70/30, verified):"
perf_table malloc-incapsule
echo "perf_rxe: PASS: $PERF_RUNS verified nvmf_perf runs (malloc and uring namespaces, every memreg policy) against nvmf_tgt over rxe0"
