#!/usr/bin/env bash
# scripts/fuzz.sh on fake fuzzers (no clang, no build): usage errors; one run's row (inputs,
# exec/s, coverage, corpus files, findings none); --jobs J asking each job for N/J inputs and
# adding the jobs' inputs and exec/s up, the largest coverage and RSS; --fast replaying the
# grown corpus once (-runs=0) in the replay build and a report there counted as a finding; a
# crash artifact counted as a finding with its first error line; the header naming the commit
# and the sanitizers.
#   fuzz_sh_test.sh PATH/TO/fuzz.sh
set -u
script="$1"
# shellcheck source=check.sh
. "$(dirname "$0")/check.sh"

# A throw-away repository holding the script (it works in the repository it sits in).
repo="$work/repo"
mkdir -p "$repo/scripts" "$repo/tests/fuzz/corpus/sgl_parse" "$repo/tests/fuzz/dict"
cp "$script" "$repo/scripts/fuzz.sh"
chmod +x "$repo/scripts/fuzz.sh"
echo seed >"$repo/tests/fuzz/corpus/sgl_parse/seed"
echo '"kw"' >"$repo/tests/fuzz/dict/nvme.dict"
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=test -c user.email=test@example.com commit -q -m canned
fuzz="$repo/scripts/fuzz.sh"

# A fake libFuzzer binary: records its arguments (calls.log beside it), then acts on -jobs,
# -runs and -artifact_prefix as libFuzzer would: per job a fuzz-K.log in the working folder
# (or its own output without -jobs) with final stats and a status line, two new corpus files
# per job, and with FAKE_CRASH set a crash-* artifact and exit 1. -runs=0 is a replay: "Done N
# runs" over the corpus, or with FAKE_REPLAY_ERROR set an ASan report and exit 1.
make_fake() {  # make_fake BUILD_DIR
  mkdir -p "$1/tests/fuzz"
  cat >"$1/tests/fuzz/fuzz_sgl_parse" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/calls.log"
jobs=0 runs=-1 prefix="" dirs=()
for arg in "$@"; do
  case "$arg" in
    -jobs=*) jobs="${arg#-jobs=}" ;;
    -runs=*) runs="${arg#-runs=}" ;;
    -artifact_prefix=*) prefix="${arg#-artifact_prefix=}" ;;
    -*) ;;
    *) dirs+=("$arg") ;;
  esac
done
if [ "$runs" = 0 ]; then
  count=$(find "${dirs[@]}" -type f | wc -l)
  if [ -n "${FAKE_REPLAY_ERROR:-}" ]; then
    echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow"
    exit 1
  fi
  echo "Done $count runs in 0 second(s)"
  exit 0
fi
job_output() {  # job_output K
  echo "#$runs	DONE   cov: $((10 + $1)) ft: $((20 + $1)) corp: 3/30b exec/s: 9 rss: 30Mb"
  echo "stat::number_of_executed_units: $runs"
  echo "stat::average_exec_per_sec:     $((100 * ($1 + 1)))"
  echo "stat::peak_rss_mb:              $((30 + $1))"
  touch "${dirs[0]}/new-$1-a" "${dirs[0]}/new-$1-b"
}
if [ -n "${FAKE_CRASH:-}" ]; then
  echo "fuzz invariant broken: parsed.ok (sgl_parse_fuzz.cpp:1): fake"
  touch "${prefix}crash-0123"
  exit 1
fi
if [ "$jobs" -gt 0 ]; then
  for ((k = 0; k < jobs; ++k)); do job_output "$k" >"fuzz-$k.log"; done
else
  job_output 0
fi
EOF
  chmod +x "$1/tests/fuzz/fuzz_sgl_parse"
}
fast_dir="$work/fast"
asan_dir="$work/asan"
make_fake "$fast_dir"
make_fake "$asan_dir"
row() { grep '^| sgl_parse ' "$fast_dir/fuzz-runs/summary.md"; }

# Usage errors: exit 2 with the usage line.
for bad in "--jobs 0" "--jobs x" "--runs -1" "--bogus" "no_such_target"; do
  # shellcheck disable=SC2086  # the words are the arguments
  "$fuzz" --no-build --build-dir "$fast_dir" $bad >"$work/out" 2>&1
  rc=$?
  check "usage: $bad" "$([ "$rc" -eq 2 ] && echo 0 || echo 1)" "exit $rc: $(cat "$work/out")"
done

# One run: the row from libFuzzer's final stats, the corpus it grew, no findings.
"$fuzz" --no-build --build-dir "$fast_dir" --runs 1000 sgl_parse >"$work/out" 2>&1
rc=$?
check "one run exits 0" "$rc" "exit $rc: $(cat "$work/out")"
expect "one run's row" grep -q '^| sgl_parse | 1000 | 100 | 10 | 20 | 2 files, .* | 30 MB | [0-9]* s | none |$' \
  "$fast_dir/fuzz-runs/summary.md"
expect "the run had the dictionary and the seeds" \
  grep -q -- "-runs=1000 .*-dict=$repo/tests/fuzz/dict/nvme.dict corpus $repo/tests/fuzz/corpus/sgl_parse" \
  "$fast_dir/tests/fuzz/calls.log"
expect "the header names the commit and the sanitizers" \
  grep -q "^scripts/fuzz.sh at commit $(git -C "$repo" rev-parse --short HEAD), .*1000 inputs per target" \
  "$fast_dir/fuzz-runs/summary.md"
expect "the header says ASan + UBSan" \
  grep -q "AddressSanitizer + UndefinedBehaviorSanitizer; load average" "$fast_dir/fuzz-runs/summary.md"

# --jobs 3 --runs 1000: each job 334 inputs; inputs and exec/s summed, the largest cov, ft, RSS.
rm -f "$fast_dir/tests/fuzz/calls.log"
"$fuzz" --no-build --build-dir "$fast_dir" --jobs 3 --runs 1000 sgl_parse >"$work/out" 2>&1
rc=$?
check "--jobs exits 0" "$rc" "exit $rc: $(cat "$work/out")"
expect "--jobs asks each job for N/J inputs" \
  grep -q -- "-runs=334 .*-jobs=3 -workers=3" "$fast_dir/tests/fuzz/calls.log"
expect "--jobs adds the jobs up" grep -q '^| sgl_parse | 1002 | 600 | 12 | 22 | 6 files, .* | 32 MB |' \
  "$fast_dir/fuzz-runs/summary.md"
expect "--jobs in the header" grep -q "1000 inputs, 3 jobs per target" "$fast_dir/fuzz-runs/summary.md"

# --fast: the grown corpus (2 new files and the seed) replayed once in the replay build.
rm -f "$asan_dir/tests/fuzz/calls.log"
"$fuzz" --no-build --fast --build-dir "$fast_dir" --replay-dir "$asan_dir" --runs 50 sgl_parse \
  >"$work/out" 2>&1
rc=$?
check "--fast exits 0" "$rc" "exit $rc: $(cat "$work/out")"
expect "--fast replays the corpus and the seeds with -runs=0" \
  grep -q -- "^-runs=0 .*corpus $repo/tests/fuzz/corpus/sgl_parse$" "$asan_dir/tests/fuzz/calls.log"
expect "--fast's replay log" grep -q "^Done 3 runs" "$fast_dir/fuzz-runs/sgl_parse/replay.log"
expect "--fast's row: no findings" grep -q '| none |$' <(row)
expect "--fast in the header" grep -q "UndefinedBehaviorSanitizer (--fast), corpus replayed under" \
  "$fast_dir/fuzz-runs/summary.md"

# A report in the replay is a finding: exit 1, the report's line on stderr.
FAKE_REPLAY_ERROR=1 "$fuzz" --no-build --fast --build-dir "$fast_dir" --replay-dir "$asan_dir" \
  --runs 50 sgl_parse >"$work/out" 2>"$work/err"
rc=$?
check "a replay report exits 1" "$([ "$rc" -eq 1 ] && echo 0 || echo 1)" "exit $rc"
expect "a replay report is in the row" grep -q '| 0 (exit 1; .*) |$' <(row)
expect "a replay report's line on stderr" grep -q "fuzz: sgl_parse: ==1==ERROR: AddressSanitizer" "$work/err"

# A crash: its artifact counted, exit 1, the harness's line on stderr.
FAKE_CRASH=1 "$fuzz" --no-build --build-dir "$fast_dir" --runs 50 sgl_parse >"$work/out" 2>"$work/err"
rc=$?
check "a crash exits 1" "$([ "$rc" -eq 1 ] && echo 0 || echo 1)" "exit $rc"
expect "a crash is in the row" grep -q '| 1 (exit 1; .*) |$' <(row)
expect "a crash's line on stderr" grep -q "fuzz: sgl_parse: fuzz invariant broken" "$work/err"

check_summary fuzz_sh
