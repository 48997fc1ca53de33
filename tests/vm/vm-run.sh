#!/usr/bin/env bash
# VM test tier: boots a QEMU guest (TCG) with a stock Debian kernel, the host's / shared
# read-only over 9p (overlay + tmpfs upper in the guest), runs tests/vm/scenarios/SCENARIO.sh
# inside it as root, and exits with the scenario's status. See tests/vm/README.md.
#
#   vm-run.sh [--build-dir DIR] [--timeout SECONDS] [--results DIR] SCENARIO [ARGS...]
#
# Environment (each also settable by the flag above where one exists):
#   NVMF_VM_CACHE    kernel + initramfs cache (default ~/.cache/nvmf-vm)
#   NVMF_BUILD_DIR   host build folder handed to the scenario (default REPO/build)
#   NVMF_VM_TIMEOUT  seconds before QEMU is killed (default 600)
#   NVMF_VM_RESULTS  per-run results folder (default: a new folder under /tmp)
#   NVMF_VM_ACCEL    QEMU accelerator (default tcg,thread=multi: KVM is unusable here)
#   NVMF_VM_QEMU_ARGS / NVMF_VM_APPEND  extra QEMU arguments / kernel command line words
# Exit: the scenario's status; 1 on timeout, guest panic or harness error; 77 (ctest skip)
# when QEMU or the kernel cannot be had, with the reason printed.
set -euo pipefail

readonly SKIP=77
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
cache="${NVMF_VM_CACHE:-$HOME/.cache/nvmf-vm}"
build_dir="${NVMF_BUILD_DIR:-$repo/build}"
timeout_s="${NVMF_VM_TIMEOUT:-600}"
results="${NVMF_VM_RESULTS:-}"

say() { echo "vm-run: $*" >&2; }
skip() { say "SKIPPED: $*"; exit "$SKIP"; }
die() { say "ERROR: $*"; exit 1; }
usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  local names=() file
  for file in "$repo"/tests/vm/scenarios/*.sh; do names+=("$(basename "$file" .sh)"); done
  echo "scenarios: ${names[*]}" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --results) results="$2"; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    -*) say "unknown option $1"; usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
scenario="$1"
shift
scenario_file="$repo/tests/vm/scenarios/$scenario.sh"
[ -f "$scenario_file" ] || { say "no scenario $scenario_file"; usage; }
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die "timeout must be whole seconds: $timeout_s"

# --- what the host needs (missing = skip with the reason; scripts/install-deps.sh has them)
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (package qemu-system-x86)"
for tool in apt-get apt-cache dpkg-deb depmod modprobe cpio flock timeout; do
  command -v "$tool" >/dev/null || skip "$tool not found (packages apt, dpkg, kmod, cpio, util-linux, coreutils)"
done
busybox=""
for candidate in /bin/busybox /usr/bin/busybox; do
  if [ -x "$candidate" ] && ! ldd "$candidate" >/dev/null 2>&1; then busybox="$candidate"; break; fi
done
[ -n "$busybox" ] || skip "no statically linked busybox (package busybox-static)"

mkdir -p "$cache"
cache="$(cd "$cache" && pwd -P)"
build_dir="$(cd "$build_dir" 2>/dev/null && pwd -P)" || die "build folder not found: $build_dir"
# The guest sees the host's paths as they are; the kernel command line carries two of them.
for path in "$repo" "$cache"; do
  [[ "$path" != *[[:space:]]* ]] || die "path with white space is not supported: '$path'"
done

# --- kernel: the package linux-image-amd64 depends on, unpacked once into the cache
exec 9>"$cache/.lock"
flock 9   # one preparer at a time; released when QEMU starts

cached_kernel() {   # newest kernel unpacked earlier, as its version; empty if none
  local ready
  ready="$(find "$cache/kernel" -mindepth 2 -maxdepth 2 -name .ready 2>/dev/null | sort -V | tail -n 1)" || true
  [ -z "$ready" ] || basename "$(dirname "$ready")"
}
download_kernel() {   # PACKAGE -> the .deb's path in $cache/debs, or fails
  local tmp apt_opts=(-q)
  [ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
  mkdir -p "$cache/debs"
  tmp="$(mktemp -d "$cache/debs/.download.XXXXXX")"
  say "downloading $1 into $cache/debs"
  if (cd "$tmp" && apt-get download "${apt_opts[@]}" "$1") >&2; then
    find "$cache/debs" -maxdepth 1 -name 'linux-image-*.deb' -delete   # keep one kernel
    mv "$tmp"/*.deb "$cache/debs/"
  fi
  rm -rf "$tmp"
  find "$cache/debs" -maxdepth 1 -name "${1}_*.deb" | sort -V | tail -n 1 | grep .
}

kernel_pkg="$(apt-cache depends linux-image-amd64 2>/dev/null |
  awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')" || true
if [ -z "$kernel_pkg" ]; then
  # No package lists (apt-get update not run yet): use a kernel cached earlier.
  kver="$(cached_kernel)"
  [ -n "$kver" ] || skip "cannot resolve linux-image-amd64 (run apt-get update) and no kernel is cached in $cache"
  say "linux-image-amd64 unresolved (apt-get update not run?); using the cached $kver"
else
  kver="${kernel_pkg#linux-image-}"
fi
kdir="$cache/kernel/$kver"
if [ ! -f "$kdir/.ready" ]; then
  deb="$(find "$cache/debs" -maxdepth 1 -name "${kernel_pkg}_*.deb" 2>/dev/null | sort -V | tail -n 1)" || true
  [ -n "$deb" ] || deb="$(download_kernel "$kernel_pkg")" || deb=""
  if [ -z "$deb" ]; then
    kver="$(cached_kernel)"
    [ -n "$kver" ] || skip "apt-get download $kernel_pkg failed (no network or stale package lists: apt-get update) and no kernel is cached in $cache"
    say "apt-get download $kernel_pkg failed; using the cached $kver"
    kdir="$cache/kernel/$kver"
  else
    say "unpacking $(basename "$deb") into $kdir"
    rm -rf "$cache/kernel"   # keep one kernel (~400 MB unpacked)
    mkdir -p "$kdir"
    dpkg-deb -x "$deb" "$kdir"
    [ -d "$kdir/lib/modules/$kver" ] || die "$deb has no lib/modules/$kver"
    [ -f "$kdir/boot/vmlinuz-$kver" ] || die "$deb has no boot/vmlinuz-$kver"
    depmod -b "$kdir" "$kver"   # the .deb ships no modules.dep
    touch "$kdir/.ready"
  fi
fi
moddir="$kdir/lib/modules/$kver"

# --- initramfs: busybox + the modules needed to mount the 9p root + a generated init
# Dependencies first, in modprobe's order (virtio_ring virtio ... 9pnet 9pnet_virtio 9p overlay).
mapfile -t module_paths < <(
  for module in virtio_pci 9pnet_virtio 9p overlay; do   # one name per call: the rest are params
    modprobe -d "$kdir" -S "$kver" --show-depends "$module"
  done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
[ "${#module_paths[@]}" -gt 0 ] || die "modprobe --show-depends found no modules in $moddir"
modules=""
for path in "${module_paths[@]}"; do modules+="$(basename "$path" .ko) "; done

init_script="$(cat <<EOF
#!/bin/busybox sh
# Stage 1 of the nvmf VM guest, generated by tests/vm/vm-run.sh: mount the host's / (9p,
# read-only) under an overlay with a tmpfs upper, then switch_root to stage 2 in the repo.
MODULES="${modules% }"
EOF
cat <<'EOF'
/bin/busybox mkdir -p /bin /proc /sys /dev
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
fail() { echo "nvmf-vm stage 1: $*"; echo o >/proc/sysrq-trigger; sleep 30; }
for word in $(cat /proc/cmdline); do
  case "$word" in
    nvmf_kmods=*) KMODS="${word#nvmf_kmods=}" ;;
    nvmf_stage2=*) STAGE2="${word#nvmf_stage2=}" ;;
  esac
done
for m in $MODULES; do insmod "/modules/$m.ko" || fail "insmod $m"; done
p9="trans=virtio,version=9p2000.L,msize=512000"
mkdir -p /lower /rw /newroot
mount -t 9p -o "$p9,ro" hostroot /lower || fail "mount hostroot"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot ||
  fail "mount overlay"
KVER="$(uname -r)"
mkdir -p "/newroot/lib/modules/$KVER" /newroot/nvmf-vm
mount --bind "/newroot$KMODS" "/newroot/lib/modules/$KVER" || fail "bind modules $KMODS"
mount -t 9p -o "$p9" results /newroot/nvmf-vm || fail "mount results"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash "$STAGE2"
EOF
)"
init_hash="$( { printf '%s' "$init_script"; sha256sum "$busybox"; } | sha256sum | cut -c1-16)"
initramfs="$cache/initramfs-$kver-$init_hash.cpio"
if [ ! -f "$initramfs" ]; then
  say "building $(basename "$initramfs")"
  stage="$(mktemp -d)"
  mkdir -p "$stage/bin" "$stage/modules"
  cp "$busybox" "$stage/bin/busybox"
  for path in "${module_paths[@]}"; do cp "$path" "$stage/modules/"; done
  printf '%s\n' "$init_script" >"$stage/init"
  chmod 755 "$stage/init"
  (cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) >"$initramfs.tmp"
  mv "$initramfs.tmp" "$initramfs"
  rm -rf "$stage"
  find "$cache" -maxdepth 1 -name "initramfs-*.cpio" ! -name "$(basename "$initramfs")" -delete
fi
flock -u 9

# --- per-run results folder, shared writable with the guest (mounted at /nvmf-vm)
if [ -z "$results" ]; then
  results="$(mktemp -d "${TMPDIR:-/tmp}/nvmf-vm-$scenario.XXXXXX")"
else
  mkdir -p "$results"
  rm -f "$results"/{exit_code,exit_code.tmp,scenario.log,console.log,dmesg.log,run.env,timing}
fi
results="$(cd "$results" && pwd -P)"
{
  printf 'NVMF_REPO=%q\n' "$repo"
  printf 'NVMF_BUILD_DIR=%q\n' "$build_dir"
  printf 'NVMF_VM_SCENARIO=%q\n' "$scenario"
  printf 'NVMF_VM_ARGS=('
  [ $# -eq 0 ] || printf '%q ' "$@"
  printf ')\n'
} >"$results/run.env"

# --- boot
# -nic none: the guest has no network to the outside, only what its scenario creates inside.
# panic=-1 + -no-reboot: a guest panic ends QEMU (oops=panic: an oops too) instead of hanging.
read -r -a extra_qemu <<<"${NVMF_VM_QEMU_ARGS:-}"
qemu=(qemu-system-x86_64
  -accel "${NVMF_VM_ACCEL:-tcg,thread=multi}" -cpu max -m 2G -smp 2
  -nographic -no-reboot -nic none
  -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$initramfs"
  -append "console=ttyS0 panic=-1 oops=panic loglevel=4 nvmf_kmods=$moddir nvmf_stage2=$repo/tests/vm/guest-init.sh ${NVMF_VM_APPEND:-}"
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap"
  "${extra_qemu[@]}")

say "scenario $scenario, kernel $kver, timeout ${timeout_s}s, results in $results"
start=$(date +%s)
timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null >"$results/console.log" 2>&1 &
qemu_pid=$!
trap 'kill "$qemu_pid" 2>/dev/null || true' EXIT
trap 'exit 1' INT TERM
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
trap - EXIT
elapsed=$(( $(date +%s) - start ))

show_logs() {
  echo "----- guest console (last ${1} lines of $results/console.log) -----" >&2
  tail -n "$1" "$results/console.log" | tr -d '\r' >&2 || true
  if [ -s "$results/scenario.log" ]; then
    echo "----- scenario log ($results/scenario.log) -----" >&2
    cat "$results/scenario.log" >&2
  fi
  echo "-----" >&2
}

if [ -f "$results/exit_code" ]; then
  rc="$(cat "$results/exit_code")"
  [[ "$rc" =~ ^[0-9]+$ ]] || rc=1
  cat "$results/scenario.log" 2>/dev/null || true
  [ ! -f "$results/timing" ] || say "guest: $(cat "$results/timing")"
  say "scenario $scenario exited $rc after ${elapsed}s (boot + run); logs in $results"
  exit "$rc"
fi
if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
  show_logs 60
  die "scenario $scenario TIMED OUT after ${timeout_s}s: QEMU killed; logs in $results"
fi
show_logs 120
reason="$(tr -d '\r' <"$results/console.log" |
  grep -m 1 -E 'Kernel panic|BUG:|Oops|general protection|nvmf-vm stage 1:' || true)"
[ -z "$reason" ] || say "guest console says: $reason"
die "guest ended without a result (QEMU exit $qemu_rc after ${elapsed}s): kernel panic or early boot failure, see the console above; logs in $results"
