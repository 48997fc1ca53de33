# Sourced by the tools' script tests (tests/tools/*_test.sh): a scratch folder removed on exit
# ($work), and check() counting passes and failures; check_summary NAME prints the count and
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
