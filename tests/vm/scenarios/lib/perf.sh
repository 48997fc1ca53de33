# Sourced by VM scenarios: one nvmf_perf run against a subsystem at $ADDR:4420, checked from
# its --json output. Needs step() and fail() from the caller and ADDR (lib/rxe.sh); set PERF
# (the binary), PERF_SECONDS (-t) and PERF_LOGS (where each run's NAME.log and NAME.json go:
# the scenario's logs/ folder in the results) first. A caller may define perf_on_failure() to
# show more when a run fails.
# The CI scenarios run each nvmf_perf for 1 s by default (perf_rxe, kernel_target_rxe,
# interrupt_rxe; 3 s until 3cf7ff7): still a thousand or more verified I/Os per run under TCG,
# which is what a run is for here (each key policy's data path over real verbs); the races the
# policies exist for are hunted in the simulated HCA (SimAdversarial).
command -v jq >/dev/null || fail "jq not installed on the host (scripts/install-deps.sh installs it)"
PERF_RUNS=0
PERF_SUMMARY=""

# perf_run NAME NQN ARGS...: nvmf_perf -r ... ARGS -t PERF_SECONDS; it must exit 0 and its JSON
# must show I/O and zero errors, verify failures, reconnects, QP errors and MW bind errors.
# One summary line per run joins PERF_SUMMARY.
perf_run() {
  local name="$1" nqn="$2"
  shift 2
  local trid="trtype:RDMA adrfam:IPv4 traddr:$ADDR trsvcid:4420 subnqn:$nqn"
  step "$name: nvmf_perf -r '$trid' $* -t $PERF_SECONDS"
  local rc=0 json="$PERF_LOGS/$name.json"
  timeout 60 "$PERF" -r "$trid" "$@" -t "$PERF_SECONDS" --json "$json" \
    >"$PERF_LOGS/$name.log" 2>&1 || rc=$?
  grep -v -E '^\[ *[0-9]+ s\]' "$PERF_LOGS/$name.log" || true   # all but the per-second lines
  if [ "$rc" -ne 0 ]; then
    ! declare -F perf_on_failure >/dev/null || perf_on_failure
    fail "$name: nvmf_perf exited $rc"
  fi
  # jq, not python3: under TCG a python3 start costs 2-3 s of a vCPU, jq's a few ms.
  local figures iops ios p99 errors verify_failures reconnects qp_errors mw_bind_errors line
  figures="$(jq -r '[.iops, .ios, .lat_us.p99, .errors // 0, .verify_failures // 0,
      .reconnects // 0, .qp_errors // 0, .mw_bind_errors // 0] | @tsv' "$json")" ||
    fail "$name: no usable JSON in $json"
  read -r iops ios p99 errors verify_failures reconnects qp_errors mw_bind_errors <<<"$figures"
  line="$(printf '%-20s %6.0f IOPS %7d I/Os  p99 %8.0f us  errors %s verify_failures %s reconnects %s qp_errors %s mw_bind_errors %s' \
    "$name" "$iops" "$ios" "$p99" "$errors" "$verify_failures" "$reconnects" "$qp_errors" "$mw_bind_errors")"
  [ "${ios:-0}" -gt 0 ] && [ "$errors$verify_failures$reconnects$qp_errors$mw_bind_errors" = 00000 ] ||
    { echo "$line"; fail "$name: I/O errors, verify failures or no I/O: $line"; }
  PERF_SUMMARY+="$line"$'\n'
  PERF_RUNS=$((PERF_RUNS + 1))
}

# perf_table NAME: nvmf_perf's results table of run NAME (header to the "N I/Os, ..." line).
perf_table() {
  sed -n '/^ *IOPS  *MiB\/s/,/ I\/Os, /p' "$PERF_LOGS/$1.log"
}
