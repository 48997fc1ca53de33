#!/bin/bash
# VM scenario 5, wire check: what our host and target put on the wire, decoded by someone
# else's dissector. Host (nvmf_perf, rxe1 on veth1) and target (nvmf_tgt, rxe0 on veth0) use two
# soft-RoCE devices on the two ends of a veth pair (lib/rxe_wire.sh; the two-namespace set-up of
# VM.md does not work on this kernel), so their RoCEv2 frames (UDP 4791) cross veth0, where
# dumpcap (tshark's capture engine; tcpdump is not installed) captures the frames that start
# each message (CAPTURE_FILTER below: no ACKs, no middle packets). Two sessions, one after the
# other, each a short verified 8 KiB 50/50 random run (8 KiB > the 4 KiB in-capsule limit:
# every read and write uses a keyed SGL):
#   a. nvmf_tgt with max_queue_depth 128, nvmf_perf -q 4: the I/O queue nvmf_perf asks for,
#      max(128, q x namespaces + 1) = 128 entries, is granted whole;
#   b. nvmf_tgt with max_queue_depth 64, nvmf_perf -q 8: nvmf_perf wants 128 but the target's
#      CAP.MQES allows 64, so the host asks for 64 on the wire and is granted 64.
# tshark 4.0 decodes UDP 4791 as RRoCE by default (no -d needed) and its nvme-rdma dissector
# (heuristic, for CM service IDs of port 4420) decodes the rest. lib/nvme_rdma_wire.awk then
# asserts, per session, on the -T fields output: the CM REQ private data (RECFMT 0; admin queue
# QID 0, HRQSIZE 32, HSQSIZE 31, CNTLID 0; I/O queue QID 1, HRQSIZE = entries, HSQSIZE =
# entries - 1, CNTLID = the controller ID the admin Connect returned), the CM REP's CRQSIZE
# (32; entries) and the RTU; the Fabrics Connects (0x7f/0x01: QID, SQSIZE; their data: SUBNQN,
# CNTLID 0xffff then the controller's; the CQE's CNTLID), Property Get/Set (0x7f/0x04,
# 0x7f/0x00), admin Identify (0x06), and on the I/O queue only reads (0x02) and writes (0x01),
# as many as nvmf_perf counted, with NSID 1 and 16 blocks; every CQE with status 0; one RDMA
# READ per write (and per Connect: its data), one RDMA WRITE per read; a CM DREQ per queue.
# What tshark 4.0.17 does not decode here: in one pass it leaves the CM REQ's NVMe private
# data undecoded (only the REP's CRQSIZE shows), so this runs `tshark -2` (two passes), which
# decodes both. It prints HSQSIZE raw (0's based: 31) with -T fields but as 32 in the tree
# view, and NLB as a count (16 for NLB 15). It decodes a command capsule only when it fits one
# RoCE packet (SEND only): a 4 KiB in-capsule write (SEND first/middle/last at path MTU 1024)
# would not be decoded, hence 8 KiB I/O.
# Two halves: in the guest (vm-run.sh wire_rxe) the capture and the sessions, which leave the
# capture and what each session must show in the results' logs/; on the host (`wire_rxe.sh
# --host`, which ctest vm_wire_rxe runs and which boots the guest) tshark's decoding and the
# checks. The same tshark either way (the guest's root is the host's), but under TCG its two
# passes over the ~6,000 frames took 55 s of the 137 s scenario.
#   wire_rxe.sh --host BUILD_DIR RESULTS_DIR [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN (2)]]]
#   wire_rxe.sh [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN (2)]]]   (in the guest, run by vm-run.sh)
# The binaries default to NVMF_BUILD_DIR's.
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "wire_rxe: FAIL: $*"; exit 1; }
here="$(cd "$(dirname "$0")" && pwd -P)"
readonly BLOCK_SIZE=512 IO_SIZE=8192 ADMIN_ENTRIES=32

# decode_and_check LOGS (on the host): tshark -2 over LOGS/wire.pcap, lib/nvme_rdma_wire.awk
# over what it decoded, against LOGS/wire-expect.sh (per session the NQN, the I/O queue entries
# granted and the I/Os nvmf_perf counted; the two addresses), as the guest wrote them.
decode_and_check() {
  local logs="$1" nqns entries ios summary addr peer_addr entries_a entries_b field rc=0
  # shellcheck source=/dev/null
  source "$logs/wire-expect.sh" || fail "no $logs/wire-expect.sh: the guest half did not finish"
  local fields=(frame.number infiniband.bth.opcode
    infiniband.mad.attributeid infiniband.mad.transactionid infiniband.cm.req.serviceid.dport
    infiniband.cm.req.ip_cm.sip4 infiniband.cm.req.ip_cm.dip4
    nvme-rdma.cm.req.recfmt nvme-rdma.cm.req.qid nvme-rdma.cm.req.hrqsize nvme-rdma.cm.req.hsqsize
    nvme-rdma.cm.req.cntlid nvme-rdma.cm.rsp.recfmt nvme-rdma.cm.rsp.crqsize
    nvme-rdma.cmd.qid nvme.cmd.opc nvme.fabrics.cmd.opc nvme.fabrics.cmd.fctype
    nvme.fabrics.cmd.connect.qid nvme.fabrics.cmd.connect.sqsize
    nvme.fabrics.cmd.connect.data.subnqn nvme.fabrics.cmd.connect.data.cntrlid
    nvme.fabrics.cqe.connect.cntrlid nvme.cqe.status nvme.cmd.nsid nvme.cmd.nlb)
  local field_args=()
  for field in "${fields[@]}"; do field_args+=(-e "$field"); done
  echo "== host: tshark -2 -r wire.pcap -Y 'infiniband.mad || nvme-rdma' -T fields (${#fields[@]} fields)"
  tshark -2 -r "$logs/wire.pcap" -Y 'infiniband.mad || nvme-rdma' -T fields -E header=y \
    -E separator=/t -E occurrence=f "${field_args[@]}" >"$logs/wire-fields.tsv" 2>"$logs/tshark.log" ||
    { cat "$logs/tshark.log"; fail "tshark failed (above)"; }
  echo "$(($(wc -l <"$logs/wire-fields.tsv") - 1)) CM and NVMe/RDMA frames decoded (logs/wire-fields.tsv; the capture: logs/wire.pcap)"
  echo "== host: checking the decoded fields"
  printf '%s' "$summary"
  awk -F'\t' -v nqns="$nqns" -v entries="$entries" -v ios="$ios" -v admin="$ADMIN_ENTRIES" \
    -v nlb=$((IO_SIZE / BLOCK_SIZE)) -v port=4420 -v addr="$addr" -v peer="$peer_addr" \
    -f "$here/lib/nvme_rdma_wire.awk" "$logs/wire-fields.tsv" >"$logs/wire-check.txt" || rc=$?
  cat "$logs/wire-check.txt"
  [ "$rc" -eq 0 ] || fail "the wire does not carry what host and target meant (wire: FAIL lines above)"
  read -r entries_a entries_b <<<"$entries"
  echo "wire_rxe: PASS: tshark decoded the CM REQ/REP (QID, HRQSIZE, HSQSIZE, CNTLID, CRQSIZE), Connect, Property Get/Set, Identify, read and write commands with the values meant, in both sessions ($entries_a and $entries_b I/O queue entries)"
}

if [ "${1:-}" = --host ]; then
  [ $# -ge 3 ] || fail "usage: wire_rxe.sh --host BUILD_DIR RESULTS_DIR [NVMF_TGT [NVMF_PERF [SECONDS_PER_RUN]]]"
  command -v tshark >/dev/null || fail "tshark not installed (scripts/install-deps.sh installs it)"
  build="$2" results="$3"
  shift 3
  rc=0
  "$here/../vm-run.sh" --build-dir "$build" --results "$results" wire_rxe "$@" || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"   # 77 (skipped) included
  decode_and_check "$results/logs"
  exit 0
fi

# --- in the guest ---------------------------------------------------------------------------
[ "${NVMF_VM_SCENARIO:-}" = wire_rxe ] ||
  fail "runs inside the VM guest, started by: tests/vm/scenarios/wire_rxe.sh --host BUILD_DIR RESULTS_DIR"
tgt="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_tgt}"
perf="${2:-$NVMF_BUILD_DIR/tools/nvmf_perf}"
seconds="${3:-2}"
[ -x "$tgt" ] || fail "not built: $tgt"
[ -x "$perf" ] || fail "not built: $perf"
for tool in dumpcap jq; do
  command -v "$tool" >/dev/null || fail "$tool not installed on the host (scripts/install-deps.sh installs tshark)"
done

# shellcheck source=lib/rxe_wire.sh
source "$here/lib/rxe_wire.sh"
# shellcheck source=lib/perf.sh
source "$here/lib/perf.sh"
# shellcheck source=lib/nvmf_tgt.sh
source "$here/lib/nvmf_tgt.sh"
# shellcheck source=lib/kmsg.sh
source "$here/lib/kmsg.sh"

logs="${RESULTS:-/nvmf-vm}/logs"   # kept in the results folder on the host
rm -rf "$logs"
mkdir -p "$logs"
work="$(mktemp -d)"
kmsg_mark

# wire_config FILE NQN MAX_QUEUE_DEPTH: one malloc namespace at $ADDR:4420.
wire_config() {
  cat >"$1" <<EOF
{
  "transports": [ { "type": "rdma", "max_queue_depth": $3 } ],
  "bdevs": [ { "type": "malloc", "name": "Malloc0", "block_size": $BLOCK_SIZE, "num_blocks": 65536 } ],
  "subsystems": [
    { "nqn": "$2", "serial_number": "NVMFVMWIRE01", "model_number": "nvmf-vm wire",
      "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] }
  ]
}
EOF
}

# RoCEv2 frames that start a message, by BTH opcode (the UDP payload's first byte): CM MADs (UD
# SEND 0x64), SEND only (0x04) and SEND only with invalidate (0x17): capsules and responses,
# RDMA WRITE first/only (0x06, 0x0a), RDMA READ request (0x0c), and READ response only (0x10:
# the Connect data). Left out: ACKs and the rest of multi-packet transfers, three quarters of
# the frames, which would only make tshark's two passes (the slowest part under TCG) longer.
readonly CAPTURE_FILTER='udp dst port 4791 and (udp[8] = 0x64 or udp[8] = 0x04 or udp[8] = 0x17 or udp[8] = 0x06 or udp[8] = 0x0a or udp[8] = 0x0c or udp[8] = 0x10)'
step "dumpcap -i veth0 -f '$CAPTURE_FILTER'"
# Its own output files: a background job holding the scenario's stdout would keep the guest's
# `tee` waiting after the scenario ends; the trap stops it on every exit.
dumpcap -q -i veth0 -f "$CAPTURE_FILTER" -w "$work/wire.pcap" >"$work/dumpcap.log" 2>&1 &
cap_pid=$!
trap 'kill "$cap_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do   # the pcap header appears once the capture runs (10 s under TCG)
  [ -s "$work/wire.pcap" ] && break
  kill -0 "$cap_pid" 2>/dev/null || { cat "$work/dumpcap.log"; fail "dumpcap exited"; }
  sleep 0.2
done
[ -s "$work/wire.pcap" ] || { cat "$work/dumpcap.log"; fail "dumpcap did not start capturing within 60 s"; }

PERF="$perf" PERF_SECONDS="$seconds" PERF_LOGS="$logs"
perf_on_failure() { tail -n 20 "$TGT_LOG"; }
nqns="" entries="" ios="" summary=""
# session NAME MAX_QUEUE_DEPTH QUEUE_DEPTH: nvmf_tgt with that max_queue_depth, one nvmf_perf
# run at -q QUEUE_DEPTH against it, nvmf_tgt stopped; appends the session's expectations.
session() {
  local name="$1" max_depth="$2" depth="$3" nqn="nqn.2026-11.io.nvmf-vm:$1"
  wire_config "$logs/nvmf_tgt-$name.json" "$nqn" "$max_depth"
  step "session $name: nvmf_tgt (interrupt mode) with max_queue_depth $max_depth"
  tgt_start "$tgt" "$logs/nvmf_tgt-$name.json" "$logs/nvmf_tgt-$name.log" --mode interrupt --reactors 1
  perf_run "$name" "$nqn" -w randrw -M 50 -q "$depth" -o "$IO_SIZE" --memreg global --verify
  step "session $name: stopping nvmf_tgt"
  tgt_stop
  tgt_check_log
  # What nvmf_perf asked for (max(128, q x namespaces + 1)) and what the wire must then carry.
  local asked completed
  read -r asked completed <<<"$(jq -r '"\(.config.io_queue_size) \(.ios)"' "$logs/$name.json")"
  local want=$(( depth + 1 > 128 ? depth + 1 : 128 ))
  [ "$asked" -eq "$want" ] || fail "session $name: nvmf_perf asked for $asked I/O queue entries, expected max(128, $depth + 1) = $want"
  local granted=$(( asked < max_depth ? asked : max_depth ))
  summary+="session $name: nvmf_perf -q $depth asks for $asked I/O queue entries; nvmf_tgt allows $max_depth; expected on the wire: $granted"$'\n'
  nqns+="$nqn " entries+="$granted " ios+="$completed "
}
session wire-a 128 4
session wire-b 64 8

step "stopping the capture"
kill -TERM "$cap_pid"
wait "$cap_pid" || true
cat "$work/dumpcap.log"
cp "$work/wire.pcap" "$logs/wire.pcap" && chmod 644 "$logs/wire.pcap"
# "Packets received/dropped on interface 'veth0': 5706/0 (pcap:0/dumpcap:0/flushed:0/ps_ifdrop:0)"
grep -q -E "^Packets received/dropped on interface 'veth0': [0-9]+/0 \(pcap:0/dumpcap:0/" "$work/dumpcap.log" ||
  fail "dumpcap dropped packets (above): the counts below would not add up"

# What the host half checks the decoded frames against.
{
  printf 'nqns=%q entries=%q ios=%q addr=%q peer_addr=%q\n' "$nqns" "$entries" "$ios" "$ADDR" "$PEER_ADDR"
  printf 'summary=%q\n' "$summary"
} >"$logs/wire-expect.sh"

kmsg_check wire_rxe
printf 'wire_rxe: results\n%s' "$PERF_SUMMARY"
echo "wire_rxe: guest half done: $logs/wire.pcap and wire-expect.sh for the host half (wire_rxe.sh --host decodes and checks)"
