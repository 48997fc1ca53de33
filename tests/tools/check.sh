# Sourced by the tools' script tests (tests/tools/*_test.sh): a scratch folder removed on exit
# ($work), and check() counting passes and failures (expect NAME COMMAND: a check of a command;
# wait_for SECONDS COMMAND: poll it); check_summary NAME prints the count and
# fails the test when anything failed (its status is the script's last).

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

check_summary() {  # check_summary NAME
  echo "$1: $passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}

# expect NAME COMMAND...: one check, passed when COMMAND succeeds; prints the result.
expect() {
  local name="$1" rc
  shift
  "$@"
  rc=$?
  check "$name" "$rc" "'$*' exited $rc"
  [ "$rc" -eq 0 ] && echo "  ok: $name"
  return "$rc"
}
# wait_for SECONDS COMMAND...: 0 as soon as COMMAND succeeds (polled every 0.2 s), else 1.
wait_for() {
  local end=$((SECONDS + $1))
  shift
  while [ "$SECONDS" -lt "$end" ]; do
    "$@" && return 0
    sleep 0.2
  done
  "$@"
}

wait_ready() {  # wait_ready PID LOG: 0 once LOG says "ready:" (10 s at most), 1 if PID exits or time runs out
  local _
  for _ in $(seq 1 100); do
    if grep -q "ready:" "$2"; then return 0; fi
    if ! kill -0 "$1" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
  return 1
}
