#!/bin/bash
# VM scenario: our host against our target on real rdma-core over soft-RoCE (the quickstart's
# main job where the machine has no RDMA NIC). nvmf_tgt serves the malloc example; nvmf_perf
# connects through librdmacm to rxe0 and runs 70/30 random 4 KiB I/O with every read verified.
# Passes when I/O happened with zero errors and zero verify failures, and both programs stop
# cleanly.
#   perf_rxe.sh NVMF_TGT NVMF_PERF EXAMPLES_DIR
# Runs inside the guest only (vm-run.sh perf_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "perf_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = perf_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh perf_rxe"
tgt="${1:?nvmf_tgt binary}"
perf="${2:?nvmf_perf binary}"
examples="${3:?examples folder}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"

work="$(mktemp -d)"
step "nvmf_tgt -c malloc.json"
"$tgt" -c "$examples/malloc.json" --mode interrupt --reactors 1 >"$work/tgt.log" 2>&1 &
tgt_pid=$!
for _ in $(seq 1 200); do
  grep -q "ready:" "$work/tgt.log" && break
  kill -0 "$tgt_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "ready:" "$work/tgt.log" || { cat "$work/tgt.log"; fail "nvmf_tgt did not report ready"; }

trid="trtype:RDMA adrfam:IPv4 traddr:$ADDR trsvcid:4420 subnqn:nqn.2026-11.io.nvmf-rdma:malloc0"
step "nvmf_perf -r '$trid' -w randrw -M 70 -q 16 -o 4096 -t 5 --verify"
rc=0
timeout 120 "$perf" -r "$trid" -w randrw -M 70 -q 16 -o 4096 -t 5 --verify \
  --json "$work/perf.json" 2>&1 | tee "$work/perf.log" || rc=$?
cp "$work/perf.json" "${RESULTS:-/nvmf-vm}/perf.json" 2>/dev/null || true

kill -TERM "$tgt_pid"
tgt_rc=0
wait "$tgt_pid" || tgt_rc=$?
tail -5 "$work/tgt.log"
[ "$rc" -eq 0 ] || fail "nvmf_perf exited $rc"
[ "$tgt_rc" -eq 0 ] || fail "nvmf_tgt exited $tgt_rc after SIGTERM"
python3 - "$work/perf.json" <<'PY' || fail "results do not hold"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"perf_rxe: {r['iops']:.0f} IOPS, {r['ios']} I/Os, errors {r['errors']}, "
      f"verify failures {r['verify_failures']}, p99 {r['lat_us']['p99']} us")
sys.exit(0 if r["ios"] > 0 and r["errors"] == 0 and r["verify_failures"] == 0 else 1)
PY
echo "perf_rxe: PASS: our host drove verified I/O at our target over rxe0"
