# Sourced by VM scenarios booted with NVMF_VM_QMP=1 (vm-run.sh --qmp): ask the host to run a
# QMP command on this guest's QEMU. The guest has no way to QEMU's monitor, so it writes a
# request file into the results share (/nvmf-vm/qmp, NVMF_VM_QMP_DIR) and vm-run.sh's watcher
# on the host runs it with tests/vm/qmp.py and writes the answer next to it (protocol:
# tests/vm/README.md). Each function prints the host's answer and returns 0 on "ok".

# qmp_request VERB ARG [TIMEOUT_S (90)]: one request, its answer on stdout.
qmp_request() {
  local dir="${NVMF_VM_QMP_DIR:-}" name status timeout="${3:-90}" deadline
  if [ "${NVMF_VM_QMP:-0}" != 1 ] || [ ! -d "$dir" ]; then
    echo "qmp_request: the guest was not booted with NVMF_VM_QMP=1 (vm-run.sh --qmp)"
    return 1
  fi
  name="req-$(date +%s%N)-$$"
  printf '%s %s\n' "$1" "$2" >"$dir/$name.req.tmp"
  mv "$dir/$name.req.tmp" "$dir/$name.req"   # the watcher only reads *.req: complete files
  deadline=$((SECONDS + timeout))
  while [ ! -f "$dir/$name.ack" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "qmp_request: no answer from the host to '$1 $2' within ${timeout}s ($dir/$name.req)"
      return 1
    fi
    sleep 0.2
  done
  { read -r status; cat; } <"$dir/$name.ack"
  rm -f "$dir/$name.ack"
  [ "$status" = ok ]
}

# qmp_device_del ID [TIMEOUT_S]: unplug QEMU device ID (vm-run.sh names the NVMe controllers
# nvme0, nvme1, ...: NVMF_VM_NVME_IDS). Returns once QEMU reported DEVICE_DELETED, that is
# once this guest's kernel let the device go.
qmp_device_del() {
  qmp_request device_del "$1" "${2:-90}"
}
