#!/usr/bin/env bash
# check_headers.sh CXX INCLUDE_DIR
# Compiles each public header INCLUDE_DIR/nvmf/*.h alone, in a one-line translation unit, with
# INCLUDE_DIR as the only include path (an application's view: no src/), twice over (the
# include guard), warning-clean at the project's warning level. Fails naming each header that
# does not compile alone.
set -uo pipefail
cxx=$1
include_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
count=0
for header in "$include_dir"/nvmf/*.h; do
  name=nvmf/$(basename "$header")
  count=$((count + 1))
  unit="$work/$(basename "$header" .h).cpp"
  printf '#include "%s"\n#include "%s"\n' "$name" "$name" > "$unit"
  if ! "$cxx" -std=c++20 -Wall -Wextra -Wshadow -Wpedantic -Werror -fsyntax-only \
       -I "$include_dir" "$unit" 2> "$work/errors"; then
    echo "FAIL: $name does not compile on its own:"
    head -20 "$work/errors"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
done
if [ "$count" -eq 0 ]; then
  echo "FAIL: no headers in $include_dir/nvmf"
  exit 1
fi
echo "$count header(s), $failures failure(s)"
[ "$failures" -eq 0 ]
