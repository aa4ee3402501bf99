"""A local stand-in for ssh between MPI "nodes" of one TrainJob.

OpenMPI starts its remote daemons through ``plm_rsh_agent``; locally that agent is ``kubetrain-rsh`` (the
``client`` below), which asks the ``serve`` side running inside the target pod to execute the command there, in
that pod's namespaces, and relays its output and exit status. It only listens on the pod's own address inside the
TrainJob's private network namespace, so nothing outside the TrainJob can reach it. No sshd, keys or users needed.

Usage: ``python -m kubetrain.local.sandbox.rsh serve`` /
``python -m kubetrain.local.sandbox.rsh [-o opt]... HOST COMMAND...``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

PORT_ENV = "KUBETRAIN_RSH_PORT"
DEFAULT_PORT = 2222
_OUT, _ERR, _EXIT = 1, 2, 3


def _send(sock: socket.socket, lock: threading.Lock, kind: int, payload: bytes) -> None:
    with lock:
        sock.sendall(struct.pack("!BI", kind, len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def _handle(conn: socket.socket) -> None:
    lock = threading.Lock()
    with conn:
        line = conn.makefile("rb").readline()
        if not line.strip():
            return  # a readiness probe: connecting is all it checks
        try:
            header = json.loads(line)
        except ValueError:
            return
        proc = subprocess.Popen(
            ["/bin/sh", "-c", " ".join(header["argv"])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

        def pump(stream: object, kind: int) -> None:
            assert hasattr(stream, "read1")
            try:
                while chunk := stream.read1(65536):
                    _send(conn, lock, kind, chunk)
            except OSError:
                pass  # client gone: watch_peer stops the command

        def watch_peer() -> None:
            # The client going away (mpirun killed) must take the remote daemon down, as ssh would.
            try:
                while conn.recv(1):
                    pass
            except OSError:
                pass
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)

        threads = [
            threading.Thread(target=pump, args=(proc.stdout, _OUT), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr, _ERR), daemon=True),
        ]
        for t in threads:
            t.start()
        threading.Thread(target=watch_peer, daemon=True).start()
        code = proc.wait()
        for t in threads:
            t.join()
        try:
            _send(conn, lock, _EXIT, struct.pack("!i", code))
        except OSError:
            pass


def _handle_quietly(conn: socket.socket) -> None:
    try:
        _handle(conn)
    except OSError:
        pass  # the client went away (mpirun finished or was killed); its remote command was already stopped


def serve(port: int, *, quiet: bool = False) -> None:
    host = socket.gethostname()
    addr = socket.gethostbyname(host)
    srv = socket.create_server((addr, port), reuse_port=False)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if not quiet:
        # In a pod that runs its own command (the launcher) the banner could split that command's output lines.
        print(f"kubetrain-rsh: serving {host} ({addr}:{port}) in place of sshd", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_handle_quietly, args=(conn,), daemon=True).start()


def client(argv: list[str]) -> int:
    args = list(argv)
    attempts = 10
    # ssh-style options from OMPI_MCA_plm_rsh_args (``-o ConnectionAttempts=10``) are accepted and ignored.
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt == "-o" and args:
            val = args.pop(0)
            if val.lower().startswith("connectionattempts="):
                attempts = int(val.split("=", 1)[1])
    if len(args) < 2:
        print("usage: kubetrain-rsh [-o opt] HOST COMMAND...", file=sys.stderr)
        return 255
    host, command = args[0], args[1:]
    port = int(os.environ.get(PORT_ENV, DEFAULT_PORT))
    sock: socket.socket | None = None
    for i in range(max(attempts, 1)):
        try:
            sock = socket.create_connection((host, port), timeout=5)
            break
        except OSError as exc:
            if i == max(attempts, 1) - 1:
                print(f"kubetrain-rsh: cannot reach {host}:{port}: {exc}", file=sys.stderr)
                return 255
            time.sleep(0.5)
    assert sock is not None
    sock.settimeout(None)
    sock.sendall(json.dumps({"argv": command}).encode() + b"\n")
    try:
        while True:
            kind, n = struct.unpack("!BI", _recv_exact(sock, 5))
            payload = _recv_exact(sock, n)
            if kind == _OUT:
                sys.stdout.buffer.write(payload)
                sys.stdout.buffer.flush()
            elif kind == _ERR:
                sys.stderr.buffer.write(payload)
                sys.stderr.buffer.flush()
            else:
                code: int = struct.unpack("!i", payload)[0]
                return code if code >= 0 else 128 - code
    except ConnectionError:
        return 255


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(int(os.environ.get(PORT_ENV, DEFAULT_PORT)), quiet="--quiet" in sys.argv[2:])
        return
    sys.exit(client(sys.argv[1:]))


if __name__ == "__main__":
    main()
