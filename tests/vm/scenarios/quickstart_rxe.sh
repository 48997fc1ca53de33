#!/bin/bash
# VM scenario behind scripts/quickstart.sh on machines without an RDMA NIC: the main job on
# real rdma-core over soft-RoCE. nvmf_tgt serves a malloc namespace on rxe0; nvmf_perf runs
# 10 s of 4 KiB random reads (QD32) against it and prints its table. Passes when I/O happened
# with zero errors and both programs stop cleanly. Not a ctest entry (perf_rxe covers more);
# quickstart.sh runs it with vm-run.sh.
#   quickstart_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS (10)]]]   (binaries: default from NVMF_BUILD_DIR)
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "quickstart_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = quickstart_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh quickstart_rxe"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-10}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"
# shellcheck source=lib/perf.sh
source "$(dirname "$0")/lib/perf.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$(dirname "$0")/lib/nvmf_tgt.sh"

logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
files="$(mktemp -d)"
mount -t tmpfs -o size=96m tmpfs "$files"
tgt_write_config "$logs/nvmf_tgt.json" "$files"
step "nvmf_tgt: $MALLOC_NQN (malloc) on rxe0"
tgt_start "$tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --reactors 1

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { tail -n 20 "$TGT_LOG"; }
perf_run randread "$MALLOC_NQN" -w randread -q 32 -o 4096

step "stopping nvmf_tgt"
tgt_stop
tgt_check_log
umount "$files"
echo "quickstart_rxe: nvmf_perf -w randread -q 32 -o 4096 -t $seconds against nvmf_tgt over rxe0:"
perf_table randread
echo "quickstart_rxe: PASS"
