#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Hot unplug and plug of an emulated rbln card through QEMU's QMP socket.

Used by rbln-vm --hotplug on the host (a guest asks for it through the run's
results directory, see rbln-vm); standard library only.

  qmp-hotplug.py QMP_SOCKET RUNTIME_DIR del N
      device_del of card N's ivshmem function (id rbln<N>), waits for the
      guest to release it (DEVICE_DELETED: the guest ran the driver's
      remove and ejected the slot), then chardev-remove of its ivshmem
      socket (the emulator sees QEMU go and waits, powered off, for the
      next connection).  The function's PCI address is kept in
      RUNTIME_DIR/card<N>.addr for the add.
  qmp-hotplug.py QMP_SOCKET RUNTIME_DIR add N
      chardev-add of card N's ivshmem socket (RUNTIME_DIR/card<N>.sock:
      the emulator serves a fresh card) and device_add of the function in
      the slot it had.

Prints "ok" or "error <why>" and exits 0 or 1.

A QEMU 7.2 bug this works around: under TCG (no irqfd) the ivshmem device
watches each of its MSI-X vectors' eventfds with qemu_set_fd_handler(), and
its unrealize closes those eventfds without removing the handlers.  The
next file QEMU opens under one of those numbers (the chardev-add socket, a
new device's eventfds) and that becomes readable runs the stale handler on
the freed device: a segfault in object_dynamic_cast_assert() from
aio_dispatch() (2 of 6 unplug/plug runs crashed so).  So after device_del
the helper hands QEMU HOLD_FDS eventfds nobody ever signals (QMP getfd):
they take the freed numbers, the stale handlers watch fds that never
become readable, and what QEMU opens next gets other numbers.  QEMU keeps
them until it exits (HOLD_FDS per unplug).
"""
import json
import os
import socket
import sys
import time

TIMEOUT_S = 60
HOLD_FDS = 16


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT_S)
        self.sock.connect(path)
        self.buf = b""
        self.events = []
        self._read()  # the greeting
        self.cmd("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("QMP socket closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise RuntimeError(f"{name}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    def hold_fd(self, name):
        """Hands QEMU an eventfd that is never signalled, kept as @name."""
        fd = os.eventfd(0, os.EFD_CLOEXEC)
        try:
            msg = {"execute": "getfd", "arguments": {"fdname": name}}
            socket.send_fds(self.sock, [json.dumps(msg).encode() + b"\n"], [fd])
        finally:
            os.close(fd)
        while True:
            reply = self._read()
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise RuntimeError(f"getfd: {reply['error'].get('desc', reply['error'])}")
            return

    def wait_event(self, name, device, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events:
                if ev.get("event") == name and ev.get("data", {}).get("device") == device:
                    return
            self.events.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no {name} for {device} within {timeout} s "
                                   "(did the guest release the slot?)")
            self.sock.settimeout(left)
            try:
                self.events.append(self._read())
            except socket.timeout:
                pass
            finally:
                self.sock.settimeout(TIMEOUT_S)


def find_addr(qmp, qdev_id):
    for bus in qmp.cmd("query-pci"):
        for dev in bus.get("devices", []):
            if dev.get("qdev_id") == qdev_id:
                return f"{dev['slot']:#x}.{dev['function']:#x}"
    return None


def main(argv):
    if len(argv) != 5 or argv[3] not in ("del", "add") or not argv[4].isdigit():
        print("usage: qmp-hotplug.py QMP_SOCKET RUNTIME_DIR del|add N", file=sys.stderr)
        return 2
    qsock, rt, op, n = argv[1], argv[2], argv[3], int(argv[4])
    dev, chardev = f"rbln{n}", f"card{n}"
    addr_file = os.path.join(rt, f"card{n}.addr")
    try:
        qmp = Qmp(qsock)
        if op == "del":
            addr = find_addr(qmp, dev)
            if addr is None:
                raise RuntimeError(f"no PCI function {dev} (unplugged already?)")
            with open(addr_file, "w", encoding="ascii") as f:
                f.write(addr)
            qmp.cmd("device_del", id=dev)
            qmp.wait_event("DEVICE_DELETED", dev, TIMEOUT_S)
            stamp = time.monotonic_ns()
            for i in range(HOLD_FDS):
                qmp.hold_fd(f"rbln-hold-{n}-{stamp}-{i}")
            qmp.cmd("chardev-remove", id=chardev)
        else:
            with open(addr_file, encoding="ascii") as f:
                addr = f.read().strip()
            qmp.cmd("chardev-add", id=chardev, backend={
                "type": "socket",
                "data": {"addr": {"type": "unix",
                                  "data": {"path": os.path.join(rt, f"card{n}.sock")}},
                         "server": False}})
            qmp.cmd("device_add", driver="ivshmem-doorbell", id=dev, chardev=chardev,
                    vectors=4, addr=addr)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"error {e}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
