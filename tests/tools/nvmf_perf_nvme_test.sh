#!/usr/bin/env bash
# The target over the nvme bdev, end to end: nvmf_perf --sim --sim-bdev nvme --verify runs the
# in-process target whose namespaces are nvme bdevs on the register-level controller model,
# its data buffers shared with the model (zero copy). One verified run in the shape the
# arguments give; its --json must show I/O done, no errors, no verify failures, nothing copied
# through the driver's bounce buffers, and the nvme bdev in the config.
# Usage: nvmf_perf_nvme_test.sh NVMF_PERF [--in-capsule] NVMF_PERF-ARGS...
#   --in-capsule: also check that the host sends writes of 4 KiB in the capsule (the target's
#                 receive buffers then carry the data to the device).
set -uo pipefail
perf="$1"
shift
in_capsule=0
if [ "${1:-}" = "--in-capsule" ]; then
  in_capsule=1
  shift
fi
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

json_get() {  # json_get FILE KEY.PATH (e.g. config.sim_bdev)
  python3 -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].split("."):
    value = value[key]
print(value)' "$1" "$2"
}

log_level=()
[ "$in_capsule" -eq 1 ] && log_level=(--log-level info)
echo "running: $perf --sim --sim-bdev nvme --verify -t 2 $* ${log_level[*]}"
"$perf" --sim --sim-bdev nvme --verify -t 2 "$@" "${log_level[@]}" --json "$work/out.json" \
  >"$work/run.log" 2>&1
rc=$?
check "exits 0" $rc "status $rc: $(tail -20 "$work/run.log")"
if [ -s "$work/out.json" ]; then
  ios=$(json_get "$work/out.json" ios)
  errors=$(json_get "$work/out.json" errors)
  verify_failures=$(json_get "$work/out.json" verify_failures)
  copied=$(json_get "$work/out.json" target_bytes_copied 2>/dev/null || echo missing)
  bdev=$(json_get "$work/out.json" config.sim_bdev)
  [ "$ios" -gt 0 ] 2>/dev/null
  check "I/Os completed" $? "ios $ios"
  [ "$errors" = 0 ]
  check "no I/O errors" $? "errors $errors"
  [ "$verify_failures" = 0 ]
  check "no verify failures" $? "verify_failures $verify_failures"
  [ "$copied" = 0 ]
  check "zero copy on the target" $? "target_bytes_copied $copied"
  [ "$bdev" = nvme ]
  check "the namespaces are nvme bdevs" $? "config.sim_bdev $bdev"
  echo "ios $ios, errors $errors, verify_failures $verify_failures, target_bytes_copied $copied"
else
  check "json written" 1 "no $work/out.json: $(tail -5 "$work/run.log")"
fi
grep -q "sim target nvme bdevs: 0 bytes copied" "$work/run.log"
check "zero copy reported" $? "$(tail -5 "$work/run.log")"
if [ "$in_capsule" -eq 1 ]; then
  grep -q "in-capsule 4096 bytes" "$work/run.log"
  check "writes of 4 KiB go in the capsule" $? "$(grep -i capsule "$work/run.log" | head -3)"
fi

check_summary "nvmf_perf --sim-bdev nvme"
