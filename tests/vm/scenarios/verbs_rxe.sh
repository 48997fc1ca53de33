#!/bin/bash
# VM scenario 1, verbs on rxe: the ibverbs provider's tests against real rdma-core over
# soft-RoCE. Every test must run (none skipped: the device tests skip only without an RDMA
# device or NVMF_TEST_RDMA_ADDR) and pass.
#   verbs_rxe.sh [TEST_BINARY [GTEST_ARGS...]]
# TEST_BINARY defaults to $NVMF_BUILD_DIR/tests/unit/verbs/ibverbs/verbs_ibverbs_unit_tests.
# Runs inside the guest only (vm-run.sh verbs_rxe): it loads modules and adds links.
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "verbs_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = verbs_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh verbs_rxe"
binary="${1:-${NVMF_BUILD_DIR:?}/tests/unit/verbs/ibverbs/verbs_ibverbs_unit_tests}"
[ $# -eq 0 ] || shift
[ -x "$binary" ] || fail "test binary not built: $binary (ninja verbs_ibverbs_unit_tests)"

# Guest-internal addresses only: the veth pair exists in this guest and nowhere else.
# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"

step "$binary"
log="$(mktemp)"
start=$(date +%s)
rc=0
NVMF_TEST_RDMA_ADDR="$ADDR" "$binary" --gtest_color=no \
  --gtest_output="xml:/nvmf-vm/verbs_ibverbs_unit_tests.xml" "$@" 2>&1 | tee "$log" ||
  rc=${PIPESTATUS[0]}
step "tests took $(( $(date +%s) - start ))s, exit $rc"

# Per-test result lines: "[       OK ] Suite.Name (N ms)", "[  SKIPPED ] Suite.Name (N ms)".
ran="$(grep -cE '^\[       OK \] ' "$log" || true)"
device_ran="$(grep -cE '^\[       OK \] Loopback\.' "$log" || true)"
skipped="$(grep -E '^\[  SKIPPED \] [A-Za-z_0-9]+\.' "$log" | sort -u || true)"
failed="$(grep -E '^\[  FAILED  \] [A-Za-z_0-9]+\.' "$log" | sort -u || true)"
[ -z "$failed" ] || fail "failed tests:"$'\n'"$failed"
[ "$rc" -eq 0 ] || fail "test binary exited $rc"
[ -z "$skipped" ] || fail "tests skipped in the guest (they must run on rxe):"$'\n'"$skipped"
[ "$device_ran" -gt 0 ] || fail "no Loopback (device) test ran"
echo "verbs_rxe: PASS: $ran tests passed, $device_ran of them on rxe0 (Loopback.*), none skipped"
