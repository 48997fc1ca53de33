#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the main job: install what is needed, build,
# then run a target serving a namespace with the initiator driving I/O at it.
#
# Where the project stands: the foundation layers (common, spec, env, reactor, bdev) exist;
# nvmf_tgt and the initiator library do not yet. Until they do, this script says so and runs
# what exists instead: the foundation's unit tier and its benchmarks (reactor messages and
# null/malloc block-device I/O), so a new user sees the build work end to end.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR"

echo
echo "quickstart: nvmf_tgt and the initiator are not built yet (issues 4 and 5)."
echo "quickstart: running what exists: the unit tier, then the foundation benchmarks."
echo
ctest --test-dir "$BUILD_DIR" -L unit --output-on-failure -j "$(nproc)"

for bench in ring_bench bdev_bench; do
  binary=$(find "$BUILD_DIR/tests/bench" -maxdepth 1 -name "$bench" -type f 2>/dev/null | head -1)
  if [ -n "$binary" ]; then
    echo
    echo "quickstart: $bench"
    "$binary" --benchmark_min_time=0.1
  fi
done
