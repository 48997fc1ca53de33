#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the main job: install what is needed, build,
# then run a target serving a namespace with the initiator driving I/O at it.
#
#   - With an RDMA device (ibv_devices lists one whose netdev has an IPv4 address): nvmf_tgt
#     serves the malloc example on it and nvmf_perf drives verified 70/30 random 4 KiB I/O
#     at it through rdma-core.
#   - Without one: the same two programs inside the test VM over soft-RoCE (tests/vm,
#     scenario quickstart_rxe: 10 s of 4 KiB random reads at QD32; the first run downloads a
#     Debian kernel package, ~70 MB). Where QEMU or the kernel cannot be had, the in-process
#     run over the simulated HCA stands in.
# Then, either way, one in-process run over the simulated HCA for a quick throughput figure.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

BUILD_DIR="${BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR"

tgt="$BUILD_DIR/tools/nvmf_tgt"
perf="$BUILD_DIR/tools/nvmf_perf"
nqn=nqn.2026-11.io.nvmf-rdma:malloc0
"$tgt" -c examples/target/malloc.json --check-config

# The first RDMA device with an IPv4 address on its netdev, if any.
rdma_addr=""
if command -v rdma >/dev/null 2>&1; then
  for netdev in $(rdma link show 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p'); do
    rdma_addr=$(ip -4 -o addr show dev "$netdev" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
    [ -n "$rdma_addr" ] && break
  done
fi

if [ -n "$rdma_addr" ]; then
  echo
  echo "quickstart: RDMA device found ($rdma_addr): nvmf_tgt + nvmf_perf over rdma-core"
  log="$(mktemp)"
  "$tgt" -c examples/target/malloc.json >"$log" 2>&1 &
  tgt_pid=$!
  trap 'kill -TERM "$tgt_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do grep -q "ready:" "$log" && break; sleep 0.1; done
  cat "$log"
  "$perf" -r "trtype:RDMA adrfam:IPv4 traddr:$rdma_addr trsvcid:4420 subnqn:$nqn" \
    -w randread -q 32 -o 4096 -t 10
  kill -TERM "$tgt_pid"
  wait "$tgt_pid"
  trap - EXIT
else
  echo
  echo "quickstart: no RDMA device here: nvmf_tgt + nvmf_perf over soft-RoCE in the test VM"
  results="$BUILD_DIR/vm-results/quickstart_rxe"
  rc=0
  tests/vm/vm-run.sh --build-dir "$BUILD_DIR" --results "$results" quickstart_rxe || rc=$?
  if [ "$rc" -eq 0 ] && grep -q "quickstart_rxe: PASS" "$results/scenario.log"; then
    echo "quickstart: the main job passed over soft-RoCE (nvmf_perf's table above)"
  elif [ "$rc" -eq 77 ]; then
    echo "quickstart: the VM cannot run here (see above): only the simulated HCA below"
  else
    echo "quickstart: the VM run failed (exit $rc); the guest log is in $results"
    exit "$rc"
  fi
fi

echo
echo "quickstart: in process over the simulated HCA: 4 KiB random read, QD128, 5 s"
"$perf" --sim -w randread -q 128 -o 4096 -t 5
