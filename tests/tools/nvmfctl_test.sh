#!/usr/bin/env bash
# nvmfctl as a user runs it: usage errors exit 2 with one line, every subcommand's --help
# works (and names every option), a socket nobody serves exits 3 with the client's message
# (nvmf_tgt's for tgt; "no nvmf_hostd is listening" for connect, connect-all, disconnect,
# disconnect-all and list, which then save no host identity), and the host subcommands exit 3
# when no target can be reached (no RDMA device here, or nothing listening). Then, if
# nvmf_tgt has --rpc-socket, against nvmf_tgt --sim with the malloc example: subsystem_list
# (human and json), bdev_create + namespace_add show in subsystem_list, a bad param exits 1
# with the target's message, save_config, SIGTERM.
# Usage: nvmfctl_test.sh NVMFCTL NVMF_TGT EXAMPLES_DIR
set -uo pipefail
ctl="$1"
tgt="$2"
examples="$3"
# shellcheck source=check.sh
source "$(dirname "$0")/check.sh"

nqn="nqn.2026-11.io.nvmf-rdma:malloc0"  # examples/target/malloc.json
# The host identity of connect and connect-all lives here, never in /etc/nvme.
export NVMF_ETC_DIR="$work/etc"

# Runs nvmfctl with the arguments; $rc, $out (stdout) and $err (stderr) hold what happened.
run() {
  "$ctl" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}

# usage NAME EXPECTED-TEXT ARGS...: exit 2, nothing on stdout, one "nvmfctl: " line naming it.
usage() {
  local name="$1" text="$2"
  shift 2
  run "$@"
  [ "$rc" -eq 2 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
    [[ "$err" == "nvmfctl: "* ]] && [[ "$err" == *"$text"* ]]
  check "usage error: $name" $? "status $rc, stdout '$out', stderr '$err'"
}

usage "no subcommand" "subcommand"
usage "unknown subcommand" "unknown subcommand 'bogus'" bogus -t rdma -a 10.0.0.1
usage "tgt without METHOD" "METHOD is required" tgt
usage "tgt unknown option" "--bogus" tgt --bogus 1 subsystem_list
usage "tgt bad -o" "yaml" tgt -o yaml subsystem_list
usage "tgt key without value" "--name needs a value" tgt bdev_delete --name
usage "tgt key twice" "--name given twice" tgt bdev_delete --name a --name=b
usage "tgt stray word" "unexpected 'M1'" tgt bdev_delete M1
usage "tgt --params not an object" "not a JSON object" tgt bdev_delete --params '[1]'
usage "discover without -t" "--transport" discover -a 10.0.0.1
usage "discover -t tcp" "tcp" discover -t tcp -a 10.0.0.1
usage "discover bad port" "trsvcid" discover -t rdma -a 10.0.0.1 -s http
usage "discover bad host ID" "not a UUID" discover -t rdma -a 10.0.0.1 -I nope
usage "id-ctrl without -n" "--nqn" id-ctrl -t rdma -a 10.0.0.1
usage "id-ns without --namespace-id" "--namespace-id" id-ns -t rdma -a 10.0.0.1 -n "$nqn"
usage "id-ns --namespace-id 0" "--namespace-id" id-ns -t rdma -a 10.0.0.1 -n "$nqn" --namespace-id 0
usage "connect without -n" "--nqn" connect -t rdma -a 10.0.0.1
usage "connect without -a" "--traddr" connect -t rdma -n "$nqn"
usage "connect -t tcp" "tcp" connect -t tcp -a 10.0.0.1 -n "$nqn"
usage "connect bad NQN" "subnqn" connect -t rdma -a 10.0.0.1 -n not-an-nqn
usage "connect bad host ID" "not a UUID" connect -t rdma -a 10.0.0.1 -n "$nqn" -I nope
usage "connect -i 0" "--nr-io-queues" connect -t rdma -a 10.0.0.1 -n "$nqn" -i 0
usage "connect -Q 1" "--queue-size" connect -t rdma -a 10.0.0.1 -n "$nqn" -Q 1
usage "connect -k -1" "--keep-alive-tmo" connect -t rdma -a 10.0.0.1 -n "$nqn" -k -1
usage "connect -c x" "--reconnect-delay" connect -t rdma -a 10.0.0.1 -n "$nqn" -c x
usage "connect -l -2" "--ctrl-loss-tmo" connect -t rdma -a 10.0.0.1 -n "$nqn" -l -2
usage "connect --memreg" "fast" connect -t rdma -a 10.0.0.1 -n "$nqn" --memreg fast
usage "connect -o yaml" "yaml" connect -t rdma -a 10.0.0.1 -n "$nqn" -o yaml
usage "connect-all -n" "-n" connect-all -t rdma -a 10.0.0.1 -n "$nqn"
usage "disconnect without -n or -d" "-n/--nqn NQN or -d/--device DEVICE" disconnect
usage "disconnect -n and -d" "exclude each other" disconnect -n "$nqn" -d /dev/nbd0
usage "disconnect-all -n" "-n" disconnect-all -n "$nqn"
usage "list -o yaml" "yaml" list -o yaml

# Help: exit 0, the synopsis and the exit codes.
for sub in "" discover id-ctrl id-ns connect connect-all disconnect disconnect-all list; do
  # shellcheck disable=SC2086
  run $sub --help
  [ "$rc" -eq 0 ] && [[ "$out" == *"Exit status"* ]] && [[ "$out" == *"3 cannot reach"* ]]
  check "nvmfctl $sub --help" $? "status $rc: $out $err"
done
run discover --help
[[ "$out" == *"-t,--transport"* ]] && [[ "$out" == *"-a,--traddr"* ]] && [[ "$out" == *"-s,--trsvcid"* ]] &&
  [[ "$out" == *"-q,--hostnqn"* ]] && [[ "$out" == *"-I,--hostid"* ]] && [[ "$out" == *"-o,--output-format"* ]]
check "discover --help names nvme-cli's flags" $? "$out"
for sub in connect connect-all; do
  run $sub --help
  [[ "$out" == *"-t,--transport"* ]] && [[ "$out" == *"-a,--traddr"* ]] && [[ "$out" == *"-s,--trsvcid"* ]] &&
    [[ "$out" == *"-q,--hostnqn"* ]] && [[ "$out" == *"-I,--hostid"* ]] && [[ "$out" == *"-i,--nr-io-queues"* ]] &&
    [[ "$out" == *"-Q,--queue-size"* ]] && [[ "$out" == *"-k,--keep-alive-tmo"* ]] &&
    [[ "$out" == *"-c,--reconnect-delay"* ]] && [[ "$out" == *"-l,--ctrl-loss-tmo"* ]] && [[ "$out" == *"--memreg"* ]] &&
    [[ "$out" == *"--socket"* ]] && [[ "$out" == *"-o,--output-format"* ]] && [[ "$out" == *"NVMF_ETC_DIR"* ]]
  check "$sub --help names every option" $? "$out"
done
run disconnect --help
[[ "$out" == *"-n,--nqn"* ]] && [[ "$out" == *"-d,--device"* ]] && [[ "$out" == *"--socket"* ]]
check "disconnect --help names every option" $? "$out"
run list --help
[[ "$out" == *"--socket"* ]] && [[ "$out" == *"-o,--output-format"* ]] && [[ "$out" == *"/var/tmp/nvmf_hostd.sock"* ]]
check "list --help names every option" $? "$out"
run --help
[[ "$out" == *"tgt"* ]] && [[ "$out" == *"discover"* ]] && [[ "$out" == *"id-ctrl"* ]] && [[ "$out" == *"id-ns"* ]] &&
  [[ "$out" == *"connect-all"* ]] && [[ "$out" == *"disconnect-all"* ]] && [[ "$out" == *"list"* ]]
check "nvmfctl --help lists the subcommands" $? "$out"
# Without a target, tgt --help says how to reach one.
run tgt --socket "$work/none.sock" --help
[ "$rc" -eq 0 ] && [[ "$out" == *"--socket"* ]] && [[ "$out" == *"not reachable at $work/none.sock"* ]] &&
  [[ "$out" == *"--rpc-socket"* ]] && [[ "$out" == *"Exit status"* ]]
check "tgt --help without a target" $? "status $rc: $out $err"

# Nobody at the socket: exit 3, the client's message naming the socket.
run tgt --socket "$work/none.sock" subsystem_list
[ "$rc" -eq 3 ] && [ -z "$out" ] && [[ "$err" == "nvmfctl: "*"$work/none.sock"* ]]
check "tgt with no socket exits 3" $? "status $rc, stderr '$err'"
run tgt --socket "$work/none.sock" subsystem_list --help
[ "$rc" -eq 3 ] && [[ "$err" == *"$work/none.sock"* ]]
check "tgt METHOD --help with no socket exits 3" $? "status $rc, stderr '$err'"

# No nvmf_hostd at the socket: exit 3, "nvmfctl: SUBCOMMAND: no nvmf_hostd is listening on PATH
# (start it, or give --socket)", and no host identity saved.
hostd_sock="$work/hostd.sock"
for args in "connect -t rdma -a 10.0.0.1 -n $nqn" "connect-all -t rdma -a 10.0.0.1" "disconnect -n $nqn" \
  "disconnect -d /dev/nbd0" "disconnect-all" "list" "list -o json"; do
  # shellcheck disable=SC2086
  run $args --socket "$hostd_sock"
  sub="${args%% *}"
  [ "$rc" -eq 3 ] && [ -z "$out" ] &&
    [ "$err" = "nvmfctl: $sub: no nvmf_hostd is listening on $hostd_sock (start it, or give --socket)" ]
  check "$args without nvmf_hostd exits 3" $? "status $rc, stderr '$err'"
done
[ ! -e "$NVMF_ETC_DIR" ]
check "no host identity saved without nvmf_hostd" $? "$(ls -la "$NVMF_ETC_DIR" 2>&1)"
if [ ! -e /var/tmp/nvmf_hostd.sock ]; then  # (a real nvmf_hostd may be serving it)
  run list
  [ "$rc" -eq 3 ] && [[ "$err" == *"/var/tmp/nvmf_hostd.sock"* ]]
  check "list defaults to /var/tmp/nvmf_hostd.sock" $? "status $rc, stderr '$err'"
fi

# The host side cannot reach a target here (nvmf_tgt --sim serves only its own process): no
# RDMA device, or nothing listening at the address: exit 3, "nvmfctl: SUBCOMMAND: why".
run discover -t rdma -a 127.0.0.1 -s 4499
[ "$rc" -eq 3 ] && [ -z "$out" ] && [[ "$err" == "nvmfctl: discover: "* ]]
check "discover with nothing listening exits 3" $? "status $rc, stderr '$err'"
run id-ctrl -t rdma -a 127.0.0.1 -s 4499 -n "$nqn" -o json
[ "$rc" -eq 3 ] && [ -z "$out" ] && [[ "$err" == "nvmfctl: id-ctrl: "* ]]
check "id-ctrl with nothing listening exits 3" $? "status $rc, stderr '$err'"
run id-ns -t rdma -a 127.0.0.1 -s 4499 -n "$nqn" --namespace-id 1
[ "$rc" -eq 3 ] && [[ "$err" == "nvmfctl: id-ns: "* ]]
check "id-ns with nothing listening exits 3" $? "status $rc, stderr '$err'"

# ---- against nvmf_tgt's JSON-RPC socket ----
if ! "$tgt" --help 2>/dev/null | grep -q -- --rpc-socket; then
  echo "SKIP: $tgt has no --rpc-socket: the target-side checks did not run"
  check_summary "nvmfctl"
  exit
fi

sock="$work/t.sock"
"$tgt" --sim -c "$examples/malloc.json" --rpc-socket "$sock" >"$work/log" 2>&1 &
pid=$!
ready=0
wait_ready "$pid" "$work/log" || ready=1
check "nvmf_tgt --sim --rpc-socket starts" $ready "$(cat "$work/log")"

valid_json() {  # stdin parses as JSON (checked with python3 or jq, when one is installed)
  if command -v python3 >/dev/null; then
    python3 -c 'import json, sys; json.load(sys.stdin)' 2>/dev/null
  elif command -v jq >/dev/null; then
    jq -e . >/dev/null 2>&1
  else
    cat >/dev/null
  fi
}

run tgt --socket "$sock" subsystem_list
[ "$rc" -eq 0 ] && [[ "$out" == *"$nqn"* ]] && [[ "$out" == *"Malloc0"* ]] && [[ "$out" == *"listeners:"* ]]
check "subsystem_list (human) shows the example's subsystem" $? "status $rc: $out $err"
run tgt --socket "$sock" -o json subsystem_list
[ "$rc" -eq 0 ] && [[ "$out" == *"\"nqn\": \"$nqn\""* ]] && printf '%s' "$out" | valid_json
check "subsystem_list -o json shows the example's subsystem" $? "status $rc: $out $err"
run tgt --socket "$sock" subsystem_list -o json
[ "$rc" -eq 0 ] && [[ "$out" == *"\"nqn\": \"$nqn\""* ]]
check "-o json after METHOD" $? "status $rc: $err"

run tgt --socket "$sock" --help
[ "$rc" -eq 0 ] && [[ "$out" == *"Methods of the target at $sock"* ]] && [[ "$out" == *"subsystem_list"* ]] &&
  [[ "$out" == *"bdev_create"* ]] && [[ "$out" == *"rpc_get_methods"* ]]
check "tgt --help lists the target's methods" $? "status $rc: $out $err"
run tgt --socket "$sock" namespace_add --help
[ "$rc" -eq 0 ] && [[ "$out" == "namespace_add: "* ]]
check "tgt METHOD --help prints its summary" $? "status $rc: $out $err"
run tgt --socket "$sock" no_such_method --help
[ "$rc" -eq 1 ] && [[ "$err" == *"no_such_method"* ]]
check "tgt METHOD --help of an unknown method exits 1" $? "status $rc: $err"

run tgt --socket "$sock" bdev_create --type malloc --name M1 --num_blocks 1024
[ "$rc" -eq 0 ] && [[ "$out" == *"M1"* ]]
check "bdev_create" $? "status $rc: $out $err"
run tgt --socket "$sock" namespace_add --nqn "$nqn" --bdev=M1
[ "$rc" -eq 0 ] && [[ "$out" == *"nsid"* ]]
check "namespace_add" $? "status $rc: $out $err"
run tgt --socket "$sock" subsystem_list
printf '%s\n' "$out" | grep -Eq '^ +2 +M1( |$)'
check "subsystem_list shows the new namespace" $? "$out"
run tgt --socket "$sock" -o json subsystem_list
[[ "$out" == *"\"bdev\": \"M1\""* ]]
check "subsystem_list -o json shows the new namespace" $? "$out"
run tgt --socket "$sock" bdev_list
[ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -Eq '^name +block_size' && printf '%s\n' "$out" | grep -Eq '^M1 +512 '
check "bdev_list is a table" $? "status $rc: $out $err"
run tgt --socket "$sock" stats
[ "$rc" -eq 0 ] && [[ "$out" == *"reactors:"* ]]
check "stats" $? "status $rc: $out $err"
run tgt --socket "$sock" log_set_level --level info
[ "$rc" -eq 0 ] && [ "$out" = "ok" ]
check "a null result prints ok" $? "status $rc: '$out' $err"

# The target's errors: exit 1, "nvmfctl: METHOD: its message".
run tgt --socket "$sock" bdev_create --type malloc --name M2 --num_blocks 8 --bogus 1
[ "$rc" -eq 1 ] && [ -z "$out" ] && [[ "$err" == "nvmfctl: bdev_create: "*"bogus"* ]] &&
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ]
check "a bad param exits 1 with the target's message" $? "status $rc, stderr '$err'"
run tgt --socket "$sock" namespace_add --nqn "$nqn" --bdev NoSuchBdev
[ "$rc" -eq 1 ] && [[ "$err" == "nvmfctl: namespace_add: "*"NoSuchBdev"* ]]
check "a missing bdev exits 1 naming it" $? "status $rc, stderr '$err'"
run tgt --socket "$sock" no_such_method
[ "$rc" -eq 1 ] && [[ "$err" == "nvmfctl: no_such_method: "* ]]
check "an unknown method exits 1" $? "status $rc, stderr '$err'"

run tgt --socket "$sock" -o json save_config
[ "$rc" -eq 0 ] && [[ "$out" == *"\"M1\""* ]] && printf '%s' "$out" | valid_json
check "save_config has the new bdev" $? "status $rc: $out $err"
run tgt --socket "$sock" save_config --path "$work/saved.json"
[ "$rc" -eq 0 ] && grep -q '"M1"' "$work/saved.json" && "$tgt" -c "$work/saved.json" --check-config >/dev/null 2>&1
check "save_config --path writes a config nvmf_tgt takes" $? "status $rc: $err"

# --params gives the whole object.
run tgt --socket "$sock" namespace_remove --params "{\"nqn\": \"$nqn\", \"nsid\": 2}"
[ "$rc" -eq 0 ] && [ "$out" = "ok" ]
check "namespace_remove --params" $? "status $rc: $out $err"
run tgt --socket "$sock" bdev_delete --name M1
[ "$rc" -eq 0 ]
check "bdev_delete" $? "status $rc: $out $err"

kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "nvmf_tgt stops on SIGTERM with status 0" $rc "status $rc: $(tail -3 "$work/log")"
run tgt --socket "$sock" subsystem_list
[ "$rc" -eq 3 ]
check "after the target stopped: exit 3" $? "status $rc: $err"

check_summary "nvmfctl"
