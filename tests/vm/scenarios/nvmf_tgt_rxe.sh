#!/bin/bash
# VM scenario: nvmf_tgt on real rdma-core over soft-RoCE. Each example configuration starts
# (the RDMA transport opens its CM channel and listens through librdmacm on rxe0), reports
# ready, and stops on SIGTERM with status 0. As information for the interop scenarios (not
# asserted yet), the kernel's own host runs `nvme discover` against the running target.
#   nvmf_tgt_rxe.sh NVMF_TGT EXAMPLES_DIR
# Runs inside the guest only (vm-run.sh nvmf_tgt_rxe).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "nvmf_tgt_rxe: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = nvmf_tgt_rxe ] || fail "runs inside the VM guest: tests/vm/vm-run.sh nvmf_tgt_rxe"
tgt="${1:?nvmf_tgt binary}"
examples="${2:?examples folder}"
[ -x "$tgt" ] || fail "not built: $tgt"

# shellcheck source=lib/rxe.sh
source "$(dirname "$0")/lib/rxe.sh"

work="$(mktemp -d)"
passed=0
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
  if [ "$name" = malloc.json ] && modprobe nvme-rdma 2>/dev/null && command -v nvme >/dev/null; then
    step "information only: kernel host: nvme discover -t rdma -a $ADDR -s 4420"
    timeout 60 nvme discover -t rdma -a "$ADDR" -s 4420 2>&1 || echo "(nvme discover exited $?)"
    nqn=nqn.2026-11.io.nvmf-rdma:malloc0
    step "information only: kernel host: nvme connect, read 1 MiB, disconnect"
    if timeout 60 nvme connect -t rdma -a "$ADDR" -s 4420 -n "$nqn" 2>&1; then
      sleep 1
      nvme list 2>&1 || true
      dev="$(ls /dev/nvme*n1 2>/dev/null | head -1 || true)"
      if [ -n "$dev" ]; then
        timeout 60 dd if="$dev" of=/dev/null bs=64k count=16 iflag=direct 2>&1 || echo "(dd exited $?)"
        timeout 60 dd if=/dev/urandom of="$dev" bs=64k count=16 oflag=direct 2>&1 || echo "(dd exited $?)"
      fi
      timeout 60 nvme disconnect -n "$nqn" 2>&1 || echo "(nvme disconnect exited $?)"
    else
      echo "(nvme connect failed)"
    fi
    dmesg | grep -i nvme | tail -20 || true
  fi
  kill -TERM "$pid"
  rc=0
  wait "$pid" || rc=$?
  tail -3 "$work/$name.log"
  [ "$rc" -eq 0 ] || fail "$name: nvmf_tgt exited $rc after SIGTERM"
  grep -q "stopped" "$work/$name.log" || fail "$name: no clean stop in the log"
  passed=$((passed + 1))
done
echo "nvmf_tgt_rxe: PASS: $passed example configurations started on rxe0 and stopped cleanly"
