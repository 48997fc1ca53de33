#!/usr/bin/env python3
"""Host side of the VM tier's QMP plumbing (python3 standard library only).

Talks to the QMP unix socket that vm-run.sh gives QEMU when NVMF_VM_QMP=1
(RESULTS/qmp.sock). vm-run.sh's request watcher calls it for the guest; a person can too:

  qmp.py SOCKET device_del ID [--timeout S]   unplug device ID; waits for QEMU's
                                              DEVICE_DELETED event (the guest let go of it)
  qmp.py SOCKET query-pci                     the PCI tree as QEMU sees it (JSON)
  qmp.py SOCKET raw COMMAND [JSON-ARGUMENTS]  any QMP command, its reply as JSON

Exit 0 on success; 1 with the QMP error (class and description) on stderr otherwise; 2 on
bad usage.
"""
import argparse
import json
import socket
import sys
import time


class QmpError(Exception):
    pass


class Qmp:
    def __init__(self, path, timeout):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as err:
            raise QmpError(f"cannot connect to QMP socket {path}: {err}") from err
        self.buffer = b""
        self.events = []
        greeting = self._read()
        if "QMP" not in greeting:
            raise QmpError(f"no QMP greeting on {path}: {greeting}")
        self.command("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout as err:
                raise QmpError("timed out waiting for QEMU") from err
            if not chunk:
                raise QmpError("QEMU closed the QMP connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def command(self, name, arguments=None):
        message = {"execute": name}
        if arguments:
            message["arguments"] = arguments
        self.sock.sendall(json.dumps(message).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                err = reply["error"]
                raise QmpError(f"{name}: {err.get('class')}: {err.get('desc')}")
            return reply.get("return")

    def wait_event(self, name, match, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("event") == name and match(event.get("data", {})):
                    return event
            self.events.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise QmpError(f"no {name} event within {timeout:g}s")
            self.sock.settimeout(left)
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)


def main():
    parser = argparse.ArgumentParser(description="QMP client for the nvmf VM tier")
    parser.add_argument("socket")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for QEMU (and for DEVICE_DELETED); default 30")
    sub = parser.add_subparsers(dest="command", required=True)
    unplug = sub.add_parser("device_del", help="unplug a device by id, wait for DEVICE_DELETED")
    unplug.add_argument("id")
    sub.add_parser("query-pci", help="print QEMU's PCI tree as JSON")
    raw = sub.add_parser("raw", help="run any QMP command")
    raw.add_argument("name")
    raw.add_argument("arguments", nargs="?", default=None, help="JSON object")
    args = parser.parse_args()

    try:
        qmp = Qmp(args.socket, args.timeout)
        if args.command == "device_del":
            qmp.command("device_del", {"id": args.id})
            qmp.wait_event("DEVICE_DELETED", lambda data: data.get("device") == args.id,
                           args.timeout)
            print(f"device_del {args.id}: DEVICE_DELETED")
        elif args.command == "query-pci":
            print(json.dumps(qmp.command("query-pci"), indent=1))
        else:
            arguments = json.loads(args.arguments) if args.arguments else None
            print(json.dumps(qmp.command(args.name, arguments), indent=1))
    except (QmpError, ValueError, OSError) as err:
        print(f"qmp.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
