#!/bin/bash
# VM scenario: the Debian packages, and an application built against them (issue 16). Two
# halves, because under TCG cpack took 430 s (dpkg-shlibdeps, which works out the Depends, is 6
# of its 8 s on the host) and the one g++ of verify_4k.cpp more than 70 s:
#  0. On the host (`install_rxe.sh --host BUILD RESULTS`: ctest vm_install_rxe), before the
#     boot: cpack -G DEB -D CPACK_INSTALL_PREFIX=/usr in the build folder makes the four
#     packages into RESULTS/prepared (cmake/packaging.cmake; with Ninja CPack builds nothing, it
#     installs what is built); the two installed examples, as the two library packages unpack
#     (dpkg-deb -x), are built against them: app_pkgconfig with make + pkg-config (their
#     nvmf_host.pc), app_cmake with find_package(nvmf) (their nvmfConfig.cmake; no build
#     RUNPATH). Then vm-run.sh boots the guest with this script and that folder.
# In the guest, whose root is a throw-away overlay over the host's /, so that installing and
# removing packages changes nothing on the host:
#  1. one .deb per package, every path under /usr, none of their files present yet, nothing
#     known to dpkg or pkg-config by those names, neither application's libnvmf_host.so.0 found.
#  2. dpkg -i of the four (their Depends met by the guest's packages, i.e. the host's) exits 0
#     and dpkg-query says "install ok installed" for each; the tools in /usr/bin, the headers,
#     libnvmf_host.so.0 (its SONAME, the -dev package's link to it, ldconfig knows it),
#     libnvmf_host.a, nvmf_host.pc (pkg-config gives the package's version), nvmfConfig.cmake,
#     the example configurations and the two units, whose ExecStart names the installed binary.
#  3. Both applications' verify_4k now load /usr's libnvmf_host.so.0. The installed
#     /usr/bin/nvmf_tgt serves a malloc (512-byte blocks) and a uring (4096) namespace on rxe0
#     (lib/nvmf_tgt.sh); against each, each application connects, writes 4 KiB, reads it back,
#     compares, disconnects and exits 0. With an NQN the target does not have, each exits 1
#     saying the connect failed.
#  4. SIGTERM stops nvmf_tgt (status 0, a clean stop in its log). dpkg -r, then dpkg -P, of the
#     four exit 0 and dpkg forgets them; of what dpkg -L listed, nothing the packages brought
#     is left (the folders that were there before them stay); pkg-config and ldconfig no
#     longer find the library.
# Each guest step is a set of checks (tests/tools/check.sh); the scenario fails if any failed,
# and at once when a step cannot go on. The host half fails at once on any error.
#   install_rxe.sh --host BUILD_DIR RESULTS_DIR   (on the host: prepares, then boots the guest)
#   install_rxe.sh PREPARED_DIR                    (in the guest, run by vm-run.sh)
set -uo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
note() { echo "  [$(cut -d' ' -f1 /proc/uptime)s] $*"; }   # an event within a step
fail() { echo "install_rxe: FAIL: $*"; exit 1; }

here="$(cd "$(dirname "$0")" && pwd -P)"
readonly PACKAGES=(libnvmf-host0 libnvmf-host-dev nvmf-target nvmf-tools)
readonly PREFIX=/usr SONAME=libnvmf_host.so.0
readonly APPS=(app_pkgconfig app_cmake)   # examples/: each builds verify_4k its own way

# set_libdir BUILD: LIBDIR, the libraries' folder in the packages: PREFIX/ the build folder's
# CMAKE_INSTALL_LIBDIR (GNUInstallDirs: lib for a build configured for /usr/local,
# lib/x86_64-linux-gnu for one configured for /usr).
set_libdir() {
  local relative
  relative="$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$1/CMakeCache.txt" 2>/dev/null)"
  if [ -z "$relative" ] || [[ "$relative" == /* ]]; then
    fail "CMAKE_INSTALL_LIBDIR in $1/CMakeCache.txt is '$relative', not a folder relative to the prefix"
  fi
  LIBDIR="$PREFIX/$relative"
}

# prepare_on_host BUILD OUT: the packages into OUT/packages, verify_4k into OUT/APP for each
# of APPS.
prepare_on_host() {
  local build="$1" out="$2" started deb
  for tool in cpack cmake dpkg-deb dpkg-shlibdeps pkg-config make g++; do
    command -v "$tool" >/dev/null || fail "host: $tool not installed (scripts/install-deps.sh; dpkg-shlibdeps: dpkg-dev)"
  done
  [ -f "$build/CPackConfig.cmake" ] || fail "host: no CPackConfig.cmake in $build: not a configured build folder"
  rm -rf "$out"
  mkdir -p "$out"
  started=$SECONDS
  if ! (cd "$build" && cpack -G DEB -D "CPACK_INSTALL_PREFIX=$PREFIX" -B "$out/packages") >"$out/cpack.log" 2>&1; then
    tail -20 "$out/cpack.log"
    fail "host: cpack failed ($out/cpack.log)"
  fi
  rm -rf "$out/packages/_CPack_Packages"
  echo "install_rxe: host: cpack made $(find "$out/packages" -name '*.deb' | wc -l) packages in $((SECONDS - started)) s"
  for deb in "$out"/packages/libnvmf-host0_*.deb "$out"/packages/libnvmf-host-dev_*.deb; do
    dpkg-deb -x "$deb" "$out/unpacked" || fail "host: dpkg-deb -x $deb"
  done
  # PKG_CONFIG_LIBDIR: the unpacked nvmf_host.pc and nothing else.
  mkdir -p "$out/app_pkgconfig"
  started=$SECONDS
  if ! PKG_CONFIG_LIBDIR="$out/unpacked$LIBDIR/pkgconfig" make -C "$out/app_pkgconfig" \
    -f "$out/unpacked$PREFIX/share/nvmf/examples/app_pkgconfig/Makefile" >"$out/app-build.log" 2>&1; then
    cat "$out/app-build.log"
    fail "host: app_pkgconfig does not build against the unpacked packages"
  fi
  echo "install_rxe: host: app_pkgconfig (make: one g++ of verify_4k.cpp) built in $((SECONDS - started)) s"
  # CMake gives a binary linked to a library outside the system folders a build RUNPATH to it;
  # without one the guest's verify_4k finds libnvmf_host.so.0 only once dpkg installs it.
  started=$SECONDS
  if ! { cmake -S "$out/unpacked$PREFIX/share/nvmf/examples/app_cmake" -B "$out/app_cmake" \
           "-DCMAKE_PREFIX_PATH=$out/unpacked$PREFIX" -DCMAKE_SKIP_BUILD_RPATH=ON &&
         cmake --build "$out/app_cmake"; } >"$out/app_cmake-build.log" 2>&1; then
    cat "$out/app_cmake-build.log"
    fail "host: app_cmake does not build against the unpacked packages"
  fi
  echo "install_rxe: host: app_cmake (find_package(nvmf)) built in $((SECONDS - started)) s"
}

if [ "${1:-}" = --host ]; then
  [ $# -eq 3 ] || fail "usage: install_rxe.sh --host BUILD_DIR RESULTS_DIR"
  build="$(cd "$2" && pwd -P)" || fail "host: no build folder $2"
  mkdir -p "$3" || fail "host: cannot make $3"
  results="$(cd "$3" && pwd -P)"
  set_libdir "$build"
  prepare_on_host "$build" "$results/prepared"
  exec "$here/../vm-run.sh" --build-dir "$build" --results "$results" install_rxe "$results/prepared"
fi

# --- in the guest ---------------------------------------------------------------------------
[ "${NVMF_VM_SCENARIO:-}" = install_rxe ] ||
  fail "runs inside the VM guest, started by: tests/vm/scenarios/install_rxe.sh --host BUILD_DIR RESULTS_DIR"
prepared="${1:?the folder install_rxe.sh --host prepared (install_rxe.sh --host BUILD_DIR RESULTS_DIR starts the guest)}"
build="${NVMF_BUILD_DIR:?}"
set_libdir "$build"
readonly LIBDIR
for tool in dpkg dpkg-deb dpkg-query pkg-config readelf ldconfig ldd; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host"
done
for app in "${APPS[@]}"; do
  [ -x "$prepared/$app/verify_4k" ] || fail "no $prepared/$app/verify_4k: install_rxe.sh --host prepares it"
done

# shellcheck source=../../tools/check.sh
source "$here/../../tools/check.sh"   # check, check_summary, expect and $work
# shellcheck source=lib/nvmf_tgt.sh
source "$here/lib/nvmf_tgt.sh"   # MALLOC_NQN & co., tgt_write_config, tgt_start, tgt_stop, tgt_check_log
TGT_PID=""
stop_target() {   # the EXIT trap: a target left running would hold the guest's output
  [ -z "$TGT_PID" ] || kill -9 "$TGT_PID" 2>/dev/null || true
  rm -rf "$work"
}
trap stop_target EXIT
# Under TCG, with the root on 9p, every process the scenario starts costs a large fraction of
# a second: the checks below test with bash itself where they can, and what a failure message
# shows is worked out only on failure (verdict).
# verdict NAME RC COMMAND...: check NAME, passed when RC is 0; otherwise COMMAND's output is
# the failure's detail.
verdict() {
  local name="$1" rc="$2"
  shift 2
  if [ "$rc" -eq 0 ]; then
    check "$name" 0 ""
  else
    check "$name" "$rc" "(status $rc) $("$@" 2>&1)"
  fi
}
has_line() { [[ $'\n'"$1"$'\n' == *$'\n'"$2"$'\n'* ]]; }   # has_line TEXT LINE
indent() { local line; while IFS= read -r line; do echo "  $line"; done; }
# ldconfig_entry TEXT: the path `ldconfig -p` (TEXT) gives for SONAME, or nothing.
ldconfig_entry() {
  local name rest
  while read -r name rest; do
    [ "$name" != "$SONAME" ] || echo "${rest##*=> }"
  done <<<"$1"
}
# loaded_from LDD_OUTPUT: where SONAME is loaded from ("not found" if from nowhere).
loaded_from() {
  local name where rest
  while read -r name _ where rest; do
    [ "$name" != "$SONAME" ] || { [ "$where $rest" = "not found" ] && echo "not found" || echo "$where"; }
  done <<<"$1"
}
# known_to_dpkg STATUSES PACKAGE: dpkg-query's "PACKAGE STATUS" lines have PACKAGE in a state
# other than not-installed.
known_to_dpkg() {
  local package status
  while read -r package status; do
    [ "$package" != "$2" ] || [[ "$status" == *" not-installed" ]] || return 0
  done <<<"$1"
  return 1
}
logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"

# package_paths DEB: every path in the package, absolute, without the trailing / of a folder
# (dpkg-deb -c: mode, owner, size, date, time, ./path, and "-> target" for a link).
package_paths() {
  local path
  dpkg-deb -c "$1" | while read -r _ _ _ _ _ path _; do
    path="${path#.}"
    path="${path%/}"
    [ -z "$path" ] || echo "$path"
  done
}

step "1. the packages cpack made on the host ($prepared/packages), before the install"
statuses="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null)"
for package in "${PACKAGES[@]}"; do
  ! known_to_dpkg "$statuses" "$package" ||
    fail "$package is known to dpkg on the host already ($statuses): nothing here would prove the install"
done
! pkg-config --exists nvmf_host
verdict "1a. pkg-config finds no nvmf_host before the install" $? pkg-config --path nvmf_host
debs=()
declare -A in_packages=() versions=()
for package in "${PACKAGES[@]}"; do
  found=("$prepared/packages/${package}_"*.deb)
  [ "${#found[@]}" -eq 1 ] && [ -f "${found[0]}" ]
  check "1b. one package $package" $? "found: ${found[*]}"
  [ -f "${found[0]}" ] || fail "no package $package in $prepared/packages"
  debs+=("${found[0]}")
  fields="$(dpkg-deb --field "${found[0]}" Package Version Depends)"
  indent <<<"$fields"
  has_line "$fields" "Package: $package"
  check "1b. ${found[0]##*/} is package $package" $? "its fields: $fields"
  while read -r key value; do [ "$key" != Version: ] || versions[$package]="$value"; done <<<"$fields"
  package_paths "${found[0]}" >"$work/paths"   # a file: the guest has no /dev/fd for <(...)
  outside=""
  while read -r path; do
    in_packages[$path]=1
    [[ "$path" == "$PREFIX" || "$path" == "$PREFIX"/* ]] || outside+=" $path"
  done <"$work/paths"
  [ -z "$outside" ]
  check "1c. every path of $package is under $PREFIX" $? "outside:$outside"
done
# What exists before the install (the folders /usr, /usr/bin, ... shared with other packages)
# must exist after the removal; nothing else of the packages' may exist yet.
declare -A there_before=()
for path in "${!in_packages[@]}"; do
  if [ -d "$path" ] && [ ! -L "$path" ]; then
    there_before[$path]=1
  elif [ -e "$path" ] || [ -L "$path" ]; then
    check "1d. $path does not exist before the install" 1 "it does (ls: $(ls -ld "$path"))"
  fi
done
echo "  ${#in_packages[@]} paths in the packages, ${#there_before[@]} of them folders that exist already"
# The application was built on the host against the unpacked packages; it has no RUNPATH, so
# until dpkg installs the library nothing provides its libnvmf_host.so.0.
[[ "$(<"$prepared/app-build.log")" == *" -lnvmf_host"* ]]
verdict "1e. app_pkgconfig was linked with pkg-config's -lnvmf_host" $? cat "$prepared/app-build.log"
for app in "${APPS[@]}"; do
  dynamic="$(readelf -d "$prepared/$app/verify_4k" 2>&1)"
  [[ "$dynamic" == *"(NEEDED)"*"[$SONAME]"* && "$dynamic" != *"(RUNPATH)"* && "$dynamic" != *"(RPATH)"* ]]
  check "1f. $app's verify_4k needs $SONAME and has no RUNPATH" $? "$dynamic"
  ldd_before="$(ldd "$prepared/$app/verify_4k" 2>&1)"
  [ "$(loaded_from "$ldd_before")" = "not found" ]
  check "1g. before the install nothing provides $app's $SONAME" $? "$ldd_before"
done

step "2. dpkg -i ${debs[*]##*/}"
started=$SECONDS
dpkg -i "${debs[@]}" >"$logs/dpkg-install.log" 2>&1
rc=$?
note "dpkg -i took $((SECONDS - started)) s"
verdict "2a. dpkg -i exits 0" "$rc" tail -5 "$logs/dpkg-install.log"
[ "$rc" -eq 0 ] || fail "the packages did not install: $logs/dpkg-install.log"
statuses="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>&1)"
for package in "${PACKAGES[@]}"; do
  has_line "$statuses" "$package install ok installed"
  check "2b. dpkg-query: $package install ok installed" $? "dpkg-query: $statuses"
done
# expect_file TEST PATH: a check that `test TEST PATH` holds.
expect_file() {
  test "$1" "$2"
  verdict "2c. test $1 $2" $? ls -ld "$2"
}
for tool in nvmf_tgt nvmfctl nvmf_perf nvmf_hostd; do expect_file -x "$PREFIX/bin/$tool"; done
for header in host.h result.h status.h export.h; do expect_file -f "$PREFIX/include/nvmf/$header"; done
for file in libnvmf_host.a pkgconfig/nvmf_host.pc cmake/nvmf/nvmfConfig.cmake cmake/nvmf/nvmfConfigVersion.cmake; do
  expect_file -f "$LIBDIR/$file"
done
expect_file -f "$PREFIX/share/nvmf/examples/target/malloc.json"
expect_file -L "$LIBDIR/$SONAME"
library="$(readlink -f "$LIBDIR/$SONAME")"
dynamic="$(readelf -d "$library" 2>&1)"
[[ "$dynamic" == *"(SONAME)"*"[$SONAME]"* ]]
check "2d. $library has SONAME $SONAME" $? "$dynamic"
[ "$LIBDIR/libnvmf_host.so" -ef "$library" ]
verdict "2e. the -dev package's libnvmf_host.so leads to $library" $? ls -l "$LIBDIR/libnvmf_host.so"
cache="$(ldconfig -p)"
cached="$(ldconfig_entry "$cache")"
[ -n "$cached" ] && [ "$cached" -ef "$library" ]
check "2f. ldconfig's cache has $SONAME (libnvmf-host0's postinst ran ldconfig)" $? "cache entry '$cached'"
version="${versions[libnvmf-host-dev]%-*}"   # without the Debian revision
modversion="$(pkg-config --modversion nvmf_host 2>&1)"
[ "$modversion" = "$version" ]
check "2g. pkg-config --modversion nvmf_host is the package's version $version" $? "'$modversion'"
for unit in nvmf_tgt nvmf_hostd; do
  unit_file="$PREFIX/lib/systemd/system/$unit.service"
  exec_start=""
  while IFS= read -r line; do
    [[ "$line" == ExecStart=* ]] && { exec_start="${line#ExecStart=}"; exec_start="${exec_start%% *}"; }
  done <"$unit_file"
  [ "$exec_start" = "$PREFIX/bin/$unit" ]
  check "2h. $unit_file runs $PREFIX/bin/$unit" $? "ExecStart binary '$exec_start'"
done

step "3. verify_4k (${APPS[*]}) against the installed /usr/bin/nvmf_tgt"
for app in "${APPS[@]}"; do
  ldd_after="$(ldd "$prepared/$app/verify_4k" 2>&1)"
  loaded="$(loaded_from "$ldd_after")"
  [ -n "$loaded" ] && [ "$loaded" -ef "$library" ]
  check "3a. $app's verify_4k loads $library" $? "$ldd_after"
  help="$("$prepared/$app/verify_4k" --help 2>&1)"
  verdict "3b. $app's verify_4k --help" $? echo "$help"
done

# shellcheck source=lib/rxe.sh
source "$here/lib/rxe.sh"   # rxe0 on veth0, ADDR
files="$work/files"   # the uring namespace's file
mkdir -p "$files"
mount -t tmpfs -o size=96m tmpfs "$files" || fail "mount a tmpfs for the uring namespace"
tgt_write_config "$logs/nvmf_tgt.json" "$files"
step "nvmf_tgt (installed): $MALLOC_NQN (malloc, $MALLOC_BS-byte blocks), $FILE_NQN (uring, $FILE_BS)"
tgt_start "$PREFIX/bin/nvmf_tgt" "$logs/nvmf_tgt.json" "$logs/nvmf_tgt.log" --mode interrupt --reactors 1
[ "/proc/$TGT_PID/exe" -ef "$PREFIX/bin/nvmf_tgt" ]
verdict "3c. the target running is $PREFIX/bin/nvmf_tgt" $? readlink -f "/proc/$TGT_PID/exe"

# verify_run APP NAME NQN: APP's verify_4k against NQN; sets VERIFY_RC and VERIFY_OUT (also
# kept in $logs/verify_4k-APP-NAME.txt).
verify_run() {
  timeout 120 "$prepared/$1/verify_4k" --traddr "$ADDR" --subnqn "$3" >"$logs/verify_4k-$1-$2.txt" 2>&1
  VERIFY_RC=$?
  VERIFY_OUT="$(<"$logs/verify_4k-$1-$2.txt")"
  indent <<<"$VERIFY_OUT"
}
for app in "${APPS[@]}"; do
  for namespace in malloc:"$MALLOC_NQN" file:"$FILE_NQN"; do
    name="${namespace%%:*}" nqn="${namespace#*:}"
    verify_run "$app" "$name" "$nqn"
    check "3d. $app's verify_4k against $nqn exits 0" "$VERIFY_RC" "$VERIFY_OUT"
    has_line "$VERIFY_OUT" "verify_4k: verified 4096 bytes at LBA 0 of namespace 1"
    check "3e. $app's verify_4k against $nqn verified 4096 bytes" $? "$VERIFY_OUT"
  done
done
tgt_check_log   # before the refused connects below, which the target logs as errors
readonly ABSENT_NQN=nqn.2026-11.io.nvmf-vm:absent
for app in "${APPS[@]}"; do
  verify_run "$app" absent "$ABSENT_NQN"
  [ "$VERIFY_RC" -eq 1 ]
  check "3f. $app's verify_4k against $ABSENT_NQN (no such subsystem) exits 1" $? "status $VERIFY_RC"
  [[ $'\n'"$VERIFY_OUT" == *$'\n'"verify_4k: connect "*" subnqn:$ABSENT_NQN: "* ]]
  check "3g. $app's verify_4k says the connect to $ABSENT_NQN failed" $? "$VERIFY_OUT"
done

step "4. SIGTERM to nvmf_tgt; dpkg -r and dpkg -P of ${PACKAGES[*]}"
tgt_stop   # status 0 and a clean stop in its log, or the scenario fails here
TGT_PID=""
umount "$files"
listed="$(dpkg -L "${PACKAGES[@]}" 2>&1)"
verdict "4a. dpkg -L ${PACKAGES[*]} exits 0" $? echo "$listed"
declare -A in_list=()
while IFS= read -r path; do
  [ -z "$path" ] || [ "$path" = /. ] || in_list[$path]=1
done <<<"$listed"
unlisted=""
for path in "${!in_packages[@]}"; do [ -n "${in_list[$path]:-}" ] || unlisted+=" $path"; done
[ -z "$unlisted" ] && [ "${#in_list[@]}" -eq "${#in_packages[@]}" ]
check "4b. dpkg -L lists the packages' ${#in_packages[@]} paths" $? "${#in_list[@]} listed; not listed:$unlisted"
started=$SECONDS
dpkg -r "${PACKAGES[@]}" >"$logs/dpkg-remove.log" 2>&1
rc=$?
note "dpkg -r took $((SECONDS - started)) s"
verdict "4c. dpkg -r exits 0" "$rc" tail -5 "$logs/dpkg-remove.log"
started=$SECONDS
dpkg -P "${PACKAGES[@]}" >"$logs/dpkg-purge.log" 2>&1
rc=$?
note "dpkg -P took $((SECONDS - started)) s"
verdict "4d. dpkg -P exits 0" "$rc" tail -5 "$logs/dpkg-purge.log"
# Purged: dpkg-query knows no such package, or (while it keeps the name) "not-installed".
statuses="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null)"
for package in "${PACKAGES[@]}"; do
  ! known_to_dpkg "$statuses" "$package"
  check "4e. dpkg forgot $package" $? "dpkg-query: $statuses"
done
left=0
for path in "${!in_list[@]}"; do
  if [ -n "${there_before[$path]:-}" ]; then
    [ -d "$path" ] || check "4f. $path (there before the install) still exists" 1 "it is gone"
  elif [ -e "$path" ] || [ -L "$path" ]; then
    left=$((left + 1))
    check "4f. $path is removed" 1 "still there: $(ls -ld "$path")"
  fi
done
echo "  $left of ${#in_list[@]} listed paths left behind"
! pkg-config --exists nvmf_host
verdict "4g. pkg-config no longer finds nvmf_host" $? pkg-config --path nvmf_host
cached="$(ldconfig_entry "$(ldconfig -p)")"
[ -z "$cached" ]
check "4h. ldconfig's cache no longer has $SONAME" $? "cache entry '$cached'"

check_summary install_rxe || fail "$failures of $((passes + failures)) checks failed (FAIL lines above)"
echo "install_rxe: PASS: $passes checks: the four packages cpack made from $build installed with dpkg, the applications built against them with pkg-config and find_package(nvmf) each verified 4 KiB written and read back through the installed nvmf_tgt on rxe0 (and failed on an absent subsystem), and dpkg -r/-P removed every file they brought"
