#!/usr/bin/env bash
# usage: scripts/fuzz.sh [--runs N] [--seconds S] [--jobs J] [--fast] [--build-dir DIR] [--replay-dir DIR] [--no-build] [TARGET...]
#
# Builds the libFuzzer targets (tests/fuzz, CMake option NVMF_FUZZ, clang) in their own build
# folder and runs each one for N inputs or S seconds, whichever comes first when both are
# given (default: 60 seconds), one after the other, each from its seed corpus
# (tests/fuzz/corpus/TARGET) with its dictionary. Prints per target the inputs executed,
# exec/s, coverage (libFuzzer's cov: edges, ft: features), the corpus it grew to, the wall
# time and the findings, with the commit, the machine and its load before and after; the
# same table goes to DIR/fuzz-runs/summary.md. TARGET is a name without the fuzz_ prefix
# (sgl_parse, rpc, ...); none means all of them. DIR is build-fuzz unless --build-dir.
#
# --jobs J runs J processes of a target at once on one shared corpus (libFuzzer's -jobs=J
# -workers=J), each for N/J inputs (rounded up) or S seconds: the inputs column adds theirs up.
# --fast builds without AddressSanitizer (UndefinedBehaviorSanitizer only, in build-fuzz-fast
# unless --build-dir): 1.6x the inputs per second of the default build on admin_commands
# (docs/testing.md, "Figures"). After each target's run its whole corpus (every input that
# reached new coverage, seeds included) runs once more under the default AddressSanitizer +
# UndefinedBehaviorSanitizer build (build-fuzz unless --replay-dir), and a report there is a
# finding like any other.
#
# Everything a run writes stays in DIR/fuzz-runs/TARGET/: corpus/ (the inputs it found; the
# seeds in the source tree are never touched), TARGET.log (libFuzzer's output; with --jobs also
# fuzz-K.log per job; with --fast replay.log) and findings as crash-*, leak-*, timeout-* or
# oom-* (replay one with `DIR/tests/fuzz/fuzz_TARGET FILE`; a fixed finding goes into
# tests/fuzz/corpus/TARGET/ as a seed). Runs and the build are niced: the machine is shared.
#
# Environment: NVMF_FUZZ_BUILD_JOBS (build parallelism, 1), NVMF_FUZZ_OPTIONS (more libFuzzer
# options, e.g. -max_len=8192). Exit status: 0 when no target found anything, 1 when one did,
# 2 on bad usage or a failed build.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(sgl_parse cm_private_data fabrics_connect admin_commands discovery_log target_config
             rpc nbd_queue)
# A dictionary per target (tests/fuzz/dict/), or none.
declare -A DICT=([sgl_parse]=nvme.dict [fabrics_connect]=nvme.dict [admin_commands]=nvme.dict
                 [target_config]=target_config.dict [rpc]=rpc.dict [nbd_queue]=nbd.dict)

usage() { sed -n '2p' "$0" | sed 's/^# //' >&2; exit 2; }

runs=""
seconds=""
jobs=1
fast=0
build_dir=""
replay_dir="build-fuzz"  # the build whose corpus replay checks a --fast run: the default one
build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] || usage; runs="$2"; shift 2 ;;
    --seconds) [ $# -ge 2 ] || usage; seconds="$2"; shift 2 ;;
    --jobs) [ $# -ge 2 ] || usage; jobs="$2"; shift 2 ;;
    --fast) fast=1; shift ;;
    --build-dir) [ $# -ge 2 ] || usage; build_dir="$2"; shift 2 ;;
    --replay-dir) [ $# -ge 2 ] || usage; replay_dir="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    -*) usage ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ -z "$runs" ] && [ -z "$seconds" ] && seconds=60
[[ -z "$runs" || "$runs" =~ ^[0-9]+$ ]] || usage
[[ -z "$seconds" || "$seconds" =~ ^[0-9]+$ ]] || usage
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || usage
if [ -z "$build_dir" ]; then
  if [ "$fast" -eq 1 ]; then build_dir="build-fuzz-fast"; else build_dir="build-fuzz"; fi
fi
# Absolute from here on: each fuzzer runs in its work folder (libFuzzer writes fuzz-K.log there).
root="$(pwd)"
[[ "$build_dir" == /* ]] || build_dir="$root/$build_dir"
[[ "$replay_dir" == /* ]] || replay_dir="$root/$replay_dir"
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")
for target in "${targets[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $target "* ]] || { echo "fuzz: no target $target (${ALL_TARGETS[*]})" >&2; exit 2; }
done

# configure_and_build DIR SANITIZERS: the fuzz targets of this run, in DIR.
configure_and_build() {
  local dir="$1" sanitizers="$2"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    # Only the fuzz targets and what they link: no gtest tiers or benchmarks in this folder.
    CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DNVMF_FUZZ=ON \
      -DNVMF_SANITIZE="$sanitizers" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVMF_BUILD_TESTS=OFF \
      -DNVMF_BUILD_BENCH=OFF >/dev/null ||
      { echo "fuzz: configuring $dir failed" >&2; exit 2; }
  fi
  local build_targets=()
  for target in "${targets[@]}"; do build_targets+=("fuzz_$target"); done
  nice -n 19 cmake --build "$dir" -j "${NVMF_FUZZ_BUILD_JOBS:-1}" --target "${build_targets[@]}" ||
    { echo "fuzz: building $dir failed" >&2; exit 2; }
}
if [ "$build" -eq 1 ]; then
  command -v clang++ >/dev/null || { echo "fuzz: clang++ missing (scripts/install-deps.sh)" >&2; exit 2; }
  if [ "$fast" -eq 1 ]; then
    configure_and_build "$build_dir" undefined
    configure_and_build "$replay_dir" "address,undefined"
  else
    configure_and_build "$build_dir" ""  # NVMF_FUZZ's default: address,undefined
  fi
fi

out="$build_dir/fuzz-runs"
mkdir -p "$out"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)"
[ "$dirty" -ne 0 ] && commit="$commit + $dirty changed files"
cxx="$(clang++ --version 2>/dev/null | head -1 || echo unknown)"
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
budget="${runs:+$runs inputs}${runs:+${seconds:+ or }}${seconds:+$seconds s}"
[ "$jobs" -gt 1 ] && budget="$budget, $jobs jobs"
sanitizers="AddressSanitizer + UndefinedBehaviorSanitizer"
[ "$fast" -eq 1 ] && sanitizers="UndefinedBehaviorSanitizer (--fast), corpus replayed under AddressSanitizer + UndefinedBehaviorSanitizer"
load_before="$(uptime | sed 's/.*load average: //')"

rows=()
findings_total=0
for target in "${targets[@]}"; do
  binary="$build_dir/tests/fuzz/fuzz_$target"
  [ -x "$binary" ] || { echo "fuzz: $binary not built" >&2; exit 2; }
  work="$out/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  log="$work/$target.log"
  options=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/")
  [ -n "$runs" ] && options+=(-runs="$(( (runs + jobs - 1) / jobs ))")
  [ -n "$seconds" ] && options+=(-max_total_time="$seconds")
  [ -n "${DICT[$target]:-}" ] && options+=(-dict="$root/tests/fuzz/dict/${DICT[$target]}")
  # libFuzzer writes each job's output to fuzz-K.log in its working directory.
  [ "$jobs" -gt 1 ] && options+=(-jobs="$jobs" -workers="$jobs")
  # shellcheck disable=SC2206  # word splitting of the extra options is the point
  [ -n "${NVMF_FUZZ_OPTIONS:-}" ] && options+=(${NVMF_FUZZ_OPTIONS})
  echo "fuzz: $target ($budget) ..."
  start=$(date +%s)
  status=0
  (cd "$work" && nice -n 19 "$binary" "${options[@]}" corpus "$root/tests/fuzz/corpus/$target") \
    >"$log" 2>&1 || status=$?
  wall=$(( $(date +%s) - start ))
  job_logs=("$log")
  [ "$jobs" -gt 1 ] && job_logs=("$work"/fuzz-*.log)
  # Summed over the jobs: inputs, exec/s; the largest: coverage, features, peak RSS.
  sum_stat() { sed -n "s/^stat::$1: *//p" "${job_logs[@]}" | awk '{ s += $1 } END { print s + 0 }'; }
  max_stat() { sed -n "s/^stat::$1: *//p" "${job_logs[@]}" | sort -n | tail -1; }
  inputs="$(sum_stat number_of_executed_units)"
  rate="$(sum_stat average_exec_per_sec)"
  rss="$(max_stat peak_rss_mb)"
  # The status lines: "#N DONE cov: C ft: F corp: U/S ...".
  status_lines="$(grep -hE '^#[0-9]+' "${job_logs[@]}" || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status_lines" | sort -n | tail -1)"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status_lines" | sort -n | tail -1)"
  corp="$(find "$work/corpus" -type f | wc -l) files, $(du -sk "$work/corpus" | cut -f1) KiB"
  if [ "$fast" -eq 1 ] && [ "$status" -eq 0 ]; then
    # Every input of the grown corpus once under AddressSanitizer (-runs=0: no fuzzing).
    replay="$replay_dir/tests/fuzz/fuzz_$target"
    [ -x "$replay" ] || { echo "fuzz: $replay not built" >&2; exit 2; }
    echo "fuzz: $target: replaying $(find "$work/corpus" -type f | wc -l) inputs under ASan ..."
    (cd "$work" && nice -n 19 "$replay" -runs=0 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$work/replay-" corpus "$root/tests/fuzz/corpus/$target") \
      >"$work/replay.log" 2>&1 || status=$?
    [ "$status" -eq 0 ] || job_logs+=("$work/replay.log")
  fi
  artifacts=$(find "$work" -maxdepth 1 -type f \( -name '*crash-*' -o -name '*leak-*' \
              -o -name '*timeout-*' -o -name '*oom-*' -o -name '*slow-unit-*' \) | wc -l)
  if [ "$status" -ne 0 ] || [ "$artifacts" -ne 0 ]; then
    found="$artifacts (exit $status; $log)"
    findings_total=$((findings_total + 1))
    grep -h -m1 -E 'ERROR: |fuzz invariant broken|runtime error' "${job_logs[@]}" |
      sed "s/^/fuzz: $target: /" >&2 || true
  else
    found="none"
  fi
  rows+=("| $target | ${inputs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp} | ${rss:-?} MB | ${wall} s | $found |")
done
load_after="$(uptime | sed 's/.*load average: //')"

{
  echo "scripts/fuzz.sh at commit $commit, $(date -u +%Y-%m-%d), $budget per target"
  echo "$(nproc) cores ($cpu), $cxx, $sanitizers; load average $load_before before, $load_after after"
  echo
  echo "| target | inputs | exec/s | cov | ft | corpus | peak RSS | wall | findings |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$out/summary.md"
[ "$findings_total" -eq 0 ]
