#!/usr/bin/env bash
# tools/bench/perf-report.sh's pure parts, on canned inputs, without a benchmark or a build:
# usage errors, a dirty tree refused with a clear message (untracked files ignored), --dry-run
# listing the sections and their commands, and --render writing the generated sections from a
# canned results folder (best of the runs, spread, the commit and load line, a dirty tree and
# failed runs said in the section) while the prose around the markers stays byte for byte.
#   perf_report_test.sh PATH/TO/perf-report.sh
set -u
script="$1"
# shellcheck source=check.sh
. "$(dirname "$0")/check.sh"

# A throw-away repository holding the script (it works in the repository it sits in).
repo="$work/repo"
mkdir -p "$repo/tools/bench" "$repo/docs"
cp "$script" "$repo/tools/bench/perf-report.sh"
sections=(machine ring bdev verbs-sim stack callgrind vm)
{
  echo "# Performance"
  echo
  echo "Prose before, kept as is: 1,234 IOPS by hand."
  for name in "${sections[@]}"; do
    echo
    echo "## $name"
    echo
    echo "Hand-written prose above $name."
    echo
    echo "<!-- perf-report:BEGIN $name -->"
    echo "OLD FIGURES of $name"
    echo "<!-- perf-report:END $name -->"
    echo
    echo "Hand-written prose below $name."
  done
} >"$repo/docs/performance.md"
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=test -c user.email=test@example.com commit -q -m canned
pr="$repo/tools/bench/perf-report.sh"

# prose FILE: the document with every generated section's body removed
prose() { sed '/<!-- perf-report:BEGIN /,/<!-- perf-report:END /{/<!-- perf-report:/!d}' "$1"; }

# --- usage
out=$("$pr" --help 2>&1)
check "--help exits 0" $? "$out"
for option in --runs --seconds --only --dry-run --output --allow-dirty --vm; do
  grep -q -- "$option" <<<"$out"
  check "--help names $option" $? "$out"
done
for bad in "--runs 0" "--runs x" "--seconds 0" "--only ring,nonsense" "--frobnicate"; do
  # shellcheck disable=SC2086 # the words of the bad usage
  "$pr" $bad --dry-run >/dev/null 2>&1
  rc=$?
  check "$bad is a usage error (2)" $((rc != 2)) "exit $rc"
done

# --- --dry-run
out=$("$pr" --dry-run --runs 3 2>&1)
check "--dry-run exits 0" $? "$out"
grep -q "tree: clean at" <<<"$out"
check "--dry-run: a committed tree is clean" $? "$out"
for name in machine ring bdev verbs-sim stack callgrind; do
  grep -q "^section $name:" <<<"$out"
  check "--dry-run lists section $name" $? "$out"
done
! grep -q "^section vm:" <<<"$out"
check "--dry-run: no vm section without --vm" $? "$out"
count=$(grep -c "nvmf_perf --sim " <<<"$out")
check "--dry-run: 2 x 6 nvmf_perf runs in each of 3 rounds" $((count != 36)) "$count"
count=$(grep -c "nvmf_perf --sim .*stack-[a-z0-9-]*-2s-[0-9].json --sim-payload skip$" <<<"$out")
check "--dry-run: half of them with --sim-payload skip" $((count != 18)) "$count"
count=$(grep -c "host_stack_bench --benchmark_min_time=5 " <<<"$out")
check "--dry-run: 6 host_stack_bench runs in each of 3 rounds" $((count != 18)) "$count"
count=$(grep -c "core_rtt_bench --benchmark_min_time=0.1 --benchmark_out=RAW/rtt-" <<<"$out")
check "--dry-run: the round trip before and after each two-core run" $((count != 72)) "$count"
grep -A2 "core_rtt_bench .*rtt-qd128-2-before.json" <<<"$out" | grep -q "nvmf_perf --sim -w randread -q 128 .*stack-qd128-2-2.json" &&
  grep -A2 "core_rtt_bench .*rtt-qd128-2-before.json" <<<"$out" | grep -q "rtt-qd128-2-after.json"
check "--dry-run: the round trips bracket their run" $? "$out"
grep -A2 "core_rtt_bench .*rtt-qd128-2s-2-before.json" <<<"$out" | grep -q "stack-qd128-2s-2.json --sim-payload skip" &&
  grep -A2 "core_rtt_bench .*rtt-qd128-2s-2-before.json" <<<"$out" | grep -q "rtt-qd128-2s-2-after.json"
check "--dry-run: ... also around a --sim-payload skip run" $? "$out"
for shape in "-w randread -q 1 " "-w randread -q 128 " "-w randread -q 64 " \
  "-w randrw -M 70 -q 64 " "-w randwrite -q 64 " "-w randread -q 8 "; do
  grep -q -- "$shape" <<<"$out"
  check "--dry-run runs nvmf_perf $shape" $? "$out"
done
grep -q "ring_bench .*--benchmark_out=RAW/ring_bench-3.json --benchmark_out_format=json" <<<"$out"
check "--dry-run: Google Benchmark writes JSON" $? "$out"
grep -q "callgrind-per-io.sh --ios 20000 --json" <<<"$out"
check "--dry-run calls callgrind-per-io.sh" $? "$out"
grep -q "cmake .*-DCMAKE_BUILD_TYPE=Release" <<<"$out"
check "--dry-run configures a Release build" $? "$out"
out=$("$pr" --dry-run --only stack,ring --vm --seconds 2 2>&1)
grep -q "sections ring stack vm;" <<<"$out" && ! grep -q "^section bdev:" <<<"$out"
check "--only picks sections (and --vm adds vm)" $? "$out"
grep -q "tests/vm/vm-run.sh .* side_by_side_rxe" <<<"$out"
check "--vm runs side_by_side_rxe" $? "$out"
grep -q -- "-t 2 " <<<"$out" && grep -q "host_stack_bench --benchmark_min_time=2 " <<<"$out"
check "--seconds sets -t and the min time" $? "$out"
[[ ! -e "$repo/build-release" ]]
check "--dry-run builds nothing" $? "$(ls "$repo")"

# --- the tree
touch "$repo/untracked-results.txt"
out=$("$pr" --dry-run 2>&1)
grep -q "tree: clean" <<<"$out"
check "untracked files do not make the tree dirty" $? "$out"
echo "an edit" >>"$repo/docs/performance.md"
out=$("$pr" --only machine 2>&1)
rc=$?
check "a dirty tree is refused (exit 2)" $((rc != 2)) "exit $rc: $out"
grep -q "refusing to run: the tree has uncommitted changes (1 changed files" <<<"$out" &&
  grep -q "commit first" <<<"$out"
check "the refusal says why and what to do" $? "$out"
[[ ! -e "$repo/build-release" ]]
check "a refused run builds nothing" $? "$(ls "$repo")"
out=$("$pr" --only machine --output "$work/elsewhere.md" 2>&1)
rc=$?
check "a dirty tree is refused with --output elsewhere too" $((rc != 2)) "exit $rc: $out"
grep -q "refusing to run: the tree has uncommitted changes" <<<"$out" && [[ ! -e "$work/elsewhere.md" ]]
check "... with the same message, nothing written" $? "$out"
out=$("$pr" --only machine --allow-dirty 2>&1)
rc=$?
check "--allow-dirty into the document itself is refused" $((rc != 2)) "exit $rc: $out"
grep -q "add --output FILE" <<<"$out"
check "the --allow-dirty refusal names --output" $? "$out"
out=$("$pr" --dry-run 2>&1)
grep -q "tree: 1 changed files: a run refuses" <<<"$out"
check "--dry-run says a run would refuse" $? "$out"
git -C "$repo" diff --quiet || git -C "$repo" show HEAD:docs/performance.md >"$repo/docs/performance.md"

# --- --render on canned results
raw="$work/raw"
mkdir -p "$raw"
python3 - "$raw" <<'PY'
import json, os, sys
raw = sys.argv[1]
tsv = []
def put(name, obj, section, cell, rnd, rc=0):
    if obj is not None:
        json.dump(obj, open(os.path.join(raw, name), "w"))
    tsv.append(f"{section}\t{cell}\t{rnd}\t{rc}\t{name}")
def gb(rows):  # Google Benchmark's --benchmark_out JSON
    return {"context": {"num_cpus": 2}, "benchmarks": [
        dict({"name": n, "run_type": "iteration", "iterations": 10}, **fields) for n, fields in rows]}
for rnd, k in ((1, 1.0), (2, 0.5)):  # round 2 runs at half the rate: the best is round 1's
    put(f"ring_bench-{rnd}.json", gb([
        ("BM_MpscRingPushPopSameThread", {"items_per_second": 50e6 * k}),
        ("BM_MpscRingCrossThread/real_time", {"items_per_second": 20e6 * k}),
        ("BM_ReactorSendAndRunSameThread", {"items_per_second": 10e6 * k}),
        ("BM_ReactorSendCrossThread/real_time", {"items_per_second": 8e6 * k})]),
        "ring", "ring_bench", rnd)
    put(f"bdev_bench-{rnd}.json", gb([
        (f"BM_{b}4k/qd:{qd}", {"items_per_second": base * (2 if qd == 32 else 1) * k})
        for b, base in (("NullRead", 10e6), ("NullWrite", 12.5e6), ("MallocRead", 1.6e6),
                        ("MallocWrite", 1.25e6)) for qd in (1, 32)]), "bdev", "bdev_bench", rnd)
    put(f"verbs_sim_bench-{rnd}.json", gb([
        ("BM_SimSendRecv/64", {"items_per_second": 9e6 * k, "bytes_per_second": 576e6 * k}),
        ("BM_SimSendRecv/4096", {"items_per_second": 4e6 * k, "bytes_per_second": 16.4e9 * k}),
        ("BM_SimRdmaWrite/4096", {"items_per_second": 5e6 * k, "bytes_per_second": 20.5e9 * k})]),
        "verbs-sim", "verbs_sim_bench", rnd)
cells = [("qd1", "randread QD1"), ("qd128", "randread QD128")]
for name, label in cells:
    for rnd, iops in ((1, 1_500_000), (2, 2_000_000)):
        put(f"stack-{name}-2-{rnd}.json", {
            "iops": iops + (0 if name == "qd128" else -1_000_000), "errors": 0,
            "verify_failures": 0, "account": {"ok": True}, "cpu_s": 12.0 - 2 * rnd,
            "lat_us": {"p50": 10.0 + rnd, "p99": 20.0 + rnd, "p999": 30.0 + rnd}},
            "stack", f"{name}/2", rnd)
        put(f"stack-{name}-1-{rnd}.json", gb([("BM_FullStack/real_time", {"IOPS": iops / 2})]),
            "stack", f"{name}/1", rnd)
        # --sim-payload skip: 1.5 x the copying runs; vCPUs near in both rounds.
        put(f"stack-{name}-2s-{rnd}.json", {
            "iops": (iops + (0 if name == "qd128" else -1_000_000)) * 3 // 2, "errors": 0,
            "verify_failures": 0, "account": {"ok": True}, "cpu_s": 10.0,
            "lat_us": {"p50": 8.0, "p99": 16.0, "p999": 24.0}},
            "stack", f"{name}/2s", rnd)
        # One freak short reading (40 ns, QD1 round 2): the far line stays at the wide jump.
        for when in ("before", "after"):
            t = 40.0 if (name, rnd, when) == ("qd1", 2, "before") else 95.0
            json.dump(gb([("BM_CacheLineRoundTrip/0/1/real_time", {"real_time": t, "time_unit": "ns"})]),
                      open(os.path.join(raw, f"rtt-{name}-2s-{rnd}-{when}.json"), "w"))
        # Round 1's vCPUs drifted apart during the run (after: 450 ns), round 2's stayed near.
        for when, t in (("before", 90.0), ("after", 450.0 if rnd == 1 else 92.0 - (name == "qd1") * 4)):
            json.dump(gb([("BM_CacheLineRoundTrip/0/1/real_time", {"real_time": t, "time_unit": "ns"})]),
                      open(os.path.join(raw, f"rtt-{name}-{rnd}-{when}.json"), "w"))
put("callgrind.json", {"ios": 20000, "total": 4090.2, "host": 441.6, "app": 51.0,
                       "target": 977.4, "sim": 2618.0, "sim_host": 865.0, "sim_target": 1753.0,
                       "top": {"host": [["nvmf::host::HostQueue::post_command", 142.0]],
                               "target": [["nvmf::transport_rdma::RdmaPollGroup::advance", 408.0]],
                               "sim": [["memcpy", 432.0]]}}, "callgrind", "default", 1)
open(os.path.join(raw, "runs.tsv"), "w").write("\n".join(tsv) + "\n")
load = {"before": "0.50", "after": "0.70", "date": "2026-12-01 10:00 UTC"}
json.dump({"commit": "abc1234", "dirty": 0, "runs": 2, "seconds": 5, "min_time": "0.5",
           "sections": ["machine", "ring", "bdev", "verbs-sim", "stack", "callgrind"],
           "loads": {"all": load, "micro": load, "stack": dict(load, before="0.60"),
                     "callgrind": load},
           "phase_of": {"ring": "micro", "bdev": "micro", "verbs-sim": "micro", "stack": "stack",
                        "callgrind": "callgrind", "vm": "vm", "machine": "all"},
           "stack_cells": [{"name": n, "label": l} for n, l in cells],
           "machine": {"cpu": "Canned CPU @ 1 GHz", "cores": 2, "memory": "8 GiB",
                       "os": "Canned OS", "kernel": "6.1.0-canned", "compiler": "g++ (canned) 12.2",
                       "build_type": "Release", "build": "build-release", "gbench": "1.7.1"}},
          open(os.path.join(raw, "meta.json"), "w"))
PY
doc="$work/out.md"
out=$("$pr" --render "$raw" --output "$doc" 2>&1)
rc=$?
check "--render exits 0" "$rc" "exit $rc: $out"
diff <(prose "$repo/docs/performance.md") <(prose "$doc") >"$work/prose.diff"
check "the prose outside the markers is kept byte for byte" $? "$(cat "$work/prose.diff")"
[[ "$(git -C "$repo" status --porcelain --untracked-files=no)" == "" ]]
check "--output leaves docs/performance.md alone" $? "$(git -C "$repo" status --short)"
count=$(grep -c "OLD FIGURES" "$doc")
check "every section run is replaced, vm (not run) kept" $((count != 1)) "$(grep "OLD FIGURES" "$doc")"
grep -q "OLD FIGURES of vm" "$doc"
check "the section not run keeps its figures" $? "$(cat "$doc")"
count=$(grep -c "^_Generated by \`tools/bench/perf-report.sh\` at commit abc1234 on 2026-12-01 10:00 UTC, load 0.[56]0 -> 0.70._$" "$doc")
check "each section says commit, date and load" $((count != 6)) "$count of 6: $(grep Generated "$doc")"
grep -q "load 0.60 -> 0.70" "$doc"
check "the stack section has its own phase's load" $? "$(grep Generated "$doc")"
expect_line() {  # expect_line NAME FIXED-STRING
  grep -qF -- "$2" "$doc"
  check "$1" $? "no line with '$2' in: $(sed -n '/perf-report:BEGIN/,/perf-report:END/p' "$doc")"
}
expect_line "machine line" "Canned CPU @ 1 GHz, 2 cores, 8 GiB, Canned OS, kernel 6.1.0-canned; g++ (canned) 12.2, \`-DCMAKE_BUILD_TYPE=Release\` in \`build-release\`, Google Benchmark 1.7.1. 2 interleaved runs of each timed benchmark: ring, bdev and verbs_sim_bench with \`--benchmark_min_time=0.5\`, the full stack 5 s each."
expect_line "ring: best of 2, time per item, spread" "| \`BM_MpscRingPushPopSameThread\` | \`try_push\` + \`try_pop\` on one thread, no cache-line transfer | 20.0 ns | 50 M/s | 50% |"
expect_line "ring: /real_time names matched" "| \`BM_MpscRingCrossThread\` | one producer thread, one consumer thread, 4096-slot ring | 50.0 ns | 20 M/s | 50% |"
expect_line "bdev: qd 1 and qd 32" "| null, write | 80 | 12.5 M | 25 M | 50%, 50% |"
expect_line "verbs-sim: payload" "| \`BM_SimSendRecv/4096\` (SEND + RECV, 4 KiB) | 250 ns | 4 M/s | 16.4 GB/s | 50% |"
expect_line "stack: 2 cores, best, median, slowest, lowest CPU share (runs under 95% counted), round trips (far runs counted), latency of the best run" "| randread QD128 | 2 (\`nvmf_perf --sim\`) | 2,000,000 | 1,750,000 | 1,500,000 | 25% | 80% (1 low) | 90-450 (1 far) | 12.0 | 22.0 | 32.0 |"
expect_line "stack: 2 cores with --sim-payload skip, its own round trips" "| randread QD128 | 2 (\`--sim-payload skip\`) | 3,000,000 | 2,625,000 | 2,250,000 | 25% | 100% | 95-95 | 8.0 | 16.0 | 24.0 |"
expect_line "stack: 1 core from host_stack_bench's IOPS counter, no round trip" "| randread QD128 | 1 (\`host_stack_bench\`) | 1,000,000 | 875,000 | 750,000 | 25% |  |  |  |  |  |"
expect_line "stack: far is the upper of two groups of the sitting's round trips" "a run is *far* when either lies in the upper of two groups the sitting's round trips split into (tightest split in log scale, kept when the groups' medians are more than 2 x apart) (here from 95 to 450 ns)"
expect_line "stack: near and far runs side by side" "| randread QD128 | 1 | 2,000,000 | 1 | 1,500,000 | 1.33 |"
expect_line "callgrind: host and budget" "| host side: libnvmf_host and the RDMA host queue | 442 | 450 |"
expect_line "callgrind: the sim by caller" "| simulated HCA (called by the host: 865, by the target: 1,753) | 2,618 | |"
expect_line "callgrind: top items" "| target | \`nvmf::transport_rdma::RdmaPollGroup::advance\` | 408 |"
! grep -q "Failed runs\|NOT from a clean commit" "$doc"
check "clean, successful results say nothing of failures" $? "$(cat "$doc")"
# Rendering again over the output replaces the sections, nothing doubles.
"$pr" --render "$raw" --output "$doc" >/dev/null 2>&1
count=$(grep -c "^_Generated by" "$doc")
check "rendering twice replaces in place" $((count != 6)) "$count"

# A dirty tree's results, a failed run and a run with I/O errors.
python3 - "$raw" <<'PY'
import json, os, sys
raw = sys.argv[1]
meta = json.load(open(os.path.join(raw, "meta.json")))
meta["dirty"] = 3
json.dump(meta, open(os.path.join(raw, "meta.json"), "w"))
runs = open(os.path.join(raw, "runs.tsv")).read().replace("stack\tqd1/2\t2\t0\t", "stack\tqd1/2\t2\t1\t")
open(os.path.join(raw, "runs.tsv"), "w").write(runs)
j = json.load(open(os.path.join(raw, "stack-qd128-2-1.json")))
j["errors"] = 7
json.dump(j, open(os.path.join(raw, "stack-qd128-2-1.json"), "w"))
PY
doc="$work/dirty.md"
out=$("$pr" --render "$raw" --output "$doc" 2>&1)
rc=$?
check "--render with failed runs exits 1" $((rc != 1)) "exit $rc: $out"
count=$(grep -c "NOT from a clean commit: the tree had 3 changed files" "$doc")
check "every generated line says the tree was dirty" $((count != 6)) "$count: $(grep Generated "$doc")"
grep -q "^- randread QD1, 2 cores, round 2: exit 1$" "$doc" &&
  grep -q "^- randread QD128, 2 cores, round 1: 7 errors" "$doc"
check "failed runs are listed in their section" $? "$(sed -n '/BEGIN stack/,/END stack/p' "$doc")"
expect_line "a failed run is left out of the best" "| randread QD128 | 2 (\`nvmf_perf --sim\`) | 2,000,000 (1 of 2 runs) |"
out=$("$pr" --render "$raw" 2>&1)
rc=$?
check "a dirty tree's results are not rendered into the document" $((rc != 2)) "exit $rc: $out"
[[ "$(git -C "$repo" status --porcelain --untracked-files=no)" == "" ]]
check "... and the document is untouched" $? "$(git -C "$repo" status --short)"

# A document without a section's markers: an error, nothing written.
doc="$work/nomarkers.md"
grep -v "perf-report:.* stack -->" "$repo/docs/performance.md" >"$doc"
cp "$doc" "$work/nomarkers.before"
out=$("$pr" --render "$raw" --output "$doc" 2>&1)
rc=$?
check "missing markers: exit 2" $((rc != 2)) "exit $rc: $out"
grep -q "no <!-- perf-report:BEGIN stack -->" <<<"$out"
check "missing markers are named" $? "$out"
cmp -s "$doc" "$work/nomarkers.before"
check "missing markers: nothing written" $? "$(diff "$work/nomarkers.before" "$doc")"

# --- the VM section: --vm-boots boots, the ratios per boot, a failed boot listed
out=$("$pr" --dry-run --only vm --vm --vm-boots 2 2>&1)
count=$(grep -c "tests/vm/vm-run.sh .*--results RAW/vm-[12] side_by_side_rxe" <<<"$out")
check "--vm-boots 2: two guest boots, each its own results folder" $((count != 2)) "$out"
out=$("$pr" --dry-run --vm-boots 0 2>&1)
check "--vm-boots 0 is refused" $(($? != 2)) "$out"
rawvm="$work/rawvm"
mkdir -p "$rawvm"
python3 - "$rawvm" <<'PY'
import json, os, sys
raw = sys.argv[1]
tsv = []
# boot -> {(workload, host, target): iops}; the kernel pair is 1000 in every workload.
boots = {1: {"kernel/intr": 1100, "kernel/poll": 900, "kernel/intr2": 1000, "ours/kernel": 950,
             "ours-intr/kernel": 1200, "ours/poll": 3000, "ours-intr/intr": 2000},
         2: {"kernel/intr": 900, "kernel/poll": 800, "kernel/intr2": 1000, "ours/kernel": 1000,
             "ours-intr/kernel": 1300, "ours/poll": 1200, "ours-intr/intr": 1100}}
for boot, pairs in boots.items():
    logs = os.path.join(raw, f"vm-{boot}", "logs")
    os.makedirs(logs)
    with open(os.path.join(logs, "results.tsv"), "w") as f:
        # Boot 1 as the scenario wrote it before rounds (8 columns); boot 2 in two rounds (a
        # ninth column) 100 IOPS either side of the figure, whose mean the cells must use.
        for w in ("rr32x2", "mix32x2", "wr32x2", "rr8x1"):
            for host, target, iops in [("kernel", "kernel", 1000)] + \
                    [tuple(p.split("/")) + (v,) for p, v in pairs.items()]:
                if boot == 1:
                    f.write(f"{w}\t{host}\t{target}\t{iops}\t1.00\t1.00\t2.00\t7.0\n")
                else:
                    for rnd, delta in ((1, -100), (2, 100)):
                        f.write(f"{w}\t{host}\t{target}\t{iops + delta}\t1.00\t1.00\t2.00\t7.0"
                                f"\t{rnd}\n")
    # Boot 2's table names its run length (3 s): its CPU per I/O can be worked out.
    head = "2 rounds of 3 s runs, canned.\n" if boot == 2 else ""
    open(os.path.join(logs, "side_by_side.md"), "w").write(f"{head}| canned table of boot {boot} |\n")
    tsv.append(f"vm\tside_by_side\t{boot}\t0\tvm-{boot}/logs/side_by_side.md")
tsv.append("vm\tside_by_side\t3\t1\tvm-3/logs/side_by_side.md")
open(os.path.join(raw, "runs.tsv"), "w").write("\n".join(tsv) + "\n")
load = {"before": "0.50", "after": "0.70", "date": "2026-12-06 16:00 UTC"}
json.dump({"commit": "abc1234", "dirty": 0, "runs": 1, "seconds": 5, "min_time": "1",
           "sections": ["vm"], "loads": {"all": load, "vm": load},
           "phase_of": {"vm": "vm", "machine": "all"}, "stack_cells": []},
          open(os.path.join(raw, "meta.json"), "w"))
PY
doc="$work/vm.md"
out=$("$pr" --render "$rawvm" --output "$doc" 2>&1)
rc=$?
check "--render with a failed boot exits 1" $((rc != 1)) "exit $rc: $out"
expect_line "vm: a ratio per boot, boots that reached 1.00" "| randread QD32 x 2 | kernel host on our target, interrupt | 1.10 | 0.90 | 1 of 2 |"
expect_line "vm: equal counts as reached" "| randrw 70/30 QD32 x 2 | kernel host on our target, interrupt, 2 reactors | 1.00 | 1.00 | 2 of 2 |"
expect_line "vm: our host on the kernel target" "| randread QD8 x 1 | our host (interrupt) on the kernel target | 1.20 | 1.30 | 2 of 2 |"
expect_line "vm: the fastest pair, yes and no with the ratio" "| randwrite QD32 x 2 | yes (2.50) | NO (0.92) |"
expect_line "vm: the failed boot is listed" "- vm side_by_side_rxe boot 3: exit 1"
# Boot 2's kernel pair: 900 and 1,100 IOPS for 3 s, 2.00 s busy, 1.00 s each side: the mean of
# 2 / 2,700 and 2 / 3,300 I/Os is 673 us busy, 337 us per side; boot 1's table has no length.
expect_line "vm: CPU per I/O from the boot that names its run length" "| kernel host, kernel target | 673 (337\\* / 337) | 673 (337\\* / 337) |"
expect_line "vm: the first boot's table in full" "| canned table of boot 1 |"
expect_line "vm: later boots folded" "<details><summary>Boot 2 in full</summary>"

# --- the two-guest VM section (--vm-pair): the same renderer, the host guest's results folder,
# the target guest's whole busy time as target CPU (no \* mark on the kernel target)
out=$("$pr" --dry-run --only vm-pair --vm-pair --vm-boots 2 2>&1)
count=$(grep -c "tests/vm/vm-pair.sh .*--results RAW/vm-pair-[12] side_by_side_rxe" <<<"$out")
check "--vm-pair --vm-boots 2: two boots of vm-pair.sh" $((count != 2)) "$out"
rawpair="$work/rawpair"
mkdir -p "$rawpair"
python3 - "$rawvm" "$rawpair" <<'PY'
import json, os, shutil, sys
vm, pair = sys.argv[1:3]
for boot in (1, 2):
    shutil.copytree(os.path.join(vm, f"vm-{boot}", "logs"), os.path.join(pair, f"vm-pair-{boot}", "host", "logs"))
open(os.path.join(pair, "runs.tsv"), "w").write(
    "".join(f"vm-pair\tside_by_side\t{b}\t0\tvm-pair-{b}/host/logs/side_by_side.md\n" for b in (1, 2)))
meta = json.load(open(os.path.join(vm, "meta.json")))
meta.update(sections=["vm-pair"], loads={k.replace("vm", "vm-pair"): v for k, v in meta["loads"].items()},
            phase_of={"vm-pair": "vm-pair", "machine": "all"})
json.dump(meta, open(os.path.join(pair, "meta.json"), "w"))
PY
doc="$work/vm-pair.md"
printf '# Two guests\n<!-- perf-report:BEGIN vm-pair -->\nOLD\n<!-- perf-report:END vm-pair -->\n' >"$doc"
out=$("$pr" --render "$rawpair" --output "$doc" 2>&1)
check "--render of the two-guest boots" $? "$out"
expect_line "vm-pair: what ran" "2 boots of \`tests/vm/vm-pair.sh side_by_side_rxe\` (two guests, one vCPU each"
expect_line "vm-pair: a ratio per boot" "| randread QD32 x 2 | kernel host on our target, interrupt | 1.10 | 0.90 | 1 of 2 |"
expect_line "vm-pair: target CPU unmarked" "| kernel host, kernel target | 673 (337 / 337) | 673 (337 / 337) |"

check_summary perf_report
