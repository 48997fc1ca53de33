#!/usr/bin/env bash
# check_units.sh UNIT_DIR BINDIR NVMF_TGT NVMF_HOSTD CONFIG
# The systemd units of packaging/systemd as configured for installation (UNIT_DIR; BINDIR is
# where they expect the binaries), with the binaries pointed at this build's:
#  1. `systemd-analyze verify` accepts each without a word (it only warns, status 0, about a
#     directive it cannot parse, so any output fails); skipped, saying so, without it;
#  2. each ExecStart command line runs as written but for its paths (the binary, the config
#     /etc/nvmf/nvmf_tgt.json -> CONFIG, the RuntimeDirectory /run/NAME -> a scratch folder)
#     and, for nvmf_tgt, --sim (this machine may have no RDMA device): it starts, serves its
#     RPC socket, and stops on the unit's KillSignal with status 0. nvmf_hostd also needs the
#     nbd module: without it, what is checked is that the command line was accepted (its one
#     complaint is the module) and the unit's ExecStartPre loads the module.
set -uo pipefail
unit_dir=$1
bindir=$2
nvmf_tgt=$3
nvmf_hostd=$4
config=$5
source "$(dirname "$0")/../tools/check.sh"  # $work, check, expect, wait_for, check_summary

mkdir -p "$work/units" "$work/run"
for unit in nvmf_tgt nvmf_hostd; do
  sed -e "s|$bindir/nvmf_tgt |$nvmf_tgt |; s|$bindir/nvmf_hostd |$nvmf_hostd |" \
      "$unit_dir/$unit.service" > "$work/units/$unit.service"
done

if command -v systemd-analyze > /dev/null; then
  for unit in nvmf_tgt nvmf_hostd; do
    out=$(systemd-analyze verify --man=no "$work/units/$unit.service" 2>&1)
    rc=$?
    [ "$rc" -eq 0 ] && [ -z "$out" ]
    check "systemd-analyze verify $unit.service" $? "status $rc: $out"
  done
elif [ -n "${CI:-}" ] && [ "${CI}" != false ]; then
  # scripts/install-deps.sh installs it: in CI its absence is a broken set-up, not a skip.
  check "systemd-analyze installed (CI is set)" 1 "not found: scripts/install-deps.sh installs systemd"
else
  echo "SKIP: systemd-analyze not installed: the units are not verified (apt-get install systemd)"
fi

unit_value() {  # unit_value UNIT KEY: the value of KEY= in the unit (the first one)
  sed -nE "s/^$2=//p" "$work/units/$1.service" | head -1
}

# The unit's ExecStart with this test's paths, as words (no quoting in these units).
command_line() {  # command_line UNIT
  local runtime_dir
  runtime_dir=$(unit_value "$1" RuntimeDirectory)
  unit_value "$1" ExecStart |
    sed -e "s|/etc/nvmf/nvmf_tgt.json|$config|; s|/run/$runtime_dir/|$work/run/|g"
}

signal=$(unit_value nvmf_tgt KillSignal)
check "nvmf_tgt.service: KillSignal is SIGTERM" "$([ "$signal" = SIGTERM ]; echo $?)" "$signal"
read -r -a tgt_command <<< "$(command_line nvmf_tgt)"
"${tgt_command[@]}" --sim > "$work/tgt.log" 2>&1 &
pid=$!
wait_for 30 bash -c "test -S '$work/run/nvmf_tgt.sock' || ! kill -0 $pid 2> /dev/null"
test -S "$work/run/nvmf_tgt.sock"
check "nvmf_tgt.service's command line starts and serves its RPC socket" $? \
      "$(cat "$work/tgt.log")"
kill -"${signal#SIG}" "$pid" 2> /dev/null
wait "$pid"
rc=$?
check "nvmf_tgt stops on $signal with status 0" "$rc" "status $rc: $(tail -3 "$work/tgt.log")"

signal=$(unit_value nvmf_hostd KillSignal)
grep -qx 'ExecStartPre=-/sbin/modprobe nbd' "$work/units/nvmf_hostd.service"
check "nvmf_hostd.service loads the nbd module first" $? "no ExecStartPre=-/sbin/modprobe nbd"
read -r -a hostd_command <<< "$(command_line nvmf_hostd)"
"${hostd_command[@]}" > "$work/hostd.log" 2>&1 &
pid=$!
wait_for 30 bash -c "test -S '$work/run/nvmf_hostd.sock' || ! kill -0 $pid 2> /dev/null"
if [ -S "$work/run/nvmf_hostd.sock" ]; then
  kill -"${signal#SIG}" "$pid" 2> /dev/null
  wait "$pid"
  rc=$?
  check "nvmf_hostd stops on $signal with status 0" "$rc" "status $rc: $(tail -3 "$work/hostd.log")"
else
  wait "$pid"
  grep -q "nbd module not loaded" "$work/hostd.log"
  check "nvmf_hostd.service's command line is accepted" $? "$(cat "$work/hostd.log")"
  echo "  (no nbd module here: nvmf_hostd stopped at it, after its command line)"
fi
check_summary check_units
