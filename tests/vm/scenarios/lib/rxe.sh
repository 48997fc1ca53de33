# Sourced by VM scenarios: soft-RoCE on a guest-internal veth pair. Sets ADDR (veth0, with
# rxe0 on it) and PEER_ADDR (veth1). The pair exists in the guest and nowhere else.
# Needs step() and fail() from the caller.
readonly ADDR=10.0.0.1 PEER_ADDR=10.0.0.2
step "soft-RoCE on a guest-internal veth pair ($ADDR)"
modprobe rdma_rxe
modprobe rdma_ucm
ip link add veth0 type veth peer name veth1
ip addr add "$ADDR/24" dev veth0
ip addr add "$PEER_ADDR/24" dev veth1
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
rdma link show
devices="$(ibv_devices)"   # once: each run costs most of a second under TCG
echo "$devices"
awk 'NR > 2 { print $1 }' <<<"$devices" | grep -qx rxe0 || fail "ibv_devices does not list rxe0"
[ -e /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm after modprobe rdma_ucm"
