"""The process that owns one TrainJob's network namespace (run as a script: stdlib only, started with ``-S``).

It creates the namespace (and, when not root, the user namespace that lets an ordinary user own it, mapping
only the invoking user's own uid and gid, so nothing inside gains rights over files the user could not write),
brings up loopback, and then answers readiness probes from inside it. Pods join with ``nsenter``. It exits when
its supervisor closes the request pipe or dies.

Protocol: prints ``ready <pid>`` (or ``error <message>``) once; then reads JSON lines
``{"id", "kind": "tcp"|"http", "host", "port", "path", "timeout"}`` and answers ``{"id", "ok"}`` lines.
``{"id", "kind": "listen", "host", "port"}`` opens a TCP listening socket inside the namespace and hands it to the
supervisor over the control socket (``argv[1]``, a SOCK_SEQPACKET fd) as ``{"id", "port"}`` with the fd attached,
or ``{"id", "error"}``: the supervisor then serves pods from its own process, without a forwarder.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import sys
import threading

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def _fail(message: str) -> None:
    sys.stdout.write(f"error {message}\n")
    sys.stdout.flush()
    os._exit(1)


def _setup() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    uid, gid = os.geteuid(), os.getegid()
    rootless = uid != 0
    if libc.unshare(CLONE_NEWNET | (CLONE_NEWUSER if rootless else 0)) != 0:
        err = ctypes.get_errno()
        _fail(f"unshare({'user+' if rootless else ''}network namespace): {os.strerror(err)}")
    if rootless:
        try:
            with open("/proc/self/setgroups", "w") as f:
                f.write("deny")
            with open("/proc/self/uid_map", "w") as f:
                f.write(f"{uid} {uid} 1")
            with open("/proc/self/gid_map", "w") as f:
                f.write(f"{gid} {gid} 1")
        except OSError as exc:
            _fail(f"mapping uid {uid} into the new user namespace: {exc.strerror}")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            req = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
    except OSError as exc:
        _fail(f"bringing up loopback in the new network namespace: {exc.strerror}")


def _probe(req: dict[str, object]) -> bool:
    host, port = str(req["host"]), int(str(req["port"]))
    timeout = float(str(req.get("timeout") or 1))
    try:
        if req["kind"] == "tcp":
            with socket.create_connection((host, port), timeout=timeout):
                return True
        import http.client

        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.request("GET", str(req.get("path") or "/"))
            return 200 <= conn.getresponse().status < 400
        finally:
            conn.close()
    except Exception:  # refused, timed out, or not HTTP (http.client's errors): not ready
        return False


_write = threading.Lock()


def _listen(control: socket.socket, req: dict[str, object]) -> None:
    rid = req["id"]
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((str(req["host"]), int(str(req["port"]))))
            sock.listen(128)
            port = sock.getsockname()[1]
            socket.send_fds(control, [json.dumps({"id": rid, "port": port}).encode()], [sock.fileno()])
        finally:
            sock.close()
    except OSError as exc:
        try:
            control.send(json.dumps({"id": rid, "error": exc.strerror or str(exc)}).encode())
        except OSError:
            pass


def _answer(req: dict[str, object]) -> None:
    ok = _probe(req)
    with _write:
        sys.stdout.write(json.dumps({"id": req["id"], "ok": ok}) + "\n")
        sys.stdout.flush()


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1])) if len(sys.argv) > 1 else None
    _setup()
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if req.get("kind") == "listen":
            if control is not None:
                _listen(control, req)
            continue
        threading.Thread(target=_answer, args=(req,), daemon=True).start()
    os._exit(0)


if __name__ == "__main__":
    main()
