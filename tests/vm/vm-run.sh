#!/usr/bin/env bash
# VM test tier: boots a QEMU guest (TCG) with a stock Debian kernel, the host's / shared
# read-only over 9p (overlay + tmpfs upper in the guest), runs tests/vm/scenarios/SCENARIO.sh
# inside it as root, and exits with the scenario's status. See tests/vm/README.md.
#
#   vm-run.sh [--build-dir DIR] [--timeout SECONDS] [--results DIR] [--nvme N] [--qmp]
#             SCENARIO [ARGS...]
#
# Environment (each also settable by the flag above where one exists):
#   NVMF_VM_CACHE    kernel + initramfs cache (default ~/.cache/nvmf-vm)
#   NVMF_BUILD_DIR   host build folder handed to the scenario (default REPO/build)
#   NVMF_VM_TIMEOUT  seconds before QEMU is killed (default 600)
#   NVMF_VM_RESULTS  per-run results folder (default: a new folder under /tmp)
#   NVMF_VM_ACCEL    QEMU accelerator (default tcg,thread=multi: KVM is unusable here)
#   NVMF_VM_QEMU_ARGS / NVMF_VM_APPEND  extra QEMU arguments / kernel command line words
#   NVMF_VM_MEM      guest RAM, QEMU's -m (default 2G; room for 128 2-MiB hugepages)
#   NVMF_VM_SMP      the guest's vCPUs, QEMU's -smp (default 2: one per core of the CI
#                    machine; more are time-shared by the host's cores)
#   NVMF_VM_NVME     --nvme N: N (1-8) emulated NVMe controllers (1b36:0010) on a q35 machine
#                    with an intel-iommu (intel_iommu=on), each a sparse raw image
#                    RESULTS/nvmeK.img behind a PCIe root port; QEMU ids nvme0..; the guest
#                    sees them at 0000:01:00.0, 0000:02:00.0, ... (NVMF_VM_NVME_PCI)
#   NVMF_VM_NVME_SIZE_MB  size of each image (default 256)
#   NVMF_VM_IOMMU_OPTS    intel-iommu's options with NVMe (default intremap=on)
#   NVMF_VM_QMP      --qmp: QMP socket RESULTS/qmp.sock and a watcher that runs the guest's
#                    requests from RESULTS/qmp/ (device_del ID; lib/qmp.sh, README.md)
#   NVMF_VM_HOST_CPU=1  RESULTS/host_cpu.log: the host CPU of each QEMU thread, per second
#                    (tests/vm/host_cpu.py), and a "host view" line per window a probe
#                    announces ("PROBE NAME: window epoch START-END")
#   NVMF_VM_PAIR_ROLE, NVMF_VM_PAIR_SOCKET, NVMF_VM_PAIR_DIR  set by tests/vm/vm-pair.sh for
#                    each of its two guests: the role (target: QEMU listens on the unix
#                    socket; host: QEMU connects to it), the socket of the virtio-net link
#                    between the two guests (-netdev stream), and a host folder both guests
#                    mount writable at /nvmf-pair (their hand-shake files)
# Exit: the scenario's status; 1 on timeout, guest panic or harness error; 77 (ctest skip)
# when QEMU or the kernel cannot be had, with the reason printed.
set -euo pipefail

readonly SKIP=77
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
cache="${NVMF_VM_CACHE:-$HOME/.cache/nvmf-vm}"
build_dir="${NVMF_BUILD_DIR:-$repo/build}"
timeout_s="${NVMF_VM_TIMEOUT:-600}"
results="${NVMF_VM_RESULTS:-}"
nvme_count="${NVMF_VM_NVME:-0}"
nvme_size_mb="${NVMF_VM_NVME_SIZE_MB:-256}"
qmp="${NVMF_VM_QMP:-0}"

say() { echo "vm-run: $*" >&2; }
skip() { say "SKIPPED: $*"; exit "$SKIP"; }
die() { say "ERROR: $*"; exit 1; }
usage() {
  sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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
    --nvme) nvme_count="$2"; shift 2 ;;
    --qmp) qmp=1; shift ;;
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
[[ "$nvme_count" =~ ^[0-8]$ ]] || die "NVMF_VM_NVME / --nvme must be 0 to 8: $nvme_count"
[[ "$nvme_size_mb" =~ ^[1-9][0-9]*$ ]] || die "NVMF_VM_NVME_SIZE_MB must be a whole number: $nvme_size_mb"
case "$qmp" in 0|"") qmp=0 ;; 1|yes|on|true) qmp=1 ;; *) die "NVMF_VM_QMP must be 0 or 1: $qmp" ;; esac

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
[ "$qmp" -eq 0 ] || command -v python3 >/dev/null || skip "NVMF_VM_QMP=1 needs python3 on the host (tests/vm/qmp.py)"

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
  rm -f "$results"/{qmp.sock,qmp.log} "$results"/nvme[0-9].img
  rm -rf "$results/qmp"
fi
results="$(cd "$results" && pwd -P)"
# What ran and beside what: a figure from a probe is worth only as much as this (the tree's
# commit, how many files differed from it, and the host's load when the guest started).
host_commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
host_dirty="$(git -C "$repo" status --porcelain 2>/dev/null | wc -l)"
host_load="$(cut -d' ' -f1-3 /proc/loadavg)"
{
  printf 'NVMF_VM_HOST_COMMIT=%q\n' "$host_commit"
  printf 'NVMF_VM_HOST_DIRTY=%q\n' "$host_dirty"
  printf 'NVMF_VM_HOST_LOAD=%q\n' "$host_load"
  printf 'NVMF_REPO=%q\n' "$repo"
  printf 'NVMF_BUILD_DIR=%q\n' "$build_dir"
  printf 'NVMF_VM_SCENARIO=%q\n' "$scenario"
  printf 'NVMF_VM_SMP=%q\n' "${NVMF_VM_SMP:-2}"
  printf 'NVMF_VM_ARGS=('
  [ $# -eq 0 ] || printf '%q ' "$@"
  printf ')\n'
} >"$results/run.env"

# --- optional devices: NVMe controllers (q35 + intel-iommu) and the QMP socket
machine=()   # empty: QEMU's default machine (pc), exactly as before these knobs existed
devices=()
append_extra=""
if [ "$nvme_count" -gt 0 ]; then
  [[ "$results" != *,* ]] || die "NVMe images need a results path without commas: $results"
  # intremap=on: interrupt remapping, without which vfio_iommu_type1 refuses VFIO_SET_IOMMU
  # ("No interrupt remapping support") and DPDK cannot use the device. See README.md.
  machine=(-M q35 -device "intel-iommu,${NVMF_VM_IOMMU_OPTS:-intremap=on}")
  append_extra="intel_iommu=on"
  pci_list="" ids=""
  for ((k = 0; k < nvme_count; k++)); do
    image="$results/nvme$k.img"
    truncate -s "${nvme_size_mb}M" "$image"   # sparse
    # Root bus pcie.0 is not hot-pluggable on q35, so each controller sits behind its own
    # PCIe root port (slots 0x10.. on pcie.0, clear of the auto-placed VGA and virtio-9p at
    # 0x01-0x03); the firmware numbers the ports' buses 1, 2, ... in slot order.
    devices+=(-device "pcie-root-port,id=nvme-port$k,bus=pcie.0,chassis=$((k + 1)),slot=$((k + 1)),addr=$(printf '0x%x' $((0x10 + k)))"
      -drive "file=$image,if=none,id=nvme$k,format=raw"
      -device "nvme,serial=nvmf-vm-$k,drive=nvme$k,id=nvme$k,bus=nvme-port$k,addr=0x0")
    pci_list+="$(printf '0000:%02x:00.0' $((k + 1))) "
    ids+="nvme$k "
  done
  {
    printf 'export NVMF_VM_NVME=%q\n' "$nvme_count"
    printf 'export NVMF_VM_NVME_PCI=%q\n' "${pci_list% }"
    printf 'export NVMF_VM_NVME_IDS=%q\n' "${ids% }"
    printf 'export NVMF_VM_NVME_SIZE_MB=%q\n' "$nvme_size_mb"
  } >>"$results/run.env"
fi
qmp_socket=""
if [ "$qmp" -eq 1 ]; then
  qmp_socket="$results/qmp.sock"
  if [ "${#qmp_socket}" -gt 100 ]; then   # sun_path holds 108 bytes
    qmp_socket="$(mktemp -d "${TMPDIR:-/tmp}/nvmf-vm-qmp.XXXXXX")/qmp.sock"
    ln -sfn "$qmp_socket" "$results/qmp.sock"
  fi
  mkdir -p "$results/qmp"
  devices+=(-qmp "unix:$qmp_socket,server=on,wait=off")
  printf 'export NVMF_VM_QMP=1 NVMF_VM_QMP_DIR=/nvmf-vm/qmp\n' >>"$results/run.env"
fi

# --- optional: one of vm-pair.sh's two guests (a virtio-net link to the other, a shared folder)
pair_role="${NVMF_VM_PAIR_ROLE:-}"
if [ -n "$pair_role" ]; then
  case "$pair_role" in
    target) pair_server=on pair_mac=52:54:00:4e:56:01 ;;
    host) pair_server=off pair_mac=52:54:00:4e:56:02 ;;
    *) die "NVMF_VM_PAIR_ROLE must be target or host: $pair_role" ;;
  esac
  pair_socket="${NVMF_VM_PAIR_SOCKET:?NVMF_VM_PAIR_SOCKET: the unix socket of the link}"
  pair_dir="$(cd "${NVMF_VM_PAIR_DIR:?NVMF_VM_PAIR_DIR: the shared folder}" && pwd -P)" ||
    die "NVMF_VM_PAIR_DIR not found: $NVMF_VM_PAIR_DIR"
  [[ "$pair_socket$pair_dir" != *,* ]] || die "pair paths must not hold commas: $pair_socket $pair_dir"
  devices+=(-netdev "stream,id=pair,server=$pair_server,addr.type=unix,addr.path=$pair_socket"
    -device "virtio-net-pci,netdev=pair,mac=$pair_mac"
    -virtfs "local,path=$pair_dir,mount_tag=pair,security_model=none,multidevs=remap")
  printf 'export NVMF_VM_PAIR_ROLE=%q\n' "$pair_role" >>"$results/run.env"
fi

# The guest's QMP requests (protocol in README.md): REQ.req holds "device_del ID"; the answer
# goes to REQ.ack, "ok" or "error" on its first line and qmp.py's output after it.
qmp_watch() {
  local req base verb arg extra out status
  while :; do
    for req in "$results"/qmp/*.req; do
      [ -f "$req" ] || continue
      base="${req%.req}"
      verb="" arg="" extra=""
      read -r verb arg extra <"$req" || true
      rm -f "$req"
      case "$verb" in
        device_del)
          if [ -n "$arg" ] && [ -z "$extra" ] &&
            out="$(python3 "$repo/tests/vm/qmp.py" "$qmp_socket" --timeout 60 device_del "$arg" 2>&1)"; then
            status=ok
          else
            status=error
          fi ;;
        *) status=error out="unknown request '$verb $arg $extra' (known: device_del ID)" ;;
      esac
      echo "$(date +%T) $(basename "$base"): $verb $arg -> $status: $out" >>"$results/qmp.log"
      printf '%s\n%s\n' "$status" "$out" >"$base.ack.tmp"
      mv "$base.ack.tmp" "$base.ack"
    done
    sleep 0.2
  done
}

# --- boot
# -nic none: the guest has no network to the outside, only what its scenario creates inside.
# panic=-1 + -no-reboot: a guest panic ends QEMU (oops=panic: an oops too) instead of hanging.
read -r -a extra_qemu <<<"${NVMF_VM_QEMU_ARGS:-}"
qemu=(qemu-system-x86_64 "${machine[@]}"
  -accel "${NVMF_VM_ACCEL:-tcg,thread=multi}" -cpu max -m "${NVMF_VM_MEM:-2G}" -smp "${NVMF_VM_SMP:-2}"
  -nographic -no-reboot -nic none
  -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$initramfs"
  -append "console=ttyS0 panic=-1 oops=panic loglevel=4 nvmf_kmods=$moddir nvmf_stage2=$repo/tests/vm/guest-init.sh ${append_extra:+$append_extra }${NVMF_VM_APPEND:-}"
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap"
  "${devices[@]}" "${extra_qemu[@]}")

say "scenario $scenario, kernel $kver, timeout ${timeout_s}s, results in $results"
say "host tree at $host_commit with $host_dirty uncommitted file(s), load $host_load"
[ "$nvme_count" -eq 0 ] || say "q35 + intel-iommu, $nvme_count NVMe controller(s) at ${pci_list% } (${nvme_size_mb} MiB each)"
[ "$qmp" -eq 0 ] || say "QMP socket $qmp_socket, guest requests in $results/qmp"
[ -z "$pair_role" ] || say "pair: the $pair_role guest, link $pair_socket (server=$pair_server), shared folder $pair_dir"
start=$(date +%s)
stop_children() {   # QEMU (still running), the QMP watcher, a socket folder under /tmp
  [ -z "$qemu_pid" ] || kill "$qemu_pid" 2>/dev/null || true
  if [ -n "$watch_pid" ]; then
    kill "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
    watch_pid=""
  fi
  if [ -n "$qmp_socket" ] && [ "$qmp_socket" != "$results/qmp.sock" ]; then
    rm -rf "$(dirname "$qmp_socket")" "$results/qmp.sock"
  fi
}
# QEMU itself dying of a signal before the guest ran anything of the scenario (seen once: a
# SIGSEGV during SeaBIOS with intel-iommu under MTTCG) is QEMU's fault, not the stack's: the
# guest is started once more, and the log says so. Anything later fails as usual.
attempt=1
while :; do
  timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null >"$results/console.log" 2>&1 &
  qemu_pid=$!
  watch_pid=""
  if [ "$qmp" -eq 1 ]; then
    qmp_watch </dev/null >/dev/null 2>&1 &
    watch_pid=$!
  fi
  if [ "${NVMF_VM_HOST_CPU:-0}" = 1 ]; then
    # timeout's child is QEMU: sample that one (it exits when QEMU does).
    sleep 0.5
    python3 "$repo/tests/vm/host_cpu.py" sample "$(pgrep -P "$qemu_pid" | head -1)" \
      "$results/host_cpu.log" </dev/null >/dev/null 2>&1 &
  fi
  trap stop_children EXIT
  trap 'exit 1' INT TERM
  qemu_rc=0
  wait "$qemu_pid" || qemu_rc=$?
  qemu_pid=""   # reaped: nothing of that number to kill any more
  stop_children
  trap - EXIT
  if [ ! -f "$results/exit_code" ] && [ "$qemu_rc" -gt 128 ] && [ "$qemu_rc" -ne 137 ] &&
    [ ! -s "$results/scenario.log" ] && [ "$attempt" -eq 1 ]; then
    mv "$results/console.log" "$results/console-attempt1.log"
    say "QEMU died of signal $((qemu_rc - 128)) before the scenario began (console in $results/console-attempt1.log): starting the guest once more"
    attempt=2
    [ "$qmp" -eq 0 ] || mkdir -p "$(dirname "$qmp_socket")"  # stop_children removed it
    continue
  fi
  break
done
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
  if [ "$rc" -ne 0 ]; then   # CI keeps only this output: what the guest kernel and QMP said
    if [ -s "$results/dmesg.log" ]; then
      echo "----- guest kernel log (last 40 lines of $results/dmesg.log) -----"
      tail -n 40 "$results/dmesg.log"
    fi
    if [ -s "$results/qmp.log" ]; then
      echo "----- QMP requests ($results/qmp.log) -----"
      cat "$results/qmp.log"
    fi
  fi
  [ ! -f "$results/timing" ] || say "guest: $(cat "$results/timing")"
  if [ -s "$results/host_cpu.log" ] && [ -f "$results/scenario.log" ]; then
    python3 "$repo/tests/vm/host_cpu.py" summarize "$results/host_cpu.log" "$results/scenario.log" |
      while read -r line; do say "$line"; done
  fi
  say "scenario $scenario exited $rc after ${elapsed}s (boot + run); logs in $results"
  say "host load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
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
