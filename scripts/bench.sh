#!/usr/bin/env bash
# Builds and runs the Google Benchmark targets (ctest label bench). JSON results land in
# BUILD_DIR/bench/*.json; figures for docs/performance.md come from there.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" -L bench --output-on-failure --verbose
