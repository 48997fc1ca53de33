#!/usr/bin/env bash
# Chaos under nvmf_perf --verify on the sim: one short verified run with --chaos FAULTS (and
# whatever else the arguments add, e.g. --sim-profile adversarial). It must exit 0 with the
# account line "account: submitted=S completed=C failed=F inflight=0 verify_failures=0 ok",
# S = C + F > 0, the same numbers in --json (failed_by_status adding up to F), every fault of
# the mix injected, and the fabric's or the bdevs' own counters showing that it landed.
# Usage: nvmf_perf_chaos.sh NVMF_PERF FAULTS [NVMF_PERF-ARGS...]   (FAULTS: a --chaos list)
set -uo pipefail
perf="$1"
faults="$2"
shift 2
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

# Short reconnect delays keep a run of a few seconds busy with faults, not with waiting.
args=(--sim -w randrw -M 50 -q 16 -o 4096 -t 3 --verify --reconnect-delay-ms 50
      --chaos "$faults" --chaos-every-ms 150 --seed 7 "$@")
echo "running: $perf ${args[*]}"
"$perf" "${args[@]}" --json "$work/out.json" >"$work/run.log" 2>&1
rc=$?
check "exits 0" $rc "status $rc: $(tail -20 "$work/run.log")"

line=$(grep '^account: ' "$work/run.log")
[[ "$line" =~ ^account:\ submitted=([0-9]+)\ completed=([0-9]+)\ failed=([0-9]+)\ inflight=0\ verify_failures=0\ ok$ ]]
check "account line" $? "'$line'"
grep '^chaos: ' "$work/run.log"

# The JSON: the account as the line says it, and each fault of the mix with its evidence.
python3 - "$work/out.json" "$faults" "$line" <<'EOF'
import json, re, sys
doc = json.load(open(sys.argv[1]))
faults = sys.argv[2].split(",")
if faults == ["all"]:
    faults = ["qp-error", "drop", "delay", "refuse", "bdev-error", "async-event"]
failures = []
def expect(ok, what):
    if not ok:
        failures.append(what)
account = doc["account"]
s, c, f = account["submitted"], account["completed"], account["failed"]
expect(s > 0 and s == c + f, "json account: submitted %d != completed %d + failed %d" % (s, c, f))
expect(account["inflight"] == 0, "json account: inflight %d" % account["inflight"])
expect(account["verify_failures"] == 0 and doc["verify_failures"] == 0, "verify failures")
expect(account["ok"] is True, "json account not ok")
expect(sum(account["failed_by_status"].values()) == f,
       "failed_by_status %s does not add up to %d" % (account["failed_by_status"], f))
m = re.search(r"submitted=(\d+) completed=(\d+) failed=(\d+)", sys.argv[3])
expect(m is not None and [int(g) for g in m.groups()] == [s, c, f],
       "line '%s' and json %s disagree" % (sys.argv[3], account))
expect(doc["config"]["chaos"] == faults, "config.chaos %s" % doc["config"].get("chaos"))
injected = doc["chaos"]["injected"]
effects = doc["chaos"]["effects"]
for fault in faults:
    expect(injected.get(fault, 0) > 0, "%s never injected: %s" % (fault, injected))
# What each fault leaves behind where it landed (delay: held CQEs leave no count of their own).
evidence = {
    "qp-error": ["wrs_failed", "qp_errors"],
    "drop": ["wrs_failed", "qp_errors"],
    "refuse": ["connects_refused"],
    "bdev-error": ["bdev_ios_failed"],
    "async-event": ["async_events", "qp_errors"],
}
for fault in faults:
    for counter in evidence.get(fault, []):
        expect(effects[counter] > 0, "%s: effects.%s is 0 (%s)" % (fault, counter, effects))
if any(fault in faults for fault in ("qp-error", "drop", "refuse", "async-event")):
    expect(doc["reconnects"] > 0, "QPs failed but nothing reconnected")
if "bdev-error" in faults:
    expect(f > 0, "bdev errors injected but no I/O failed with a status")
    # Only the error bdevs fail I/Os here (the host resends what a lost QP held); a host that
    # retries a status without DNR may turn a failure into a success, never the reverse.
    expect(f <= effects["bdev_ios_failed"],
           "failed %d > the error bdevs' %d" % (f, effects["bdev_ios_failed"]))
for failure in failures:
    print("FAIL: " + failure)
sys.exit(1 if failures else 0)
EOF
check "json account and chaos counters" $? "see above"

check_summary "nvmf_perf_chaos $faults"
