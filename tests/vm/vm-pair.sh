#!/usr/bin/env bash
# Two QEMU guests at once, one per side of the fabric, as on two machines: vm-run.sh boots a
# "target" guest and a "host" guest, each with NVMF_VM_SMP (default 1) vCPUs, linked by a
# virtio-net NIC (QEMU -netdev stream over a unix socket: the target's QEMU listens, the
# host's connects) and sharing the writable folder RESULTS/pair (/nvmf-pair in both guests).
# Both run tests/vm/scenarios/SCENARIO.sh with the same ARGS; the scenario tells the two
# sides apart by NVMF_VM_PAIR_ROLE (scenarios/lib/pair.sh sets up the link and the
# hand-shakes). Why: in one guest the host's processes and the target's share vCPUs, and
# under TCG a switch between two processes costs 50-95 us more than one between threads
# (docs/performance.md), a cost the kernel's target never pays and ours does.
#
#   vm-pair.sh [--build-dir DIR] [--timeout SECONDS] [--results DIR] SCENARIO [ARGS...]
#
# Results: RESULTS/target and RESULTS/host (each a vm-run.sh results folder), RESULTS/pair.
# Exit: 0 when both guests' scenarios exit 0; 77 when either is skipped; else 1 or the first
# non-zero status.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
say() { echo "vm-pair: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

run_args=()
results="${NVMF_VM_RESULTS:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir | --timeout) run_args+=("$1" "$2"); shift 2 ;;
    --results) results="$2"; shift 2 ;;
    -h | --help) usage ;;
    --) shift; break ;;
    -*) say "unknown option $1"; usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
scenario="$1"
if [ -z "$results" ]; then
  results="$(mktemp -d "${TMPDIR:-/tmp}/nvmf-vm-pair-$scenario.XXXXXX")"
else
  rm -rf "$results/pair" "$results/target" "$results/host"
  mkdir -p "$results"
fi
results="$(cd "$results" && pwd -P)"
mkdir -p "$results/pair"
# The socket's path is short whatever RESULTS is (sun_path holds 108 bytes).
sock_dir="$(mktemp -d "${TMPDIR:-/tmp}/nvmf-vm-link.XXXXXX")"
socket="$sock_dir/link.sock"

pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$sock_dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

role_of=()   # pid -> role
start_guest() {  # start_guest ROLE SCENARIO [ARGS...]: vm-run.sh in the background (RESULTS/ROLE.out)
  local role="$1"
  shift
  NVMF_VM_PAIR_ROLE="$role" NVMF_VM_PAIR_SOCKET="$socket" NVMF_VM_PAIR_DIR="$results/pair" \
    NVMF_VM_SMP="${NVMF_VM_SMP:-1}" \
    "$repo/tests/vm/vm-run.sh" "${run_args[@]}" --results "$results/$role" "$@" \
    </dev/null >"$results/$role.out" 2>&1 &
  pids+=($!)
  role_of[$!]="$role"
}

say "scenario $scenario in two guests (target, host), results in $results"
# The target's QEMU first: it listens on the socket the host's QEMU connects to at its start.
start_guest target "$@"
deadline=$((SECONDS + 300))   # the first vm-run.sh may be unpacking a kernel
until [ -S "$socket" ]; do
  if ! kill -0 "${pids[0]}" 2>/dev/null; then
    rc=0
    wait "${pids[0]}" || rc=$?
    cat "$results/target.out" >&2
    [ "$rc" -ne 77 ] || exit 77
    die "the target guest's vm-run.sh exited $rc before its QEMU listened on $socket"
  fi
  [ "$SECONDS" -lt "$deadline" ] || die "no socket $socket after 300 s"
  sleep 0.2
done
start_guest host "$@"

# The first to end: if it failed without telling its scenario's peer (a panic, a timeout), the
# hand-shake folder says so, and the other guest gets two minutes to notice and power off.
rc_of=()
first_rc=0
wait -n -p done_pid "${pids[@]}" || first_rc=$?
rc_of[$done_pid]="$first_rc"
first_role="${role_of[$done_pid]}"
other_pid="${pids[0]}"
[ "$other_pid" != "$done_pid" ] || other_pid="${pids[1]}"
if [ "$first_rc" -ne 0 ]; then
  [ -e "$results/pair/failed.$first_role" ] ||
    echo "vm-run.sh exit $first_rc" >"$results/pair/failed.$first_role"
  (sleep 120; kill "$other_pid" 2>/dev/null) &
  pids+=($!)
fi
other_rc=0
wait "$other_pid" || other_rc=$?
rc_of[$other_pid]="$other_rc"

status=0
for role in target host; do
  for pid in "${!role_of[@]}"; do
    [ "${role_of[$pid]}" = "$role" ] || continue
    echo "---------- the $role guest (vm-run.sh exit ${rc_of[$pid]}; $results/$role.out) ----------"
    cat "$results/$role.out"
    if [ "${rc_of[$pid]}" -ne 0 ] && { [ "$status" -eq 0 ] || [ "${rc_of[$pid]}" -eq 77 ]; }; then
      status="${rc_of[$pid]}"
    fi
  done
done
say "scenario $scenario: target guest exit ${rc_of[${pids[0]}]}, host guest exit ${rc_of[${pids[1]}]}; results in $results"
exit "$status"
