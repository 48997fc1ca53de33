#!/usr/bin/env bash
# Installs what is missing, configures, builds, and runs every test tier that exists
# (unit, e2e, vm). Benchmarks (label bench) are not run here: scripts/bench.sh runs them.
#   BUILD_DIR   build folder (default: build)
#   NVMF_SANITIZE  e.g. address,undefined: the main build itself with sanitizers
#   NVMF_CI_SANITIZERS  0 leaves out the sanitizer tiers below (default 1)
#   NVMF_FUZZ_SECONDS   seconds each fuzz target runs in the sanitizer tier (default 20)
#   NVMF_TEST_COMPILE_FLAGS  flags for the test code only, in every build (default -O0)
#   NVMF_CI_TSAN        0 leaves out the ThreadSanitizer tier (default 1; it runs after ASan+UBSan)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, printed as it ends and again as a table at the end (docs/testing.md,
# "How long CI takes", is made from it).
stage_names=()
stage_seconds=()
stage_began=0
stage() {  # stage NAME: the previous stage ends, NAME begins
  local now
  now="$(date +%s)"
  if [ ${#stage_names[@]} -gt 0 ]; then
    stage_seconds+=($((now - stage_began)))
    echo "test.sh: stage '${stage_names[-1]}' took ${stage_seconds[-1]} s (load $(cut -d' ' -f1-3 /proc/loadavg))"
  fi
  stage_began="$now"
  [ -n "${1:-}" ] && stage_names+=("$1")
  return 0
}
stage_table() {
  stage
  echo "test.sh: stages (wall s):"
  for i in "${!stage_names[@]}"; do printf '  %-28s %6s\n' "${stage_names[$i]}" "${stage_seconds[$i]}"; done
}
trap 'stage_table' EXIT

# What the figures below belong to (docs/testing.md, "How long CI takes").
echo "test.sh: commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "($(git status --porcelain --untracked-files=no 2>/dev/null | wc -l) changed files)," \
  "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
stage install-deps
./scripts/install-deps.sh

BUILD_DIR="${BUILD_DIR:-build}"
# The test code itself (not the code under test) at -O0 in every build here: about half the
# compile time of the test files (tests/CMakeLists.txt, NVMF_TEST_COMPILE_FLAGS).
TEST_COMPILE_FLAGS="${NVMF_TEST_COMPILE_FLAGS--O0}"
# Debug info as line tables (-g1): backtraces, gdb's bt and sanitizer reports keep file:line,
# and the gtest-heavy test files compile in a third less CPU than with -g (docs/testing.md,
# "How long CI takes").
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
            "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
            "-DNVMF_TEST_COMPILE_FLAGS=$TEST_COMPILE_FLAGS")
if [ -n "${NVMF_SANITIZE:-}" ]; then
  cmake_args+=("-DNVMF_SANITIZE=$NVMF_SANITIZE")
fi
stage build
cmake "${cmake_args[@]}"
cmake --build "$BUILD_DIR"

# Tests are separate processes, so two at a time keeps both cores busy; none of them depends
# on timing tighter than a loaded CI machine.
stage "ctest unit+e2e"
ctest --test-dir "$BUILD_DIR" -L "unit|e2e" --output-on-failure -j "$(nproc)" --timeout 600

# Sanitizer tiers (docs/testing.md, "Sanitizers"), each in a clang build folder of its own:
# 1. AddressSanitizer + UndefinedBehaviorSanitizer (NVMF_FUZZ: every library also carries
#    libFuzzer's coverage and keeps its asserts) serves the unit and e2e tiers and the fuzz
#    targets (label fuzz: each runs its seed corpus, then fuzzes for NVMF_FUZZ_SECONDS).
# 2. ThreadSanitizer over the binaries whose tests run threads: the reactors, the target on
#    its reactor threads, host qpairs on several threads, the RPC server, the sim's threads,
#    nvmf_hostd and the bdevs with completion threads. Only those binaries are built.
# A sanitizer report fails the test that made it (halt_on_error; leaks included).
asan_tier() {
  local asan_dir="${BUILD_DIR}-asan"
  # -O1 -gline-tables-only (ASan's advice; reports keep file:line): 11-16% less compile CPU
  # than -O2 -g per translation unit here, and objects a third smaller to link. The tools' own
  # code and the control plane's JSON code in src/ at -O0 (tools/CMakeLists.txt,
  # cmake/nvmf.cmake): their CLI11/JSON files were the slowest objects.
  CC=clang CXX=clang++ cmake -S . -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    -DNVMF_FUZZ=ON -DNVMF_BUILD_BENCH=OFF "-DNVMF_FUZZ_SECONDS=${NVMF_FUZZ_SECONDS:-20}" \
    "-DNVMF_TEST_COMPILE_FLAGS=$TEST_COMPILE_FLAGS" -DNVMF_TOOLS_COMPILE_FLAGS=-O0 \
    -DNVMF_CONTROL_COMPILE_FLAGS=-O0 ||
    return 1
  nice -n 10 cmake --build "$asan_dir" || return 1
  echo "test.sh: the ASan+UBSan build took $(($(date +%s) - stage_began)) s"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n 10 ctest --test-dir "$asan_dir" -L "unit|e2e|fuzz" --output-on-failure \
    -j "$(nproc)" --timeout 900
}

# ThreadSanitizer over the binaries whose tests run threads, each binary whole (ctest would
# also list the binaries not built here), two at a time; a binary's log stays in
# build-tsan/tsan-logs/ and its tail is printed when it fails.
TSAN_BINARIES=(reactor_unit_tests env_unit_tests rpc_unit_tests verbs_sim_unit_tests
               target_unit_tests bdev_unit_tests nbd_unit_tests target_threads_e2e_tests
               host_e2e_tests nvmf_hostd_e2e_tests)
tsan_tier() {
  local began
  began="$(date +%s)"
  TSAN_DIR="${BUILD_DIR}-tsan"
  CC=clang CXX=clang++ cmake -S . -B "$TSAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
    -DNVMF_SANITIZE=thread -DNVMF_BUILD_BENCH=OFF "-DNVMF_TEST_COMPILE_FLAGS=$TEST_COMPILE_FLAGS" \
    -DNVMF_TOOLS_COMPILE_FLAGS=-O0 -DNVMF_CONTROL_COMPILE_FLAGS=-O0 ||
    return 1
  nice -n 10 cmake --build "$TSAN_DIR" --target "${TSAN_BINARIES[@]}" || return 1
  echo "test.sh: the TSan build took $(($(date +%s) - began)) s"
  mkdir -p "$TSAN_DIR/tsan-logs"
  export TSAN_DIR
  printf '%s\n' "${TSAN_BINARIES[@]}" | TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    nice -n 10 xargs -P "$(nproc)" -I{} sh -c 'log="$TSAN_DIR/tsan-logs/{}.log"
      if timeout 1200 "$(find "$TSAN_DIR" -type f -name {} -perm -u+x | head -1)" \
          --gtest_brief=1 >"$log" 2>&1; then echo "tsan: {} passed"
      else echo "tsan: {} FAILED ($log):"; tail -60 "$log"; exit 255; fi' || return 1
  echo "test.sh: the TSan tier took $(($(date +%s) - began)) s"
}

# The VM tier runs its guests one at a time (RESOURCE_LOCK), and a TCG guest keeps about one
# core busy: the ASan+UBSan tier and then the TSan tier run beside it on what is left, niced so
# that the guest keeps its core. The VM tier's output is shown when it ends.
if [ "${NVMF_CI_SANITIZERS:-1}" != 0 ]; then
  stage "vm tier | asan+ubsan, tsan tiers"
  vm_log="$(mktemp)"
  (
    began="$(date +%s)"
    rc=0
    ctest --test-dir "$BUILD_DIR" -L vm --output-on-failure --timeout 900 >"$vm_log" 2>&1 || rc=$?
    echo "test.sh: the VM tier took $(($(date +%s) - began)) s (exit $rc)" >>"$vm_log"
    exit "$rc"
  ) &
  vm_pid=$!
  asan_rc=0
  asan_tier || asan_rc=$?
  tsan_rc=0
  if [ "${NVMF_CI_TSAN:-1}" != 0 ]; then
    tsan_tier || tsan_rc=$?
  fi
  vm_rc=0
  wait "$vm_pid" || vm_rc=$?
  echo "test.sh: ---- the VM tier's output ----"
  cat "$vm_log"
  rm -f "$vm_log"
  [ "$asan_rc" = 0 ] || echo "test.sh: the ASan+UBSan tier failed (exit $asan_rc)" >&2
  [ "$tsan_rc" = 0 ] || echo "test.sh: the ThreadSanitizer tier failed (exit $tsan_rc)" >&2
  [ "$vm_rc" = 0 ] || echo "test.sh: the VM tier failed (exit $vm_rc)" >&2
  [ "$asan_rc" = 0 ] && [ "$tsan_rc" = 0 ] && [ "$vm_rc" = 0 ] || exit 1
else
  stage "vm tier"
  ctest --test-dir "$BUILD_DIR" -L vm --output-on-failure --timeout 900
fi
