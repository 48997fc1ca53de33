# Sourced by VM scenarios: write a configuration with a malloc and a uring (file on a guest
# tmpfs) namespace, each in its own subsystem; start and stop nvmf_tgt; check its log.
# Needs step() and fail() from the caller, and ADDR (lib/rxe.sh).

# The two subsystems of tgt_write_config: NQN, serial number, model number, block size, blocks.
readonly MALLOC_NQN=nqn.2026-11.io.nvmf-vm:malloc0 MALLOC_SN=NVMFVMMALLOC01 MALLOC_MN="nvmf-vm malloc"
readonly MALLOC_BS=512 MALLOC_BLOCKS=131072                 # 64 MiB
readonly FILE_NQN=nqn.2026-11.io.nvmf-vm:file0 FILE_SN=NVMFVMFILE01 FILE_MN="nvmf-vm uring file"
readonly FILE_BS=4096 FILE_BLOCKS=16384                     # 64 MiB

# tgt_write_config CONFIG FOLDER: a target on $ADDR:4420 with subsystem $MALLOC_NQN (a malloc
# bdev) and $FILE_NQN (a uring bdev on FOLDER/file0.img, created by nvmf_tgt).
tgt_write_config() {
  cat >"$1" <<EOF
{
  "transports": [ { "type": "rdma", "send_with_invalidate": "auto" } ],
  "bdevs": [
    { "type": "malloc", "name": "Malloc0", "block_size": $MALLOC_BS, "num_blocks": $MALLOC_BLOCKS },
    { "type": "uring", "name": "File0", "path": "$2/file0.img", "create_file": true,
      "size_bytes": $((FILE_BS * FILE_BLOCKS)), "block_size": $FILE_BS, "direct_io": "prefer" }
  ],
  "subsystems": [
    { "nqn": "$MALLOC_NQN", "serial_number": "$MALLOC_SN", "model_number": "$MALLOC_MN",
      "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "Malloc0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] },
    { "nqn": "$FILE_NQN", "serial_number": "$FILE_SN", "model_number": "$FILE_MN",
      "allow_any_host": true,
      "namespaces": [ { "nsid": 1, "bdev": "File0" } ],
      "listeners": [ { "adrfam": "ipv4", "traddr": "$ADDR", "trsvcid": "4420" } ] }
  ]
}
EOF
}

# tgt_start NVMF_TGT CONFIG LOG [ARGS...]: start nvmf_tgt in the background, wait until it
# reports ready (20 s at most), set TGT_PID and TGT_LOG.
tgt_start() {
  local tgt="$1" config="$2"
  TGT_LOG="$3"
  shift 3
  # TGT_LAUNCH: a command prefix that execs its arguments (nice, chrt), so $! stays nvmf_tgt.
  # shellcheck disable=SC2086 # TGT_LAUNCH is a command and its options
  ${TGT_LAUNCH:-} "$tgt" -c "$config" "$@" >"$TGT_LOG" 2>&1 &
  TGT_PID=$!
  local _
  for _ in $(seq 1 200); do
    grep -q "ready:" "$TGT_LOG" && break
    kill -0 "$TGT_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q "ready:" "$TGT_LOG"; then
    cat "$TGT_LOG"
    kill -9 "$TGT_PID" 2>/dev/null || true
    fail "nvmf_tgt did not report ready"
  fi
}

# tgt_stop: SIGTERM; nvmf_tgt must exit 0 and log its clean stop (30 s at most).
tgt_stop() {
  kill -TERM "$TGT_PID"
  local rc=0 _
  for _ in $(seq 1 300); do
    kill -0 "$TGT_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$TGT_PID" 2>/dev/null; then
    tail -20 "$TGT_LOG"
    kill -9 "$TGT_PID" 2>/dev/null || true
    fail "nvmf_tgt still running 30 s after SIGTERM"
  fi
  wait "$TGT_PID" || rc=$?
  tail -3 "$TGT_LOG"
  [ "$rc" -eq 0 ] || fail "nvmf_tgt exited $rc after SIGTERM"
  grep -q "stopped" "$TGT_LOG" || fail "nvmf_tgt: no clean stop in its log"
}

# tgt_check_log: fail on any line of nvmf_tgt's log that says "error" (any case: an error-level
# line or an error reported at another level); warnings are shown, not fatal.
tgt_check_log() {
  local warnings
  warnings="$(grep -E '^\[[0-9:.]+\] warn ' "$TGT_LOG" || true)"
  [ -z "$warnings" ] || printf 'nvmf_tgt warnings:\n%s\n' "$warnings"
  if grep -q -i 'error' "$TGT_LOG"; then
    grep -i 'error' "$TGT_LOG"
    fail "nvmf_tgt logged an error (above)"
  fi
}
