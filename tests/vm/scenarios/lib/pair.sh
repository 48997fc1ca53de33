# shellcheck shell=bash
# Sourced by scenarios that tests/vm/vm-pair.sh runs in two guests at once, one per side of
# the fabric, as on two machines: the "target" guest and the "host" guest, linked by a
# virtio-net NIC (eth0) and sharing the writable folder /nvmf-pair for their hand-shakes.
# Sets up soft-RoCE (rxe0) on the link and sets ROLE, TARGET_ADDR, HOST_ADDR and ADDR (the
# target's address: where it listens, where the host connects). Each side marks its failure
# in the folder (failed.ROLE) when the scenario exits non-zero, so that the other stops
# waiting. Needs step() and fail() from the caller.
readonly PAIR=/nvmf-pair TARGET_ADDR=10.0.1.1 HOST_ADDR=10.0.1.2
ROLE="${NVMF_VM_PAIR_ROLE:-}"
case "$ROLE" in
  target | host) ;;
  *) fail "runs in one of vm-pair.sh's two guests (NVMF_VM_PAIR_ROLE is '$ROLE')" ;;
esac
readonly ROLE ADDR="$TARGET_ADDR"
PEER=host
[ "$ROLE" = target ] || PEER=target
readonly PEER
[ -d "$PAIR" ] || fail "no shared folder $PAIR"
trap 'rc=$?; [ "$rc" -eq 0 ] || echo "exit $rc" >"$PAIR/failed.$ROLE"' EXIT

# pair_post NAME [TEXT]: NAME appears in the shared folder whole (written, then renamed).
pair_post() {
  printf '%s\n' "${2:-}" >"$PAIR/.$1.tmp"
  mv "$PAIR/.$1.tmp" "$PAIR/$1"
}

# pair_wait NAME [SECONDS (600)] [INTERVAL (0.05)]: returns once the other guest has posted
# NAME; fails when it has failed instead, or after SECONDS.
pair_wait() {
  local deadline=$((SECONDS + ${2:-600}))
  until [ -e "$PAIR/$1" ]; do
    [ ! -e "$PAIR/failed.$PEER" ] || fail "the $PEER guest failed ($(cat "$PAIR/failed.$PEER")) while this one waited for $1"
    [ "$SECONDS" -lt "$deadline" ] || fail "waited ${2:-600} s for $1 from the $PEER guest"
    sleep "${3:-0.05}"
  done
}

# The link: whichever NIC the guest has (virtio-net, no udev: eth0), its address, rxe0 on it.
pair_nic="$(ls /sys/class/net | grep -v '^lo$' | head -n 1)"
[ -n "$pair_nic" ] || fail "no network interface (is virtio_net loaded?)"
my_addr="$HOST_ADDR"
[ "$ROLE" = host ] || my_addr="$TARGET_ADDR"
step "the $ROLE guest: $pair_nic $my_addr/24, soft-RoCE rxe0 on it (the $PEER guest is the other end)"
modprobe rdma_rxe
modprobe rdma_ucm
ip addr add "$my_addr/24" dev "$pair_nic"
ip link set "$pair_nic" up
rdma link add rxe0 type rxe netdev "$pair_nic"
ibv_devices | awk 'NR > 2 { print $1 }' | grep -qx rxe0 || fail "ibv_devices does not list rxe0"
[ -e /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm after modprobe rdma_ucm"
pair_post "up.$ROLE" "$my_addr"
pair_wait "up.$PEER" 300 0.2
step "both guests are up"
