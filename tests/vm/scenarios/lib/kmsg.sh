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
