#!/bin/sh
# ctest's runner for one fuzz target (CMakeLists.txt): a fresh corpus folder in the build tree
# takes the inputs the run finds (never the seeds in the source tree), then the fuzzer runs
# the seeds and fuzzes for the time its options say. A finding is saved as WORK/crash-* (or
# leak-*, timeout-*, oom-*); replay it with `FUZZER WORK/crash-...`.
# usage: run.sh WORK SEEDS FUZZER [LIBFUZZER-OPTIONS...]
set -eu
work="$1"
seeds="$2"
shift 2
rm -rf "$work"
mkdir -p "$work/corpus"
fuzzer="$1"
shift
exec "$fuzzer" "$@" -artifact_prefix="$work/" "$work/corpus" "$seeds"
