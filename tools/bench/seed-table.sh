#!/usr/bin/env bash
# usage: tools/bench/seed-table.sh [--quick] [build-dir] | --render RAW-DIR    (~20 min)
#
# Reruns the matrix of the 2017 linux-nvme post this project starts from
# (../shared/seeds/000_2ecde18e778e76dc.txt: 4 KiB random 100/0, 70/30 and 0/100 IOPS with
# Sagi's and Max's fixes, and a QD8 latency case) with nvmf_perf --sim and writes
# docs/seed-reproduction.md. The seed's columns are host and driver combinations, so each is
# a key policy on a sim profile: 4.10-RC8 = unsafe on mlx5-2017, Sagi = sagi on mlx5-2017,
# Max = unsafe on mlx5-fenced (the driver's strong fence on every registration), Both = sagi
# on mlx5-fenced. mlx5-2017, rxe and adversarial run every policy (global, unsafe, sagi, max,
# deferred); mlx5-fenced runs global (the baseline), unsafe and sagi. Every matrix run uses
# malloc namespaces and --verify. build-dir defaults to build-release; nvmf_perf (and
# host_stack_bench, for callgrind) are built there (Release) if missing.
#
# Costs that do not drown in noise: on the paired profiles every cell runs in interleaved
# rounds (each round runs the profile's policies in turn, forward in odd rounds and backward
# in even ones), and the document shows the median of the rounds and, against global, the
# ratio of the medians with the range of the per-round ratios; it calls a ratio a difference
# only when there are 5 rounds or more and every round's ratio is on the same side of 1. The
# deterministic costs come from each run's --json "per_io" (work requests by opcode, signaled
# and fenced ones, CQEs, doorbells, the sim's work steps) and from callgrind-per-io.sh
# (host-side instructions per I/O, one policy at a time, on one thread). Then the rare race
# (unsafe and global on mlx5-2017-rare: full speed between the status-6 reconnects) and the
# second seed (../shared/seeds/001_a840c731d0cd7af2.txt: a null namespace, 12 queue pairs of
# depth 8, sequential 4 KiB reads; in process here, over rxe from the VM, see
# SEED_TABLE_RXE_SEED001).
#
# The document is written only from a tree without uncommitted changes (git status empty),
# and records the commit and the machine's load; elsewhere (SEED_TABLE_OUT) anything goes.
# --quick is a smoke of the script, not figures: 2 rounds of -t 1 (about 4 minutes), written
# to SEED_TABLE_OUT or ${TMPDIR:-/tmp}/seed-reproduction.quick.md, never to the document.
#
# Environment:
#   SEED_TABLE_SECONDS   -t of each matrix run (3; --quick 1)
#   SEED_TABLE_ROUNDS    interleaved rounds of each cell on the paired profiles (5; --quick 2)
#   SEED_TABLE_PROFILES  sim profiles, in run order ("mlx5-2017 mlx5-fenced rxe adversarial")
#   SEED_TABLE_PAIRED_PROFILES  the profiles run in rounds ("mlx5-2017 mlx5-fenced rxe"; the
#                        others run each cell once). A policy that fails the race there
#                        (unsafe on mlx5-2017) runs once per workload: its IOPS measure
#                        reconnect delays.
#   SEED_TABLE_RARE_SECONDS  -t of the two mlx5-2017-rare runs (15; --quick 3)
#   SEED_TABLE_RACE_ONE_IN   their --sim-race-one-in (500000; --quick 50000)
#   SEED_TABLE_CALLGRIND_IOS I/Os of each callgrind run (20000; --quick 2000); 0 skips
#                        callgrind (the document says so; not an acceptance failure then)
#   SEED_TABLE_RXE_SEED001   the --json of the VM's seed-001 run over rxe (perf_rxe's
#                        logs/seed001.json, `tests/vm/vm-run.sh perf_rxe`); copied into the
#                        raw results, the document names where it came from
#   SEED_TABLE_OUT       the document (docs/seed-reproduction.md)
#   SEED_TABLE_KEEP      keep the raw results (runs.tsv, callgrind.tsv, meta.json, each run's
#                        JSON and log) in this directory; `--render DIR` writes the document
#                        from them again
#
# Exit status: 0 when the acceptance conditions hold, 1 when one does not (the document is
# written first either way), 2 on bad usage, a dirty tree or a failed build. The conditions:
# no run of global, sagi, max or deferred, nor of unsafe under mlx5-fenced (the seed's Max),
# has I/O errors, MW bind errors (status 6) or verify failures; unsafe under mlx5-2017 has MW
# bind errors and reconnects in each of its runs that read (4 KiB writes travel in the
# command capsule and bind no window, so 0/100 cannot race); no run at all has verify
# failures; every run finished and wrote its --json with the per-I/O counts; every paired
# cell has its rounds; the rare unsafe run has status-6 errors, reconnects, the seed's log
# lines and seconds at full speed between them, the rare global run none of that; every
# seed-001 run ran 12 queue pairs of depth 8 without errors; every callgrind run (unless
# skipped) wrote its figures.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() { sed -n '2p' "$0" | sed 's/^# //' >&2; exit 2; }
doc=docs/seed-reproduction.md
quick=0
if [[ "${1:-}" == --quick ]]; then
  quick=1
  shift
fi
if ((quick)); then
  out="${SEED_TABLE_OUT:-${TMPDIR:-/tmp}/seed-reproduction.quick.md}"
else
  out="${SEED_TABLE_OUT:-$doc}"
fi
# True when $out is the document itself, however it is spelled.
out_is_doc() { [[ "$(realpath -m "$out")" == "$(realpath -m "$doc")" ]]; }
# refuse_dirty PATHS: the document states the commit it was made from, so it is written from
# that commit only.
refuse_dirty() {
  if [[ "$1" != 0 ]] && out_is_doc; then
    echo "seed-table: refusing to write $doc from a tree with uncommitted changes ($1 paths in" \
      "git status): commit first, or write elsewhere with SEED_TABLE_OUT" >&2
    exit 2
  fi
}

render() {  # render RAW-DIR: the document from runs.tsv and meta.json; exit 1 if a condition fails
python3 - "$1" "$out" <<'PY'
import json, os, re, statistics, sys

raw, out_path = sys.argv[1:3]
meta = json.load(open(os.path.join(raw, "meta.json")))
POLICIES = ["global", "unsafe", "sagi", "max", "deferred"]
SAFE = ["global", "sagi", "max", "deferred"]
# The seed's columns: (name, policy, profile), as the seed ran them (host x driver).
SEED_COLUMNS = [("4.10-RC8", "unsafe", "mlx5-2017"), ("Sagi", "sagi", "mlx5-2017"),
                ("Max", "unsafe", "mlx5-fenced"), ("Both", "sagi", "mlx5-fenced")]

def safe(profile, policy):
    """The runs that must not fail a bind: the race-free policies, and the unpatched host on
    the driver with the strong fence on every registration (the seed's Max)."""
    return policy in SAFE or (policy == "unsafe" and profile == "mlx5-fenced")
WORKLOADS = [("r100", "100/0"), ("r70", "70/30"), ("r0", "0/100")]
ALL = ["r100", "r70", "r0", "qd8"]
READS = ["r100", "r70", "qd8"]  # the runs that bind windows: 4 KiB writes go in the capsule
NAMES = dict(WORKLOADS + [("qd8", "QD8 read")])
LAG = meta["lag"]
ROUNDS = meta["rounds"]
# Fewer rounds than this call nothing a difference: with every round on the same side of 1,
# 5 rounds leave a chance of 2 in 32 that two policies doing the same work look different
# (a sign test), 2 rounds a chance of 1 in 2.
ROUNDS_FOR_A_DIFFERENCE = 5
RARE = "mlx5-2017-rare"
PROFILE_TEXT = {
    "mlx5-2017": "`--sim-profile mlx5-2017 --sim-remote-invalidate off`: ConnectX-4 before the "
                 "2017 UMR fence. The target never answers with SEND_WITH_INVALIDATE, so the "
                 "host invalidates every window itself (LOCAL_INV). Every LOCAL_INV and bind, "
                 "signaled or not, is seen by later binds, and completes, "
                 f"{LAG} steps after it executes (`mkey_commit_lag_steps`, see \"The sim's "
                 "rules\"); a bind has no fence unless the policy asks for one, and "
                 "`IBV_SEND_FENCE` orders key updates (the profile's rule).",
    "rxe": "`--sim-profile rxe` (remote invalidation on, the default): soft-RoCE as in kernel "
           "6.1. The target answers every command that carries a window key with "
           "SEND_WITH_INVALIDATE, so no policy posts a LOCAL_INV; memory operations execute in "
           "order and take effect at once.",
    "adversarial": "`--sim-profile adversarial --sim-remote-invalidate off`: mlx5-2017's rules "
                   f"with a random lag of every LOCAL_INV and bind in [0, {LAG}] steps, random "
                   "in-order completion delays and random execution interleavings (reproducible "
                   "from `--seed 1`).",
    "mlx5-fenced": "`--sim-profile mlx5-fenced --sim-remote-invalidate off`: mlx5-2017 with the "
                   "strong fence on every bind (the driver's `umr_fence`, Max's patch): a bind "
                   "starts only once every earlier work request has completed and its key "
                   "change is visible. Run with the seed's hosts only: `unsafe` (the seed's "
                   "Max), `sagi` (Both), and `global` as the baseline.",
    RARE: "`--sim-profile mlx5-2017-rare --sim-remote-invalidate off`: mlx5-2017 with the "
          f"{LAG}-step lag on one LOCAL_INV or bind in `--sim-race-one-in` (seeded) and none "
          "on the others: the race, rare.",
}

def others_share(base):
    """The share of the machine's CPU time that went to other work (other processes, and
    time the hypervisor stole) during a run: /proc/stat before and after, less the run's own
    CPU time. None when not recorded."""
    try:
        lines = open(base + ".stat").read().splitlines()
        elapsed, user, system = (float(x) for x in open(base + ".time").read().split()[-3:])
    except (OSError, ValueError):
        return None
    if len(lines) < 2:
        return None
    a, b = ([int(x) for x in line.split()[1:9]] for line in lines[:2])
    d = [y - x for x, y in zip(a, b)]  # user nice system idle iowait irq softirq steal
    hz = os.sysconf("SC_CLK_TCK")
    total = sum(d) / hz
    if total <= 0:
        return None
    busy = (d[0] + d[1] + d[2] + d[5] + d[6]) / hz
    steal = d[7] / hz
    return max(0.0, min(1.0, (busy - user - system + steal) / total))

def progress_series(log):
    """Per-second IOPS from nvmf_perf's progress lines, each with whether the queue pair was
    failing or reconnecting during that second: a MEMREG error or a "reconnecting in" line
    since the previous progress line, a reconnect still pending, or the "Successfully
    reconnected" line (stdout and stderr go to one file, in order)."""
    series, marked, down = [], False, False
    for line in log.splitlines():
        m = re.match(r"\[\s*\d+ s\] (\d+) IOPS", line)
        if m:
            series.append((int(m.group(1)), marked or down))
            marked = False
        elif "MEMREG for" in line or "reconnecting in" in line:
            marked = down = True
        elif "Successfully reconnected" in line:
            marked, down = True, False
    return series

# ---- the runs
runs = {}    # (profile, policy, workload) -> [result per round]
order = []   # command lines in run order
for line in open(os.path.join(raw, "runs.tsv")):
    profile, policy, rnd, workload, rc, wall, name, cmd = line.rstrip("\n").split("\t")
    r = {"rc": int(rc), "round": int(rnd), "json": None, "ok": False}
    try:
        with open(os.path.join(raw, name + ".json")) as f:
            r["json"] = json.load(f)
        r["ok"] = r["rc"] in (0, 1)  # 1: I/O errors or verify failures, judged below
    except (OSError, ValueError):
        pass
    log_path = os.path.join(raw, name + ".log")
    log = open(log_path, errors="replace").read() if os.path.exists(log_path) else ""
    r["log"] = log
    r["target_error_lines"] = len(re.findall(r"\] error\s+\S+\s+target_", log))
    r["overruns"] = log.count("overran its queue")
    r["others"] = others_share(os.path.join(raw, name))
    r["log_tail"] = log.strip().splitlines()[-2:]
    runs.setdefault((profile, policy, workload), []).append(r)
    order.append(cmd)
profiles = list(dict.fromkeys(k[0] for k in runs if k[2] in ALL))

def pols(profile):
    """The policies run under `profile`, in POLICIES order."""
    return [p for p in POLICIES if any(k[0] == profile and k[1] == p for k in runs)]
rounds = {p: max(r["round"] for k, rs in runs.items() if k[0] == p and k[2] in ALL for r in rs)
          for p in profiles}

def field(j, key, sub):
    v = j.get(key)
    return v.get(sub) if sub and isinstance(v, dict) else v

def values(profile, policy, workload, key, sub=None):
    return [field(r["json"], key, sub) for r in runs.get((profile, policy, workload), [])
            if r["json"] and field(r["json"], key, sub) is not None]

def med(profile, policy, workload, key, sub=None):
    """The median over the cell's rounds."""
    vs = values(profile, policy, workload, key, sub)
    return statistics.median(vs) if vs else None

def total(profile, policy, workload, key):
    rs = [r for r in runs.get((profile, policy, workload), []) if r["json"]]
    return sum(r["json"].get(key) or 0 for r in rs) if rs else None

def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b

def round_ratios(profile, policy, workload, key, sub=None, base="global"):
    """policy / base of the same round, for each round that has both."""
    b = {r["round"]: r for r in runs.get((profile, base, workload), []) if r["json"]}
    out = []
    for r in runs.get((profile, policy, workload), []):
        if r["json"] and r["round"] in b:
            x = ratio(field(r["json"], key, sub), field(b[r["round"]]["json"], key, sub))
            if x is not None:
                out.append(x)
    return out

def n(v):
    return "n/a" if v is None else f"{v:,.0f}"

def us(v):
    return "n/a" if v is None else f"{v:,.1f}"

def k(v):
    return "n/a" if v is None else f"{v / 1000:,.1f}k"

def pct(x):
    return "n/a" if x is None else f"{(x - 1) * 100:+.1f}%"

def spread(profile, policy, workload, key="iops", sub=None):
    """median [min..max] over the rounds, in thousands."""
    vs = values(profile, policy, workload, key, sub)
    if not vs:
        return "n/a"
    text = k(statistics.median(vs))
    return text + (f" [{min(vs) / 1000:,.1f}..{max(vs) / 1000:,.1f}]" if len(vs) > 1 else "")

def troubled(profile, policy, workload):
    """A run of the cell had a QP error or a reconnect: its IOPS are mostly reconnect delay."""
    return any(r["json"] and (r["json"].get("qp_errors") or r["json"]["reconnects"])
               for r in runs.get((profile, policy, workload), []))

def compare(profile, policy, workload, key="iops", sub=None, base="global"):
    """(ratio of the medians, the per-round ratios, whether it is a difference), or None
    when a run of either cell had a QP error."""
    if troubled(profile, policy, workload) or troubled(profile, base, workload):
        return None
    x = ratio(med(profile, policy, workload, key, sub), med(profile, base, workload, key, sub))
    rs = round_ratios(profile, policy, workload, key, sub, base)
    diff = (x is not None and len(rs) >= ROUNDS_FOR_A_DIFFERENCE
            and (all(v > 1 for v in rs) or all(v < 1 for v in rs)))
    return x, rs, diff

def ccell(profile, policy, workload, key="iops", sub=None, base="global"):
    """"+3.1% [+1.0..+5.2]": the ratio of the medians, the per-round range; bold when it is a
    difference."""
    c = compare(profile, policy, workload, key, sub, base)
    if c is None:
        return "n/a (QP errors)"
    x, rs, diff = c
    if x is None:
        return "n/a"
    text = f"**{pct(x)}**" if diff else pct(x)
    if len(rs) > 1:
        text += f" [{(min(rs) - 1) * 100:+.1f}..{(max(rs) - 1) * 100:+.1f}]"
    return text

def failed_binds(profile, policy):
    return any(total(profile, policy, w, "mw_bind_errors") for w in ALL)

# ---- the extra runs: rare race, seed 001, callgrind
rare_unsafe = [r for r in runs.get((RARE, "unsafe", "rare"), [])]
rare_global = [r for r in runs.get((RARE, "global", "rare"), [])]
seed001 = runs.get(("seed001", "global", "seed001"), [])
callgrind = {}  # (policy, workload) -> figures, or None when the run failed
cg_path = os.path.join(raw, "callgrind.tsv")
if os.path.exists(cg_path):
    for line in open(cg_path):
        policy, workload, rc, name = line.rstrip("\n").split("\t")
        try:
            callgrind[(policy, workload)] = json.load(open(os.path.join(raw, name)))
        except (OSError, ValueError):
            callgrind[(policy, workload)] = None
CG_WORKLOADS = [("r100", "100/0"), ("r70", "70/30")]
rxe_seed001 = None
if meta.get("rxe_seed001"):
    try:
        rxe_seed001 = json.load(open(os.path.join(raw, "rxe-seed001.json")))
    except (OSError, ValueError):
        rxe_seed001 = None

def quote(log, needle):
    """The first log line holding `needle`, without the timestamp (or None)."""
    for line in log.splitlines():
        if needle in line:
            return re.sub(r"^\[[0-9:.]+\]\s*", "", line.strip())
    return None

def rare_view(r):
    """What one rare-race run shows: per-second IOPS, the seconds undisturbed by a reconnect."""
    series = progress_series(r["log"])
    clean = [v for v, disturbed in series if not disturbed]
    return {"series": series, "clean": clean,
            "clean_median": statistics.median(clean) if clean else None,
            "disturbed": sum(1 for _, d in series if d)}

def seed001_ok(r):
    j = r["json"]
    if not j or r["rc"] != 0:
        return False
    c = j["config"]
    return (j["ios"] > 0 and j["errors"] == 0 and c["cores"] * c["qpairs_per_worker"] == 12
            and c["queue_depth"] == 8 * c["qpairs_per_worker"] and c["workload"] == "read"
            and c["io_size"] == 4096 and c["sim_bdev"] == "null")

# ---- acceptance
failures, notes = [], []
for (profile, policy, workload), rs in runs.items():
    for r in rs:
        where = f"{profile} / {policy} / {workload} (round {r['round']})"
        if not r["ok"]:
            failures.append(f"{where}: the run did not finish (exit {r['rc']}, "
                            f"{'no JSON' if r['json'] is None else 'JSON written'}): "
                            + " | ".join(r["log_tail"]))
            continue
        j = r["json"]
        if not (j.get("per_io") or {}).get("send"):
            failures.append(f"{where}: no per-I/O work counts in its JSON")
        if j.get("verify_failures"):
            failures.append(f"{where}: {j['verify_failures']} verify failures")
        if workload not in ALL:
            continue
        if safe(profile, policy):
            if j["errors"]:
                failures.append(f"{where}: {j['errors']} I/O errors")
            if j.get("mw_bind_errors"):
                failures.append(f"{where}: {j['mw_bind_errors']} MW bind errors (status 6)")
            if j.get("qp_errors") or j["reconnects"]:
                notes.append(f"{where}: {j.get('qp_errors')} QP errors, {j['reconnects']} "
                             "reconnects, no bind error (not an acceptance condition; see \"Queue pairs failed "
                             "without a bind error\")")
        if policy == "unsafe" and profile == "mlx5-2017" and workload in READS:
            if not j.get("mw_bind_errors"):
                failures.append(f"{where}: no MW bind errors: the 2017 race did not reproduce")
            if not j["reconnects"]:
                failures.append(f"{where}: no reconnects after the failed binds")
for (profile, policy, workload), rs in runs.items():
    if (workload in ALL and profile in meta["paired_profiles"] and policy in meta["paired_policies"][profile]
            and len(rs) < ROUNDS):
        failures.append(f"{profile} / {policy} / {workload}: {len(rs)} rounds of {ROUNDS}")
if "mlx5-2017" not in profiles:
    notes.append("profile mlx5-2017 was not run: the race itself was not checked")
if "mlx5-fenced" not in profiles:
    notes.append("profile mlx5-fenced was not run: the seed's Max and Both columns were not checked")
# The rare race: the seed's picture.
if not rare_unsafe or not rare_global:
    failures.append(f"the rare-race runs ({RARE}: unsafe and global) are missing")
for r in rare_unsafe:
    j = r["json"]
    if not j:
        continue
    if not j.get("mw_bind_errors"):
        failures.append(f"{RARE} / unsafe: no MW bind error: the rare race did not show")
    if not j["reconnects"]:
        failures.append(f"{RARE} / unsafe: no reconnect")
    if j["errors"]:
        failures.append(f"{RARE} / unsafe: {j['errors']} I/O errors (the resent I/Os must complete)")
    for needle in ("failed with status memory management operation error (6)",
                   "reconnecting in", "Successfully reconnected"):
        if quote(r["log"], needle) is None:
            failures.append(f"{RARE} / unsafe: no log line with \"{needle}\"")
    if not rare_view(r)["clean"]:
        failures.append(f"{RARE} / unsafe: no second without a reconnect: not rare")
for r in rare_global:
    j = r["json"]
    if j and (j["errors"] or j.get("mw_bind_errors") or j["reconnects"]):
        failures.append(f"{RARE} / global: errors, bind errors or reconnects")
# The second seed.
if not seed001:
    failures.append("the seed-001 runs are missing")
for r in seed001:
    if not seed001_ok(r):
        failures.append(f"seed001 (round {r['round']}): not a clean run of 12 queue pairs x QD8 "
                        f"(exit {r['rc']}): " + " | ".join(r["log_tail"]))
# Callgrind.
if meta["callgrind_ios"]:
    for p in POLICIES:
        for w, _ in CG_WORKLOADS:
            if not callgrind.get((p, w)):
                failures.append(f"callgrind {p} / {w}: no figures (see the script's stderr)")
else:
    notes.append("callgrind was skipped (SEED_TABLE_CALLGRIND_IOS=0): no host-side "
                 "instruction counts")

def counters(profile, policy, workload):
    rs = runs.get((profile, policy, workload), [])
    if not rs or not all(r["json"] for r in rs):
        return "**no result**"
    c = [total(profile, policy, workload, x)
         for x in ("errors", "mw_bind_errors", "reconnects", "verify_failures")]
    bad = (c[3] or (safe(profile, policy) and (c[0] or c[1]))
           or (policy == "unsafe" and profile == "mlx5-2017" and workload in READS
               and not all(r["json"].get("mw_bind_errors") and r["json"]["reconnects"] for r in rs)))
    cell = " / ".join(str(x) for x in c)
    return f"**{cell}**" if bad else cell

# ---- document
L = []
w = L.append
w("# Seed reproduction: the 2017 memory-registration race, per key policy")
w("")
w("<!-- Generated by tools/bench/seed-table.sh; change the script, not this file. -->")
w("")
w("The seed (`../shared/seeds/000_2ecde18e778e76dc.txt`, linux-nvme, March 2017) measured what "
  "two fixes for a race in nvme-rdma memory registration cost (\"Sagi's patch\", in the host: "
  "wait for a signaled LOCAL_INV before completing the I/O; \"Max's patch\", in the mlx5 "
  "driver: give every registration work request the device's strong fence, the host "
  "unchanged), and reported the error the race produces: `MEMREG ... failed with status "
  "memory management operation error (6)`, then `reconnecting in 10 seconds`. This file reruns "
  "its matrix with `nvmf_perf --sim` (an in-process target over the simulated HCA) for each "
  "key policy of `src/memreg/key_policy.h`: `global` (the registered region's rkey, no per-I/O "
  "key), `unsafe` (the 2017 host), `sagi`, `max` and `deferred`. It counts what each policy "
  "posts per I/O, shows the race as the seed saw it (rare, the host at full speed between "
  "reconnects), and reruns the second seed's workload (a null device, 12 queues of depth 8).")
w("")
w("## The seed's figures")
w("")
w("4.10-RC8 kernel on both sides, ConnectX-4 at 25 Gb/s, 8 x Intel P3520, fio 4 KiB random, "
  "4 jobs x QD32 per disk, IOPS:")
w("")
w("| Read/Write | 4.10-RC8 | Sagi | Max | Both |")
w("|---|---:|---:|---:|---:|")
w("| 100/0 | 667,158 | 611,737 | 619,586 | 607,080 |")
w("| 70/30 | 941,352 | 890,962 | 884,222 | 876,926 |")
w("| 0/100 | 667,379 | 666,000 | 666,093 | 666,144 |")
w("")
w("QD8, one disk, one job, 4 KiB random read: 4.10-RC8 49,304 IOPS and 160.3 us, Sagi 40,490 "
  "IOPS and 192.9 us (+20%), Max about +2% latency (no figure given). At 50 Gb/s the "
  "status-6 error occurred unpatched and with Sagi's patch (about 30 on the initiator and 2 "
  "on the target in 48 two-minute runs), not with Max's. No other source confirms these "
  "figures (design note `memreg-2017-race.md`, section 5).")
w("")
w("## The seed's matrix, as the seed ran it")
w("")
w("The seed's columns are host and driver combinations. \"Sagi\" changed the host (nvme-rdma), "
  "\"Max\" changed the driver (mlx5: the UMR strong fence, `umr_fence`, on every REG_MR), so "
  "each column is a key policy on a sim profile:")
w("")
w("| Seed column | Host | HCA / driver | Here | Status 6 in the sim | Who can touch a buffer after its I/O completes |")
w("|---|---|---|---|---|---|")
w("| 4.10-RC8 | unsignaled LOCAL_INV, MR reused at once | ConnectX-4, no UMR fence | `unsafe` on "
  "`mlx5-2017` | yes (certain in the sim; rare in the seed, see `mlx5-2017-rare` below) | the "
  "target, until the LOCAL_INV lands |")
w("| Sagi | signaled LOCAL_INV, the I/O completes at its completion | no UMR fence | `sagi` on "
  "`mlx5-2017` | no | no one: the key is dead before the I/O completes |")
w("| Max | as 4.10-RC8 | strong fence on every registration | `unsafe` on `mlx5-fenced` | no | "
  "the target, until the LOCAL_INV lands |")
w("| Both | as Sagi | strong fence on every registration | `sagi` on `mlx5-fenced` | no | no one |")
w("")
w("The seed also saw status 6 with Sagi's patch at 50 Gb/s (about 30 errors on the initiator "
  "and 2 on the target in 48 runs, not with Max's); the sim has no counterpart for that. The "
  "userspace policies of this stack have no seed column: they are not what the seed ran.")
w("")
w("| Policy | What it does | Status 6 in the sim | Who can touch a buffer after its I/O completes |")
w("|---|---|---|---|")
w("| `max` | unsignaled LOCAL_INV; the window's next bind carries `IBV_SEND_FENCE`, the only "
  "fence userspace verbs can ask for | no on `mlx5-2017` as documented (its fence orders key "
  "updates); yes where `IBV_SEND_FENCE` is only the IBTA fence (`SimOpts::send_fence = reads`); "
  "whether mlx5 orders key updates for it is not documented (design note, sections 3 and 6) | "
  "the target, until the LOCAL_INV lands |")
w("| `deferred` | signaled LOCAL_INV; the I/O completes at the response, the window returns to "
  "the pool (2 x depth) only at the LOCAL_INV's completion | no, on every profile | the target, "
  "until the LOCAL_INV lands |")
w("| `global` | the registered region's own rkey, no per-I/O key | no (nothing to rebind) | the "
  "target, anywhere in the registered region, for as long as it is registered |")
w("")
w("When the target invalidates the key itself (SEND_WITH_INVALIDATE), the key is dead before "
  "the response's receive completes, under every window policy.")
w("")
w("### The sim's rules (issue 13)")
w("")
w("- A BIND_MW or LOCAL_INV changes the key for remote access when it executes. A later bind's "
  "check that the window is FREE sees the change only after the work request's commit lag, "
  "whether it was signaled or not, and the work request completes (CQE or not) only after "
  "that. So `sagi` is safe because it waits for the LOCAL_INV's completion before reusing the "
  "window, not because of the signal bit: a host that signals the LOCAL_INV and rebinds at "
  "once fails like `unsafe` (test `SimHazard.SignaledLocalInvRebindWithoutWaitingFailsUnderMlx5_2017`).")
w(f"- The lag per profile: `rxe` none; `mlx5-2017` and `mlx5-fenced` always "
  f"`mkey_commit_lag_steps` = {LAG} steps (the race is certain, as in the canonical trace); "
  f"`mlx5-2017-rare` {LAG} steps for one work request in `mkey_commit_slow_one_in` (seeded), "
  f"none for the others (the race is rare, as in the seed); `adversarial` uniform in [0, {LAG}] "
  "(seeded).")
w("- Fences, as separate rules: the IBTA fence (prior RDMA READs complete; `IBV_SEND_FENCE` on "
  "`rxe`); the local-invalidate fence (every prior work request complete; every LOCAL_INV on "
  "`rxe`); the strong fence (every prior work request complete and its key change visible: the "
  "driver's UMR fence, on every bind under `mlx5-fenced`); mlx5's `IBV_SEND_FENCE` is a profile "
  "parameter (`SimOpts::send_fence`): on the mlx5 profiles it orders key updates (the strong "
  "fence) unless set to `reads` (the IBTA fence).")
w("")
w("## How this was produced")
w("")
paired = [p for p in profiles if p in meta["paired_profiles"]]
if meta.get("quick"):
    w(f"- **A `--quick` smoke of the script ({ROUNDS} rounds of `-t {meta['seconds']}`): not "
      "figures to cite.**")
w(f"- `tools/bench/seed-table.sh {'--quick ' if meta.get('quick') else ''}{meta['build']}` on {meta['date']}: "
  f"{sum(len(rs) for rs in runs.values())} runs of `nvmf_perf` (the matrix at `-t {meta['seconds']}`), "
  f"{len([v for v in callgrind.values() if v])} of callgrind, {meta['wall_s']} s wall time in all.")
w(f"- Machine: {meta['nproc']} cores (`nproc`), {meta['cpu']}, Linux {meta['kernel']}. The "
  f"cores are shared with other work: load average {meta['load_start']} at the start and "
  f"{meta['load_end']} at the end (nvmf_perf alone keeps both cores busy polling).")
w(f"- Build: `{meta['build']}`, CMAKE_BUILD_TYPE={meta['build_type']}, {meta['cxx']}; commit "
  f"{meta['commit']}" + (f" plus uncommitted changes ({meta['dirty']} paths in `git status`)."
                         if meta["dirty"] != "0" else "."))
w("- Scaling. The seed ran 8 disks x 4 fio jobs x QD32 = 1024 I/Os outstanding, over 16 I/O "
  "queues per disk. This machine has 2 cores, and with `--sim` the target's reactor takes one "
  "of them. So the host gets one worker (`-c 1`: one core, one I/O queue) with `-q 32` per "
  "namespace over 8 namespaces (`--ns-count 8`), 8 x 32 = 256 outstanding. More jobs per "
  "namespace would only share the same core. The latency case is the seed's: 1 namespace, "
  "1 job (`-c 1`), `-q 8`, 4 KiB random read.")
w("- Every matrix run: 4 KiB I/Os (`-o 4096`), `--sim-bdev malloc` (RAM namespaces, 64 MiB "
  "each by default) and `--verify` (each write carries nsid, LBA and a generation, and every "
  "read is checked, so \"no data lost or corrupted\" is checked in every cell), "
  "`--reconnect-delay-ms 1000` (the kernel's 10 s would outlast a run), `--seed 1`, `--json`.")
partial = [p for p in profiles if pols(p) != POLICIES]
w(f"- Profiles, in run order: {', '.join('`' + p + '`' for p in profiles)}"
  + (" (" + "; ".join(f"`{p}` only " + ", ".join(f"`{x}`" for x in pols(p)) for p in partial)
     + (": the seed's Max and Both, and the baseline" if partial == ["mlx5-fenced"] else "")
     + ")" if partial else "") + ".")
if paired:
    once = {p: [x for x in pols(p) if x not in meta["paired_policies"][p]] for p in paired}
    w(f"- Interleaved rounds. On {', '.join('`' + p + '`' for p in paired)} every cell ran "
      f"{ROUNDS} rounds: a workload's rounds run one after the other, and each round runs the "
      "profile's policies in turn, forward in odd rounds and backward in even ones, so that a "
      "slow stretch of the shared machine falls on every policy alike. Each cell shows the "
      "median of its rounds. A ratio against `global` is the ratio of the medians, with the "
      "range of the per-round ratios (each run against `global`'s run of the same round) in "
      "brackets, in percent. It is called a difference (in **bold**) only when there are at "
      f"least {ROUNDS_FOR_A_DIFFERENCE} rounds and every round's ratio is on the same side of 1: "
      f"two policies that do the same work pass that test by chance 2 times in 32 at 5 rounds "
      "(a sign test); otherwise the difference is within the noise."
      + ("".join(f" `{x}` under `{p}` fails the race at once and runs once per workload, after "
                 "the first round: its IOPS measure reconnect delays."
                 for p, xs in once.items() for x in xs)))
unpaired = [p for p in profiles if p not in paired]
if unpaired:
    w(f"- {', '.join('`' + p + '`' for p in unpaired)}: every cell once (a check of the rules "
      "under random reorderings, not a cost measurement: no ratio there is called a difference).")
w("- 4 KiB writes travel inside the command capsule (the target offers 4096 bytes of "
  "in-capsule data, like nvmet-rdma in 2017): they bind no window under any policy. So 0/100 "
  "does the same work under all five policies, and 70/30 binds windows for its reads only. "
  "The 2017 host did the same: `nvme_rdma_map_data()` sent a single-segment write that fits "
  "the capsule inline (`nvme_rdma_map_sg_inline`) without a registration, which is why the "
  "seed's 0/100 row is flat (our reading of the 4.10-era source).")
w("")
w("<details><summary>The exact command lines, each once in run order ($TMP is a temporary "
  "directory, RUN the run's number)</summary>")
w("")
w("```")
for cmd in dict.fromkeys(re.sub(r"\$TMP/\d+\.json", "$TMP/RUN.json", c) for c in order):
    w(cmd)
for (p, wl) in [(p, wl) for p in POLICIES for wl, _ in CG_WORKLOADS if (p, wl) in callgrind]:
    read_percent = 100 if wl == "r100" else 70
    w(f"tools/bench/callgrind-per-io.sh --memreg {p} --sim-profile rxe --remote-invalidate off "
      f"--read-percent {read_percent} --queue-depth 32 --ios {meta['callgrind_ios']} "
      f"--json $TMP/cg-{p}-{wl}.json {meta['build']}")
w("```")
w("")
w("</details>")
w("")

w("## Results")
w("")
w("IOPS of the whole run (all namespaces), the median of the rounds. Counters, summed over "
  "the rounds: **I/O errors / MW bind errors (status 6) / reconnects / verify failures**; "
  "bold marks a cell that breaks an acceptance condition. The I/Os in flight when a queue "
  "pair fails are resent after the reconnect, so a failed bind counts as a bind error and a "
  "reconnect, not as an I/O error. A reconnect without a bind error is a queue pair that "
  "failed for another reason (see the notes under Acceptance).")
seed_cols = [(name, p, prof) for name, p, prof in SEED_COLUMNS if (prof, p, "r100") in runs]
if seed_cols:
    w("")
    w("### The seed's columns")
    w("")
    w("Each column as the seed ran it (see the mapping above), beside the seed's own figures. "
      "IOPS of the whole run (median of the rounds); the counters as below.")
    w("")
    w("| Read/Write | " + " | ".join(f"{name} (`{p}` on `{prof}`)" for name, p, prof in seed_cols) + " |")
    w("|---|" + "---:|" * len(seed_cols))
    SEED_IOPS = {"100/0": [667158, 611737, 619586, 607080], "70/30": [941352, 890962, 884222, 876926],
                 "0/100": [667379, 666000, 666093, 666144]}
    index = {name: i for i, (name, _, _) in enumerate(SEED_COLUMNS)}
    for key, name in WORKLOADS:
        w(f"| {name} | " + " | ".join(n(med(prof, p, key, "iops")) for _, p, prof in seed_cols) + " |")
        w(f"| *{name}, the seed* | " + " | ".join(f"*{SEED_IOPS[name][index[c]]:,}*" for c, _, _ in seed_cols) + " |")
    w("| QD8 read IOPS | " + " | ".join(n(med(prof, p, "qd8", "iops")) for _, p, prof in seed_cols) + " |")
    w("| QD8 read avg us | " + " | ".join(us(med(prof, p, "qd8", "lat_us", "avg")) for _, p, prof in seed_cols) + " |")
    for key, name in WORKLOADS + [("qd8", "QD8 read")]:
        w(f"| {name} errors | " + " | ".join(counters(prof, p, key) for _, p, prof in seed_cols) + " |")
for profile in profiles:
    P = pols(profile)
    w("")
    w(f"### Profile `{profile}`" + (f" ({rounds[profile]} rounds)" if rounds[profile] > 1 else ""))
    w("")
    w(PROFILE_TEXT.get(profile, ""))
    w("")
    w("4 KiB random, 8 namespaces x QD32 on one host core, IOPS in thousands, the median "
      + ("[and the range] of the rounds:" if rounds[profile] > 1 else "of one run:"))
    w("")
    w("| Read/Write | " + " | ".join(P) + " |")
    w("|---|" + "---:|" * len(P))
    for key, name in WORKLOADS:
        w(f"| {name} | " + " | ".join(spread(profile, p, key) for p in P) + " |")
    w("")
    w("Errors (I/O errors / MW bind errors / reconnects / verify failures):")
    w("")
    w("| Workload | " + " | ".join(P) + " |")
    w("|---|" + "---:|" * len(P))
    for key, name in WORKLOADS + [("qd8", "QD8 read")]:
        w(f"| {name} | " + " | ".join(counters(profile, p, key) for p in P) + " |")
    w("")
    w("QD8 latency (1 namespace, 1 job, `-q 8`, 4 KiB random read), medians of the rounds:")
    w("")
    w("| Policy | IOPS | avg us | p50 us | p99 us |")
    w("|---|---:|---:|---:|---:|")
    for p in P:
        w(f"| {p} | {n(med(profile, p, 'qd8', 'iops'))} | {us(med(profile, p, 'qd8', 'lat_us', 'avg'))} | "
          f"{us(med(profile, p, 'qd8', 'lat_us', 'p50'))} | {us(med(profile, p, 'qd8', 'lat_us', 'p99'))} |")

w("")
w("## Cost of each policy against `global`")
w("")
w("Policy / `global` of the same profile, as the ratio of the medians in percent, with the "
  "range of the per-round ratios in brackets; **bold** is a difference by the rule above "
  f"(at least {ROUNDS_FOR_A_DIFFERENCE} rounds, every one on the same side), the rest is "
  "within the noise. Below 0 is fewer IOPS, above 0 more latency. The seed's rows (italics) "
  "are against the unpatched 4.10-RC8 kernel, which is `unsafe` on `mlx5-2017`, not `global` "
  "(see below). Each seed row stands under the profile that reproduces its column: Sagi under "
  "`mlx5-2017` (beside `sagi`), Max and Both under `mlx5-fenced` (beside `unsafe` and "
  "`sagi`); `max` and `deferred` have no seed row. A policy whose binds failed has no "
  "meaningful ratio, nor has a cell where a queue pair failed for another reason (\"n/a (QP "
  "errors)\").")
SEED = {
    "Sagi": [611737 / 667158, 890962 / 941352, 666000 / 667379, 40490 / 49304, 192.9 / 160.3],
    "Max": [619586 / 667158, 884222 / 941352, 666093 / 667379, None, 1.02],
    "Both": [607080 / 667158, 876926 / 941352, 666144 / 667379, None, None],
}
for profile in profiles:
    w("")
    w(f"### `{profile}`")
    w("")
    w("| Policy | 100/0 IOPS | 70/30 IOPS | 0/100 IOPS | QD8 IOPS | QD8 avg latency | QD8 p50 latency |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    for p in pols(profile)[1:]:
        if failed_binds(profile, p):
            w(f"| {p} | fails (status 6) | | | | | |")
            continue
        cells = [ccell(profile, p, x, "iops") for x, _ in WORKLOADS]
        cells += [ccell(profile, p, "qd8", "iops"), ccell(profile, p, "qd8", "lat_us", "avg"),
                  ccell(profile, p, "qd8", "lat_us", "p50")]
        w(f"| {p} | " + " | ".join(cells) + " |")
    for name, p, prof in SEED_COLUMNS:
        if prof == profile and name in SEED:
            cells = SEED[name]
            w(f"| *seed: {name}* | " + " | ".join("" if c is None else f"*{pct(c)}*" for c in cells) + " | |")
    if not failed_binds(profile, "unsafe") and med(profile, "unsafe", "r100", "iops"):
        w("")
        w(f"`unsafe` ran clean under `{profile}`"
          + (" (the seed's Max)" if profile == "mlx5-fenced" else "")
          + ", so an unpatched-host baseline exists here: against `unsafe`, " + "; ".join(
              f"`{p}` {ccell(profile, p, 'r100', base='unsafe')} 100/0 IOPS and "
              f"{ccell(profile, p, 'qd8', 'lat_us', 'avg', base='unsafe')} QD8 latency"
              for p in pols(profile) if p != "unsafe") + "."
          + (" The seed: Both against Max "
             f"{pct(SEED['Both'][0] / SEED['Max'][0])} 100/0 IOPS." if profile == "mlx5-fenced" else ""))

# ---- deterministic costs
def count(profile, policy, workload, key):
    vs = [r["json"]["per_io"].get(key) for r in runs.get((profile, policy, workload), [])
          if r["json"] and r["json"].get("per_io") and r["json"]["per_io"].get(key) is not None]
    return vs

def c2(vs):
    return "n/a" if not vs else f"{statistics.median(vs):.2f}"

def doorbell_cell(vs):
    if not vs:
        return "n/a"
    text = f"{statistics.median(vs):.2f}"
    return text + (f" [{min(vs):.2f}..{max(vs):.2f}]" if len(vs) > 1 else "")

w("")
w("## What each policy posts per I/O")
w("")
w("Counted, not timed: the host library's counts of what its I/O queue pairs posted and "
  "reaped (`IoQpairStats`: work requests by opcode, those asking for a completion, those "
  "with `IBV_SEND_FENCE`, doorbells, completions), and the sim's own work (work requests the "
  "two simulated HCAs took and completions they wrote), from each run's `--json` `per_io` "
  "(the count over the I/Os completed). These are exact but for the few hundred work "
  "requests of connecting and setting up the queues, and the same in every round (the median "
  "is shown). Only the doorbells depend on timing: one poll rings once for everything its "
  "completions made the host post, so they are shown with their range. The sim's time is not "
  "a clock here: its step clocks are per queue pair and also tick on polls that find nothing, "
  "so the time-free count of its work is work requests taken plus completions written, both "
  "HCAs (\"sim work\"). A policy that fails the race (`unsafe` on `mlx5-2017`) counts its "
  "reconnects' work too.")
for key, name in [("r100", "100/0"), ("r70", "70/30")]:
    w("")
    w(f"### {name}, 8 namespaces x QD32")
    w("")
    w("| Profile | Policy | SEND | BIND_MW | LOCAL_INV | signaled | fenced | CQEs reaped | doorbells | sim work |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for profile in profiles:
        for p in pols(profile):
            label = p + (" (fails: status 6)" if failed_binds(profile, p) else "")
            cells = [c2(count(profile, p, key, x)) for x in
                     ("send", "bind_mw", "local_inv", "signaled", "fenced", "cqes_reaped")]
            cells.append(doorbell_cell(count(profile, p, key, "doorbells")))
            cells.append(c2(count(profile, p, key, "sim_work_steps")))
            w(f"| `{profile}` | {label} | " + " | ".join(cells) + " |")
m = "mlx5-2017"
if m in profiles:
    def c(p, x, wl="r100"):
        return c2(count(m, p, wl, x))
    w("")
    w(f"Under `{m}` every read is invalidated by the host: `global` posts the SEND alone "
      f"({c('global', 'send')} per I/O), every window policy a bind and a LOCAL_INV with it "
      f"(`sagi` {c('sagi', 'bind_mw')} and {c('sagi', 'local_inv')}). `sagi` and `deferred` "
      f"signal the LOCAL_INV ({c('sagi', 'signaled')} and {c('deferred', 'signaled')} signaled "
      f"per I/O against {c('global', 'signaled')}), so each read brings one more completion "
      f"({c('sagi', 'cqes_reaped')} and {c('deferred', 'cqes_reaped')} CQEs against "
      f"{c('global', 'cqes_reaped')}). `max` posts as many work requests as `unsafe` and asks "
      f"for no completion more, but fences its rebinds ({c('max', 'fenced')} fenced per I/O): "
      "its cost is the wait, which no count shows. The sim's work per I/O: "
      + ", ".join(f"`{p}` {c(p, 'sim_work_steps')}" for p in pols(m) if not failed_binds(m, p))
      + ".")
if callgrind:
    cg = {key: v for key, v in callgrind.items() if v}
    def cgv(p, wl, part):
        v = cg.get((p, wl))
        return None if v is None else v[part]
    def cg_vs(p, wl):
        x = ratio(cgv(p, wl, "host"), cgv("global", wl, "host"))
        return "" if p == "global" or x is None else f" ({pct(x)})"
    w("")
    w("### Host-side instructions per I/O (callgrind)")
    w("")
    w(f"`tools/bench/callgrind-per-io.sh` over `tests/bench/host_stack_bench`: the host library, "
      "the sim and the target on one thread, polled in turn, so a run is the same sequence of "
      f"calls every time and the counts are exact. {meta['callgrind_ios']:,} I/Os per run, "
      "4 KiB, QD32, one null namespace, `rxe` with remote invalidation off: every policy posts "
      "its full work (a bind and a LOCAL_INV for each keyed I/O) and none fails, so the host "
      "library's own cost of each policy shows. \"Host\" is the library (`IoQpair` and the "
      "RDMA host queue, the key policy, the benchmark's callbacks), without the sim calls it "
      "makes; the sim and the target are shown for scale.")
    w("")
    w("| Policy | 100/0 host | 70/30 host | 100/0 target | 100/0 sim | 100/0 total |")
    w("|---|---:|---:|---:|---:|---:|")
    for p in POLICIES:
        w(f"| {p} | {n(cgv(p, 'r100', 'host'))}{cg_vs(p, 'r100')} | {n(cgv(p, 'r70', 'host'))}{cg_vs(p, 'r70')} | "
          f"{n(cgv(p, 'r100', 'target'))} | {n(cgv(p, 'r100', 'sim'))} | {n(cgv(p, 'r100', 'total'))} |")
elif not meta["callgrind_ios"]:
    w("")
    w("Host-side instructions per I/O (callgrind) were not measured for this document "
      "(`SEED_TABLE_CALLGRIND_IOS=0`).")

# ---- the rare race
if rare_unsafe or rare_global:
    w("")
    w("## The race, rare: `unsafe` on `mlx5-2017-rare`")
    w("")
    w(PROFILE_TEXT[RARE] + f" Both runs: 100/0 as above (8 namespaces x QD32, `--verify`), "
      f"`-t {meta['rare_seconds']}`, `--sim-race-one-in {meta['race_one_in']}`, "
      "`--reconnect-delay-ms 1000`. The seed saw the unpatched host fail now and then (about 30 "
      "errors in 48 two-minute runs) and run at full speed in between; under `mlx5-2017` ours "
      "fails at every chance.")
    u = rare_unsafe[0] if rare_unsafe and rare_unsafe[0]["json"] else None
    g = rare_global[0] if rare_global and rare_global[0]["json"] else None
    if u and g:
        uv, gv = rare_view(u), rare_view(g)
        uj, gj = u["json"], g["json"]
        g_med = statistics.median([v for v, _ in gv["series"]]) if gv["series"] else None
        w("")
        w("| | `unsafe` | `global` |")
        w("|---|---:|---:|")
        w(f"| IOPS, whole run | {n(uj['iops'])} | {n(gj['iops'])} |")
        w(f"| IOPS per second, median of the seconds without a reconnect | {n(uv['clean_median'])} "
          f"({len(uv['clean'])} of {len(uv['series'])} seconds) | {n(g_med)} (all {len(gv['series'])}) |")
        w(f"| MW bind errors (status 6) | {uj.get('mw_bind_errors')} | {gj.get('mw_bind_errors')} |")
        w(f"| reconnects | {uj['reconnects']} | {gj['reconnects']} |")
        w(f"| I/O errors / verify failures | {uj['errors']} / {uj['verify_failures']} | "
          f"{gj['errors']} / {gj['verify_failures']} |")
        w("")
        w("Per second, `unsafe` (in thousands of IOPS; * a second with a failure or a reconnect "
          "in it): " + ", ".join(f"{v / 1000:.0f}{'*' if d else ''}" for v, d in uv["series"]) + ".")
        w("")
        between = ratio(uv["clean_median"], g_med)
        w(f"Between its reconnects `unsafe` ran at "
          + ("n/a" if between is None else f"{between * 100:.0f}%")
          + " of `global`'s per-second median: the seed's picture, full speed until a bind fails. Each failure costs the "
          "reconnect delay (1 s here, 10 s in the seed's kernel) and the I/Os in flight are "
          "resent, so nothing is lost: the verify failures are 0. The log lines, as the seed "
          "quoted them (the host logs the command's CID where the kernel logged the CQE's "
          "address):")
        w("")
        w("```")
        for needle in ("failed with status memory management operation error (6)",
                       "reconnecting in", "Successfully reconnected"):
            line = quote(u["log"], needle)
            w(line if line else f"(no line with \"{needle}\")")
        w("```")
    else:
        w("")
        w("**The rare-race runs did not finish** (see Acceptance).")

# ---- the second seed
if seed001 or rxe_seed001:
    w("")
    w("## The second seed: a null device, 12 queues of depth 8")
    w("")
    w("The seed (`../shared/seeds/001_a840c731d0cd7af2.txt`, dm-devel, January 2018, dm-rq "
      "sequential I/O patches): \"null_blk with queue depth of 8, 12 hw queues on 12 cpu "
      "system, with 12 fio jobs\", sequential, 1350K IOPS before the patches and 1420K after, "
      "5275 and 5532 MB/s. 1350K x 4 KiB is 5273 MiB/s, so the seed's MB/s are MiB/s and its "
      "I/Os 4 KiB. Here: a null namespace (`--sim-bdev null`, nothing stored), 12 I/O queue "
      "pairs of depth 8 and sequential 4 KiB reads, `-c 1 -P 12 -q 96 -w read -o 4096`: one "
      "worker with 12 queue pairs, its 96 I/Os dealt 8 to each (`-q` is per worker, as in "
      "spdk_nvme_perf). One worker because this machine has 2 cores and with `--sim` the "
      "target's reactor takes one: `-c 2 -P 6` would put two workers on the one host core, "
      "and they would only take turns.")
    ok = [r for r in seed001 if seed001_ok(r)]
    w("")
    w("| | IOPS | MiB/s (the seed's MB/s) |")
    w("|---|---:|---:|")
    w("| *the seed: null_blk, 12 hw queues x QD8, 12 fio jobs, before the dm-rq patches* | *1,350K* | *5,275* |")
    w("| *the seed: after* | *1,420K* | *5,532* |")
    if ok:
        iops = [r["json"]["iops"] for r in ok]
        mib = [r["json"]["mibps"] for r in ok]
        w(f"| here, in process (`--sim`, {len(ok)} runs of `-t {ok[0]['json']['config']['time_s']}`: "
          f"median [range]) | {k(statistics.median(iops))} [{k(min(iops))}..{k(max(iops))}] | "
          f"{statistics.median(mib):,.0f} [{min(mib):,.0f}..{max(mib):,.0f}] |")
    else:
        w("| here, in process (`--sim`) | **the runs failed** | |")
    if rxe_seed001:
        c = rxe_seed001.get("config", {})
        w(f"| here, over rxe (VM: `nvmf_tgt` with a null bdev, `-t {c.get('time_s', '?')}`) | "
          f"{k(rxe_seed001.get('iops'))} | {rxe_seed001.get('mibps', 0):,.0f} |")
    w("")
    if rxe_seed001:
        src = meta["rxe_seed001"]
        w(f"The rxe row comes from the VM scenario `perf_rxe` (`tests/vm/scenarios/perf_rxe.sh`, "
          f"its step `seed001`), run by hand in the VM (`tests/vm/vm-run.sh perf_rxe`): its "
          f"`--json`, `{src['path']}` of {src['mtime']}, passed to this script as "
          "`SEED_TABLE_RXE_SEED001`. It is soft-RoCE between two processes of one guest, not "
          "the seed's hardware.")
    else:
        w("Over rxe the same run is the step `seed001` of the VM scenario `perf_rxe` "
          "(`tests/vm/scenarios/perf_rxe.sh`: `nvmf_tgt` with a null bdev, `nvmf_perf -c 1 -P "
          "12 -q 96 -w read -o 4096`, one line `seed001: iops=... mibps=...`); it runs only in "
          "the VM (`tests/vm/vm-run.sh perf_rxe`), which this document's run did not have. Its "
          "`logs/seed001.json`, passed as `SEED_TABLE_RXE_SEED001`, adds the row.")
    w("")
    w("The comparison is one of shape, not of speed: the seed measured the kernel's block "
      "layer over null_blk on 12 CPUs, with no fabric; here every I/O crosses the NVMe-oF host, "
      "the simulated RDMA fabric (or soft-RoCE) and the target, on one host core.")

# ---- noise
null_cells = []  # 0/100: every policy does the same work
for profile in paired:
    for p in pols(profile)[1:]:
        if failed_binds(profile, p):
            continue
        cmp = compare(profile, p, "r0")
        if cmp and cmp[0] is not None:
            null_cells.append((profile, p, cmp))
shares = [r["others"] for rs in runs.values() for r in rs if r["others"] is not None]
slow_fast = []  # (others' share in the slowest round, in the fastest), cells run twice or more
for (profile, p, wl), rs in runs.items():
    rs = [r for r in rs if r["json"] and r["others"] is not None]
    if wl in ALL and len(rs) > 1 and not failed_binds(profile, p) and not troubled(profile, p, wl):
        rs.sort(key=lambda r: r["json"]["iops"])
        slow_fast.append((rs[0]["others"], rs[-1]["others"]))
spreads = []
for (profile, p, wl), rs in runs.items():
    vs = [r["json"]["iops"] for r in rs if r["json"]]
    if wl in ALL and len(vs) > 1 and min(vs) > 0 and not troubled(profile, p, wl):
        spreads.append((max(vs) / min(vs) - 1) * 100)

def vs_global(profile, p, wl, key="iops", sub=None):
    return ccell(profile, p, wl, key, sub)

w("")
w("## What the differences mean")
w("")
w("**Noise.** "
  + (f"Within a cell the rounds' IOPS differed by {statistics.median(spreads):.1f}% (max / min) "
     f"in the median cell and by up to {max(spreads):.1f}%. " if spreads else "")
  + ("In 0/100 every policy does the same work (the writes go in the capsule, no window is "
     "bound), so its ratios against `global` are the noise itself: "
     + ", ".join(f"`{p}` on `{prof}` {ccell(prof, p, 'r0')}" for prof, p, _ in null_cells)
     + f"; the rule called {sum(1 for _, _, c in null_cells if c[2])} of {len(null_cells)} of "
     "them a difference. " if null_cells else "")
  + "The two cores are shared with other jobs, and a host or target thread that loses its "
  "core for a while stalls the whole pipeline"
  + (f": other work (other processes, and time the hypervisor stole) took "
     f"{statistics.median(shares) * 100:.0f}% of the machine's CPU time in the median run and "
     f"up to {max(shares) * 100:.0f}% (`/proc/stat` around each run, less the run's own CPU "
     "time)" if shares else "")
  + (f"; in the cells run more than once, the slowest round had {statistics.fmean(x for x, _ in slow_fast) * 100:.0f}% "
     f"of the machine taken on average, the fastest {statistics.fmean(y for _, y in slow_fast) * 100:.0f}%"
     if slow_fast else "")
  + ". Interleaving puts that noise on every policy alike, and the medians keep one bad round "
  "from moving a cell; what the rule does not call a difference is not one. The counts above "
  "carry no such noise.")
w("")
if m in profiles:
    binds = sum(total(m, "unsafe", x, "mw_bind_errors") or 0 for x in ALL)
    recon = sum(total(m, "unsafe", x, "reconnects") or 0 for x in ALL)
    terr = sum(r["target_error_lines"] for x in ALL for r in runs.get((m, "unsafe", x), []))
    w(f"**`unsafe` fails under `mlx5-2017`**: {binds} MW bind errors and {recon} reconnects over "
      f"its runs, {terr} target-side error lines in their logs, 100/0 at "
      f"{n(med(m, 'unsafe', 'r100', 'iops'))} IOPS against {n(med(m, 'global', 'r100', 'iops'))} "
      "for `global`. It is the 2017 host. The response arrives without remote invalidation, so "
      "the host posts an unsignaled LOCAL_INV and puts the window back on the free list at "
      "once. The free list is LIFO, so the next I/O binds the same window right behind that "
      f"LOCAL_INV. In the sim a later bind sees the LOCAL_INV's key change only "
      f"`mkey_commit_lag_steps` = {LAG} WQE steps after it executes, and nothing fences the bind. The bind's check that the "
      "window is FREE therefore still sees it VALID: status 6, \"memory management operation "
      "error\". The QP goes to error, everything outstanding is flushed, and the queue "
      "reconnects after `--reconnect-delay-ms`, as in the seed's log. The reuse is immediate, "
      "so each new QP fails again within its first I/Os, and the run spends its time waiting "
      "for reconnects: its IOPS measure nothing. The resent I/Os all complete and verify, so "
      "the race costs availability here, not data. The 0/100 run of `unsafe` is clean: it "
      "binds no window. `mlx5-2017-rare` above shows the same host when the race is rare.")
    w("")
if "rxe" in profiles:
    w("**`unsafe` does not fail under `rxe`**. With remote invalidation on, the target ends "
      "every command with SEND_WITH_INVALIDATE, the window is invalid before the response's "
      "receive completion is delivered, and no policy posts a LOCAL_INV at all. rxe also "
      "executes memory operations in order with no lag. The race needs a host-side "
      "invalidation that is still landing. So under `rxe`, `unsafe`, `sagi`, `max` and "
      "`deferred` do the same work: one bind per read (see the counts above), with the extra "
      "machinery of the last three idle. Their differences to `global` are the cost of that "
      "bind (100/0 IOPS: "
      + ", ".join(f"`{p}` {vs_global('rxe', p, 'r100')}" for p in POLICIES[1:])
      + "; QD8 latency: "
      + ", ".join(f"`{p}` {vs_global('rxe', p, 'qd8', 'lat_us', 'avg')}" for p in POLICIES[1:])
      + "). As the four do the same work here, the spread among them is noise too.")
    w("")
f = "mlx5-fenced"
if f in profiles:
    fb = {p: sum(total(f, p, x, "mw_bind_errors") or 0 for x in ALL) for p in ["unsafe", "sagi"]}
    w(f"**The seed's Max and Both** (`unsafe` and `sagi` under `mlx5-fenced`): "
      + ("no MW bind error in any run. " if not any(fb.values()) else
         f"**{fb['unsafe']} and {fb['sagi']} MW bind errors**. ")
      + "Max's patch changed the driver, not the host: the device puts its strong fence on "
      "every registration, so a bind starts only when every earlier work request on the send "
      f"queue has completed and its key change is visible, the {LAG}-step lag of the LOCAL_INV "
      "before it included. The unpatched host's immediate reuse of the window is then safe; "
      "Sagi's wait on top of it (Both) adds no protection against status 6, only the "
      "isolation (the key is dead before the I/O completes). Against `global` under "
      f"`mlx5-fenced`: Max 100/0 IOPS {vs_global(f, 'unsafe', 'r100')}, 70/30 "
      f"{vs_global(f, 'unsafe', 'r70')}, QD8 latency {vs_global(f, 'unsafe', 'qd8', 'lat_us', 'avg')}; "
      f"Both {vs_global(f, 'sagi', 'r100')}, {vs_global(f, 'sagi', 'r70')}, "
      f"{vs_global(f, 'sagi', 'qd8', 'lat_us', 'avg')} (the seed, against 4.10-RC8: Max -7.1%, "
      "-6.1%, about +2% latency; Both -9.0%, -6.8%). Every bind waits, not only the one that "
      "reuses a window, and in the sim that wait is a drain counted in sim steps; on the "
      "hardware it was an ordering bit the HCA honours in its pipeline (design note section "
      "1a).")
    w("")
if m in profiles:
    w(f"**`sagi`** under `mlx5-2017` (against `global`: 100/0 IOPS {vs_global(m, 'sagi', 'r100')}, "
      f"70/30 {vs_global(m, 'sagi', 'r70')}, QD8 latency {vs_global(m, 'sagi', 'qd8', 'lat_us', 'avg')}; "
      "the seed: -8.3%, -5.4%, +20%) posts its LOCAL_INV signaled for every I/O the target "
      "did not invalidate (here every read), and completes the I/O only when that completion "
      "arrives: one more work request and one more CQE per read (counted above), and the I/O's "
      "completion waits for the LOCAL_INV to get through the send queue. It is the only policy "
      "that guarantees the buffer is invalid before the application gets it back. What the sim "
      "cannot show is what that completion cost the 2017 kernel: its host took completions "
      "from an interrupt, in softirq context (`ib_alloc_cq(..., IB_POLL_SOFTIRQ)` in the "
      "4.10-era `rdma.c`), and a signaled LOCAL_INV adds a HCA round trip and a completion "
      "to handle before the block layer hears of the I/O. This host polls its completion "
      "queue, and the sim executes the LOCAL_INV in software, so the extra completion costs "
      "polling work on the host core, not a device round trip and an interrupt. The seed's "
      "+30 us at QD8 was probably that round trip (our inference). The LOCAL_INV completes "
      f"only after its {LAG}-step commit lag, so the I/O's completion waits through it too.")
    w("")
    w(f"**`max`** (100/0 IOPS {vs_global(m, 'max', 'r100')}, 70/30 {vs_global(m, 'max', 'r70')}, "
      f"QD8 latency {vs_global(m, 'max', 'qd8', 'lat_us', 'avg')}) keeps the LOCAL_INV unsignaled and completes the I/O at the response, but "
      "fences the window's next bind: the bind may not start until every earlier work request "
      f"on the send queue has completed and taken effect, the {LAG}-step lag included. The "
      "free list is LIFO (`key_policy.h`: \"the one freed last first\"), so the next read "
      "nearly always gets the window whose LOCAL_INV was just posted, and nearly every bind "
      "is fenced (the counts above): the send queue drains before each read's bind, and the "
      f"host core waits through the {LAG} lag steps. `max` is not the seed's Max: that was the "
      "driver's strong fence on every registration (`unsafe` on `mlx5-fenced`, above), while "
      "`max` asks for `IBV_SEND_FENCE` on the bind that reuses a window, the only fence "
      "userspace verbs can ask for; the seed's figures above are no measure of it. A pool "
      "that reused the least recently invalidated window, whose LOCAL_INV has long landed, "
      "should rarely wait (not measured). The target can still reach the buffer between the "
      "I/O's completion and the moment the LOCAL_INV lands. The sim's `mlx5-2017` assumes that "
      "`IBV_SEND_FENCE` orders key updates; where it is only the IBTA fence "
      "(`SimOpts::send_fence = reads`, `nvmf_perf --sim-send-fence reads`), `max` fails with "
      "status 6 like `unsafe` (tests "
      "`KeyPolicySim.MaxIsSafeUnderMlx5_2017OnlyWhereTheFenceOrdersKeyUpdates`, "
      "`Policies/HostMemregTest.DataSurvivesEveryPolicyAndProfile/mlx5_2017_local_fence_reads_max`). "
      "Whether real mlx5 hardware orders key updates for it is not documented.")
    w("")
    w(f"**`deferred`** (100/0 IOPS {vs_global(m, 'deferred', 'r100')}, 70/30 "
      f"{vs_global(m, 'deferred', 'r70')}, QD8 latency {vs_global(m, 'deferred', 'qd8', 'lat_us', 'avg')}) "
      "signals the LOCAL_INV like `sagi` but completes the I/O at the response like `max`. "
      "The window returns to the pool only when the LOCAL_INV completes, and the pool holds "
      "2 x depth windows, so a grant does not wait and no bind is fenced. It pays the extra "
      "CQE, but off the I/O's path; the price is twice the windows. It has the same "
      "isolation gap as `max`.")
    w("")
w("**`global`** is the baseline: the registered region's own rkey, with no bind and no "
  "invalidation. It is the cheapest policy and cannot hit the race. It also isolates least: "
  "the target holds a key to the whole registered region, other I/Os' buffers included, for "
  "as long as the registration lives.")
w("")
# Queue pairs of the race-free policies that failed anyway (not with a bind error).
trouble = [(p, pol, x) for (p, pol, x) in runs if x in ALL and safe(p, pol) and troubled(p, pol, x)]
overruns = sum(r["overruns"] for key in trouble for r in runs[key])
if "adversarial" in profiles:
    a = "adversarial"
    others = [p for p in SAFE if failed_binds(a, p)]
    w(f"**`adversarial`** applies the mlx5-2017 rules with random lags and interleavings. "
      f"`unsafe` had {sum(total(a, 'unsafe', x, 'mw_bind_errors') or 0 for x in ALL)} MW bind "
      "errors there; " + ("the other policies had none" if not others else
                          "**" + ", ".join(others) + " had some too**")
      + ". QD8 latency against `global` (one run each, no difference called): "
      + ", ".join(f"`{p}` {vs_global(a, p, 'qd8', 'lat_us', 'avg')}" for p in ["sagi", "max", "deferred"])
      + "; 100/0 IOPS: " + ", ".join(f"`{p}` {vs_global(a, p, 'r100')}" for p in ["sagi", "max", "deferred"])
      + ".")
    w("")
if trouble:
    where = ", ".join(f"`{p}`/`{pol}`/{NAMES[x]}" for p, pol, x in trouble)
    w(f"**Queue pairs failed without a bind error** in {len(trouble)} cells ({where}): "
      "their IOPS are mostly reconnect delay, and their ratios are left out. "
      + (f"The logs name the cause {overruns} times: the target reports that the host "
         "\"overran its queue\" and disconnects. The target frees a request slot only when "
         "its response SEND's completion comes back. The host may already have that response "
         "and send the next command into the slot, and nothing orders a send completion before "
         "a later receive completion; the adversarial profile delays completions, so the new "
         "command can arrive first. This is a target flow-control problem "
         "(`src/transport_rdma/target_transport.cpp`, `handle_recv`), not a memory-registration "
         "one: it hits `global` too." if overruns else "The logs do not say why."))
    w("")
w("### What is and is not comparable with the seed")
w("")
safe_binds = sum(total(p, pol, x, "mw_bind_errors") or 0 for (p, pol, x) in runs
                 if x in ALL and safe(p, pol))
race = sum(total("mlx5-2017", "unsafe", x, "mw_bind_errors") or 0 for x in READS) if m in profiles else 0
w("- Which host fails matches the seed"
  + (": the unpatched host (`unsafe`) hits status 6 and reconnects under `mlx5-2017`"
     if race else ": **no, `unsafe` did not fail here**")
  + (", and neither fix (Sagi's in the host, Max's in the driver: `unsafe` on `mlx5-fenced`), "
     "nor `max`, `deferred` or `global`, had a bind error in any run."
     if not safe_binds else f", but **the fixed configurations had {safe_binds} bind errors**.")
  + " With the race rare (`mlx5-2017-rare`) the unpatched host runs at full speed between its "
  "reconnects, as in the seed. The seed still saw errors with Sagi's patch at 50 Gb/s; the "
  "sim has no counterpart for that, since the only hazard it models is the one described "
  "above.")
w("- The seed ran a kernel host on real ConnectX-4s and SSDs. Ours is a userspace host driving "
  "a simulated HCA in the same process, with RAM namespaces. The seed's 100/0 and 0/100 "
  "baselines are both about 667 K IOPS, i.e. 2.7 GB/s or 21.9 Gb/s of payload, close to the "
  "25 Gb/s link. Its high-QD runs were most likely link-bound (our inference), so a per-I/O "
  "CPU cost showed only where it pushed the read path below line rate. Here there is no link "
  "and no disk: one host core runs the host stack and the sim's host half, so every per-I/O "
  "cost shows in full in IOPS. Percentages can be compared in direction and rough size, not "
  "digit by digit; the counts per I/O compare the work exactly.")
w("- The sim executes work requests in software. An extra CQE costs sim and polling work on "
  "the host core instead of PCIe and HCA time, and a fence stalls for sim steps, not for "
  "nanoseconds. Absolute latencies (tens of us here, 160 us in the seed, most of it the SSD) "
  "are not comparable, and neither are the seed's interrupt-driven completions and our "
  "polled ones (see `sagi` above).")
w("- The baselines differ. The seed compared against the unpatched kernel, which is `unsafe`. "
  "Under `mlx5-2017`, `unsafe` fails at once and cannot be a baseline, so the ratios here are "
  "against `global`, which the 2017 host did not use (it registered every I/O; "
  "`register_always`). Where `unsafe` ran clean (`rxe`; `mlx5-fenced`, where it is the "
  "seed's Max), the ratios against it are given too.")
w("- `mlx5-2017` turns remote invalidation off, so every read needs a host LOCAL_INV: the worst "
  "case for `sagi`. Whether the seed's target invalidated remotely is not known (design note, "
  "section 0). If it did, Sagi's patch would have cost little, so its -8% suggests that most "
  "I/Os were invalidated by the host, or that the RFC cost something else (signaling every "
  "SEND, for instance).")
w("- \"Both patches\" is `sagi` on `mlx5-fenced`, and \"Max\" is `unsafe` on `mlx5-fenced` (see "
  "the mapping)" + ("; both were run above." if "mlx5-fenced" in profiles
                   else "; neither was run for these figures."))
w("")
w("## Acceptance")
w("")
w("Conditions: no run of `global`, `sagi`, `max` or `deferred`, nor of `unsafe` under "
  "`mlx5-fenced` (the seed's Max), has I/O errors, MW bind errors or verify failures; every "
  "`unsafe` run under `mlx5-2017` that reads (100/0, 70/30, QD8) has MW bind errors and "
  "reconnects; no run has verify failures; every run finished and wrote its JSON with the "
  "per-I/O counts; every paired cell has its rounds; the rare `unsafe` run has status-6 "
  "errors, reconnects, the seed's three log lines, no I/O error and seconds without a "
  "reconnect, the rare `global` run no error, bind error or reconnect; every seed-001 run "
  "ran 12 queue pairs of depth 8 with no error; every callgrind run wrote its figures.")
w("")
if failures:
    w("**FAILED:**")
    w("")
    for x in failures:
        w(f"- {x}")
else:
    w("**All conditions hold.**")
if notes:
    w("")
    w("Notes:")
    w("")
    for x in notes:
        w(f"- {x}")
w("")
os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
with open(out_path, "w") as out_file:
    out_file.write("\n".join(L))
for x in failures:
    print(f"seed-table: FAIL {x}", file=sys.stderr)
for x in notes:
    print(f"seed-table: note {x}", file=sys.stderr)
print(f"seed-table: wrote {out_path} ("
      f"{'FAILED' if failures else 'the acceptance conditions hold'})", file=sys.stderr)
sys.exit(1 if failures else 0)
PY
}

if [[ "${1:-}" == --render ]]; then
  ((!quick)) || usage
  [[ $# -eq 2 && -f "$2/runs.tsv" && -f "$2/meta.json" ]] || usage
  refuse_dirty "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["dirty"])' "$2/meta.json")"
  if out_is_doc && python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get("quick") else 1)' "$2/meta.json"; then
    echo "seed-table: $2 holds a --quick run: not rendered into $doc" >&2
    exit 2
  fi
  render "$2"
  exit $?
fi
[[ $# -le 1 && "${1:-}" != -* ]] || usage
build="${1:-build-release}"
if [[ -n "${SEED_TABLE_REPEAT+set}${SEED_TABLE_REPEAT_PROFILES+set}" ]]; then
  echo "seed-table: SEED_TABLE_REPEAT and SEED_TABLE_REPEAT_PROFILES are gone: cells run in" \
    "interleaved rounds (SEED_TABLE_ROUNDS, SEED_TABLE_PAIRED_PROFILES)" >&2
  exit 2
fi
if ((quick)); then
  out_is_doc && { echo "seed-table: --quick does not write $doc (set SEED_TABLE_OUT elsewhere)" >&2; exit 2; }
  seconds="${SEED_TABLE_SECONDS:-1}"
  rounds="${SEED_TABLE_ROUNDS:-2}"
  rare_seconds="${SEED_TABLE_RARE_SECONDS:-3}"
  race_one_in="${SEED_TABLE_RACE_ONE_IN:-50000}"  # a race or two in 3 s: the smoke checks the path
  callgrind_ios="${SEED_TABLE_CALLGRIND_IOS:-2000}"
else
  seconds="${SEED_TABLE_SECONDS:-3}"
  rounds="${SEED_TABLE_ROUNDS:-5}"
  rare_seconds="${SEED_TABLE_RARE_SECONDS:-15}"
  # One bind or LOCAL_INV in this many lags: at the sim's 100/0 rates (some 0.5..2 x 10^5
  # reads a second on one host core) one to six races in 15 s, each costing the 1 s reconnect
  # delay, and most seconds at full speed.
  race_one_in="${SEED_TABLE_RACE_ONE_IN:-500000}"
  callgrind_ios="${SEED_TABLE_CALLGRIND_IOS:-20000}"
fi
rxe_seed001="${SEED_TABLE_RXE_SEED001:-}"
# Before many minutes of runs, not after: the commit the document names is the one it was
# made from.
dirty_start=$(git status --porcelain 2>/dev/null | wc -l)
refuse_dirty "$dirty_start"
profiles="${SEED_TABLE_PROFILES:-mlx5-2017 mlx5-fenced rxe adversarial}"
paired_profiles="${SEED_TABLE_PAIRED_PROFILES-mlx5-2017 mlx5-fenced rxe}"
whole() {  # whole NAME VALUE MIN: VALUE is a whole number >= MIN, or exit 2
  [[ "$2" =~ ^[0-9]+$ ]] && (($2 >= $3)) || { echo "$1: '$2' is not a whole number >= $3" >&2; exit 2; }
}
whole SEED_TABLE_SECONDS "$seconds" 1
whole SEED_TABLE_ROUNDS "$rounds" 1
whole SEED_TABLE_RARE_SECONDS "$rare_seconds" 2
whole SEED_TABLE_RACE_ONE_IN "$race_one_in" 1
whole SEED_TABLE_CALLGRIND_IOS "$callgrind_ios" 0
[[ -n "${profiles// }" ]] || { echo "SEED_TABLE_PROFILES is empty" >&2; exit 2; }
if [[ -n "$rxe_seed001" ]]; then
  python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); j["iops"]; j["config"]["qpairs_per_worker"]' \
    "$rxe_seed001" 2>/dev/null ||
    { echo "SEED_TABLE_RXE_SEED001: '$rxe_seed001' is not the --json of a seed-001 run (perf_rxe's logs/seed001.json)" >&2; exit 2; }
fi
profile_args() {
  case "$1" in
    # The 2017 ConnectX-4: the target never invalidates remotely, so the host posts LOCAL_INV.
    mlx5-2017) echo "--sim-profile mlx5-2017 --sim-remote-invalidate off" ;;
    rxe) echo "--sim-profile rxe" ;;
    # mlx5-2017's rules with random lags and interleavings; remote invalidation off as above.
    adversarial) echo "--sim-profile adversarial --sim-remote-invalidate off" ;;
    # The 2017 ConnectX-4 with Max's driver fix: the strong fence on every bind.
    mlx5-fenced) echo "--sim-profile mlx5-fenced --sim-remote-invalidate off" ;;
    # mlx5-2017 with the lag on one bind or LOCAL_INV in --sim-race-one-in.
    mlx5-2017-rare) echo "--sim-profile mlx5-2017-rare --sim-remote-invalidate off --sim-race-one-in $race_one_in" ;;
    *) return 1 ;;
  esac
}
# The policies run under a profile, in run order. mlx5-fenced is the seed's patched driver:
# the seed ran it with the unpatched host (Max) and with Sagi's (Both); global is the
# baseline. The userspace policies (max, deferred) are not what the seed ran there.
profile_policies() {
  case "$1" in
    mlx5-fenced) echo "global unsafe sagi" ;;
    *) echo "global unsafe sagi max deferred" ;;
  esac
}
# The policies of a profile that fail the race at every chance: run once per workload, after
# the first round (their IOPS measure reconnect delays, no round would tell more).
profile_failing() {
  case "$1" in
    mlx5-2017 | adversarial) echo "unsafe" ;;
    *) echo "" ;;
  esac
}
for profile in $profiles; do
  [[ "$profile" != mlx5-2017-rare ]] && profile_args "$profile" >/dev/null ||
    { echo "SEED_TABLE_PROFILES: '$profile' is not one of mlx5-2017, mlx5-fenced, rxe, adversarial (mlx5-2017-rare runs on its own)" >&2; exit 2; }
done
workload_args() {
  case "$1" in
    r100 | rare) echo "-w randread --ns-count 8 -c 1 -q 32" ;;
    r70) echo "-w randrw -M 70 --ns-count 8 -c 1 -q 32" ;;
    r0) echo "-w randwrite --ns-count 8 -c 1 -q 32" ;;
    qd8) echo "-w randread --ns-count 1 -c 1 -q 8" ;;
    # The second seed: 12 queue pairs of depth 8 (one worker: see the document), sequential.
    seed001) echo "-w read --ns-count 1 -c 1 -P 12 -q 96 --sim-bdev null" ;;
  esac
}
workloads=(r100 r70 r0 qd8)

perf="$build/tools/nvmf_perf"
bench="$build/tests/bench/host_stack_bench"
if [[ ! -x "$perf" ]] || { ((callgrind_ios)) && [[ ! -x "$bench" ]]; }; then
  echo "seed-table: building nvmf_perf and host_stack_bench in $build" >&2
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNVMF_BUILD_BENCH=ON >&2 || exit 2
  fi
  targets=(nvmf_perf)
  ((callgrind_ios)) && targets+=(host_stack_bench)
  ninja -C "$build" -j2 "${targets[@]}" >&2 ||
    { echo "seed-table: build failed (host_stack_bench needs -DNVMF_BUILD_BENCH=ON; SEED_TABLE_CALLGRIND_IOS=0 skips callgrind)" >&2; exit 2; }
fi
if ((callgrind_ios)) && ! command -v valgrind >/dev/null; then
  echo "seed-table: callgrind needs valgrind (SEED_TABLE_CALLGRIND_IOS=0 skips it)" >&2
  exit 2
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)

if [[ -n "${SEED_TABLE_KEEP:-}" ]]; then
  work="$SEED_TABLE_KEEP"
  mkdir -p "$work"
  [[ ! -e "$work/runs.tsv" ]] || { echo "SEED_TABLE_KEEP: $work already holds results" >&2; exit 2; }
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
: >"$work/runs.tsv"
: >"$work/callgrind.tsv"

# run PROFILE POLICY ROUND WORKLOAD [SECONDS]
n=0
run() {
  local profile="$1" policy="$2" round="$3" workload="$4" t="${5:-$seconds}"
  n=$((n + 1))
  local -a wargs pargs data
  read -ra wargs <<<"$(workload_args "$workload")"
  if [[ "$workload" == seed001 ]]; then
    pargs=()
    data=()  # null namespaces: nothing stored, nothing to verify
  else
    read -ra pargs <<<"$(profile_args "$profile")"
    data=(--sim-bdev malloc --verify)
  fi
  local -a cmd=("$perf" --sim "${wargs[@]}" -o 4096 -t "$t" "${data[@]}"
                "${pargs[@]}" --memreg "$policy" --reconnect-delay-ms 1000 --seed 1
                --json "$work/$n.json")
  local rc=0 start=$SECONDS
  local -a timed=()
  # The run's own CPU time, and the machine's before and after (/proc/stat): what other jobs
  # and the hypervisor took meanwhile shows how disturbed the run was.
  [[ -x /usr/bin/time ]] && timed=(/usr/bin/time -f '%e %U %S' -o "$work/$n.time")
  head -1 /proc/stat >"$work/$n.stat" 2>/dev/null || true
  # SIGTERM makes nvmf_perf stop, drain and report; SIGKILL if even that hangs.
  "${timed[@]}" timeout -k 15 $((t + 90)) "${cmd[@]}" >"$work/$n.log" 2>&1 || rc=$?
  head -1 /proc/stat >>"$work/$n.stat" 2>/dev/null || true
  local shown="${cmd[*]}"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$profile" "$policy" "$round" "$workload" "$rc" \
    $((SECONDS - start)) "$n" "${shown//$work\//\$TMP/}" >>"$work/runs.tsv"
  printf 'seed-table: %3d  %-14s %-9s %-7s round %s  exit %s\n' "$n" "$profile" "$policy" \
    "$workload" "$round" "$rc" >&2
}

date_utc=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$SECONDS
paired_json="{}"
for profile in $profiles; do
  read -ra policies <<<"$(profile_policies "$profile")"
  failing=" $(profile_failing "$profile") "
  profile_rounds=1
  [[ " $paired_profiles " == *" $profile "* ]] && profile_rounds=$rounds
  in_rounds=()
  for policy in "${policies[@]}"; do [[ "$failing" == *" $policy "* ]] || in_rounds+=("$policy"); done
  if ((profile_rounds > 1)); then
    paired_json=$(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d[sys.argv[2]] = sys.argv[3:]; print(json.dumps(d))' \
      "$paired_json" "$profile" "${in_rounds[@]}")
  fi
  for workload in "${workloads[@]}"; do
    for ((round = 1; round <= profile_rounds; round++)); do
      # Forward in odd rounds, backward in even ones: drift within a round favours no policy.
      if ((round % 2)); then
        for policy in "${in_rounds[@]}"; do run "$profile" "$policy" "$round" "$workload"; done
      else
        for ((i = ${#in_rounds[@]} - 1; i >= 0; i--)); do run "$profile" "${in_rounds[$i]}" "$round" "$workload"; done
      fi
      if ((round == 1)); then
        for policy in "${policies[@]}"; do
          [[ "$failing" != *" $policy "* ]] || run "$profile" "$policy" 1 "$workload"
        done
      fi
    done
  done
done
# The race, rare: the 2017 host and the baseline on mlx5-2017-rare.
run mlx5-2017-rare global 1 rare "$rare_seconds"
run mlx5-2017-rare unsafe 1 rare "$rare_seconds"
# The second seed, in process: as many runs as a paired cell has rounds.
for ((round = 1; round <= rounds; round++)); do run seed001 global "$round" seed001; done
# Host-side instructions per I/O, one policy at a time (rxe, remote invalidation off: every
# policy posts its full work and none fails).
if ((callgrind_ios)); then
  for policy in global unsafe sagi max deferred; do
    for workload in r100 r70; do
      read_percent=100
      [[ "$workload" == r70 ]] && read_percent=70
      name="cg-$policy-$workload.json"
      rc=0
      tools/bench/callgrind-per-io.sh --memreg "$policy" --sim-profile rxe --remote-invalidate off \
        --read-percent "$read_percent" --queue-depth 32 --ios "$callgrind_ios" \
        --json "$work/$name" "$build" >"$work/cg-$policy-$workload.log" 2>&1 || rc=$?
      printf '%s\t%s\t%s\t%s\n' "$policy" "$workload" "$rc" "$name" >>"$work/callgrind.tsv"
      printf 'seed-table:      callgrind %-9s %-5s exit %s\n' "$policy" "$workload" "$rc" >&2
    done
  done
fi
rxe_meta=""
if [[ -n "$rxe_seed001" ]]; then
  cp "$rxe_seed001" "$work/rxe-seed001.json"
  rxe_meta="$(realpath "$rxe_seed001")"$'\t'"$(date -u -r "$rxe_seed001" '+%Y-%m-%d %H:%M UTC')"
fi
wall=$((SECONDS - t0))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# The sim's lag of an unsignaled LOCAL_INV: SimOpts' default, which nvmf_perf keeps.
lag=$(sed -n 's/^ *uint32_t mkey_commit_lag_steps = \([0-9]*\);.*/\1/p' src/verbs/sim/sim.h | head -1)
if grep -q mkey_commit_lag_steps tools/nvmf_perf/*.cpp; then lag="${lag:-?} (the default; nvmf_perf may change it)"; fi

# The tree as it was at the start, or as it is now if something changed it during the runs.
dirty_end=$(git status --porcelain 2>/dev/null | wc -l)
dirty=$((dirty_end > dirty_start ? dirty_end : dirty_start))
SEED_DATE="$date_utc" SEED_NPROC="$(nproc)" SEED_CPU="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)" \
SEED_CXX="$({ [[ -n "$cxx" ]] && "$cxx" --version 2>/dev/null | head -1; } || echo unknown)" \
SEED_BUILD="$build" SEED_BUILD_TYPE="${build_type:-unknown}" SEED_SECONDS="$seconds" \
SEED_WALL="$wall" SEED_LOAD_START="$load_start" SEED_LOAD_END="$load_end" SEED_LAG="${lag:-unknown}" \
SEED_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
SEED_DIRTY="$dirty" SEED_QUICK="$quick" SEED_ROUNDS="$rounds" SEED_PAIRED="$paired_json" \
SEED_RARE_SECONDS="$rare_seconds" SEED_RACE_ONE_IN="$race_one_in" SEED_CALLGRIND_IOS="$callgrind_ios" \
SEED_RXE="$rxe_meta" \
python3 - "$work/meta.json" <<'PY'
import json, os, platform, sys
e = os.environ
paired = json.loads(e["SEED_PAIRED"])
rxe = e["SEED_RXE"].split("\t") if e["SEED_RXE"] else None
json.dump({"date": e["SEED_DATE"], "nproc": int(e["SEED_NPROC"]), "cpu": e["SEED_CPU"],
           "kernel": platform.release(), "build": e["SEED_BUILD"],
           "build_type": e["SEED_BUILD_TYPE"], "cxx": e["SEED_CXX"], "commit": e["SEED_COMMIT"],
           "dirty": e["SEED_DIRTY"].strip(), "seconds": int(e["SEED_SECONDS"]),
           "wall_s": int(e["SEED_WALL"]), "load_start": e["SEED_LOAD_START"],
           "load_end": e["SEED_LOAD_END"], "lag": e["SEED_LAG"],
           "quick": e["SEED_QUICK"] == "1", "rounds": int(e["SEED_ROUNDS"]),
           "paired_profiles": list(paired), "paired_policies": paired,
           "rare_seconds": int(e["SEED_RARE_SECONDS"]), "race_one_in": int(e["SEED_RACE_ONE_IN"]),
           "callgrind_ios": int(e["SEED_CALLGRIND_IOS"]),
           "rxe_seed001": {"path": rxe[0], "mtime": rxe[1]} if rxe else None},
          open(sys.argv[1], "w"), indent=1)
PY

status=0
# Something changed the tree during the runs: the results stay in SEED_TABLE_KEEP, if set.
refuse_dirty "$dirty"
render "$work" || status=$?
echo "seed-table: $wall s of runs" >&2
exit "$status"
