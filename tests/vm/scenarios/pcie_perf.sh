#!/bin/bash
# VM benchmark scenario (label bench, not vm: never in CI): one QEMU NVMe controller driven by
# the kernel's nvme driver (fio) and by our userspace driver (nvmf_perf -r 'trtype:PCIe ...'),
# interleaved in ONE guest boot (kernel, ours, kernel, ours), so the ratios mean something:
# under TCG absolute figures move by 2x from boot to boot, and QEMU's emulation dominates.
#
# Workloads (4 KiB, one thread, SECONDS each, a 64 MiB region):
#   randread QD32 | randwrite QD32 | randrw 70/30 QD32 | randread QD1
#   kernel: fio --ioengine=io_uring --direct=1 --numjobs=1 on /dev/nvme0n1
#   ours:   nvmf_perf -r 'trtype:PCIe traddr:ADDR' -c 1 -q QD (polls: one vCPU all the time)
# CPU per I/O: ours: nvmf_perf's process CPU time / I/Os (its "cpu_us_per_io"); the kernel:
# fio's usr+sys (the waiting subshell's cutime+cstime) plus the guest's irq+softirq time over
# the run (/proc/stat), where the nvme driver completes I/O, / I/Os. Copies per I/O: ours from
# nvmf_perf's "bytes_copied" (bounce buffers); the kernel's direct I/O copies nothing either.
# Prints a markdown table at the end (also results/logs/pcie_perf.md).
#   pcie_perf.sh [NVMF_PERF [SECONDS (6)]]
# Runs inside the guest only (vm-run.sh --nvme 1 pcie_perf).
set -euo pipefail

step() { echo "== [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() { echo "pcie_perf: FAIL: $*"; exit 1; }

[ "${NVMF_VM_SCENARIO:-}" = pcie_perf ] || fail "runs inside the VM guest: tests/vm/vm-run.sh --nvme 1 pcie_perf"
[ "${NVMF_VM_NVME:-0}" -ge 1 ] || fail "needs an NVMe controller (vm-run.sh --nvme 1)"
perf="${1:-${NVMF_BUILD_DIR:?}/tools/nvmf_perf}"
seconds="${2:-6}"
[ -x "$perf" ] || fail "not built: $perf"
command -v fio >/dev/null || fail "fio not installed (scripts/install-deps.sh)"

# shellcheck source=lib/vfio.sh
source "$(dirname "$0")/lib/vfio.sh"
read -r -a pci <<<"$NVMF_VM_NVME_PCI"
addr="${pci[0]}"
logs="${RESULTS:-/nvmf-vm}/logs"
rm -rf "$logs"
mkdir -p "$logs"
results="$logs/results.tsv"
: >"$results"
hz="$(getconf CLK_TCK)"

# irq_ticks: the guest's irq + softirq time so far, in clock ticks.
irq_ticks() { awk '$1 == "cpu" { print $7 + $8 }' /proc/stat; }

# kernel_run NAME RW MIX QD
kernel_run() {
  local name="$1" rw="$2" mix="$3" qd="$4" disk irq0 irq1 json
  disk="$(vfio_namespaces "$addr" | head -n 1)"
  [ -n "$disk" ] || fail "no block device for $addr on the nvme driver"
  json="$logs/kernel-$name-$round.json"
  irq0="$(irq_ticks)"
  fio --name="$name" --filename="/dev/$disk" --ioengine=io_uring --direct=1 --bs=4k \
    --iodepth="$qd" --numjobs=1 --rw="$rw" --rwmixread="$mix" --size=64m --time_based \
    --runtime="$seconds" --randrepeat=0 --output-format=json --output="$json" ||
    fail "fio $name failed"
  irq1="$(irq_ticks)"
  python3 - "$json" "$name" "$round" "$(( irq1 - irq0 ))" "$hz" >>"$results" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
name, rnd, irq_ticks, hz = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
ios = job["read"]["total_ios"] + job["write"]["total_ios"]
runtime_s = max(job["read"]["runtime"], job["write"]["runtime"]) / 1000.0
cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s + irq_ticks / hz
print(f"{name}\tkernel\t{rnd}\t{ios / runtime_s:.0f}\t{cpu_s / ios * 1e6:.1f}\t-")
PY
}

# ours_run NAME MIX QD
ours_run() {
  local name="$1" mix="$2" qd="$3" json workload=randrw
  json="$logs/ours-$name-$round.json"
  timeout $((seconds + 60)) "$perf" -r "trtype:PCIe traddr:$addr" -c 1 -q "$qd" -o 4096 \
    -w "$workload" -M "$mix" -t "$seconds" --json "$json" >"$logs/ours-$name-$round.log" 2>&1 ||
    { tail -20 "$logs/ours-$name-$round.log"; fail "nvmf_perf $name failed"; }
  python3 - "$json" "$name" "$round" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
copies = r["bytes_copied"] / r["ios"] if r["ios"] else 0
print(f"{sys.argv[2]}\tours\t{sys.argv[3]}\t{r['iops']:.0f}\t{r['cpu_us_per_io']:.1f}\t{copies:.0f}")
PY
}

vfio_prepare
for round in 1 2; do
  step "round $round: the kernel's nvme driver (fio)"
  kernel_run randread-qd32 randread 100 32
  kernel_run randwrite-qd32 randwrite 0 32
  kernel_run randrw70-qd32 randrw 70 32
  kernel_run randread-qd1 randread 100 1
  step "round $round: our driver (nvmf_perf -r 'trtype:PCIe traddr:$addr')"
  PCI_ALLOWED="$addr" NRHUGE=128 "$SETUP_SH" config >/dev/null || fail "setup.sh config failed"
  ours_run randread-qd32 100 32
  ours_run randwrite-qd32 0 32
  ours_run randrw70-qd32 70 32
  ours_run randread-qd1 100 1
  PCI_ALLOWED="$addr" "$SETUP_SH" reset >/dev/null || fail "setup.sh reset failed"
  vfio_wait 20 vfio_has_namespace "$addr" || fail "$addr did not come back on nvme"
done
cat "$results"

python3 - "$results" "$seconds" >"$logs/pcie_perf.md" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
order = ["randread-qd32", "randwrite-qd32", "randrw70-qd32", "randread-qd1"]
print(f"| workload (4 KiB, {sys.argv[2]} s, 1 thread) | kernel IOPS | ours IOPS | ours / kernel "
      "(per round) | kernel CPU us/IO | ours CPU us/IO | ours copies B/IO |")
print("|---|---|---|---|---|---|---|")
for name in order:
    k = [r for r in rows if r[0] == name and r[1] == "kernel"]
    o = [r for r in rows if r[0] == name and r[1] == "ours"]
    k_iops = [float(r[3]) for r in k]
    o_iops = [float(r[3]) for r in o]
    ratios = [oi / ki for oi, ki in zip(o_iops, k_iops) if ki > 0]
    print(f"| {name} | {statistics.median(k_iops):.0f} | {statistics.median(o_iops):.0f} | "
          f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) | "
          f"{statistics.median(float(r[4]) for r in k):.1f} | "
          f"{statistics.median(float(r[4]) for r in o):.1f} | "
          f"{max(int(float(r[5])) for r in o)} |")
PY
cat "$logs/pcie_perf.md"
echo "pcie_perf: PASS: $(wc -l <"$results") runs"
