#!/usr/bin/env bash
# nvmf_tgt as a user runs it: every example config checks and starts (on the simulated HCA,
# since this machine may have no RDMA device), SIGTERM stops it cleanly, and a bad config or
# option fails with one line that names the field. Usage: nvmf_tgt_test.sh NVMF_TGT EXAMPLES_DIR
set -uo pipefail
tgt="$1"
examples="$2"
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

for config in "$examples"/*.json; do
  name=$(basename "$config")
  out=$("$tgt" -c "$config" --check-config 2>&1)
  check "$name --check-config" $? "$out"

  "$tgt" -c "$config" --sim --mode interrupt --reactors 2 >"$work/log" 2>&1 &
  pid=$!
  ready=1
  for _ in $(seq 1 100); do
    if grep -q "ready:" "$work/log"; then ready=0; break; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  check "$name starts" $ready "$(cat "$work/log")"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  check "$name stops on SIGTERM with status 0" $rc "status $rc: $(tail -3 "$work/log")"
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
bad "bad NQN" '{"subsystems": [{"nqn": "not-an-nqn"}]}' "subsystems[0].nqn"

out=$("$tgt" -c "$work/none.json" 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"cannot read config file"* ]]
check "missing file" $? "$out"
out=$("$tgt" -c "$examples/malloc.json" --mode fast 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"--mode"* ]]
check "bad --mode" $? "$out"
out=$("$tgt" -c "$examples/malloc.json" --cpumask 0xZZ 2>&1); rc=$?
[ "$rc" -eq 1 ] && [[ "$out" == *"--cpumask"* ]]
check "bad --cpumask" $? "$out"

# NVMe SSDs (examples/target/pcie/nvme.json): with --sim the controller model stands in for
# each PCI address, so the nvme bdevs build and the target serves them; without --sim, on a
# machine where VFIO is not usable, one line says so and the exit status is 1.
nvme_config="$examples/pcie/nvme.json"
out=$("$tgt" -c "$nvme_config" --sim --check-config 2>&1)
check "pcie/nvme.json --sim --check-config (controller model)" $? "$out"
[[ "$out" == *"configuration OK (2 bdevs, 1 subsystems)"* ]]
check "pcie/nvme.json builds both nvme bdevs" $? "$out"
"$tgt" -c "$nvme_config" --sim >"$work/log" 2>&1 &
pid=$!
ready=1
for _ in $(seq 1 100); do
  if grep -q "ready:" "$work/log"; then ready=0; break; fi
  if ! kill -0 "$pid" 2>/dev/null; then break; fi
  sleep 0.1
done
check "pcie/nvme.json --sim starts" $ready "$(cat "$work/log")"
kill -TERM "$pid" 2>/dev/null
wait "$pid"
check "pcie/nvme.json --sim stops with status 0" $? "$(tail -3 "$work/log")"
grep -q "bdev Nvme0n1: 0 bytes copied through bounce buffers" "$work/log"
check "pcie/nvme.json --sim: the zero-copy account is logged" $? "$(tail -5 "$work/log")"
if [ ! -e /dev/vfio/vfio ]; then
  out=$("$tgt" -c "$nvme_config" --check-config 2>&1); rc=$?
  [ "$rc" -eq 1 ] && [[ "$out" == *"VFIO"* ]] && [[ "$out" == *'bdevs[0]: cannot create bdev "Nvme0n1"'* ]]
  check "pcie/nvme.json without VFIO: exit 1 naming VFIO and the bdev" $? "status $rc: $out"
fi
bad "nvme bdev with a bad PCI address" '{"bdevs": [{"type": "nvme", "name": "N", "pci": "1:2.3"}]}' 'bdevs[0].pci: "1:2.3" is not a PCI address'

check_summary "nvmf_tgt"
