# Sourced by VM scenarios: the kernel's NVMe host, seen through sysfs (no udev in the guest;
# devtmpfs makes the /dev nodes).

# nvme_disk_of NQN: the namespace block device (nvmeXnY) the kernel host holds for NQN; empty
# if none. With native multipath the disk's parent is the nvme-subsystem, without it the
# controller: both have subsysnqn.
nvme_disk_of() {
  local dir name
  for dir in /sys/block/nvme*; do
    name="$(basename "$dir")"
    [[ "$name" =~ ^nvme[0-9]+n[0-9]+$ ]] || continue
    [ "$(cat "$dir/device/subsysnqn" 2>/dev/null)" = "$1" ] && { echo "$name"; return; }
  done
  true
}

# nvme_wait_disk NQN: after nvme connect, waits up to 10 s for NQN's block device and prints
# its name; prints nothing if it never came.
nvme_wait_disk() {
  local disk _
  for _ in $(seq 1 100); do
    disk="$(nvme_disk_of "$1")"
    [ -n "$disk" ] && [ -b "/dev/$disk" ] && { echo "$disk"; return; }
    sleep 0.1
  done
  true
}
