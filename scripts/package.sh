#!/usr/bin/env bash
# scripts/package.sh [BUILD_DIR]: the Debian packages, in one command. Configures BUILD_DIR
# (default build-pkg) for /usr without tests or benchmarks, builds it, and runs CPack:
#   BUILD_DIR/packages/libnvmf-host0_*.deb     libnvmf_host.so.0
#   BUILD_DIR/packages/libnvmf-host-dev_*.deb  headers, libnvmf_host.so/.a, nvmf_host.pc, CMake
#   BUILD_DIR/packages/nvmf-target_*.deb       nvmf_tgt, nvmfctl, example configs, docs, unit
#   BUILD_DIR/packages/nvmf-tools_*.deb        nvmf_perf, nvmf_hostd, unit
# Depends come from the binaries (dpkg-shlibdeps): Debian 12's libibverbs1, librdmacm1,
# liburing2, librte-eal23. Needs dpkg-dev (dpkg-shlibdeps) besides the build dependencies.
# packaging/README.md says how to install and remove them.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-pkg}

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DNVMF_BUILD_TESTS=OFF -DNVMF_BUILD_BENCH=OFF
cmake --build "$build_dir" -j "${NVMF_PACKAGE_JOBS:-$(nproc)}"
rm -rf "$build_dir/packages"
(cd "$build_dir" && cpack -G DEB -B packages)
rm -rf "$build_dir/packages/_CPack_Packages"

for deb in "$build_dir"/packages/*.deb; do
  echo "$deb"
  dpkg-deb --field "$deb" Package Version Depends | sed 's/^/  /'
done
