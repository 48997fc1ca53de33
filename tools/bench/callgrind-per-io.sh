#!/usr/bin/env bash
# Instructions per I/O of the full stack, split into host side, target side and the simulated
# HCA, measured with callgrind on tests/bench/host_stack_bench (one core, 4 KiB random I/O,
# null bdev; by default reads at QD128 with the global policy on rxe). Only the benchmark's
# timed loop is collected. The benchmark polls host and target in turn from one thread, so a
# run of --ios N is the same sequence of calls each time: the counts are exact, not sampled.
#
#   tools/bench/callgrind-per-io.sh [--memreg POLICY] [--sim-profile PROFILE]
#       [--remote-invalidate on|off] [--read-percent N] [--queue-depth N] [--ios N]
#       [--json FILE] [build-dir]     (default build-dir: build-release)
#
# The options go to host_stack_bench (its --ios N: exactly N I/Os in one iteration); --json
# writes {"ios", "total", "host", "app", "target", "sim", "sim_host", "sim_target"}
# (instructions per I/O; sim_host and sim_target: the sim's, by caller) and "top" (each side's
# and the sim's largest functions, [name, own instructions per I/O]) to FILE too.
#
# Attribution: every call from outside the sim into a function of nvmf::verbs::sim is "sim";
# the benchmark's own callback code (it counts the I/O and draws the next LBA from its RNG) is
# "app"; the rest of IoQpair::process_completions (which runs the callbacks that resubmit) is
# "host" (libnvmf_host and its RDMA host queue); the rest of Reactor::poll_once is "target"
# (transport, target core, bdev, reactor). Each side's top functions by own instructions follow
# (inlined code counts where it was inlined).
set -euo pipefail
usage() { sed -n '8,10p' "$0" | sed 's/^# *//' >&2; exit 2; }
bench_args=()
json_out=""
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --memreg | --sim-profile | --remote-invalidate | --read-percent | --queue-depth | --ios)
      [[ $# -ge 2 ]] || usage
      bench_args+=("$1=$2")
      shift 2
      ;;
    --json)
      [[ $# -ge 2 ]] || usage
      json_out="$(realpath -m "$2")"
      shift 2
      ;;
    *) usage ;;
  esac
done
[[ $# -le 1 ]] || usage
cd "$(dirname "$0")/../.."
build="${1:-build-release}"
bench="$build/tests/bench/host_stack_bench"
[[ -x "$bench" ]] || { echo "build $bench first (ninja -C $build host_stack_bench)" >&2; exit 2; }
# What the counts belong to: the commit of the build's source tree, and whether it was clean
# (instruction counts do not depend on the machine's load; the compiler is in CMakeCache.txt).
source_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")"
echo "commit $(git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "($(git -C "$source_dir" status --porcelain --untracked-files=no 2>/dev/null | wc -l) changed files)," \
  "$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")," \
  "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Without --ios the benchmark runs for its minimum time (0.3 s of the slowed-down process).
time_args=(--benchmark_min_time=0.3)
[[ " ${bench_args[*]-} " == *" --ios="* ]] && time_args=()
if ! valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$work/cg.out" \
    "$bench" "${time_args[@]}" "${bench_args[@]}" >"$work/stdout" 2>"$work/stderr"; then
  echo "callgrind-per-io: host_stack_bench failed:" >&2
  tail -5 "$work/stderr" "$work/stdout" >&2
  exit 1
fi
if grep -q "ERROR OCCURRED" "$work/stdout"; then
  echo "callgrind-per-io: the benchmark reported an error:" >&2
  grep "ERROR OCCURRED" "$work/stdout" >&2
  exit 1
fi
ios=$(awk '/^measured_ios/ {sum += $2} END {print sum + 0}' "$work/stdout")

python3 - "$work/cg.out" "$ios" "$json_out" <<'PY'
import json, re, sys

path, ios, json_out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = {}          # "(id)" -> name, for callgrind's name compression
def name_of(token):
    m = re.match(r"\((\d+)\)(?: (.*))?", token)
    if not m:
        return token
    if m.group(2):
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), token)

self_cost = {}      # fn -> self instructions
calls = {}          # (caller, callee) -> inclusive instructions of those calls
fn = None
callee = None
expect_call_cost = False
with open(path) as f:
    for line in f:
        line = line.rstrip("\n")
        if line.startswith("fn="):
            fn = name_of(line[3:])
            continue
        if line.startswith("cfn="):
            callee = name_of(line[4:])
            continue
        if line.startswith("calls="):
            expect_call_cost = True
            continue
        if line and (line[0].isdigit() or line[0] in "+-*"):
            parts = line.split()
            if len(parts) < 2:
                continue
            cost = int(parts[1])
            if expect_call_cost:
                calls[(fn, callee)] = calls.get((fn, callee), 0) + cost
                expect_call_cost = False
            else:
                self_cost[fn] = self_cost.get(fn, 0) + cost

def is_sim(name):
    return "nvmf::verbs::sim::" in name

# The benchmark's functions that run inside process_completions() (host_stack_bench.cpp).
APP = r"^nvmf::\(anonymous namespace\)::(on_done|submit|next_lba|xorshift)\("
def is_app(name):
    return re.search(APP, name) is not None

total = sum(self_cost.values())
sim_total = sum(c for (a, b), c in calls.items() if is_sim(b) and not is_sim(a))

# Inclusive cost of a function = self + calls it makes.
def inclusive(pattern):
    return sum(v for k, v in self_cost.items() if re.search(pattern, k)) + \
           sum(c for (a, b), c in calls.items() if re.search(pattern, a) and not re.search(pattern, b))

# Sim calls made (directly or not) from each side: attribute each non-sim caller of a sim
# function to host or target by what it is.
def side_of(name):
    if re.search(r"nvmf::host::|HostQueue|host_stack_bench|BM_|nvmf::\(anonymous namespace\)::(on_done|submit|run_full_stack)", name):
        return "host"
    return "target"
sim_by_side = {"host": 0, "target": 0}
for (a, b), c in calls.items():
    if is_sim(b) and not is_sim(a):
        sim_by_side[side_of(a)] += c
app = sum(v for k, v in self_cost.items() if is_app(k))
host = inclusive(r"IoQpair::process_completions") - sim_by_side["host"] - app
target = inclusive(r"Reactor::poll_once") - sim_by_side["target"]
if ios == 0:
    print("no I/O measured"); sys.exit(1)
def short(name):
    return re.sub(r'[(].*', '', name.replace('(anonymous namespace)', '{anon}'))[:100]
def own_of(side):  # [(own instructions, name)] of one side's functions, largest first
    return sorted(((v, k) for k, v in self_cost.items()
                   if not is_sim(k) and not is_app(k) and "nvmf::" in k and side_of(k) == side),
                  reverse=True)
sim_own = sorted(((v, k) for k, v in self_cost.items() if is_sim(k) or "nvmf::" not in k),
                 reverse=True)
if json_out:
    top = {side: [[short(k), round(v / ios, 1)] for v, k in items[:8]]
           for side, items in (("host", own_of("host")), ("target", own_of("target")),
                               ("sim", sim_own))}
    with open(json_out, "w") as f:
        json.dump({"ios": ios, "total": round(total / ios, 1), "host": round(host / ios, 1),
                   "app": round(app / ios, 1), "target": round(target / ios, 1),
                   "sim": round(sim_total / ios, 1),
                   "sim_host": round(sim_by_side["host"] / ios, 1),
                   "sim_target": round(sim_by_side["target"] / ios, 1), "top": top}, f)
        f.write("\n")
print(f"I/Os measured: {ios}")
print(f"total instructions per I/O:       {total / ios:8.0f}")
print(f"host side (libnvmf_host) per I/O: {host / ios:8.0f}")
print(f"benchmark's callback per I/O:     {app / ios:8.0f}  (the application's, not the host's)")
print(f"target side per I/O:              {target / ios:8.0f}")
print(f"simulated HCA per I/O:            {sim_total / ios:8.0f}  "
      f"(host calls {sim_by_side['host'] / ios:.0f}, target calls {sim_by_side['target'] / ios:.0f})")
def top_of(side, count=8):
    print(f"top {side} functions by own instructions per I/O:")
    for v, k in own_of(side)[:count]:
        print(f"  {v / ios:7.0f}  {short(k)}")
top_of("host")
top_of("target")
print("top sim (and libc) functions by own instructions per I/O:")
for v, k in sim_own[:5]:
    print(f"  {v / ios:7.0f}  {re.sub(r'[(].*', '', k)[:100]}")
PY
