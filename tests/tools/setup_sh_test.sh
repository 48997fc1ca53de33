#!/usr/bin/env bash
# scripts/setup.sh against a fake sysfs/dev/proc tree (no hardware, no root needed): two
# emulated NVMe controllers (1b36:0010, IOMMU groups 7 and 8), the second with a partition
# mounted on /mnt/data, plus a virtio device that must be left alone. A small hook
# (SYSFS_WRITE_HOOK) plays the kernel: a write to unbind / drivers_probe / bind moves the
# device's driver symlink, creates or removes the nvme block devices and /dev/vfio/N. Checks
# config / status / reset output line by line and the files they leave.
#   setup_sh_test.sh [SETUP_SH]   (default: ../../scripts/setup.sh)
set -uo pipefail
setup="${1:-$(cd "$(dirname "$0")/../.." && pwd)/scripts/setup.sh}"
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

# The fake kernel: called by setup.sh as HOOK FILE VALUE after each sysfs write.
cat >"$work/hook.sh" <<'EOF'
#!/usr/bin/env bash
set -eu
file="$1" value="$2"
sys="$SYSFS_ROOT" dev="$DEV_ROOT"
echo "${file#"$sys"/} <- $value" >>"$sys/../writes.log"
unbind() {
  local d="$sys/bus/pci/devices/$1" drv ctrl ns
  drv="$(basename "$(readlink "$d/driver")")"
  rm -f "$d/driver" "$sys/bus/pci/drivers/$drv/$1"
  if [ "$drv" = nvme ]; then
    for ns in "$d"/nvme/nvme*/nvme*n*; do
      [ -e "$ns" ] || continue
      rm -rf "$sys/block/$(basename "$ns")" "$dev/$(basename "$ns")"
    done
    rm -rf "$d/nvme"
  fi
  [ "$drv" != vfio-pci ] || rm -f "$dev/vfio/$(basename "$(readlink "$d/iommu_group")")"
}
bindto() {
  local d="$sys/bus/pci/devices/$1" k=0
  [ ! -e "$d/driver" ] || { echo "$1 already bound" >&2; exit 1; }
  [ -d "$sys/bus/pci/drivers/$2" ] || return 0   # no such driver loaded: stays unbound
  ln -s "$sys/bus/pci/drivers/$2" "$d/driver"
  ln -s "$d" "$sys/bus/pci/drivers/$2/$1"
  if [ "$2" = nvme ]; then
    while [ -e "$sys/block/nvme${k}n1" ]; do k=$((k + 1)); done
    mkdir -p "$d/nvme/nvme$k/nvme${k}n1" "$d/nvme/nvme$k/ng${k}n1" "$sys/block/nvme${k}n1/holders"
    echo "259:$((k * 2))" >"$sys/block/nvme${k}n1/dev"
    touch "$dev/nvme${k}n1"
  fi
  [ "$2" != vfio-pci ] || touch "$dev/vfio/$(basename "$(readlink "$d/iommu_group")")"
}
case "$file" in
  */unbind) unbind "$value" ;;
  */drivers_probe)
    override="$(cat "$sys/bus/pci/devices/$value/driver_override")"
    [ -e "$sys/bus/pci/devices/$value/driver" ] || bindto "$value" "${override:-nvme}" ;;
  */bind) bindto "$value" "$(basename "$(dirname "$file")")" ;;
  */nr_hugepages)   # FAKE_HUGE_MAX: the memory there is
    if [ -n "${FAKE_HUGE_MAX:-}" ] && [ "$value" -gt "$FAKE_HUGE_MAX" ]; then echo "$FAKE_HUGE_MAX" >"$file"; fi
    cp "$file" "$(dirname "$file")/free_hugepages" ;;
esac
EOF
chmod +x "$work/hook.sh"

# make_tree DIR [nvme-count]: DIR/sys, DIR/dev, DIR/proc. Controller K (0-based) is
# 0000:0K+1:00.0 in IOMMU group 7+K with block device nvmeKn1; controller 1 has partition
# nvme1n1p1 mounted on /mnt/data.
make_tree() {
  local t="$1" count="${2:-2}" k addr d group
  local sys="$t/sys"
  mkdir -p "$sys/bus/pci/devices" "$sys/bus/pci/drivers"/{nvme,vfio-pci,virtio-pci} \
    "$sys/kernel/iommu_groups" "$sys/kernel/mm/hugepages/hugepages-2048kB" "$sys/block" \
    "$t/dev/vfio" "$t/proc/self"
  touch "$sys/bus/pci/drivers_probe"
  for driver in nvme vfio-pci virtio-pci; do touch "$sys/bus/pci/drivers/$driver"/{bind,unbind}; done
  echo 0 >"$sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
  echo 0 >"$sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
  printf 'MemTotal:        2000000 kB\nHugepagesize:       2048 kB\n' >"$t/proc/meminfo"
  echo "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0" >"$t/proc/mounts"
  echo "22 1 0:21 / / rw,relatime - overlay overlay rw" >"$t/proc/self/mountinfo"
  : >"$t/proc/swaps"
  # A virtio device (not NVMe: must not be touched), group 2.
  d="$sys/bus/pci/devices/0000:00:02.0"
  mkdir -p "$d" "$sys/kernel/iommu_groups/2/devices"
  echo 0x000200 >"$d/class"; echo 0x1af4 >"$d/vendor"; echo 0x1009 >"$d/device"; : >"$d/driver_override"
  ln -s "$sys/kernel/iommu_groups/2" "$d/iommu_group"
  ln -s "$d" "$sys/kernel/iommu_groups/2/devices/0000:00:02.0"
  ln -s "$sys/bus/pci/drivers/virtio-pci" "$d/driver"
  for ((k = 0; k < count; k++)); do
    addr="0000:0$((k + 1)):00.0" group=$((7 + k))
    d="$sys/bus/pci/devices/$addr"
    mkdir -p "$d" "$sys/kernel/iommu_groups/$group/devices"
    echo 0x010802 >"$d/class"; echo 0x1b36 >"$d/vendor"; echo 0x0010 >"$d/device"; : >"$d/driver_override"
    ln -s "$sys/kernel/iommu_groups/$group" "$d/iommu_group"
    ln -s "$d" "$sys/kernel/iommu_groups/$group/devices/$addr"
    ln -s "$sys/bus/pci/drivers/nvme" "$d/driver"
    ln -s "$d" "$sys/bus/pci/drivers/nvme/$addr"
    mkdir -p "$d/nvme/nvme$k/nvme${k}n1" "$d/nvme/nvme$k/ng${k}n1" "$sys/block/nvme${k}n1/holders"
    echo "259:$((k * 2))" >"$sys/block/nvme${k}n1/dev"
    touch "$t/dev/nvme${k}n1"
  done
  if [ "$count" -ge 2 ]; then
    mkdir -p "$sys/block/nvme1n1/nvme1n1p1/holders"
    echo 259:3 >"$sys/block/nvme1n1/nvme1n1p1/dev"
    echo "40 22 259:3 / /mnt/data rw,relatime shared:1 - ext4 /dev/nvme1n1p1 rw" >>"$t/proc/self/mountinfo"
  fi
}

# run NAME TREE [VAR=VALUE...] -- ARGS: setup.sh on TREE; sets out (stdout), err, rc.
run() {
  local tree="$1"
  shift
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  out="$(env SYSFS_ROOT="$tree/sys" DEV_ROOT="$tree/dev" PROC_ROOT="$tree/proc" \
    STATE_FILE="$tree/state" SYSFS_WRITE_HOOK="$work/hook.sh" "${vars[@]}" \
    "$setup" "$@" 2>"$work/stderr")"
  rc=$?
  err="$(cat "$work/stderr")"
}
has_line() { grep -qxF -- "$2" <<<"$1"; }   # has_line TEXT LINE: LINE exactly, alone on a line
driver_of() { local l; if l="$(readlink "$1/sys/bus/pci/devices/$2/driver")"; then basename "$l"; else echo none; fi; }
expect_line() {   # NAME LINE
  has_line "$out" "$2"
  check "$1: prints '$2'" $? "status $rc; stdout:
$out
stderr: $err"
}
expect_rc() { [ "$rc" -eq "$2" ]; check "$1: exits $2" $? "status $rc; stdout: $out; stderr: $err"; }

t="$work/t1"
make_tree "$t"
A=0000:01:00.0 B=0000:02:00.0

# --- status before anything
run "$t" -- status
expect_rc "status" 0
[[ "$out" == *"$A"*"1b36:0010"*nvme*7*nvme0n1* ]]; check "status lists $A on nvme, group 7, nvme0n1" $? "$out"
[[ "$out" == *"$B"*"1b36:0010"*nvme*8*nvme1n1* ]]; check "status lists $B on nvme, group 8, nvme1n1" $? "$out"
[[ "$out" != *0000:00:02.0* ]]; check "status ignores the virtio device" $? "$out"
expect_line "status" "hugepages (2048 kB): 0 reserved, 0 free; hugetlbfs mounted on /dev/hugepages"

# --- config: A goes to vfio-pci, B (mounted partition) is refused, hugepages reserved
run "$t" NRHUGE=64 -- config
expect_rc "config" 0
expect_line "config" "$A (1b36 0010): nvme -> vfio-pci, group $t/dev/vfio/7"
expect_line "config" "$B (1b36 0010): skipped: in use (nvme1n1p1 is mounted on /mnt/data)"
expect_line "config" "hugepages: 0 -> 64 (2048 kB each)"
expect_line "config" "undo: STATE_FILE=$t/state $setup reset"
[ "$(grep -c . <<<"$out")" -eq 4 ]; check "config prints four lines" $? "$out"
[[ "$(head -n 1 <<<"$out")" == "$A "* ]]; check "config prints the controllers in address order" $? "$out"
[ "$(driver_of "$t" $A)" = vfio-pci ]; check "config: $A's driver symlink is vfio-pci" $? "$(driver_of "$t" $A)"
[ "$(cat "$t/sys/bus/pci/devices/$A/driver_override")" = vfio-pci ]; check "config: driver_override written" $? ""
[ -e "$t/dev/vfio/7" ]; check "config: /dev/vfio/7 exists" $? ""
[ ! -e "$t/dev/nvme0n1" ]; check "config: nvme0n1 is gone" $? ""
[ "$(driver_of "$t" $B)" = nvme ]; check "config: $B stays on nvme" $? "$(driver_of "$t" $B)"
[ "$(driver_of "$t" 0000:00:02.0)" = virtio-pci ]; check "config: virtio untouched" $? ""
[ "$(cat "$t/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" = 64 ]; check "config: nr_hugepages 64" $? ""
grep -qx "device $A nvme" "$t/state" && grep -qx "hugepages 2048 0 64" "$t/state"
check "config: the state file records $A on nvme and hugepages 0 -> 64" $? "$(cat "$t/state" 2>&1)"
writes_before="$(cat "$t/writes.log")"
grep -q "^bus/pci/devices/$A/driver/unbind <- $A\$" <<<"$writes_before" &&
  grep -q "^bus/pci/devices/$A/driver_override <- vfio-pci\$" <<<"$writes_before" &&
  grep -q "^bus/pci/drivers_probe <- $A\$" <<<"$writes_before"
check "config: wrote unbind, driver_override, drivers_probe" $? "$writes_before"

# --- config again: nothing changes
state_before="$(cat "$t/state")"
run "$t" NRHUGE=64 -- config
expect_rc "config twice" 0
expect_line "config twice" "$A (1b36 0010): already on vfio-pci, group $t/dev/vfio/7 (unchanged)"
expect_line "config twice" "hugepages: 64 of 2048 kB reserved (>= 64 wanted; unchanged)"
expect_line "config twice" "nothing changed"
[ "$(cat "$t/writes.log")" = "$writes_before" ]; check "config twice: no sysfs write" $? "$(cat "$t/writes.log")"
[ "$(cat "$t/state")" = "$state_before" ]; check "config twice: state unchanged" $? "$(cat "$t/state")"

# --- status after config
run "$t" -- status
[[ "$out" == *"$A"*vfio-pci*7*"$t/dev/vfio/7"* ]]; check "status shows $A on vfio-pci" $? "$out"
expect_line "status" "  $A was on nvme"
expect_line "status" "hugepages (2048 kB): 64 reserved, 64 free; hugetlbfs mounted on /dev/hugepages"

# --- reset: back to nvme, hugepages restored, state file gone
run "$t" -- reset
expect_rc "reset" 0
expect_line "reset" "$A (1b36 0010): vfio-pci -> nvme (nvme0n1)"
expect_line "reset" "hugepages: 64 -> 0 (2048 kB each; 0 before config)"
[ "$(driver_of "$t" $A)" = nvme ]; check "reset: $A on nvme" $? "$(driver_of "$t" $A)"
[ -z "$(cat "$t/sys/bus/pci/devices/$A/driver_override")" ]; check "reset: driver_override cleared" $? ""
[ ! -e "$t/dev/vfio/7" ] && [ -e "$t/dev/nvme0n1" ]; check "reset: /dev/vfio/7 gone, nvme0n1 back" $? ""
[ "$(cat "$t/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" = 0 ]; check "reset: nr_hugepages 0" $? ""
[ ! -e "$t/state" ]; check "reset: state file removed" $? ""
run "$t" -- reset
expect_rc "reset twice" 0
expect_line "reset twice" "nothing changed"

# --- PCI_ALLOWED (short form) picks B once it is unmounted; A is left alone; a partial
#     reset keeps the hugepages until the last recorded controller is back
sed -i '/mnt\/data/d' "$t/proc/self/mountinfo"
run "$t" PCI_ALLOWED="02:00.0" NRHUGE=8 -- config
expect_rc "PCI_ALLOWED" 0
expect_line "PCI_ALLOWED" "$A (1b36 0010): skipped: not in PCI_ALLOWED"
expect_line "PCI_ALLOWED" "$B (1b36 0010): nvme -> vfio-pci, group $t/dev/vfio/8"
[ "$(driver_of "$t" $A)" = nvme ] && [ "$(driver_of "$t" $B)" = vfio-pci ]
check "PCI_ALLOWED: only $B moved" $? "$(driver_of "$t" $A) $(driver_of "$t" $B)"
run "$t" PCI_BLOCKED="$A" NRHUGE=8 -- config
expect_line "PCI_BLOCKED" "$A (1b36 0010): skipped: in PCI_BLOCKED"
run "$t" PCI_ALLOWED="$A" -- reset
expect_line "partial reset" "$B (1b36 0010): skipped: not in PCI_ALLOWED"
expect_line "partial reset" "hugepages: left as they are ($B still recorded in $t/state)"
[ "$(driver_of "$t" $B)" = vfio-pci ]; check "partial reset: $B stays on vfio-pci" $? ""
run "$t" -- reset
expect_line "reset" "$B (1b36 0010): vfio-pci -> nvme (nvme1n1)"
expect_line "reset" "hugepages: 8 -> 0 (2048 kB each; 0 before config)"

# --- a holder (device-mapper on nvme0n1) makes A busy too; an unknown PCI_ALLOWED warns
mkdir -p "$t/sys/block/nvme0n1/holders/dm-0"
run "$t" PCI_ALLOWED="$A 0000:09:00.0" NRHUGE=8 -- config
expect_line "holder" "$A (1b36 0010): skipped: in use (nvme0n1 is held by dm-0)"
[[ "$err" == *"PCI_ALLOWED 0000:09:00.0: no NVMe controller at 0000:09:00.0"* ]]; check "unknown PCI_ALLOWED warns" $? "$err"
rmdir "$t/sys/block/nvme0n1/holders/dm-0"
run "$t" -- reset

# --- too little memory for the hugepages asked for: warns with the count it got
run "$t" PCI_ALLOWED=none NRHUGE=64 FAKE_HUGE_MAX=10 -- config
expect_line "short hugepages" "hugepages: 0 -> 10 (2048 kB each)"
[[ "$err" == *"asked for 64 hugepages, got 10"* ]]; check "short hugepages warns" $? "$err"
run "$t" -- reset
expect_line "short hugepages reset" "hugepages: 10 -> 0 (2048 kB each; 0 before config)"

# --- failures, each on a fresh tree: exit 1, the reason on stderr, nothing bound
t2="$work/t2"
make_tree "$t2"
rm -rf "$t2/sys/kernel/iommu_groups"/*
run "$t2" -- config
[ "$rc" -eq 1 ] && [[ "$err" == *"no IOMMU"*"intel_iommu=on"*"amd_iommu=on"* ]]
check "no IOMMU: exit 1, says to boot with intel_iommu=on / amd_iommu=on" $? "status $rc; $err"
[ "$(driver_of "$t2" $A)" = nvme ]; check "no IOMMU: $A untouched" $? ""

t3="$work/t3"
make_tree "$t3"
rm -rf "$t3/sys/bus/pci/drivers/vfio-pci"
run "$t3" -- config
[ "$rc" -eq 1 ] && [[ "$err" == *"vfio-pci module missing"* ]]
check "no vfio-pci: exit 1, says the module is missing" $? "status $rc; $err"

t4="$work/t4"
make_tree "$t4"
run "$t4" SETUP_UID=1000 -- config
[ "$rc" -eq 1 ] && [[ "$err" == *"must run as root"* ]]
check "not root: exit 1, says so" $? "status $rc; $err"
run "$t4" SETUP_UID=1000 -- status
expect_rc "status as non-root" 0
: >"$t4/proc/mounts"   # no hugetlbfs: a real run mounts one on HUGEDIR, a fake one says so
run "$t4" PCI_ALLOWED=none NRHUGE=2 -- config
expect_line "no hugetlbfs" "hugetlbfs: none mounted (fake SYSFS_ROOT: not mounting $t4/dev/hugepages)"

t5="$work/t5"
make_tree "$t5"
run "$t5" SYSFS_WRITE_HOOK= -- config   # no fake kernel: the writes change no symlink
[ "$rc" -eq 1 ] && [[ "$err" == *"$A (1b36 0010): nvme -> vfio-pci failed: still on nvme after unbind"* ]]
check "a bind that does not happen is an error" $? "status $rc; $err"

t6="$work/t6"
make_tree "$t6" 0
run "$t6" -- config
expect_rc "no NVMe: config" 0
expect_line "no NVMe: config" "no NVMe controllers found (PCI class 0x010802 under $t6/sys/bus/pci/devices): nothing to do"
[ "$(cat "$t6/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" = 0 ]; check "no NVMe: no hugepages reserved" $? ""
run "$t6" -- status
expect_rc "no NVMe: status" 0
expect_line "no NVMe: status" "no NVMe controllers found (PCI class 0x010802 under $t6/sys/bus/pci/devices)"
run "$t6" -- bogus
expect_rc "unknown command" 2

check_summary "setup.sh"
