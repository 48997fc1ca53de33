#!/usr/bin/env bash
# nvmf_tgt as a user runs it: every example config checks and starts (on the simulated HCA,
# since this machine may have no RDMA device), SIGTERM stops it cleanly, and a bad config or
# option fails with one line that names the field. Usage: nvmf_tgt_test.sh NVMF_TGT EXAMPLES_DIR
set -uo pipefail
tgt="$1"
examples="$2"
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

# start_and_stop NAME CONFIG [ARGS...]: nvmf_tgt -c CONFIG --sim ARGS must become ready; then
# SIGTERM. Its log is left in $work/log, its exit status in $stopped.
start_and_stop() {
  local name="$1" config="$2" ready=0
  shift 2
  "$tgt" -c "$config" --sim "$@" >"$work/log" 2>&1 &
  pid=$!
  wait_ready "$pid" "$work/log" || ready=1
  check "$name starts" $ready "$(cat "$work/log")"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  stopped=$?
}

for config in "$examples"/*.json; do
  name=$(basename "$config")
  out=$("$tgt" -c "$config" --check-config 2>&1)
  check "$name --check-config" $? "$out"

  # A socket of its own: the default one (/var/tmp/nvmf_tgt.sock) may be another run's.
  start_and_stop "$name" "$config" --mode interrupt --reactors 2 --rpc-socket "$work/loop.sock"
  check "$name stops on SIGTERM with status 0" $stopped "status $stopped: $(tail -3 "$work/log")"
  grep -q "stopped" "$work/log"
  check "$name logs its stop" $? "$(tail -3 "$work/log")"
done

# Bad configs: exit 1, one line, the field named.
bad() {  # bad NAME JSON EXPECTED-TEXT
  printf '%s' "$2" >"$work/bad.json"
  out=$("$tgt" -c "$work/bad.json" --check-config 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && [[ "$out" == *"$3"* ]]
  check "bad config: $1" $? "status $rc, output: $out"
}
bad "unknown key" '{"bdevs": [{"type": "malloc", "name": "M", "blocksize": 512}]}' "bdevs[0].blocksize: unknown key"
bad "missing bdev" '{"subsystems": [{"nqn": "nqn.2026-11.io.example:a", "namespaces": [{"bdev": "Nope"}]}]}' 'subsystems[0].namespaces[0].bdev'
bad "not JSON" '{"bdevs": [' "$work/bad.json"
# (A name without the nqn. form passes with a warning, as on nvmet; a '/' cannot.)
bad "bad NQN" '{"subsystems": [{"nqn": "bad/name"}]}' "subsystems[0].nqn"

out=$("$tgt" -c "$work/none.json" 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"cannot read config file"* ]]
check "missing file" $? "$out"
out=$("$tgt" -c "$examples/malloc.json" --mode fast 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"--mode"* ]]
check "bad --mode" $? "$out"
out=$("$tgt" -c "$examples/malloc.json" --cpumask 0xZZ 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"--cpumask"* ]]
check "bad --cpumask" $? "$out"

# The RDMA transport's receive set-up (no_srq, max_srq_depth) takes effect: the transport's
# start-up line says what it took.
receives() {  # receives NAME TRANSPORT-JSON EXPECTED-TEXT
  printf '{"transports": [%s]}' "$2" >"$work/receives.json"
  start_and_stop "$1:" "$work/receives.json" --rpc-socket ''
  grep -q "receives $3" "$work/log"
  check "$1: receives $3" $? "$(grep transport: "$work/log")"
}
receives "default receives" '{"type": "rdma"}' "a shared receive queue of 4096 per reactor and device"
receives "max_srq_depth 512" '{"type": "rdma", "max_srq_depth": 512}' "a shared receive queue of 512 per reactor and device"
receives "no_srq" '{"type": "rdma", "no_srq": true}' "per connection (no_srq)"
bad "max_srq_depth below 2" '{"transports": [{"type": "rdma", "max_srq_depth": 1}]}' "transports[0].max_srq_depth: 1 is outside [2, 16384]"

# NVMe SSDs (examples/target/pcie/nvme.json): with --sim the controller model stands in for
# each PCI address, so the nvme bdevs build and the target serves them; without --sim, on a
# machine where VFIO is not usable, one line says so and the exit status is 1.
nvme_config="$examples/pcie/nvme.json"
out=$("$tgt" -c "$nvme_config" --sim --check-config 2>&1)
check "pcie/nvme.json --sim --check-config (controller model)" $? "$out"
[[ "$out" == *"configuration OK (2 bdevs, 1 subsystems)"* ]]
check "pcie/nvme.json builds both nvme bdevs" $? "$out"
start_and_stop "pcie/nvme.json --sim" "$nvme_config" --rpc-socket ''
check "pcie/nvme.json --sim stops with status 0" $stopped "$(tail -3 "$work/log")"
grep -q "bdev Nvme0n1: 0 bytes copied through bounce buffers" "$work/log"
check "pcie/nvme.json --sim: the zero-copy account is logged" $? "$(tail -5 "$work/log")"
if [ ! -e /dev/vfio/vfio ]; then
  out=$("$tgt" -c "$nvme_config" --check-config 2>&1); rc=$?
  [ "$rc" -eq 1 ] && [[ "$out" == *"VFIO"* ]] && [[ "$out" == *'bdevs[0]: cannot create bdev "Nvme0n1"'* ]]
  check "pcie/nvme.json without VFIO: exit 1 naming VFIO and the bdev" $? "status $rc: $out"
fi
bad "nvme bdev with a bad PCI address" '{"bdevs": [{"type": "nvme", "name": "N", "pci": "1:2.3"}]}' 'bdevs[0].pci: "1:2.3" is not a PCI address'

# Runtime control over JSON-RPC (--rpc-socket): the socket is there with mode 0600, answers
# rpc_get_methods and subsystem_list, and a second nvmf_tgt on the same socket exits 1 saying
# another one serves it.
rpc() {  # rpc SOCKET METHOD [PARAMS-JSON]: prints the response object
  python3 - "$@" <<'PY'
import json, socket, sys
path, method = sys.argv[1], sys.argv[2]
params = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.settimeout(10)
client.connect(path)
client.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode())
data = b""
while not data.endswith(b"\n"):
    chunk = client.recv(65536)
    if not chunk:
        break
    data += chunk
print(json.dumps(json.loads(data)))
PY
}
sock="$work/rpc.sock"
"$tgt" -c "$examples/malloc.json" --sim --mode interrupt --rpc-socket "$sock" >"$work/log" 2>&1 &
pid=$!
ready=0
wait_ready "$pid" "$work/log" || ready=1
check "--rpc-socket: starts" $ready "$(cat "$work/log")"
[ -S "$sock" ] && [ "$(stat -c %a "$sock")" = 600 ]
check "--rpc-socket: a socket with mode 0600" $? "$(ls -l "$sock" 2>&1)"
out=$(rpc "$sock" rpc_get_methods 2>&1)
python3 -c 'import json, sys
names = [m["name"] for m in json.loads(sys.argv[1])["result"]]
assert {"subsystem_list", "bdev_create", "namespace_add", "listener_add", "save_config"} <= set(names), names' "$out"
check "rpc_get_methods lists the methods" $? "$out"
out=$(rpc "$sock" subsystem_list 2>&1)
python3 -c 'import json, sys
nvme = [s for s in json.loads(sys.argv[1])["result"] if s["subtype"] == "nvme"]
assert [s["nqn"] for s in nvme] == ["nqn.2026-11.io.nvmf-rdma:malloc0"], nvme
assert [n["bdev"] for n in nvme[0]["namespaces"]] == ["Malloc0"], nvme
assert nvme[0]["listeners"][0]["trsvcid"] == "4420", nvme' "$out"
check "subsystem_list shows malloc.json's subsystem" $? "$out"
out=$(rpc "$sock" namespace_remove '{"nqn": "nqn.2026-11.io.nvmf-rdma:malloc0", "nsid": 3}' 2>&1)
[[ "$out" == *'"code": -32001'* ]] && [[ "$out" == *'has no namespace 3'* ]]
check "an error names the problem" $? "$out"
out=$("$tgt" -c "$examples/malloc.json" --sim --rpc-socket "$sock" 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"nvmf_tgt: another nvmf_tgt is serving $sock"* ]]
check "a second nvmf_tgt on the same socket exits 1" $? "status $rc: $out"
out=$(rpc "$sock" subsystem_list 2>&1)
[[ "$out" == *'"result"'* ]]
check "the first one still answers" $? "$out"
kill -TERM "$pid" 2>/dev/null
wait "$pid"
check "--rpc-socket: stops with status 0" $? "$(tail -3 "$work/log")"
[ ! -e "$sock" ]
check "--rpc-socket: the socket is removed at exit" $? "$(ls -l "$sock" 2>&1)"

check_summary "nvmf_tgt"
