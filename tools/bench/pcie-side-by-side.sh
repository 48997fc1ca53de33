#!/usr/bin/env bash
# usage: tools/bench/pcie-side-by-side.sh [build-dir (build)]     (~4 min)
#
# Regenerates the "Local NVMe: our PCIe driver against the kernel's" section of
# docs/performance.md: boots the VM tier's guest with one QEMU NVMe controller and runs the
# pcie_perf scenario (tests/vm/scenarios/pcie_perf.sh: fio on the kernel's nvme driver and
# nvmf_perf -r 'trtype:PCIe ...' on ours, interleaved, two rounds, one boot), then writes its
# table into the document between the pcie-side-by-side markers, with the commit, the
# machine and its load. Refuses a tree with uncommitted changes (the figures must belong to a
# commit). Exit 1 when the scenario fails, 2 on bad usage or a dirty tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
doc=docs/performance.md

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "pcie-side-by-side: the tree has uncommitted changes; commit first (figures name a commit)" >&2
  exit 2
fi
[ -x "$build/tools/nvmf_perf" ] || { echo "pcie-side-by-side: $build/tools/nvmf_perf not built" >&2; exit 2; }
commit="$(git rev-parse --short HEAD)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
results="$(mktemp -d)"
NVMF_VM_NVME=1 tests/vm/vm-run.sh --build-dir "$build" --results "$results" pcie_perf \
  "$(cd "$build" && pwd)/tools/nvmf_perf" || { echo "pcie-side-by-side: the scenario failed ($results)" >&2; exit 1; }
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
table="$results/logs/pcie_perf.md"
[ -s "$table" ] || { echo "pcie-side-by-side: no table in $results" >&2; exit 1; }

section="$(mktemp)"
{
  echo "<!-- pcie-side-by-side:begin (written by tools/bench/pcie-side-by-side.sh; do not edit) -->"
  echo "Commit $commit, $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
  echo "load average $load_before before and $load_after after; $(date -u +%Y-%m-%d)."
  echo
  cat "$table"
  echo "<!-- pcie-side-by-side:end -->"
} >"$section"
python3 - "$doc" "$section" <<'PY'
import re, sys
doc, section = sys.argv[1], open(sys.argv[2]).read().rstrip("\n")
text = open(doc).read()
pattern = re.compile(r"<!-- pcie-side-by-side:begin.*?<!-- pcie-side-by-side:end -->", re.S)
if not pattern.search(text):
    sys.exit(f"{doc}: no pcie-side-by-side markers")
open(doc, "w").write(pattern.sub(lambda _: section, text))
PY
echo "pcie-side-by-side: $doc updated (commit $commit)"
