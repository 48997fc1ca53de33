#!/bin/bash
# VM probe (by hand, never in CI): what a clock read, a system call and a context switch cost
# inside the guest, where the clocksource is the HPET (user space cannot read it, so
# CLOCK_MONOTONIC is a system call and an emulated device read) and where switching to another
# process flushes the vCPU's software TLB (QEMU's TCG). Prints the clocksources and
# tests/bench/clock_bench's table; docs/performance.md uses it to price the stack's clock reads
# per I/O and the switches between the host's fio and an interrupt-mode nvmf_tgt.
#   tests/vm/vm-run.sh --build-dir build-release probe_clock [CLOCK_BENCH]
#   (a build with -DNVMF_BUILD_BENCH=ON; default NVMF_BUILD_DIR/tests/bench/clock_bench)
# Runs inside the guest only. Prints "PROBE ..." lines.
set -euo pipefail

fail() { echo "probe_clock: FAIL: $*"; exit 1; }
[ "${NVMF_VM_SCENARIO:-}" = probe_clock ] || fail "runs inside the VM guest: tests/vm/vm-run.sh probe_clock"
bench="${1:-${NVMF_BUILD_DIR:?}/tests/bench/clock_bench}"
[ -x "$bench" ] || fail "not built: $bench (configure with -DNVMF_BUILD_BENCH=ON)"

source=/sys/devices/system/clocksource/clocksource0
echo "PROBE clocksource: $(cat "$source/current_clocksource") (available: $(cat "$source/available_clocksource"))"
echo "PROBE TSC flags: $(grep -m1 -o 'constant_tsc\|nonstop_tsc' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for round in 1 2; do
  "$bench" --benchmark_min_time=0.2 2>&1 | sed -n "s/^BM_/PROBE round $round: BM_/p"
done
