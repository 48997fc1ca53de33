#!/usr/bin/env bash
# Installs what is missing, configures, builds, and runs every test tier that exists
# (unit, e2e, vm). Benchmarks (label bench) are not run here: scripts/bench.sh runs them.
#   BUILD_DIR   build folder (default: build)
#   NVMF_SANITIZE  e.g. address,undefined for a sanitizer build
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

BUILD_DIR="${BUILD_DIR:-build}"
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ -n "${NVMF_SANITIZE:-}" ]; then
  cmake_args+=("-DNVMF_SANITIZE=$NVMF_SANITIZE")
fi
cmake "${cmake_args[@]}"
cmake --build "$BUILD_DIR"

# -LE bench: every tier but benchmarks. Tests are separate processes, so two at a time
# keeps both cores busy; none of them depends on timing tighter than a loaded CI machine.
ctest --test-dir "$BUILD_DIR" -LE bench --output-on-failure -j "$(nproc)" --timeout 600
