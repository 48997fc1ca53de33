# Sourced by VM scenarios: verified I/O on a block device, whoever exports it (the kernel's
# nvme host, nvmf_hostd's NBD devices). Needs step() and fail() from the caller, and $logs.

# fio_verify TAG NAME FILE RW BS IODEPTH OFFSET SIZE: one fio job with verify=crc32c (direct
# I/O, libaio), output in $logs/TAG-fio-NAME.txt; fails the scenario on any error.
fio_verify() {
  local tag="$1" name="$2" file="$3" rw="$4" bs="$5" iodepth="$6" offset="$7" size="$8"
  local out="$logs/$tag-fio-$name.txt"
  timeout 300 fio --name="$name" --filename="$file" --ioengine=libaio --direct=1 \
    --rw="$rw" --bs="$bs" --iodepth="$iodepth" --offset="$offset" --size="$size" \
    --verify=crc32c --verify_fatal=1 --do_verify=1 --output="$out" ||
    { cat "$out"; fail "$tag: fio $name ($rw, $bs, QD $iodepth) with verify failed on $file"; }
  grep -E 'err=|WRITE:|READ:' "$out"
}

# ext4_round_trip TAG DEVICE MOUNTPOINT SCRATCH: mkfs.ext4, mount, write 8 MiB, umount, drop
# caches, mount again and compare; the file system stays mounted for the caller.
ext4_round_trip() {
  local tag="$1" dev="$2" mnt="$3" scratch="$4"
  mkfs.ext4 -F -q "$dev" || fail "$tag: mkfs.ext4 $dev failed"
  mount "$dev" "$mnt" || fail "$tag: mount $dev failed"
  head -c 8M /dev/urandom >"$scratch/payload"
  cp "$scratch/payload" "$mnt/payload"
  sync
  umount "$mnt" || fail "$tag: umount failed"
  echo 3 >/proc/sys/vm/drop_caches
  mount "$dev" "$mnt" || fail "$tag: second mount of $dev failed"
  cmp "$scratch/payload" "$mnt/payload" || fail "$tag: the file read back after a remount differs"
  df -h "$mnt" | tail -1
}
