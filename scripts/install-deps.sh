#!/usr/bin/env bash
# Installs every Debian package the build and all test tiers need. Idempotent: packages that
# are already installed are skipped, and apt is not touched at all when nothing is missing.
set -euo pipefail

# Build and unit/e2e tiers.
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config g++ clang-format
  rdma-core ibverbs-providers libibverbs-dev librdmacm-dev ibverbs-utils rdmacm-utils
  libdpdk-dev liburing-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
# Fuzz targets (tests/fuzz, NVMF_FUZZ=ON; scripts/fuzz.sh): clang and its runtime libraries,
# which hold libFuzzer and the sanitizers (a Recommends of clang, so --no-install-recommends
# below would leave them out). llvm gives llvm-symbolizer for readable sanitizer reports.
FUZZ_PACKAGES=(clang libclang-rt-dev llvm)
# Packaging (scripts/package.sh, tests/install, the VM tier's install_rxe): dpkg-shlibdeps
# works out the packages' Depends, systemd-analyze verifies the units (systemd is not started:
# installing it in a container leaves the init alone).
PACKAGING_PACKAGES=(dpkg-dev systemd)
# VM tier (QEMU guest with soft-RoCE and VFIO; see docs/architecture.md).
VM_PACKAGES=(
  qemu-system-x86 busybox-static cpio kmod iproute2 nvme-cli fio tshark
  jq   # the scenarios' JSON checks: a python3 start costs 2-3 s of a TCG vCPU, jq's a few ms
)

missing=()
for package in "${BUILD_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}" "${PACKAGING_PACKAGES[@]}" \
               "${VM_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#BUILD_PACKAGES[@]} build, ${#FUZZ_PACKAGES[@]} fuzz, ${#PACKAGING_PACKAGES[@]} packaging and ${#VM_PACKAGES[@]} VM-tier packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once so the install never prompts.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
