# shellcheck shell=bash
# Sourced by VM scenarios: a process's CPU time, all its threads together.

# cpu_sample PID: one line "TICKS UPTIME TID:NS:SWITCHES ...": utime + stime from
# /proc/PID/stat (clock ticks, the process and all its threads, exited ones included), then
# /proc/uptime, then per live thread its run time from /proc/PID/task/TID/schedstat (ns) and
# its voluntary + involuntary context switches (how often it slept or was preempted: the
# wakeups an idle reactor still has).
cpu_sample() {
  local pid="$1" stat fields tasks="" task run _ key value switches
  stat="$(cat "/proc/$pid/stat")" || return 1
  stat="${stat##*) }"   # the fields after "PID (COMM) ": state is [0], utime [11], stime [12]
  read -r -a fields <<<"$stat"
  for task in /proc/"$pid"/task/*; do
    read -r run _ <"$task/schedstat" 2>/dev/null || continue
    switches=0
    while read -r key value; do
      case "$key" in
        voluntary_ctxt_switches: | nonvoluntary_ctxt_switches:) switches=$((switches + value)) ;;
      esac
    done <"$task/status" 2>/dev/null
    tasks+=" ${task##*/}:$run:$switches"
  done
  echo "$((fields[11] + fields[12])) $(cut -d' ' -f1 /proc/uptime)$tasks"
}

# cpu_between BEFORE AFTER: "PERCENT SECONDS TICKS RUN_MS SWITCHES_PER_S" between two
# cpu_sample lines. PERCENT is utime + stime as a share of one CPU; RUN_MS and SWITCHES_PER_S
# add up the threads alive at both samples (threads come and go: io_uring workers).
cpu_between() {
  awk -v hz="$(getconf CLK_TCK)" -v a="$1" -v b="$2" 'BEGIN {
    n = split(a, x, " "); m = split(b, y, " ")
    for (i = 3; i <= n; i++) { split(x[i], t, ":"); run[t[1]] = t[2]; sw[t[1]] = t[3] }
    for (i = 3; i <= m; i++) {
      split(y[i], t, ":")
      if (t[1] in run) { ns += t[2] - run[t[1]]; switches += t[3] - sw[t[1]] }
    }
    wall = y[2] - x[2]; if (wall <= 0) wall = 0.01
    ticks = y[1] - x[1]
    printf "%.2f %.2f %d %.1f %.1f\n", 100 * ticks / hz / wall, wall, ticks, ns / 1e6, switches / wall
  }'
}

# cpu_measure PID SECONDS: samples PID, sleeps SECONDS, samples again; sets CPU_PCT (utime +
# stime as a percentage of one CPU) and CPU_TEXT (the figures in words).
cpu_measure() {
  local before after pct wall ticks run_ms rate
  before="$(cpu_sample "$1")" || fail "no process $1"
  sleep "$2"
  after="$(cpu_sample "$1")" || fail "process $1 exited while measured"
  read -r pct wall ticks run_ms rate <<<"$(cpu_between "$before" "$after")"
  CPU_PCT="$pct"
  CPU_TEXT="$pct% of one CPU ($ticks ticks of utime + stime in ${wall} s; run time ${run_ms} ms; $rate context switches/s)"
}

# cpu_below PERCENT LIMIT: true when PERCENT < LIMIT (decimals allowed).
cpu_below() {
  awk -v p="$1" -v l="$2" 'BEGIN { exit !(p < l) }'
}
