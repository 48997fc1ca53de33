#!/usr/bin/env bash
# Hands NVMe controllers to userspace (vfio-pci) and reserves hugepages, in the spirit of
# SPDK's scripts/setup.sh; `reset` undoes exactly what `config` did.
#
#   scripts/setup.sh [config|reset|status|help]        (config when no command is given)
#
#   config  each NVMe controller (PCI class 0x010802) that PCI_ALLOWED/PCI_BLOCKED let through
#           and that is not in use (a mounted file system, swap or a holder such as dm/md on
#           one of its block devices) is unbound from its driver (nvme) and bound to
#           DRIVER_OVERRIDE through driver_override + drivers_probe; hugepages are reserved
#           and hugetlbfs is mounted at HUGEDIR when no hugetlbfs is mounted. One line per
#           change; what was there before goes to STATE_FILE.
#   reset   binds the controllers recorded in STATE_FILE back to the driver they had (those
#           on DRIVER_OVERRIDE with no record go to nvme), then, once no controller is left
#           recorded, puts nr_hugepages back to its old value and unmounts the hugetlbfs that
#           config mounted.
#   status  NVMe controllers with their driver, IOMMU group and block devices; hugepages.
#
# Environment:
#   PCI_ALLOWED="ADDR ..."  only these controllers (0000:01:00.0; 01:00.0 means domain 0000)
#   PCI_BLOCKED="ADDR ..."  never these
#   DRIVER_OVERRIDE   driver to bind to (default vfio-pci; uio_pci_generic needs no IOMMU)
#   HUGEMEM           MiB of hugepages to reserve (default 2048), or NRHUGE pages; config
#                     never lowers a count that is already at least that high
#   HUGEPGSZ          hugepage size in kB (default: Hugepagesize of /proc/meminfo, or 2048)
#   HUGEDIR           where config mounts hugetlbfs if none is mounted (default /dev/hugepages)
#   STATE_FILE        default /var/run/nvmf-setup.state, or /tmp/nvmf-setup.state where
#                     /var/run is not writable
# Testing without hardware (tests/tools/setup_sh_test.sh): SYSFS_ROOT, DEV_ROOT, PROC_ROOT
# (default /sys, /dev, /proc) point at a fake tree. With SYSFS_ROOT other than /sys, nothing
# needs root (SETUP_UID=N checks as if id -u said N), modprobe and mount are not run,
# STATE_FILE defaults to a file beside the fake tree, and SYSFS_WRITE_HOOK (an executable,
# called as HOOK FILE VALUE after each write this script makes under SYSFS_ROOT) plays the
# kernel's part: moves the driver symlink, creates /dev/vfio/N. Every bind is judged by the
# device's driver symlink afterwards, so a fake tree without a hook shows a failed bind.
# Exit 0 on success (nothing to do included, e.g. no NVMe controllers); 1 on failure with a
# one-line reason on stderr; 2 on bad usage.
set -euo pipefail

readonly PROG="$0"
readonly NVME_CLASS=0x010802
SYSFS_ROOT="${SYSFS_ROOT:-/sys}"
DEV_ROOT="${DEV_ROOT:-/dev}"
PROC_ROOT="${PROC_ROOT:-/proc}"
fake=0
[ "$SYSFS_ROOT" = /sys ] || fake=1
DRIVER_OVERRIDE="${DRIVER_OVERRIDE:-vfio-pci}"
HUGEMEM="${HUGEMEM:-2048}"
NRHUGE="${NRHUGE:-}"
HUGEDIR="${HUGEDIR:-$DEV_ROOT/hugepages}"
state_given="${STATE_FILE:+STATE_FILE=$STATE_FILE }"
if [ -z "${STATE_FILE:-}" ]; then
  if [ "$fake" -eq 1 ]; then
    STATE_FILE="$(dirname "$SYSFS_ROOT")/nvmf-setup.state"
  elif [ -d /var/run ] && [ -w /var/run ]; then
    STATE_FILE=/var/run/nvmf-setup.state
  else
    STATE_FILE=/tmp/nvmf-setup.state
  fi
fi
pci="$SYSFS_ROOT/bus/pci"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
die() { echo "setup.sh: error: $*" >&2; exit 1; }
warn() { echo "setup.sh: warning: $*" >&2; }

# --- the state file: "device ADDR DRIVER", "hugepages SIZE_KB BEFORE AFTER", "mount DIR"
declare -A state_driver=()
state_devices=()   # in the order recorded
state_huge=""      # "SIZE_KB BEFORE AFTER"
state_mount=""
load_state() {
  [ -f "$STATE_FILE" ] || return 0
  local kind a b c
  while read -r kind a b c; do
    case "$kind" in
      device) [ -n "${state_driver[$a]:-}" ] || state_devices+=("$a"); state_driver[$a]="$b" ;;
      hugepages) state_huge="$a $b $c" ;;
      mount) state_mount="$a" ;;
    esac
  done <"$STATE_FILE"
}
save_state() {
  local addr tmp
  if [ "${#state_devices[@]}" -eq 0 ] && [ -z "$state_huge" ] && [ -z "$state_mount" ]; then
    rm -f "$STATE_FILE"
    return 0
  fi
  tmp="$STATE_FILE.tmp.$$"
  {
    echo "# scripts/setup.sh state: what 'config' changed, for 'reset' to undo"
    for addr in "${state_devices[@]}"; do echo "device $addr ${state_driver[$addr]}"; done
    [ -z "$state_huge" ] || echo "hugepages $state_huge"
    [ -z "$state_mount" ] || echo "mount $state_mount"
  } >"$tmp" || die "cannot write the state file $STATE_FILE (set STATE_FILE)"
  mv "$tmp" "$STATE_FILE"
}
forget_device() {
  local addr kept=()
  unset "state_driver[$1]"
  for addr in "${state_devices[@]}"; do [ "$addr" = "$1" ] || kept+=("$addr"); done
  state_devices=("${kept[@]}")
}

# --- sysfs
sysfs_write() {   # FILE VALUE: fails with the kernel's answer
  local err
  if ! err="$( { printf '%s\n' "$2" >"$1"; } 2>&1)"; then
    echo "writing '$2' to ${1#"$SYSFS_ROOT"/}: ${err##*: }"
    return 1
  fi
  if [ "$fake" -eq 1 ] && [ -n "${SYSFS_WRITE_HOOK:-}" ]; then
    "$SYSFS_WRITE_HOOK" "$1" "$2" || { echo "SYSFS_WRITE_HOOK failed on $1"; return 1; }
  fi
}
to_array() {   # NAME COMMAND...: the command's output lines into array NAME (no process
  # substitution: it needs /dev/fd, which a minimal /dev such as the VM guest's lacks)
  local -n _to_array_var="$1"
  local _to_array_out
  shift
  _to_array_out="$("$@")"
  _to_array_var=()
  [ -z "$_to_array_out" ] || mapfile -t _to_array_var <<<"$_to_array_out"
}
normalize() {   # ADDR -> 0000:bb:dd.f, lower case
  local a="${1,,}"
  [[ "$a" =~ ^[0-9a-f]{4}: ]] || a="0000:$a"
  echo "$a"
}
# Few programs run per device: under a VM guest whose root is 9p, each exec costs ~50 ms.
readfile() { local line=""; read -r line <"$1" || true; printf '%s' "$line"; }   # FILE: line 1
nvme_controllers() {   # every NVMe controller's address, in address order (glob order)
  local dev
  for dev in "$pci"/devices/*; do
    [ -e "$dev/class" ] || continue
    if [ "$(readfile "$dev/class")" = "$NVME_CLASS" ]; then echo "${dev##*/}"; fi
  done
}
dev_driver() { local l; if l="$(readlink "$pci/devices/$1/driver" 2>/dev/null)"; then echo "${l##*/}"; else echo none; fi; }
dev_group() { local l; if l="$(readlink "$pci/devices/$1/iommu_group" 2>/dev/null)"; then echo "${l##*/}"; fi; }
dev_ids() {   # "1b36 0010"
  local v d
  v="$(readfile "$pci/devices/$1/vendor")" d="$(readfile "$pci/devices/$1/device")"
  echo "${v#0x} ${d#0x}"
}
dev_blocks() {   # the controller's namespaces as block device names (multipath paths -> heads)
  local ns name seen=" "
  for ns in "$pci/devices/$1"/nvme/nvme*/nvme*n*; do
    [ -e "$ns" ] || continue
    name="${ns##*/}"
    if [[ "$name" =~ ^(nvme[0-9]+)c[0-9]+(n[0-9]+)$ ]]; then name="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"; fi
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [[ "$seen" == *" $name "* ]] || { seen+="$name "; echo "$name"; }
  done
}
block_in_use() {   # NAME -> why the block device or one of its partitions is busy; empty if not
  local part p devno holders h
  for part in "$SYSFS_ROOT/block/$1" "$SYSFS_ROOT/block/$1/$1"p*; do
    [ -d "$part" ] || continue
    p="${part##*/}"
    holders=""
    for h in "$part"/holders/*; do [ ! -e "$h" ] || holders+="${h##*/} "; done
    if [ -n "$holders" ]; then echo "$p is held by ${holders% }"; return; fi
    devno="$(readfile "$part/dev" 2>/dev/null)"
    if [ -r "$PROC_ROOT/self/mountinfo" ]; then
      awk -v devno="$devno" -v src="/dev/$p" -v p="$p" '
        { for (i = 7; i <= NF && $i != "-"; i++) {} }
        (devno != "" && $3 == devno) || $(i + 2) == src { print p " is mounted on " $5; exit }
      ' "$PROC_ROOT/self/mountinfo" | grep . && return
    fi
    if [ -r "$PROC_ROOT/swaps" ] && awk -v src="/dev/$p" '$1 == src { f = 1 } END { exit !f }' "$PROC_ROOT/swaps"; then
      echo "$p is in use as swap"; return
    fi
  done
}
hugetlbfs_mount() {   # the first hugetlbfs mount point, empty if none
  [ -r "$PROC_ROOT/mounts" ] || return 0
  awk '$3 == "hugetlbfs" { print $2; exit }' "$PROC_ROOT/mounts"
}
wait_for() {   # SECONDS TEST...: true once TEST is, up to SECONDS (a tenth with a fake tree)
  local tries=$(( fake ? $1 : $1 * 10 ))
  shift
  while ! "$@"; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    sleep 0.1
  done
}
has_blocks() { [ -n "$(dev_blocks "$1")" ]; }
driver_is() { [ "$(dev_driver "$1")" = "$2" ]; }
ensure_driver() {   # DRIVER: loaded, or modprobe it (not with a fake tree)
  [ -d "$pci/drivers/$1" ] && return 0
  local err=""
  if [ "$fake" -eq 0 ] && command -v modprobe >/dev/null; then
    err="$(modprobe "$1" 2>&1)" || true
    [ -d "$pci/drivers/$1" ] && return 0
  fi
  echo "driver $1 is not available: ${err:-no $pci/drivers/$1}"
  return 1
}
bind() {   # ADDR DRIVER: unbind from the current driver, bind to DRIVER ("none": just unbind)
  local addr="$1" driver="$2" dev="$pci/devices/$1" current
  current="$(dev_driver "$addr")"
  if [ "$current" != none ]; then
    sysfs_write "$dev/driver/unbind" "$addr" || return 1
    wait_for 5 driver_is "$addr" none || { echo "still on $current after unbind"; return 1; }
  fi
  if [ "$driver" = "$DRIVER_OVERRIDE" ]; then
    sysfs_write "$dev/driver_override" "$driver" || return 1
  else
    sysfs_write "$dev/driver_override" "" || return 1   # back to ID-table matching
  fi
  [ "$driver" != none ] || return 0
  sysfs_write "$pci/drivers_probe" "$addr" || return 1
  if ! wait_for 5 driver_is "$addr" "$driver" && [ -e "$pci/drivers/$driver/bind" ]; then
    sysfs_write "$pci/drivers/$driver/bind" "$addr" || return 1
  fi
  wait_for 5 driver_is "$addr" "$driver" || { echo "bound to $(dev_driver "$addr") instead of $driver"; return 1; }
}
group_note() {   # ADDR -> ", group /dev/vfio/N" and a warning when the group is not viable
  local group dev other drv
  group="$(dev_group "$1")"
  [ -n "$group" ] || return 0
  printf ', group %s' "$DEV_ROOT/vfio/$group"
  for dev in "$SYSFS_ROOT/kernel/iommu_groups/$group/devices"/*; do
    [ -e "$dev" ] || continue
    other="${dev##*/}"
    [ "$other" != "$1" ] || continue
    drv="$(dev_driver "$other")"
    case "$drv" in none|vfio-pci|pci-stub|pcieport) ;;
      *) warn "IOMMU group $group also holds $other on $drv: unbind it too before using the group" ;;
    esac
  done
}
allowed() {   # ADDR -> empty if allowed, else the reason
  local a
  if [ -n "${PCI_ALLOWED:-}" ]; then
    local hit=0
    for a in $PCI_ALLOWED; do [ "$(normalize "$a")" != "$1" ] || hit=1; done
    [ "$hit" -eq 1 ] || { echo "not in PCI_ALLOWED"; return; }
  fi
  for a in ${PCI_BLOCKED:-}; do
    [ "$(normalize "$a")" != "$1" ] || { echo "in PCI_BLOCKED"; return; }
  done
}
need_root() {   # with a fake tree only when SETUP_UID (the test's stand-in for id -u) is set
  local uid="${SETUP_UID:-}"
  [ "$fake" -eq 1 ] || uid="$(id -u)"
  [ -z "$uid" ] || [ "$uid" -eq 0 ] ||
    die "must run as root: '$1' writes /sys/bus/pci and /sys/kernel/mm/hugepages (sudo $PROG $1)"
}
check_iommu() {
  [ "$DRIVER_OVERRIDE" = vfio-pci ] || return 0
  local groups=("$SYSFS_ROOT"/kernel/iommu_groups/*)
  if [ ! -e "${groups[0]}" ]; then
    die "no IOMMU: $SYSFS_ROOT/kernel/iommu_groups is empty; enable VT-d/AMD-Vi in the firmware and boot with intel_iommu=on (Intel) or amd_iommu=on (AMD) on the kernel command line (vfio-pci needs an IOMMU; DRIVER_OVERRIDE=uio_pci_generic does not)"
  fi
}
warn_missing_allowed() {   # PCI_ALLOWED entries that are no NVMe controller
  local a found
  for a in ${PCI_ALLOWED:-}; do
    found="$(normalize "$a")"
    [[ " $* " == *" $found "* ]] || warn "PCI_ALLOWED $a: no NVMe controller at $found"
  done
}

# --- hugepages
huge_size_kb() {
  local size="${HUGEPGSZ:-}"
  [ -n "$size" ] || size="$(awk '$1 == "Hugepagesize:" { print $2 }' "$PROC_ROOT/meminfo" 2>/dev/null || true)"
  echo "${size:-2048}"
}
huge_dir() { echo "$SYSFS_ROOT/kernel/mm/hugepages/hugepages-${1}kB"; }
huge_wanted() {   # SIZE_KB -> pages to reserve
  local n="$NRHUGE"
  if [ -z "$n" ]; then
    [[ "$HUGEMEM" =~ ^[0-9]+$ ]] || die "HUGEMEM must be MiB as a whole number: $HUGEMEM"
    n=$(( (HUGEMEM * 1024 + $1 - 1) / $1 ))
  fi
  [[ "$n" =~ ^[0-9]+$ ]] || die "NRHUGE must be a whole number: $n"
  echo "$n"
}

# --- commands
changes=0
cmd_config() {
  local addrs addr why driver ids blocks busy b result size dir before wanted after mnt
  to_array addrs nvme_controllers
  if [ "${#addrs[@]}" -eq 0 ]; then
    echo "no NVMe controllers found (PCI class $NVME_CLASS under $pci/devices): nothing to do"
    return 0
  fi
  need_root config
  load_state
  warn_missing_allowed "${addrs[@]}"
  # First the verdict on each controller, then (if any is to move) the IOMMU and driver
  # checks, then one line per controller in address order.
  declare -A note=()
  local todo=0
  for addr in "${addrs[@]}"; do
    why="$(allowed "$addr")"
    if [ -n "$why" ]; then note[$addr]="skipped: $why"; continue; fi
    driver="$(dev_driver "$addr")"
    if [ "$driver" = "$DRIVER_OVERRIDE" ]; then
      note[$addr]="already on $driver$(group_note "$addr") (unchanged)"
      continue
    fi
    busy=""
    to_array blocks dev_blocks "$addr"
    for b in "${blocks[@]}"; do
      busy="$(block_in_use "$b")"
      [ -z "$busy" ] || break
    done
    if [ -n "$busy" ]; then note[$addr]="skipped: in use ($busy)"; continue; fi
    todo=$((todo + 1))
  done
  if [ "$todo" -gt 0 ]; then
    check_iommu
    if ! result="$(ensure_driver "$DRIVER_OVERRIDE")"; then
      [ "$DRIVER_OVERRIDE" != vfio-pci ] || die "vfio-pci module missing: $result (the kernel needs CONFIG_VFIO_PCI; Debian's has it as a module)"
      die "$result"
    fi
  fi
  for addr in "${addrs[@]}"; do
    ids="$(dev_ids "$addr")"
    if [ -n "${note[$addr]:-}" ]; then echo "$addr ($ids): ${note[$addr]}"; continue; fi
    driver="$(dev_driver "$addr")"
    if [ -z "${state_driver[$addr]:-}" ]; then state_devices+=("$addr"); state_driver[$addr]="$driver"; fi
    save_state
    result="$(bind "$addr" "$DRIVER_OVERRIDE")" || die "$addr ($ids): $driver -> $DRIVER_OVERRIDE failed: $result"
    if [ "$DRIVER_OVERRIDE" = vfio-pci ] && [ -n "$(dev_group "$addr")" ]; then
      wait_for 5 test -e "$DEV_ROOT/vfio/$(dev_group "$addr")" ||
        die "$addr: bound to vfio-pci but $DEV_ROOT/vfio/$(dev_group "$addr") did not appear"
    fi
    echo "$addr ($ids): $driver -> $DRIVER_OVERRIDE$(group_note "$addr")"
    changes=$((changes + 1))
  done

  size="$(huge_size_kb)"
  dir="$(huge_dir "$size")"
  [ -e "$dir/nr_hugepages" ] || die "no $size kB hugepages in this kernel ($dir/nr_hugepages missing; set HUGEPGSZ)"
  wanted="$(huge_wanted "$size")"
  before="$(readfile "$dir/nr_hugepages")"
  if [ "$before" -ge "$wanted" ]; then
    echo "hugepages: $before of $size kB reserved (>= $wanted wanted; unchanged)"
  else
    [ -n "$state_huge" ] || state_huge="$size $before $wanted"
    result="$(sysfs_write "$dir/nr_hugepages" "$wanted")" || die "hugepages: $result"
    after="$(readfile "$dir/nr_hugepages")"
    state_huge="${state_huge% *} $after"
    save_state
    [ "$after" -gt "$before" ] || die "hugepages: asked for $wanted of $size kB, the kernel kept $after (not enough free memory)"
    echo "hugepages: $before -> $after ($size kB each)"
    [ "$after" -ge "$wanted" ] || warn "asked for $wanted hugepages, got $after (memory too small or fragmented)"
    changes=$((changes + 1))
  fi
  mnt="$(hugetlbfs_mount)"
  if [ -z "$mnt" ] && [ "$(readfile "$dir/nr_hugepages")" -gt 0 ]; then
    if [ "$fake" -eq 1 ]; then
      echo "hugetlbfs: none mounted (fake SYSFS_ROOT: not mounting $HUGEDIR)"
    else
      mkdir -p "$HUGEDIR"
      result="$(mount -t hugetlbfs -o "pagesize=${size}K" nodev "$HUGEDIR" 2>&1)" || die "mount hugetlbfs on $HUGEDIR: $result"
      state_mount="$HUGEDIR"
      save_state
      echo "hugetlbfs: mounted on $HUGEDIR"
      changes=$((changes + 1))
    fi
  fi

  if [ "$changes" -eq 0 ]; then
    echo "nothing changed"
  else
    echo "undo: ${state_given}$PROG reset"
  fi
}

cmd_reset() {
  local addrs addr ids driver original why result seen=() size dir now before after blocks
  to_array addrs nvme_controllers
  if [ "${#addrs[@]}" -eq 0 ] && [ ! -f "$STATE_FILE" ]; then
    echo "no NVMe controllers found and no state file $STATE_FILE: nothing to do"
    return 0
  fi
  need_root reset
  load_state
  if [ ! -f "$STATE_FILE" ]; then
    echo "no state file $STATE_FILE: config recorded nothing; controllers on $DRIVER_OVERRIDE go back to nvme, hugepages are left as they are"
  fi
  # Recorded controllers first, then any other on DRIVER_OVERRIDE (config of an older run).
  for addr in "${state_devices[@]}" "${addrs[@]}"; do
    [[ " ${seen[*]} " != *" $addr "* ]] || continue
    seen+=("$addr")
    why="$(allowed "$addr")"
    original="${state_driver[$addr]:-}"
    if [ ! -d "$pci/devices/$addr" ]; then
      echo "$addr: gone from the PCI bus (removed); its record is dropped"
      forget_device "$addr"
      save_state
      continue
    fi
    ids="$(dev_ids "$addr")"
    driver="$(dev_driver "$addr")"
    if [ -z "$original" ]; then
      [ "$driver" = "$DRIVER_OVERRIDE" ] || continue
      original=nvme
    fi
    if [ -n "$why" ]; then echo "$addr ($ids): skipped: $why"; continue; fi
    if [ "$driver" = "$original" ]; then
      echo "$addr ($ids): already on $original (unchanged)"
    else
      if [ "$original" != none ]; then
        result="$(ensure_driver "$original")" || die "$addr ($ids): $result"
      fi
      result="$(bind "$addr" "$original")" || die "$addr ($ids): $driver -> $original failed: $result"
      blocks=""
      if [ "$original" = nvme ]; then   # the namespaces show up after the controller's reset
        wait_for 10 has_blocks "$addr" || true
        blocks="$(dev_blocks "$addr" | tr '\n' ' ')"
        blocks="${blocks% }"
        blocks=" (${blocks:-no namespace yet})"
      fi
      echo "$addr ($ids): $driver -> $original$blocks"
      changes=$((changes + 1))
    fi
    forget_device "$addr"
    save_state
  done

  if [ "${#state_devices[@]}" -gt 0 ]; then
    echo "hugepages: left as they are (${state_devices[*]} still recorded in $STATE_FILE)"
  elif [ -n "$state_huge" ]; then
    read -r size before after <<<"$state_huge"
    dir="$(huge_dir "$size")"
    now="$(readfile "$dir/nr_hugepages")"
    if [ "$now" = "$before" ]; then
      echo "hugepages: $now of $size kB (as before config; unchanged)"
    else
      result="$(sysfs_write "$dir/nr_hugepages" "$before")" || die "hugepages: $result"
      echo "hugepages: $now -> $(readfile "$dir/nr_hugepages") ($size kB each; $before before config)"
      changes=$((changes + 1))
    fi
    state_huge=""
    save_state
  fi
  if [ "${#state_devices[@]}" -eq 0 ] && [ -n "$state_mount" ]; then
    if [ "$fake" -eq 0 ] && mountpoint -q "$state_mount"; then
      result="$(umount "$state_mount" 2>&1)" || die "umount $state_mount: $result (hugepages still in use?)"
      echo "hugetlbfs: unmounted $state_mount"
      changes=$((changes + 1))
    fi
    state_mount=""
    save_state
  fi
  [ "$changes" -gt 0 ] || echo "nothing changed"
}

cmd_status() {
  local addrs addr group driver blocks size dir mnt
  to_array addrs nvme_controllers
  if [ "${#addrs[@]}" -eq 0 ]; then
    echo "no NVMe controllers found (PCI class $NVME_CLASS under $pci/devices)"
  else
    printf '%-13s %-10s %-10s %-6s %s\n' address vendor:dev driver group "block devices / vfio"
    for addr in "${addrs[@]}"; do
      group="$(dev_group "$addr")"
      driver="$(dev_driver "$addr")"
      if [ "$driver" = vfio-pci ] && [ -n "$group" ]; then
        blocks="$DEV_ROOT/vfio/$group"
      else
        blocks="$(dev_blocks "$addr" | tr '\n' ' ')"
        blocks="${blocks% }"
      fi
      printf '%-13s %-10s %-10s %-6s %s\n' "$addr" "$(dev_ids "$addr" | tr ' ' :)" "$driver" "${group:--}" "${blocks:--}"
    done
  fi
  size="$(huge_size_kb)"
  dir="$(huge_dir "$size")"
  if [ -e "$dir/nr_hugepages" ]; then
    mnt="$(hugetlbfs_mount)"
    echo "hugepages ($size kB): $(readfile "$dir/nr_hugepages") reserved, $(readfile "$dir/free_hugepages" 2>/dev/null || echo '?') free; hugetlbfs $(if [ -n "$mnt" ]; then echo "mounted on $mnt"; else echo "not mounted"; fi)"
  else
    echo "hugepages ($size kB): not supported by this kernel"
  fi
  if [ -f "$STATE_FILE" ]; then
    load_state
    echo "state $STATE_FILE:"
    for addr in "${state_devices[@]}"; do echo "  $addr was on ${state_driver[$addr]}"; done
    [ -z "$state_huge" ] || echo "  hugepages: $(cut -d' ' -f2 <<<"$state_huge") before config, $(cut -d' ' -f3 <<<"$state_huge") after"
    [ -z "$state_mount" ] || echo "  hugetlbfs mounted by config on $state_mount"
  fi
}

[ $# -le 1 ] || { usage >&2; exit 2; }
case "${1:-config}" in
  config) cmd_config ;;
  reset) cmd_reset ;;
  status) cmd_status ;;
  help|-h|--help) usage ;;
  *) echo "setup.sh: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac
