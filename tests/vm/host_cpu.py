#!/usr/bin/env python3
"""What the host sees of a TCG guest: per second, the host CPU of each QEMU thread.

Under TCG a vCPU whose guest idles (HLT) sleeps in QEMU, so the host CPU of QEMU's vCPU threads
tells whether the guest's "idle" time (/proc/stat inside it) is really free. vm-run.sh starts
the sampler when NVMF_VM_HOST_CPU=1, and summarizes the windows a probe announced
("PROBE NAME: window epoch START-END", guest wall clock = the host's, to the second).

  host_cpu.py sample QEMU_PID OUT        one line a second until QEMU is gone:
                                         EPOCH HOST-IDLE-% THREAD-%... (busiest first)
  host_cpu.py summarize OUT SCENARIO_LOG one "host view" line per announced window
"""
import os
import re
import sys
import time


def host_idle_ticks():
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    return int(fields[4]) + int(fields[5])  # idle + iowait


def thread_ticks(pid):
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


def sample(pid, out_path):
    hz = os.sysconf("SC_CLK_TCK")
    cores = os.cpu_count() or 1
    with open(out_path, "w") as out:
        idle0, threads0, t0 = host_idle_ticks(), thread_ticks(pid), time.time()
        while os.path.exists(f"/proc/{pid}"):
            time.sleep(1)
            try:
                idle1, threads1, t1 = host_idle_ticks(), thread_ticks(pid), time.time()
            except OSError:
                break
            seconds = max(t1 - t0, 1e-3)
            busy = sorted(((threads1[t] - threads0.get(t, threads1[t])) / hz / seconds * 100
                           for t in threads1), reverse=True)
            idle = (idle1 - idle0) / hz / seconds / cores * 100
            out.write(f"{int(t1)} {idle:.0f} " + " ".join(f"{b:.0f}" for b in busy if b >= 1) + "\n")
            out.flush()
            idle0, threads0, t0 = idle1, threads1, t1


def summarize(out_path, scenario_log):
    rows = []
    for line in open(out_path):
        fields = line.split()
        if len(fields) >= 2:
            rows.append((int(fields[0]), float(fields[1]), [float(f) for f in fields[2:]]))
    window = re.compile(r"PROBE (\S+): window epoch (\d+)-(\d+)")
    for line in open(scenario_log, errors="replace"):
        match = window.search(line)
        if not match:
            continue
        name, start, end = match.group(1), int(match.group(2)), int(match.group(3))
        inside = [r for r in rows if start < r[0] <= end]  # each row covers the second before it
        if not inside:
            print(f"host view of {name}: no samples in {start}-{end}")
            continue
        top = [sorted(r[2], reverse=True)[:2] + [0, 0] for r in inside]
        vcpu_a = sum(t[0] for t in top) / len(top)
        vcpu_b = sum(t[1] for t in top) / len(top)
        idle = sum(r[1] for r in inside) / len(inside)
        print(f"host view of {name}: QEMU's two busiest threads (the vCPUs) {vcpu_a:.0f}% and "
              f"{vcpu_b:.0f}% of a host core, host idle {idle:.0f}%, over {len(inside)} s")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sample":
        sample(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "summarize":
        summarize(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
