#!/usr/bin/env bash
# nvmf_perf as a user runs it, on the in-process sim target: a verified mixed run is clean and
# its --json says so; a plain run works too; bad options exit 2 with one line that names the
# option. Usage: nvmf_perf_test.sh NVMF_PERF
set -uo pipefail
perf="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

check() {  # check NAME CONDITION-RESULT(0/1) DETAIL
  if [ "$2" -eq 0 ]; then
    passes=$((passes + 1))
  else
    failures=$((failures + 1))
    echo "FAIL: $1: $3"
  fi
}

json_get() {  # json_get FILE EXPRESSION (a jq path such as .lat_us.p99)
  if command -v jq >/dev/null 2>&1; then
    jq -r "$2" "$1"
  else
    python3 -c 'import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2].lstrip(".").split("."):
    value = value[key]
print(value)' "$1" "$2"
  fi
}

# The verified mixed run: 70% reads on a malloc namespace, every read checked.
"$perf" --sim -w randrw -M 70 -q 32 -o 4096 -t 2 --verify --json "$work/out.json" \
  >"$work/verify.log" 2>&1
rc=$?
check "verified randrw exits 0" $rc "status $rc: $(tail -20 "$work/verify.log")"
if [ -s "$work/out.json" ]; then
  keys=$(json_get "$work/out.json" '[keys_unsorted[]] | join(",")' 2>/dev/null ||
         python3 -c 'import json, sys; print(",".join(json.load(open(sys.argv[1]))))' "$work/out.json")
  [[ "$keys" == iops,mibps,lat_us,ios,errors,reconnects,verify_failures* ]]
  check "json keys in order" $? "$keys"
  errors=$(json_get "$work/out.json" .errors)
  verify_failures=$(json_get "$work/out.json" .verify_failures)
  ios=$(json_get "$work/out.json" .ios)
  [ "$errors" = 0 ]
  check "no I/O errors" $? "errors $errors"
  [ "$verify_failures" = 0 ]
  check "no verify failures" $? "verify_failures $verify_failures"
  [ "$ios" -gt 0 ] 2>/dev/null
  check "I/Os completed" $? "ios $ios"
  p99=$(json_get "$work/out.json" .lat_us.p99)
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$p99"
  check "latency measured" $? "p99 $p99"
else
  check "json written" 1 "no $work/out.json: $(tail -5 "$work/verify.log")"
fi
grep -q "IOPS" "$work/verify.log"
check "progress lines printed" $? "$(head -5 "$work/verify.log")"
grep -q "^Total" "$work/verify.log"
check "result table printed" $? "$(tail -5 "$work/verify.log")"

# A plain run on null namespaces, two of them, sequential writes.
"$perf" --sim -w write -q 8 -o 8192 -t 1 --ns-count 2 >"$work/plain.log" 2>&1
rc=$?
check "sequential write on 2 null namespaces exits 0" $rc "status $rc: $(tail -10 "$work/plain.log")"
grep -q "nsid 2" "$work/plain.log"
check "both namespaces reported" $? "$(tail -10 "$work/plain.log")"

# --help is not an error.
"$perf" --help >"$work/help.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q -- "--verify" "$work/help.log"
check "--help exits 0" $? "status $rc"

# Bad usage: exit 2, one line on stderr, the option named.
bad() {  # bad NAME EXPECTED-TEXT ARGS...
  local name="$1" text="$2"
  shift 2
  out=$("$perf" "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *"$text"* ]]
  check "bad usage: $name" $? "status $rc, stderr: $out"
}
bad "unknown flag" "--frobnicate" --sim -w read --frobnicate
bad "bad workload" "-w" --sim -w readwrite -t 1
bad "no workload" "-w" --sim -t 1
bad "no target" "--sim" -w read -t 1
bad "null cannot verify" "discards writes" --sim -w randrw --verify --sim-bdev null -t 1
bad "io size not whole blocks" "-o" --sim -w read -o 1000 -t 1
bad "read percent on reads" "-M" --sim -w randread -M 70 -t 1
bad "bad memreg" "--memreg" --sim -w read --memreg fastest -t 1
bad "bad trid" "-r" -r "trtype:TCP traddr:10.0.0.1" -w read -t 1
bad "unwritable json" "--json" --sim -w read -t 1 --json /nonexistent-dir/out.json

echo "nvmf_perf: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
