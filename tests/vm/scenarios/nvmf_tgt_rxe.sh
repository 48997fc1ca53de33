#!/bin/bash
# VM scenario: nvmf_tgt on real rdma-core over soft-RoCE. Each example configuration starts
# (the RDMA transport opens its CM channel and listens through librdmacm on rxe0), reports
# ready, and stops on SIGTERM with status 0. (The kernel's host against our target is
# kernel_host_rxe's.)
#   nvmf_tgt_rxe.sh NVMF_TGT EXAMPLES_DIR
# Runs inside the guest only (vm-run.sh nvmf_tgt_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "nvmf_tgt_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = nvmf_tgt_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh nvmf_tgt_rxe"
tgt="${1:?nvmf_tgt binary}"
examples="${2:?examples folder}"
[ -x "$tgt" ] || fail "not built: $tgt"
command -v jq >/dev/null || fail "jq not installed on the host (scripts/install-deps.sh installs it)"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"

work="$(mktemp -d)"
passed=0
# A file an example creates may be left on the host's / by an earlier run (tests/tools runs
# the examples there): opened read-write, the overlay would copy all of it up over 9p (12 s
# for 256 MiB). Removed from the guest's view only; the example creates it afresh.
jq -r '.bdevs[]? | select(.create_file == true) | .path' "$examples"/*.json | xargs -r rm -f
for config in "$examples"/*.json; do
  name="$(basename "$config")"
  step "nvmf_tgt -c $name"
  "$tgt" -c "$config" --mode interrupt --reactors 2 >"$work/$name.log" 2>&1 &
  pid=$!
  ready=no
  for _ in $(seq 1 200); do
    if grep -q "ready:" "$work/$name.log"; then ready=yes; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/$name.log"
  [ "$ready" = yes ] || { kill -9 "$pid" 2>/dev/null || true; fail "$name: nvmf_tgt did not report ready"; }
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  tail -3 "$work/$name.log"
  [ "$rc" -eq 0 ] || fail "$name: nvmf_tgt exited $rc after SIGTERM"
  grep -q "stopped" "$work/$name.log" || fail "$name: no clean stop in the log"
  passed=$((passed + 1))
done
echo "nvmf_tgt_rxe: PASS: $passed example configurations started on rxe0 and stopped cleanly"
