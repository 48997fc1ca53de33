# shellcheck shell=bash
# Sourced by VM scenarios: the Linux kernel's NVMe-oF target (nvmet + nvmet-rdma) through
# configfs, exporting a null_blk device (4 KiB blocks, 1 GiB, discards writes) over RDMA.
# Needs fail() from the caller.
readonly NVMET=/sys/kernel/config/nvmet

# nvmet_export NQN ADDR PORT: null_blk's /dev/nullb0 as namespace 1 of NQN (any host), on
# an RDMA port at ADDR:PORT.
nvmet_export() {
  local nqn="$1" addr="$2" trsvcid="$3" sub port _
  modprobe null_blk nr_devices=1 gb=1 bs=4096
  modprobe nvmet
  modprobe nvmet-rdma
  mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
  [ -d "$NVMET" ] || fail "no $NVMET after modprobe nvmet"
  for _ in $(seq 1 50); do [ -b /dev/nullb0 ] && break; sleep 0.1; done
  [ -b /dev/nullb0 ] || fail "no /dev/nullb0 after modprobe null_blk"
  sub="$NVMET/subsystems/$nqn"
  mkdir "$sub"
  echo 1 >"$sub/attr_allow_any_host"
  mkdir "$sub/namespaces/1"
  echo -n /dev/nullb0 >"$sub/namespaces/1/device_path"
  echo 1 >"$sub/namespaces/1/enable"
  port="$NVMET/ports/1"
  mkdir "$port"
  echo rdma >"$port/addr_trtype"
  echo ipv4 >"$port/addr_adrfam"
  echo "$addr" >"$port/addr_traddr"
  echo "$trsvcid" >"$port/addr_trsvcid"
  ln -s "$sub" "$port/subsystems/$nqn"
}

# nvmet_unexport NQN: undoes nvmet_export (hosts must have disconnected).
nvmet_unexport() {
  local sub="$NVMET/subsystems/$1" port="$NVMET/ports/1"
  rm "$port/subsystems/$1"
  rmdir "$port"
  echo 0 >"$sub/namespaces/1/enable"
  rmdir "$sub/namespaces/1"
  rmdir "$sub"
}
