#!/usr/bin/env bash
# install_consumers.sh CMAKE CXX BUILD_DIR
# `cmake --install BUILD_DIR` into a temporary staging prefix, then, from the installed copies
# of the examples (share/nvmf/examples), builds examples/app_cmake with find_package(nvmf)
# (nvmf::host, then nvmf::host_static) and examples/app_pkgconfig with pkg-config, each
# against the staging prefix alone, and runs each with --help. Also checks the installed
# layout (headers, libraries and SONAME, tools, configs, pkg-config and CMake files without
# test dependencies). Fails on the first error, saying which step.
set -euo pipefail
cmake_command=$1
cxx=$2
build_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
staging=$work/staging

fail() {
  echo "FAIL: $*"
  exit 1
}

step() {  # step NAME COMMAND...: runs COMMAND, its output shown only when it fails
  local name=$1
  shift
  if ! "$@" > "$work/step.log" 2>&1; then
    cat "$work/step.log"
    fail "$name"
  fi
  echo "ok: $name"
}

step "cmake --install into a staging prefix" \
  "$cmake_command" --install "$build_dir" --prefix "$staging"

libdir=$(dirname "$(find "$staging" -name 'libnvmf_host.so' -print -quit)")
[ "$libdir" != "." ] || fail "no libnvmf_host.so installed"
for file in include/nvmf/host.h include/nvmf/result.h include/nvmf/status.h \
            include/nvmf/export.h bin/nvmf_tgt bin/nvmfctl bin/nvmf_hostd bin/nvmf_perf \
            share/nvmf/examples/target/malloc.json; do
  [ -e "$staging/$file" ] || fail "$file is not installed"
done
for file in libnvmf_host.a pkgconfig/nvmf_host.pc cmake/nvmf/nvmfConfig.cmake \
            cmake/nvmf/nvmfConfigVersion.cmake; do
  [ -e "$libdir/$file" ] || fail "${libdir#"$staging"/}/$file is not installed"
done
[ -z "$(find "$staging/include" -name '*.h' ! -path '*/include/nvmf/*')" ] ||
  fail "headers outside include/nvmf are installed"
soname=$(readelf -d "$libdir/libnvmf_host.so" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
[ "$soname" = libnvmf_host.so.0 ] || fail "SONAME is '$soname', not libnvmf_host.so.0"
[ -e "$libdir/$soname" ] || fail "$soname is not installed"
if grep -qiE 'gtest|gmock|benchmark|nlohmann' "$libdir/cmake/nvmf/nvmfConfig.cmake"; then
  fail "nvmfConfig.cmake names a test or internal dependency"
fi
echo "ok: installed layout ($(find "$staging" -type f | wc -l) files)"

examples=$staging/share/nvmf/examples
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

run_help() {  # run_help NAME BINARY
  "$2" --help > "$work/help.txt" 2>&1 || { cat "$work/help.txt"; fail "$1: --help exited $?"; }
  grep -q '^usage: verify_4k' "$work/help.txt" || { cat "$work/help.txt"; fail "$1: no usage"; }
  echo "ok: $1 --help"
}

for linkage in shared static; do
  static=OFF
  [ "$linkage" = static ] && static=ON
  step "app_cmake ($linkage): configure with find_package(nvmf)" \
    "$cmake_command" -S "$examples/app_cmake" -B "$work/app_cmake_$linkage" \
    "-DCMAKE_PREFIX_PATH=$staging" "-DCMAKE_CXX_COMPILER=$cxx" "-DNVMF_APP_STATIC=$static"
  step "app_cmake ($linkage): build" "$cmake_command" --build "$work/app_cmake_$linkage"
  binary=$work/app_cmake_$linkage/verify_4k
  needed=$(readelf -d "$binary" | grep -c 'NEEDED.*libnvmf_host' || true)
  if [ "$linkage" = shared ]; then
    [ "$needed" -eq 1 ] || fail "app_cmake (shared) does not need libnvmf_host.so.0"
    loaded=$(ldd "$binary")
    grep -qF "$libdir/libnvmf_host.so.0" <<< "$loaded" ||
      fail "app_cmake (shared) does not load the staged libnvmf_host.so.0: $loaded"
  else
    [ "$needed" -eq 0 ] || fail "app_cmake (static) still needs libnvmf_host.so"
  fi
  run_help "app_cmake ($linkage)" "$binary"
done

mkdir "$work/app_pkgconfig"
step "app_pkgconfig: build with pkg-config --cflags --libs nvmf_host" \
  env "PKG_CONFIG_PATH=$libdir/pkgconfig" make -C "$work/app_pkgconfig" \
  -f "$examples/app_pkgconfig/Makefile" "CXX=$cxx"
run_help "app_pkgconfig" "$work/app_pkgconfig/verify_4k"
static_libs=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --static --libs nvmf_host)
[[ " $static_libs " == *" -libverbs "* && " $static_libs " == *" -lrdmacm "* ]] ||
  fail "pkg-config --static --libs nvmf_host lacks rdma-core: $static_libs"
echo "ok: pkg-config --static --libs nvmf_host: $static_libs"
