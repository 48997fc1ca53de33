#!/usr/bin/env bash
# usage: tools/bench/perf-report.sh [OPTIONS]    (regenerates docs/performance.md; ~10 min)
#
# Regenerates every generated table of docs/performance.md from a clean commit: builds what it
# needs in a Release build folder, runs the benchmarks, and replaces each section between
#   <!-- perf-report:BEGIN NAME -->  and  <!-- perf-report:END NAME -->
# in place (the prose around them stays), each with a line naming the commit, the date and
# the machine's load before and after its runs. Sections (NAME):
#   machine    CPU model, cores, memory, OS, kernel, compiler, build type
#   ring       reactor messages: tests/bench/ring_bench
#   bdev       block devices: tests/bench/bdev_bench
#   verbs-sim  the simulated HCA: tests/bench/verbs_sim_bench
#   stack      the full stack in process, 4 KiB on a null namespace: QD1, QD128 and the four
#              seed workloads of the VM side-by-side run, each on one core (host_stack_bench:
#              host, sim and the target's reactor polled in turn from one thread) and on two
#              (nvmf_perf --sim -c 1: one host worker, the target's reactor on its own thread;
#              each such run between two measurements of the cache-line round trip between
#              the two CPUs, tests/bench/core_rtt_bench, which tells the vCPU placements apart),
#              and on two again with --sim-payload skip (the sim copies no READ or WRITE
#              payload, as a real HCA's DMA costs no CPU: the stack's own rate)
#   callgrind  instructions per I/O per side and the top items (tools/bench/callgrind-per-io.sh)
#   vm         with --vm only: the VM side-by-side run (tests/vm/vm-run.sh side_by_side_rxe)
#              in --vm-boots guest boots: per workload, each mixed pairing's IOPS over the
#              kernel pair's in each boot and how many boots reached 1.00 (issue 15's check),
#              whether our host on our target was the fastest pair, and each boot's table
#   vm-pair    with --vm-pair only: the same in two guests, one per side (tests/vm/vm-pair.sh
#              side_by_side_rxe: the targets in one guest, the hosts in the other, one vCPU
#              each, soft-RoCE over a virtio-net link), --vm-boots times
# Timed runs are interleaved: each of N rounds runs every benchmark of the section once,
# forward in odd rounds and backward in even ones, so drift favours none; the tables give the
# best of the N runs and their spread. Google Benchmark and nvmf_perf write JSON
# (--benchmark_out, --json); nothing is read off the screen.
#
# Options:
#   --build-dir DIR   Release build folder (build-release); configured if missing, refused
#                     if it is another build type; the targets are (re)built every run
#   --runs N          interleaved runs of every timed benchmark (5)
#   --seconds S       -t of each nvmf_perf run and min time of each host_stack_bench run (5)
#   --min-time S      --benchmark_min_time of ring, bdev and verbs_sim_bench (1)
#   --callgrind-ios N I/Os of the callgrind run (20000)
#   --only LIST       comma-separated sections to regenerate (default: all but vm)
#   --vm              also the VM side-by-side run (about 11 min a boot; needs QEMU, see tests/vm)
#   --vm-pair         also the two-guest VM run (about 15 min a boot)
#   --vm-boots N      guest boots of each VM run, one after the other (3)
#   --output FILE     write FILE instead of docs/performance.md (updated in place if it
#                     exists, else made from docs/performance.md)
#   --allow-dirty     run on a tree with uncommitted changes (a trial: refused with the
#                     document itself as the output; every generated line says so)
#   --keep DIR        keep the raw results (meta.json, runs.tsv, each run's JSON and log)
#   --render DIR      only write the sections from raw results kept with --keep
#   --build-lock FILE run cmake and ninja under flock FILE (a shared machine's build lock)
#   --vm-lock FILE    run the VM under flock FILE
#   --dry-run         print the sections and every command a run would make, run nothing
#   -h, --help        this text
# Exit status: 0 when written; 1 when a benchmark failed (the sections are written, the
# failures listed in them); 2 on bad usage, a dirty tree, a failed build or a missing marker.
set -euo pipefail
cd "$(dirname "$0")/../.."

doc=docs/performance.md
all_sections=(machine ring bdev verbs-sim stack callgrind vm vm-pair)
say() { echo "perf-report: $*" >&2; }
die() { say "$*"; exit 2; }
usage() { sed -n '2,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

build="build-release"
runs=5
seconds=5
min_time=1
callgrind_ios=20000
vm_boots=3
only=""
vm=0
vm_pair=0
output=""
allow_dirty=0
keep=""
render_dir=""
build_lock=""
vm_lock=""
dry_run=0
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (--help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) need "$@"; build="$2"; shift 2 ;;
    --runs) need "$@"; runs="$2"; shift 2 ;;
    --seconds) need "$@"; seconds="$2"; shift 2 ;;
    --min-time) need "$@"; min_time="$2"; shift 2 ;;
    --callgrind-ios) need "$@"; callgrind_ios="$2"; shift 2 ;;
    --vm-boots) need "$@"; vm_boots="$2"; shift 2 ;;
    --only) need "$@"; only="$2"; shift 2 ;;
    --vm) vm=1; shift ;;
    --vm-pair) vm_pair=1; shift ;;
    --output) need "$@"; output="$2"; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --keep) need "$@"; keep="$2"; shift 2 ;;
    --render) need "$@"; render_dir="$2"; shift 2 ;;
    --build-lock) need "$@"; build_lock="$2"; shift 2 ;;
    --vm-lock) need "$@"; vm_lock="$2"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage 0 ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
done
whole() {  # whole OPTION VALUE MIN: VALUE is a whole number >= MIN, or exit 2
  if ! [[ "$2" =~ ^[0-9]+$ ]] || (($2 < $3)); then die "$1: '$2' is not a whole number >= $3"; fi
}
whole --runs "$runs" 1
whole --seconds "$seconds" 1
whole --callgrind-ios "$callgrind_ios" 1
whole --vm-boots "$vm_boots" 1
[[ "$min_time" =~ ^[0-9]*\.?[0-9]+$ && "$min_time" =~ [1-9] ]] ||
  die "--min-time: '$min_time' is not a positive number of seconds"

# The sections to regenerate, in document order.
sections=()
if [[ -n "$only" ]]; then
  IFS=, read -ra wanted <<<"$only"
  for name in "${wanted[@]}"; do
    [[ " ${all_sections[*]} " == *" $name "* ]] || die "--only: '$name' is not one of ${all_sections[*]}"
  done
  for name in "${all_sections[@]}"; do
    [[ ",$only," != *",$name,"* ]] || sections+=("$name")
  done
  if ((vm)) && [[ " ${sections[*]} " != *" vm "* ]]; then sections+=(vm); fi
  if ((vm_pair)) && [[ " ${sections[*]} " != *" vm-pair "* ]]; then sections+=(vm-pair); fi
else
  sections=(machine ring bdev verbs-sim stack callgrind)
  ((!vm)) || sections+=(vm)
  ((!vm_pair)) || sections+=(vm-pair)
fi
has() { [[ " ${sections[*]} " == *" $1 "* ]]; }

if [[ -z "$output" ]]; then output="$doc"; fi
output_is_doc() { [[ "$(realpath -m "$output")" == "$(realpath -m "$doc")" ]]; }
# Changed tracked files (untracked ones are ignored: they are not in the commit's build, and a
# results folder may sit in the tree).
dirty_count() { git status --porcelain --untracked-files=no 2>/dev/null | wc -l; }

# ---- rendering: the sections from a raw results folder into $output (pure: no benchmark)
render() {  # render RAW-DIR
  [[ -f "$output" ]] || cp "$doc" "$output"
  python3 - "$1" "$output" <<'PY'
import json, math, os, re, statistics, sys

raw, out_path = sys.argv[1:3]
meta = json.load(open(os.path.join(raw, "meta.json")))
runs = {}  # (section, cell) -> [{"round", "rc", "file"}]
with open(os.path.join(raw, "runs.tsv")) as f:
    for line in f:
        if not line.strip():
            continue
        section, cell, rnd, rc, name = line.rstrip("\n").split("\t")
        runs.setdefault((section, cell), []).append(
            {"round": int(rnd), "rc": int(rc), "file": os.path.join(raw, name)})
failures = []

def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def si(x, digits=3):
    """1234567 -> '1.23 M', 45600 -> '45.6 k'."""
    for factor, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= factor:
            return f"{x / factor:.{digits}g}{unit}"
    return f"{x:.{digits}g}"

def ns(seconds):
    x = seconds * 1e9
    return f"{x:.1f} ns" if x < 100 else f"{x:.0f} ns"

def spread(values):
    """(max - min) / max of the runs, in percent."""
    return 0.0 if not values or max(values) == 0 else 100.0 * (max(values) - min(values)) / max(values)

def gbench_rates(section, binary):
    """name -> [items_per_second per run] (and bytes_per_second), from each run's JSON."""
    items, bytes_ = {}, {}
    for r in runs.get((section, binary), []):
        j = load_json(r["file"])
        if r["rc"] != 0 or j is None:
            failures.append(f"{binary} round {r['round']}: exit {r['rc']}"
                            + ("" if j is not None else ", no JSON"))
            continue
        for b in j.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            name = re.sub(r"/(real_time|process_time)$", "", b["name"])
            if b.get("error_occurred"):
                failures.append(f"{binary} {name} round {r['round']}: {b.get('error_message')}")
                continue
            items.setdefault(name, []).append(float(b.get("items_per_second", 0)))
            if "bytes_per_second" in b:
                bytes_.setdefault(name, []).append(float(b["bytes_per_second"]))
    return items, bytes_

def best_and_spread(values):
    return max(values), spread(values)

RING = [("BM_MpscRingPushPopSameThread",
         "`try_push` + `try_pop` on one thread, no cache-line transfer"),
        ("BM_MpscRingCrossThread", "one producer thread, one consumer thread, 4096-slot ring"),
        ("BM_ReactorSendAndRunSameThread",
         "`Reactor::send` + `poll_once` running the message (harness)"),
        ("BM_ReactorSendCrossThread", "`send` from a thread to a reactor thread in poll mode")]

def ring_section():
    items, _ = gbench_rates("ring", "ring_bench")
    n = meta["runs"]
    rows = [f"| benchmark | what it measures | time per item | items per second, best of {n} "
            "| spread of the runs |", "|---|---|---|---|---|"]
    for name, what in RING:
        if name not in items:
            failures.append(f"ring_bench: no result for {name}")
            continue
        best, sp = best_and_spread(items[name])
        rows.append(f"| `{name}` | {what} | {ns(1 / best)} | {si(best)}/s | {sp:.0f}% |")
    return rows

BDEV = [("null, read", "BM_NullRead4k"), ("null, write", "BM_NullWrite4k"),
        ("malloc, read", "BM_MallocRead4k"), ("malloc, write", "BM_MallocWrite4k")]

def bdev_section():
    items, _ = gbench_rates("bdev", "bdev_bench")
    n = meta["runs"]
    rows = [f"| backend, op | qd 1: ns per I/O | qd 1: I/O per s | qd 32: I/O per s "
            f"| spread of the {n} runs (qd 1, qd 32) |", "|---|---|---|---|---|"]
    for label, name in BDEV:
        qd1, qd32 = items.get(name + "/qd:1"), items.get(name + "/qd:32")
        if not qd1 or not qd32:
            failures.append(f"bdev_bench: no result for {name}")
            continue
        rows.append(f"| {label} | {1e9 / max(qd1):.0f} | {si(max(qd1))} | {si(max(qd32))} "
                    f"| {spread(qd1):.0f}%, {spread(qd32):.0f}% |")
    return rows

SIM = [("BM_SimSendRecv/64", "SEND + RECV, 64 B"), ("BM_SimSendRecv/4096", "SEND + RECV, 4 KiB"),
       ("BM_SimRdmaWrite/4096", "RDMA WRITE, 4 KiB")]

def sim_section():
    items, bytes_ = gbench_rates("verbs-sim", "verbs_sim_bench")
    n = meta["runs"]
    rows = [f"| benchmark | per WR | WRs per second, best of {n} | payload | spread of the runs |",
            "|---|---|---|---|---|"]
    for name, what in SIM:
        if name not in items:
            failures.append(f"verbs_sim_bench: no result for {name}")
            continue
        best, sp = best_and_spread(items[name])
        payload = max(bytes_.get(name, [0])) / 1e9
        rows.append(f"| `{name}` ({what}) | {ns(1 / best)} | {si(best)}/s | {payload:.3g} GB/s "
                    f"| {sp:.0f}% |")
    return rows

def us(x):
    return f"{x:.1f}" if x < 1000 else f"{x:,.0f}"

# A run whose process got less of its cores than this shared them with other work.
LOW_SHARE = 0.95

# Two groups of round trips whose medians are more than this many times apart are two
# placements of the vCPUs: a two-core run in the upper group ran with its vCPUs apart
# (far_threshold()).
FAR = 2.0

# The stack section's run variants: one core (host_stack_bench), two (nvmf_perf --sim), two
# with the sim's payload copies skipped (--sim-payload skip).
VARIANTS = ("1", "2", "2s")
VARIANT_TOOL = {"1": "1 (`host_stack_bench`)", "2": "2 (`nvmf_perf --sim`)",
                "2s": "2 (`--sim-payload skip`)"}
VARIANT_NOTE = {"1": "", "2": "", "2s": ", payloads skipped"}  # after a cell's label

def rtt_tag(cell, variant):
    """The round-trip files' name part of a two-core variant (as rtt_cmd names them)."""
    return cell if variant == "2" else f"{cell}-{variant}"

def rtt_ns(tag, rnd, when):
    """The cache-line round trip measured before or after a two-core run, in ns, or None."""
    j = load_json(os.path.join(raw, f"rtt-{tag}-{rnd}-{when}.json"))
    marks = [] if j is None else [b for b in j.get("benchmarks", [])
                                  if b.get("run_type", "iteration") == "iteration"
                                  and not b.get("error_occurred")]
    if not marks:
        return None
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}.get(marks[0].get("time_unit", "ns"), 1.0)
    return float(marks[0]["real_time"]) * scale

def stack_runs(cell, cores):
    """Each run of a cell: {round, iops, share, lat, rtt: (before, after)}; failures noted."""
    out = []
    for r in runs.get(("stack", f"{cell['name']}/{cores}"), []):
        j = load_json(r["file"])
        where = (f"{cell['label']}, " + ("1 core" if cores == "1" else "2 cores") +
                 VARIANT_NOTE[cores] + f", round {r['round']}")
        if r["rc"] != 0 or j is None:
            failures.append(f"{where}: exit {r['rc']}" + ("" if j is not None else ", no JSON"))
            continue
        run = {"round": r["round"], "share": None, "lat": None, "rtt": (None, None)}
        if cores == "1":  # host_stack_bench: Google Benchmark's JSON
            marks = [b for b in j.get("benchmarks", [])
                     if b.get("run_type", "iteration") == "iteration"]
            if not marks or marks[0].get("error_occurred") or "IOPS" not in marks[0]:
                failures.append(f"{where}: " + (marks[0].get("error_message", "no IOPS")
                                                if marks else "no benchmark"))
                continue
            run["iops"] = float(marks[0]["IOPS"])
            if marks[0].get("real_time"):
                run["share"] = float(marks[0]["cpu_time"]) / float(marks[0]["real_time"])
        else:  # nvmf_perf --json
            bad = int(j.get("errors", 0)) + int(j.get("verify_failures", 0))
            if bad or not j.get("account", {}).get("ok", True):
                failures.append(f"{where}: {j.get('errors')} errors, "
                                f"{j.get('verify_failures')} verify failures")
                continue
            run["iops"] = float(j["iops"])
            if "cpu_s" in j:
                run["share"] = float(j["cpu_s"]) / (2 * float(meta["seconds"]))
            run["lat"] = j["lat_us"]
            tag = rtt_tag(cell["name"], cores)
            run["rtt"] = (rtt_ns(tag, r["round"], "before"), rtt_ns(tag, r["round"], "after"))
        out.append(run)
    return out

def far_threshold(rtts):
    """The round trip above which a run counts as far, as (below, above): the sitting's round
    trips split in two where the split is tightest in log scale (two-means), kept when the
    upper group's median exceeds FAR x the lower's; None when not (one placement all along).
    Not a multiple of the shortest (one freak short reading, a pair of hyperthreads, would
    make every run far) nor the widest jump between neighbours (readings taken while a vCPU
    moved fill the gap)."""
    xs = sorted(x for x in rtts if x > 0)
    logs = [math.log(x) for x in xs]
    def spread(part):
        mean = sum(part) / len(part)
        return sum((v - mean) ** 2 for v in part)
    best = None
    for k in range(1, len(xs)):
        cost = spread(logs[:k]) + spread(logs[k:])
        if best is None or cost < best[0]:
            best = (cost, k)
    if best is None:
        return None
    k = best[1]
    if statistics.median(xs[k:]) <= FAR * statistics.median(xs[:k]):
        return None
    return xs[k - 1], xs[k]

def is_far(run, gap):
    return gap is not None and any(x is not None and x > gap[0] for x in run["rtt"])

def stack_section():
    n = meta["runs"]
    # Results kept before the skip runs existed have none: their table stays as it was.
    variants = [v for v in VARIANTS if v != "2s" or
                any(("stack", f"{c['name']}/2s") in runs for c in meta["stack_cells"])]
    cells = {(c["name"], v): stack_runs(c, v) for c in meta["stack_cells"] for v in variants}
    all_rtt = [x for rs in cells.values() for r in rs for x in r["rtt"] if x is not None]
    gap = far_threshold(all_rtt)
    rows = [f"{n} interleaved runs of each, {meta['seconds']} s each (nvmf_perf's `-t`, "
            "host_stack_bench's `--benchmark_min_time`, wall-clock rates); latency percentiles "
            "of the best nvmf_perf run (host_stack_bench measures none). CPU: the share of its "
            "cores the process got over the run (process CPU over cores x wall), lowest of the "
            f"runs; under {LOW_SHARE:.0%} something else was running, and the run's IOPS "
            "mean little (the host worker and the reactor wait on each other: a half core "
            "taken from one halves both). Round trip: a cache line's between the two CPUs "
            "(`core_rtt_bench`), measured before and after each two-core run, the range over "
            "the runs; a run is *far* when either lies in the upper of two groups the "
            "sitting's round trips split into (tightest split in log scale, kept when the "
            f"groups' medians are more than {FAR:g} x apart)"
            + (" (none: one placement all along)" if gap is None else
               f" (here from {gap[0]:.0f} to {gap[1]:.0f} ns)") +
            ": its vCPUs were placed apart." +
            ("" if "2s" not in variants else
             " `--sim-payload skip`: the same two-core run, but the sim copies no RDMA READ or "
             "WRITE payload of the host's I/O buffers (every check and completion as before; "
             "a real HCA moves payloads by DMA, without the CPU, while the sim copies them on "
             "the posting thread, mostly the target's reactor): the rate of the stack itself."),
            "",
            f"| workload (4 KiB) | cores | IOPS, best of {n} | median | slowest | spread "
            "| CPU | round trip ns | p50 us | p99 us | p99.9 us |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for cell in meta["stack_cells"]:
        for cores in variants:
            rs = cells[(cell["name"], cores)]
            label = cell["label"]
            tool = VARIANT_TOOL[cores]
            if not rs:
                rows.append(f"| {label} | {tool} | failed | | | | | | | | |")
                continue
            iops = [r["iops"] for r in rs]
            shares = [r["share"] for r in rs if r["share"] is not None]
            best = max(rs, key=lambda r: r["iops"])
            lat = ["", "", ""] if best["lat"] is None else \
                [us(best["lat"][k]) for k in ("p50", "p99", "p999")]
            runs_note = "" if len(iops) == n else f" ({len(iops)} of {n} runs)"
            share = "" if not shares else f"{min(shares):.0%}" + \
                (f" ({sum(x < LOW_SHARE for x in shares)} low)" if min(shares) < LOW_SHARE else "")
            rtts = [x for r in rs for x in r["rtt"] if x is not None]
            far = sum(is_far(r, gap) for r in rs)
            rtt = "" if not rtts else f"{min(rtts):.0f}-{max(rtts):.0f}" + (f" ({far} far)" if far else "")
            rows.append(f"| {label} | {tool} | {max(iops):,.0f}{runs_note} "
                        f"| {statistics.median(iops):,.0f} | {min(iops):,.0f} "
                        f"| {spread(iops):.0f}% | {share} | {rtt} | {' | '.join(lat)} |")
    near_far = []
    for cell, cores in ((c, v) for c in meta["stack_cells"] for v in variants if v != "1"):
        rs = cells[(cell["name"], cores)]
        near = [r["iops"] for r in rs if gap is not None and not is_far(r, gap)
                and None not in r["rtt"]]
        far = [r["iops"] for r in rs if is_far(r, gap)]
        label = cell["label"] + VARIANT_NOTE[cores]
        if near and far:
            near_far.append(f"| {label} | {len(near)} | {statistics.median(near):,.0f} "
                            f"| {len(far)} | {statistics.median(far):,.0f} "
                            f"| {statistics.median(near) / statistics.median(far):.2f} |")
    if near_far:
        rows += ["", "Two-core runs by placement (median IOPS of the near and the far runs of each "
                 "workload):", "",
                 "| workload (4 KiB) | near runs | median IOPS | far runs | median IOPS | near / far |",
                 "|---|---:|---:|---:|---:|---:|"] + near_far
    return rows

BUDGET = {"host": "450", "target": "1,000"}

def callgrind_section():
    r = (runs.get(("callgrind", "default")) or [None])[0]
    j = load_json(r["file"]) if r else None
    if r is None or r["rc"] != 0 or j is None:
        failures.append("callgrind-per-io.sh: " + ("not run" if r is None else f"exit {r['rc']}"))
        return ["callgrind-per-io.sh failed: no figures."]
    rows = [f"Exactly {j['ios']:,} 4 KiB random reads at QD128, `global` policy on `rxe`, one "
            "thread (`callgrind-per-io.sh --ios`; the counts are exact, a rerun gives the same).",
            "", "| part | instructions per I/O | budget (issue 15) |", "|---|---|---|",
            f"| host side: libnvmf_host and the RDMA host queue | {j['host']:,.0f} | {BUDGET['host']} |",
            f"| the benchmark's own callback (count the I/O, draw the next LBA) | {j['app']:,.0f} | |",
            f"| target side: RDMA transport, target core, null bdev, reactor | {j['target']:,.0f} "
            f"| {BUDGET['target']} |"]
    sim = f"| simulated HCA"
    if "sim_host" in j:
        sim += f" (called by the host: {j['sim_host']:,.0f}, by the target: {j['sim_target']:,.0f})"
    rows += [f"{sim} | {j['sim']:,.0f} | |", f"| total | {j['total']:,.0f} | |"]
    top = j.get("top")
    if top:
        rows += ["", "The largest items by own instructions per I/O (inlined code counts where it "
                 "was inlined):", "", "| side | function | instructions per I/O |", "|---|---|---:|"]
        for side in ("host", "target", "sim"):
            for name, count in top.get(side, [])[:5]:
                rows.append(f"| {side} | `{name}` | {count:,.0f} |")
    return rows

def machine_section():
    m = meta["machine"]
    return [f"{m['cpu']}, {m['cores']} cores, {m['memory']}, {m['os']}, kernel {m['kernel']}; "
            f"{m['compiler']}, `-DCMAKE_BUILD_TYPE={m['build_type']}` in `{m['build']}`, "
            f"Google Benchmark {m['gbench']}. {meta['runs']} interleaved runs of each timed "
            f"benchmark: ring, bdev and verbs_sim_bench with `--benchmark_min_time="
            f"{meta.get('min_time', '?')}`, the full stack {meta['seconds']} s each."]

def vm_boot_runs(r):
    """One boot's runs from the scenario's results.tsv: {(workload, host, target): [(IOPS,
    target CPU s, host CPU s, guest busy s)]}, one entry per round (a ninth column; results
    without it: one round)."""
    runs_of = {}
    path = os.path.join(os.path.dirname(r["file"]), "results.tsv")
    try:
        with open(path) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                if len(cols) in (8, 9):
                    runs_of.setdefault(tuple(cols[:3]), []).append(
                        tuple(float(cols[i]) for i in (3, 4, 5, 6)))
    except OSError:
        pass
    return runs_of

def vm_boot_iops(runs_of):
    """{(workload, host, target): IOPS}, the mean over the boot's rounds."""
    return {k: statistics.mean(run[0] for run in v) for k, v in runs_of.items()}

def vm_boot_cpu(r, runs_of):
    """One boot's CPU per I/O in us: {(workload, host, target): (guest busy, target, host)},
    each run's CPU seconds (over its wall time, start-up included) over IOPS x the scenario's
    run length, the mean over the boot's rounds; {} when the run length is not in the table."""
    try:
        head = open(r["file"]).readline()
    except OSError:
        return {}
    m = re.search(r"(\d+) s (?:runs|per run)", head)
    if not m:
        return {}
    seconds, per = float(m.group(1)), {}
    for key, rounds in runs_of.items():
        for iops, tgt, hst, busy in rounds:
            if iops > 0:
                ios = iops * seconds
                per.setdefault(key, []).append((busy / ios * 1e6, tgt / ios * 1e6, hst / ios * 1e6))
    return {k: tuple(statistics.mean(x[i] for x in v) for i in range(3)) for k, v in per.items()}

# The scenario's names (tests/vm/scenarios/side_by_side_rxe.sh).
VM_WORKLOADS = {"rr32x2": "randread QD32 x 2", "mix32x2": "randrw 70/30 QD32 x 2",
                "wr32x2": "randwrite QD32 x 2", "rr8x1": "randread QD8 x 1"}
VM_CPU_PAIRS = [("kernel", "kernel", "kernel host, kernel target"),
                ("kernel", "poll", "kernel host, our target (poll)"),
                ("kernel", "intr2", "kernel host, our target (interrupt, 2 reactors)"),
                ("ours-intr", "kernel", "our host (interrupt), kernel target"),
                ("ours-intr", "intr2", "our host (interrupt), our target (interrupt, 2 reactors)")]
VM_MIXED = [("kernel", "poll", "kernel host on our target, poll"),
            ("kernel", "intr", "kernel host on our target, interrupt"),
            ("kernel", "intr2", "kernel host on our target, interrupt, 2 reactors"),
            ("ours", "kernel", "our host (polling) on the kernel target"),
            ("ours-intr", "kernel", "our host (interrupt) on the kernel target")]

def vm_section(kind="vm"):
    two_guests = kind == "vm-pair"
    boots, cpu = [], []
    for r in sorted(runs.get((kind, "side_by_side"), []), key=lambda r: r["round"]):
        runs_of = vm_boot_runs(r) if r["rc"] == 0 and os.path.exists(r["file"]) else {}
        rows = vm_boot_iops(runs_of)
        if not rows:
            failures.append(f"{kind} side_by_side_rxe boot {r['round']}: exit {r['rc']}"
                            + ("" if r["rc"] != 0 else ", no results"))
            continue
        boots.append((r, rows))
        boot_cpu = vm_boot_cpu(r, runs_of)
        if boot_cpu:
            cpu.append(boot_cpu)
    if not boots:
        return ["The VM runs failed: no figures."]
    n = len(boots)
    heads = " | ".join(f"boot {r['round']}" for r, _ in boots)
    what = (f"{n} boot{'s' if n > 1 else ''} of `tests/vm/vm-pair.sh side_by_side_rxe` (two "
            "guests, one vCPU each: the targets in one, the hosts in the other), one after the "
            "other. " if two_guests else
            f"{n} guest boot{'s' if n > 1 else ''} of `side_by_side_rxe`, one after the other. ")
    out = [what +
           "Each cell: the pairing's IOPS over the kernel host's on the kernel target (k/k), same "
           "workload, same boot, each the mean of the boot's rounds (the targets in alternating "
           "order); the last column counts the boots where it reached 1.00 "
           "(issue 15 asks for at least 2 of 3).", "",
           f"| workload | pairing | {heads} | boots >= 1.00 |",
           "|---|---|" + "---:|" * n + "---:|"]
    for w, wname in VM_WORKLOADS.items():
        for host, target, label in VM_MIXED:
            cells, reached = [], 0
            for _, rows in boots:
                base, pair = rows.get((w, "kernel", "kernel")), rows.get((w, host, target))
                if not base or not pair:
                    cells.append("-")
                    continue
                ratio = pair / base
                reached += ratio >= 1.0
                cells.append(f"{ratio:.2f}")
            out.append(f"| {wname} | {label} | {' | '.join(cells)} | {reached} of {n} |")
    out += ["", "Our host on our target, the fastest of all pairs (its best mode against the "
            "best of every other pair; the ratio between them):", "",
            f"| workload | {heads} |", "|---|" + "---:|" * n]
    for w, wname in VM_WORKLOADS.items():
        cells = []
        for _, rows in boots:
            ours = [v for (ww, h, t), v in rows.items()
                    if ww == w and h != "kernel" and t != "kernel"]
            others = [v for (ww, h, t), v in rows.items()
                      if ww == w and (h == "kernel" or t == "kernel")]
            if not ours or not others:
                cells.append("-")
                continue
            ratio = max(ours) / max(others)
            cells.append(f"{'yes' if ratio >= 1.0 else 'NO'} ({ratio:.2f})")
        out.append(f"| {wname} | {' | '.join(cells)} |")
    if cpu:
        out += ["", "Guest CPU per I/O in microseconds, the median of the boots: both guests' "
                "busy time (target CPU: the target guest's busy time, whichever target / host "
                "CPU: the host process's) over the run, per I/O done.", ""] if two_guests else \
               ["", "Guest CPU per I/O in microseconds, the median of the boots: both vCPUs' busy "
                "time (target CPU / host CPU) over the run, per I/O done; the kernel target's "
                "CPU is all kernel time less the host process's (an upper bound, \\*). What "
                "is in neither process is kernel work: soft-RoCE, wake-ups, system calls' "
                "devices.", ""]
        out += [
                "| pairing | " + " | ".join(VM_WORKLOADS.values()) + " |",
                "|---|" + "---:|" * len(VM_WORKLOADS)]
        for host, target, label in VM_CPU_PAIRS:
            cells = []
            for w in VM_WORKLOADS:
                got = [c[(w, host, target)] for c in cpu if (w, host, target) in c]
                if not got:
                    cells.append("-")
                    continue
                busy, tgt, hst = (statistics.median(g[i] for g in got) for i in range(3))
                mark = "\\*" if target == "kernel" and not two_guests else ""
                cells.append(f"{busy:.0f} ({tgt:.0f}{mark} / {hst:.0f})")
            out.append(f"| {label} | {' | '.join(cells)} |")
    for i, (r, _) in enumerate(boots):
        table = open(r["file"]).read().rstrip("\n").split("\n")
        if i == 0:
            out += ["", f"Boot {r['round']} in full:", ""] + table
        else:
            out += ["", f"<details><summary>Boot {r['round']} in full</summary>", ""] + table + \
                   ["", "</details>"]
    return out

RENDER = {"machine": machine_section, "ring": ring_section, "bdev": bdev_section,
          "verbs-sim": sim_section, "stack": stack_section, "callgrind": callgrind_section,
          "vm": vm_section, "vm-pair": lambda: vm_section("vm-pair")}

text = open(out_path).read()
for name in meta["sections"]:
    pattern = re.compile(r"(<!-- perf-report:BEGIN %s -->\n).*?(<!-- perf-report:END %s -->)"
                         % (re.escape(name), re.escape(name)), re.S)
    if not pattern.search(text):
        print(f"perf-report: {out_path} has no <!-- perf-report:BEGIN {name} --> ... "
              f"<!-- perf-report:END {name} --> markers: nothing written", file=sys.stderr)
        sys.exit(2)
    before = len(failures)
    body = RENDER[name]()
    phase = meta["loads"][meta["phase_of"][name]]
    line = (f"_Generated by `tools/bench/perf-report.sh` at commit {meta['commit']} on "
            f"{phase['date']}, load {phase['before']} -> {phase['after']}")
    if meta["dirty"]:
        line += (f"; NOT from a clean commit: the tree had {meta['dirty']} changed files, "
                 "so these figures belong to no commit")
    line += "._"
    body = [line, ""] + body
    if len(failures) > before:
        body += ["", "**Failed runs:**", ""] + [f"- {x}" for x in failures[before:]]
    section = "\n".join(body) + "\n"
    text = pattern.sub(lambda m: m.group(1) + section + m.group(2), text)
open(out_path, "w").write(text)
for x in failures:
    print(f"perf-report: FAILED {x}", file=sys.stderr)
print(f"perf-report: wrote {', '.join(meta['sections'])} into {out_path}", file=sys.stderr)
sys.exit(1 if failures else 0)
PY
}

if [[ -n "$render_dir" ]]; then
  [[ -f "$render_dir/meta.json" && -f "$render_dir/runs.tsv" ]] ||
    die "--render: $render_dir holds no meta.json and runs.tsv (made with --keep)"
  if output_is_doc && [[ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["dirty"])' "$render_dir/meta.json")" != 0 ]]; then
    die "--render: $render_dir is from a tree with uncommitted changes: not written into $doc (--output elsewhere)"
  fi
  render "$render_dir"
  exit $?
fi

# ---- the tree: figures name a commit, so they come from one
dirty=$(dirty_count)
if ((dry_run)); then
  :  # the dry run says what a run would do with this tree
elif ((dirty)) && ! ((allow_dirty)); then
  git status --porcelain --untracked-files=no | head -5 | sed 's/^/  /' >&2
  die "refusing to run: the tree has uncommitted changes ($dirty changed files in git status;" \
    "untracked files are ignored). The figures must belong to a commit: commit first, or pass" \
    "--allow-dirty with --output elsewhere for a trial."
elif ((dirty)); then
  output_is_doc && die "--allow-dirty writes only elsewhere than $doc: add --output FILE"
  say "WARNING: the tree has $dirty uncommitted changes: these figures are NOT from a clean" \
    "commit (every generated line says so)"
fi

# ---- the commands
perf="$build/tools/nvmf_perf"
stack_bench="$build/tests/bench/host_stack_bench"
# The full stack's cells: name, label, nvmf_perf's arguments, host_stack_bench's. The seed
# workloads are those of the VM side-by-side run (tests/vm/scenarios/side_by_side_rxe.sh), with
# its nvmf_perf arguments: one worker at fio's total depth (2 jobs x 32 = -q 64).
stack_cells=(
  "qd1|randread QD1|-w randread -q 1|--queue-depth=1"
  "qd128|randread QD128|-w randread -q 128|--queue-depth=128"
  "randread-qd32x2|seed: randread QD32 x 2 (-q 64)|-w randread -q 64|--queue-depth=64"
  "randrw70-qd32x2|seed: randrw 70/30 QD32 x 2 (-q 64)|-w randrw -M 70 -q 64|--queue-depth=64 --read-percent=70"
  "randwrite-qd32x2|seed: randwrite QD32 x 2 (-q 64)|-w randwrite -q 64|--queue-depth=64 --read-percent=0"
  "randread-qd8|seed: randread QD8 x 1 (-q 8)|-w randread -q 8|--queue-depth=8"
)
targets=()
gbench=()  # section:binary, in run order
has ring && gbench+=(ring:ring_bench)
has bdev && gbench+=(bdev:bdev_bench)
has verbs-sim && gbench+=(verbs-sim:verbs_sim_bench)
for entry in "${gbench[@]}"; do targets+=("${entry#*:}"); done
has stack && targets+=(nvmf_perf host_stack_bench core_rtt_bench)
has callgrind && [[ " ${targets[*]-} " != *" host_stack_bench "* ]] && targets+=(host_stack_bench)
if has vm || has vm-pair; then
  [[ " ${targets[*]-} " == *" nvmf_perf "* ]] || targets+=(nvmf_perf)
  targets+=(nvmf_tgt)
fi

# show WORDS...: the command as it would be typed
show() { local IFS=' '; printf '  %s\n' "$*"; }
locked() {  # locked LOCK COMMAND...: COMMAND under flock LOCK when LOCK is set
  local lock="$1"
  shift
  if [[ -n "$lock" ]]; then flock "$lock" "$@"; else "$@"; fi
}
configure_cmd=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVMF_BUILD_BENCH=ON)
build_cmd=(ninja -C "$build" -j"$(nproc)" "${targets[@]}")
# Each *_cmd sets cmd (the words) and out (the JSON it writes, relative to the raw folder).
gbench_cmd() {  # gbench_cmd BINARY ROUND RAW
  out="$1-$2.json"
  cmd=("$build/tests/bench/$1" "--benchmark_min_time=$min_time" "--benchmark_out=$3/$out"
       --benchmark_out_format=json)
}
stack_cmd() {  # stack_cmd CELL-INDEX VARIANT ROUND RAW (VARIANT: 1, 2 or 2s, see variants())
  local name pargs sargs
  IFS='|' read -r name _ pargs sargs <<<"${stack_cells[$1]}"
  out="stack-$name-$2-$3.json"
  if [[ "$2" != 1 ]]; then
    # shellcheck disable=SC2206 # the cell's arguments are words
    cmd=("$perf" --sim $pargs -o 4096 -c 1 -t "$seconds" --seed 1 --json "$4/$out")
    [[ "$2" == 2 ]] || cmd+=(--sim-payload skip)
  else
    # shellcheck disable=SC2206
    cmd=("$stack_bench" "--benchmark_min_time=$seconds" $sargs "--benchmark_out=$4/$out"
         --benchmark_out_format=json)
  fi
}
rtt_cmd() {  # rtt_cmd CELL-INDEX VARIANT ROUND before|after RAW: the round trip around a two-core run
  local tag variant="$2" round="$3" when="$4" raw_dir="$5"
  tag=$(stack_cell_name "$1")
  [[ "$variant" == 2 ]] || tag+="-$variant"  # rtt_tag() in the renderer
  out="rtt-$tag-$round-$when.json"
  cmd=("$build/tests/bench/core_rtt_bench" --benchmark_min_time=0.1 "--benchmark_out=$raw_dir/$out"
       --benchmark_out_format=json)
}
callgrind_cmd() {  # callgrind_cmd RAW
  out=callgrind.json
  cmd=(tools/bench/callgrind-per-io.sh --ios "$callgrind_ios" --json "$1/$out" "$build")
}
vm_cmd() {  # vm_cmd SECTION RAW BOOT: side_by_side_rxe in one guest (vm: vm-run.sh writes
  # RAW/vm-BOOT/logs/side_by_side.md, and results.tsv) or two (vm-pair: vm-pair.sh, the host
  # guest's RAW/vm-pair-BOOT/host/logs/...); vm_limit: run's limit, past the guests' own
  local runner=tests/vm/vm-run.sh timeout=1800 logs="$1-$3/logs"
  vm_limit=2400
  if [[ "$1" == vm-pair ]]; then
    runner=tests/vm/vm-pair.sh timeout=2400 logs="$1-$3/host/logs" vm_limit=2700
  fi
  out="$logs/side_by_side.md"
  cmd=()
  [[ -z "$vm_lock" ]] || cmd=(flock "$vm_lock")
  cmd+=("$runner" --build-dir "$build" --timeout "$timeout" --results "$2/$1-$3" side_by_side_rxe
        "$(realpath -m "$build")/tools/nvmf_tgt" "$(realpath -m "$perf")")
}
# order ROUND COUNT: the indexes 0..COUNT-1, forward in odd rounds, backward in even ones
order() {
  local i
  if (($1 % 2)); then for ((i = 0; i < $2; i++)); do echo "$i"; done
  else for ((i = $2 - 1; i >= 0; i--)); do echo "$i"; done; fi
}
stack_cell_name() { cut -d'|' -f1 <<<"${stack_cells[$1]}"; }
# The stack cell's runs in round ROUND: 1 core, 2 cores, 2 cores with --sim-payload skip (2s);
# the two-core pair in turn first, so drift favours neither.
variants() { ((${1} % 2)) && echo 2 2s 1 || echo 1 2s 2; }

if ((dry_run)); then
  echo "perf-report --dry-run: sections ${sections[*]}; ${runs} runs each; into $output"
  if ((dirty)); then
    echo "tree: $dirty changed files: a run refuses$( ((allow_dirty)) && echo ' unless --allow-dirty (then every generated line says the figures are not from a clean commit)')"
  else
    echo "tree: clean at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  fi
  echo "build ($build, Release):"
  [[ -f "$build/build.ninja" ]] || show "${configure_cmd[@]}"
  ((${#targets[@]} == 0)) || show "${build_cmd[@]}"
  for name in "${sections[@]}"; do
    echo "section $name:"
    case "$name" in
      machine) show "(reads /proc/cpuinfo, /proc/meminfo, /etc/os-release, uname -r, the compiler)" ;;
      ring | bdev | verbs-sim)
        for entry in "${gbench[@]}"; do
          [[ "${entry%%:*}" == "$name" ]] || continue
          for ((round = 1; round <= runs; round++)); do gbench_cmd "${entry#*:}" "$round" RAW; show "${cmd[@]}"; done
        done ;;
      stack)
        for ((round = 1; round <= runs; round++)); do
          for i in $(order "$round" "${#stack_cells[@]}"); do
            for variant in $(variants "$round"); do
              if [[ "$variant" != 1 ]]; then rtt_cmd "$i" "$variant" "$round" before RAW; show "${cmd[@]}"; fi
              stack_cmd "$i" "$variant" "$round" RAW; show "${cmd[@]}"
              if [[ "$variant" != 1 ]]; then rtt_cmd "$i" "$variant" "$round" after RAW; show "${cmd[@]}"; fi
            done
          done
        done ;;
      callgrind) callgrind_cmd RAW; show "${cmd[@]}" ;;
      vm | vm-pair) for ((boot = 1; boot <= vm_boots; boot++)); do vm_cmd "$name" RAW "$boot"; show "${cmd[@]}"; done ;;
    esac
  done
  exit 0
fi

# ---- build
if [[ -f "$build/CMakeCache.txt" ]]; then
  type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
  [[ "$type" == Release ]] || die "$build is a ${type:-default} build, not Release: pass --build-dir elsewhere"
fi
if ((${#targets[@]})); then
  if [[ ! -f "$build/build.ninja" ]]; then
    say "configuring $build (Release)"
    locked "$build_lock" "${configure_cmd[@]}" >&2 || die "cmake failed"
  fi
  say "building ${targets[*]} in $build"
  locked "$build_lock" "${build_cmd[@]}" >&2 ||
    die "the build failed (host_stack_bench and the *_bench targets need -DNVMF_BUILD_BENCH=ON)"
fi
if has callgrind && ! command -v valgrind >/dev/null; then die "callgrind needs valgrind"; fi

# ---- runs
if [[ -n "$keep" ]]; then
  raw="$keep"
  mkdir -p "$raw"
  [[ ! -e "$raw/runs.tsv" ]] || die "--keep: $raw already holds results"
else
  raw="$(mktemp -d)"
  trap 'rm -rf "$raw"' EXIT
fi
raw="$(realpath "$raw")"
: >"$raw/runs.tsv"
declare -A load_before load_after phase_date
load1() { cut -d' ' -f1 /proc/loadavg; }
phase_start() { load_before[$1]=$(load1); phase_date[$1]=$(date -u '+%Y-%m-%d %H:%M UTC'); }
phase_end() { load_after[$1]=$(load1); }
# run SECTION CELL ROUND TIMEOUT: runs "${cmd[@]}" (its output in RAW/logs), records "$out"
n=0
run() {
  local rc=0
  n=$((n + 1))
  timeout -k 15 "$4" "${cmd[@]}" >"$raw/logs/$n-$1.log" 2>&1 || rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$rc" "$out" >>"$raw/runs.tsv"
  say "$(printf '%3d %-9s %-20s round %s exit %s' "$n" "$1" "$2" "$3" "$rc")"
}
# rtt CELL-INDEX ROUND before|after: the round trip beside a two-core run (a failure only
# leaves its JSON out: the table then shows no round trip for that run)
rtt() {
  rtt_cmd "$1" "$2" "$3" "$4" "$raw"
  timeout -k 5 60 "${cmd[@]}" >"$raw/logs/$out.log" 2>&1 || say "core_rtt_bench failed: $raw/logs/$out.log"
}
mkdir -p "$raw/logs"  # every run's and round trip's output
phase_start all
# The microbenchmarks, interleaved by binary.
if ((${#gbench[@]})); then
  phase_start micro
  for ((round = 1; round <= runs; round++)); do
    for i in $(order "$round" "${#gbench[@]}"); do
      gbench_cmd "${gbench[$i]#*:}" "$round" "$raw"
      run "${gbench[$i]%%:*}" "${gbench[$i]#*:}" "$round" 600
    done
  done
  phase_end micro
fi
if has stack; then
  phase_start stack
  for ((round = 1; round <= runs; round++)); do
    for i in $(order "$round" "${#stack_cells[@]}"); do
      for variant in $(variants "$round"); do
        [[ "$variant" == 1 ]] || rtt "$i" "$variant" "$round" before
        stack_cmd "$i" "$variant" "$round" "$raw"
        # SIGTERM makes nvmf_perf stop, drain and report; SIGKILL if even that hangs.
        run stack "$(stack_cell_name "$i")/$variant" "$round" $((seconds * 10 + 120))
        [[ "$variant" == 1 ]] || rtt "$i" "$variant" "$round" after
      done
    done
  done
  phase_end stack
fi
if has callgrind; then
  phase_start callgrind
  callgrind_cmd "$raw"
  run callgrind default 1 3600
  phase_end callgrind
fi
for section in vm vm-pair; do
  has "$section" || continue
  phase_start "$section"
  for ((boot = 1; boot <= vm_boots; boot++)); do
    vm_cmd "$section" "$raw" "$boot"
    run "$section" side_by_side "$boot" "$vm_limit"
  done
  phase_end "$section"
done
phase_end all

# ---- what the figures belong to
dirty_end=$(dirty_count)
((dirty_end <= dirty)) || dirty=$dirty_end
((!dirty)) || ((allow_dirty)) || die "the tree changed during the runs ($dirty_end changed files): nothing written"
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
PR_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" PR_DIRTY="$dirty" \
PR_RUNS="$runs" PR_SECONDS="$seconds" PR_MIN_TIME="$min_time" PR_SECTIONS="${sections[*]}" PR_BUILD="$build" \
PR_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" PR_CORES="$(nproc)" \
PR_MEM="$(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)" \
PR_OS="$(# shellcheck disable=SC1091
  . /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-unknown}")" PR_KERNEL="$(uname -r)" \
PR_CXX="$({ [[ -n "$cxx" ]] && "$cxx" --version 2>/dev/null | head -1; } || echo unknown)" \
PR_TYPE="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")" \
PR_GBENCH="$(pkg-config --modversion benchmark 2>/dev/null || dpkg-query -W -f '${Version}' libbenchmark-dev 2>/dev/null || echo unknown)" \
PR_LOADS="$(for p in "${!load_before[@]}"; do printf '%s\t%s\t%s\t%s\n' "$p" "${load_before[$p]}" "${load_after[$p]}" "${phase_date[$p]}"; done)" \
PR_CELLS="$(printf '%s\n' "${stack_cells[@]}")" \
python3 - "$raw/meta.json" <<'PY'
import json, os, sys
e = os.environ
loads = {}
for line in e["PR_LOADS"].splitlines():
    phase, before, after, date = line.split("\t")
    loads[phase] = {"before": before, "after": after, "date": date}
cells = [dict(zip(("name", "label", "perf", "bench"), c.split("|"))) for c in e["PR_CELLS"].splitlines()]
phase_of = {"ring": "micro", "bdev": "micro", "verbs-sim": "micro", "stack": "stack",
            "callgrind": "callgrind", "vm": "vm", "vm-pair": "vm-pair", "machine": "all"}
json.dump({"commit": e["PR_COMMIT"], "dirty": int(e["PR_DIRTY"]), "runs": int(e["PR_RUNS"]),
           "seconds": int(e["PR_SECONDS"]), "min_time": e["PR_MIN_TIME"], "sections": e["PR_SECTIONS"].split(),
           "loads": loads, "phase_of": phase_of, "stack_cells": cells,
           "machine": {"cpu": e["PR_CPU"], "cores": int(e["PR_CORES"]), "memory": e["PR_MEM"],
                       "os": e["PR_OS"], "kernel": e["PR_KERNEL"], "compiler": e["PR_CXX"],
                       "build_type": e["PR_TYPE"], "build": e["PR_BUILD"],
                       "gbench": e["PR_GBENCH"]}},
          open(sys.argv[1], "w"), indent=1)
PY
status=0
render "$raw" || status=$?
if ((dirty)); then say "WARNING: figures NOT from a clean commit ($dirty changed files)"; fi
exit "$status"
