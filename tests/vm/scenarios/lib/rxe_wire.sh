# shellcheck shell=bash
# Sourced by VM scenarios that must see RoCEv2 on the wire: two soft-RoCE devices on the two
# ends of one veth pair, both in the root network namespace, so host and target use different
# rxe devices and their traffic crosses veth0/veth1 as real UDP 4791 frames that a capture
# on veth0 sees. Sets ADDR (veth0, rxe0: the target side) and PEER_ADDR (veth1, rxe1: the host
# side). Needs step() and fail() from the caller.
#
# Why not two network namespaces (one rxe device in each), as ../../../../../shared/design/VM.md
# suggests: on the 6.1 guest kernel rdma_rxe routes and receives in the initial namespace only
# (its UDP socket lives there), so an rdma_cm connect from a namespace ends in
# RDMA_CM_EVENT_UNREACHABLE and no frame reaches the veth (tried: 0 packets captured). In one
# namespace both addresses are local, and the kernel would deliver 10.0.0.2 -> 10.0.0.1 over
# lo, where rxe drops it (no rxe device on lo). Policy routing fixes that: the `local` table is
# consulted for packets arriving on the veths only, output lookups use table 100, which sends
# each address out of the other end of the pair; accept_local lets a packet whose source
# address is local in. Static neighbour entries: when the neighbour needed ARP, rdma_cm (6.1)
# reported the address resolved only once its resolve timeout ran out, although the ARP reply
# came within milliseconds, and nvmf_perf, which passes its whole 5 s connect deadline as that
# timeout, failed with "connect timed out" (2 of 2 tries; rping, with 2 s, merely waits).
readonly ADDR=10.0.0.1 PEER_ADDR=10.0.0.2
step "soft-RoCE on both ends of a veth pair: rxe0 on veth0 ($ADDR, target), rxe1 on veth1 ($PEER_ADDR, host)"
modprobe rdma_rxe
modprobe rdma_ucm
ip link add veth0 type veth peer name veth1
ip addr add "$ADDR/24" dev veth0
ip addr add "$PEER_ADDR/24" dev veth1
for conf in all default veth0 veth1; do
  sysctl -q -w "net.ipv4.conf.$conf.accept_local=1" "net.ipv4.conf.$conf.rp_filter=0"
done
ip link set veth0 up
ip link set veth1 up
ip rule add pref 10 iif veth0 lookup local
ip rule add pref 11 iif veth1 lookup local
ip rule add pref 20 lookup 100
ip route add "$ADDR" dev veth1 src "$PEER_ADDR" table 100
ip route add "$PEER_ADDR" dev veth0 src "$ADDR" table 100
ip rule add pref 100 lookup local
ip rule del pref 0 lookup local
ip neigh replace "$ADDR" lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
ip neigh replace "$PEER_ADDR" lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
ip route get "$ADDR" | grep -q " dev veth1 " || fail "the route to $ADDR does not leave through veth1: $(ip route get "$ADDR")"
ip route get "$PEER_ADDR" | grep -q " dev veth0 " || fail "the route to $PEER_ADDR does not leave through veth0: $(ip route get "$PEER_ADDR")"
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
rdma link show
devices="$(ibv_devices | awk 'NR > 2 { print $1 }')"   # once: most of a second under TCG
for dev in rxe0 rxe1; do
  grep -qx "$dev" <<<"$devices" || fail "ibv_devices does not list $dev"
done
[ -e /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm after modprobe rdma_ucm"
