# Sourced by VM scenarios: trouble in the kernel log. Needs fail() from the caller.

# kmsg_mark: remember where the kernel log is now; kmsg_check NAME fails on nvme/rdma/block/
# file-system trouble logged after the mark (and prints every kernel line since the mark).
kmsg_mark() {
  KMSG_START="$(dmesg | wc -l)"
}
kmsg_check() {
  local new bad
  new="$(dmesg | tail -n "+$((KMSG_START + 1))")"
  echo "--- kernel log since the start of $1:"
  printf '%s\n' "$new"
  echo "---"
  bad="$(printf '%s\n' "$new" | grep -i -E 'error|fail|timeout|timed out|reset|abort|reconnect|invalid|warning|bug|oops|call trace|hung task|refus|reject' || true)"
  [ -z "$bad" ] || { printf 'trouble in the kernel log:\n%s\n' "$bad"; fail "$1: the kernel logged trouble (above)"; }
}

# kmsg_kernel_clean NAME: for scenarios that provoke nvme/rdma errors on purpose (a target
# killed, a controller reset or deleted), where kmsg_check's words (error, reset, reconnect)
# are expected: true unless the kernel itself got into trouble after the mark: a BUG, an oops,
# a WARNING (with its call trace), a hung task, a lockup or stall, memory corruption, a panic.
# Prints those lines. Returns a status instead of failing the scenario.
kmsg_kernel_clean() {
  local bad
  bad="$(dmesg | tail -n "+$((KMSG_START + 1))" |
    grep -E 'BUG[: ]|Oops|WARNING:|Call Trace:|hung_task|blocked for more than|soft lockup|hard LOCKUP|detected stall|general protection fault|Kernel panic|KASAN|UBSAN|refcount_t:|list_(add|del) corruption|double free')" ||
    return 0
  printf '%s: the kernel itself logged trouble:\n%s\n' "$1" "$bad"
  return 1
}
