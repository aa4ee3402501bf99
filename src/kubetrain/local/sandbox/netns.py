"""One network namespace per TrainJob, owned by a small holder process (``_nsholder``), as root or not.

Why a holder process and not ``ip netns add``: an ordinary user cannot create named namespaces under
``/run/netns``, but can own a user namespace with a network namespace inside it. The holder creates both (only the
network namespace when root), pods join them with ``nsenter``, readiness probes run inside through the holder,
and the namespace disappears by itself when the holder and the last pod are gone: nothing to clean up after a
crash, and no global name two TrainJobs could race for.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kubetrain.local.sandbox.namespaces import NamespaceError, userns_help
from kubetrain.local.sandbox.programs import which

if TYPE_CHECKING:
    from concurrent.futures import Future

HOLDER = str(Path(__file__).with_name("_nsholder.py"))
# slirp4netns's fixed addresses: the gateway NATs to the host's network, 10.0.2.3 forwards DNS.
SLIRP_DNS = "10.0.2.3"


class _Pending:
    """One answer of the holder, awaited (``get``) by whoever needs it first."""

    __slots__ = ("_answer", "_done")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._answer: dict[str, Any] | None = None

    def set(self, answer: dict[str, Any]) -> None:
        self._answer = answer
        self._done.set()

    def get(self, timeout: float) -> dict[str, Any] | None:
        return self._answer if self._done.wait(timeout) else None


class NetworkNamespace:
    """A live network namespace: ``enter_argv()`` runs a command inside, ``probe()`` checks a port from inside."""

    def __init__(
        self, proc: subprocess.Popen[bytes], rootless: bool, control: socket.socket | None = None
    ) -> None:
        self._proc = proc
        self._control = control  # where the holder hands over listening sockets (``listen``)
        self._control_lock = threading.Lock()
        self.pid = 0  # known once ready
        self.rootless = rootless
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._pending: dict[str, _Pending] = {}  # pod -> its network namespace, made or being made
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin: IO[bytes] = proc.stdin
        self._ready = False

    @classmethod
    def start(cls) -> NetworkNamespace:
        """Start the holder without waiting for it (``ready()`` waits), so that its start-up overlaps other work."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-S", "-E", HOLDER, str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(proc, os.geteuid() != 0, ours)

    def ready(self, timeout: float = 10.0) -> NetworkNamespace:
        if self._ready:
            return self
        proc = self._proc
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
        if not line.startswith("ready "):
            proc.kill()
            err = proc.communicate(timeout=5)[1].decode(errors="replace").strip()
            detail = line.removeprefix("error ") or err or "timed out"
            msg = f"could not create the TrainJob's network namespace: {detail}"
            if self.rootless:
                msg += ". " + userns_help()
            raise NamespaceError(msg)
        self.pid = int(line.split()[1])
        self._ready = True
        self._reader = threading.Thread(target=self._read_answers, args=(proc.stdout,), daemon=True)
        self._reader.start()
        return self

    @property
    def net_path(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    @property
    def user_path(self) -> str:
        return f"/proc/{self.pid}/ns/user"

    def enter_argv(self) -> list[str]:
        """Prefix that runs a command in this network namespace (and its user namespace when rootless), keeping
        the caller's own uid and gid."""
        if not self.rootless:
            return ["nsenter", f"--net={self.net_path}", "--"]
        return ["nsenter", f"--user={self.user_path}", f"--net={self.net_path}", "--preserve-credentials", "--"]

    def alive(self) -> bool:
        return self._proc.poll() is None

    def _ask(self, req: dict[str, Any], on_answer: Callable[[dict[str, Any]], None]) -> None:
        """Send ``req`` to the holder; ``on_answer`` gets its answer (``{"ok": False, ...}`` if it is gone)."""
        with self._lock:
            self._next += 1
            rid = self._next
            self._waiting[rid] = on_answer
            try:
                self._stdin.write(json.dumps({**req, "id": rid}).encode() + b"\n")
                self._stdin.flush()
            except (OSError, ValueError):
                del self._waiting[rid]
                on_answer({"ok": False, "error": "the network namespace holder is gone"})

    def _call(self, req: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """``_ask`` and wait; None when no answer came within ``timeout``."""
        done = threading.Event()
        box: list[dict[str, Any]] = []

        def on_answer(answer: dict[str, Any]) -> None:
            box.append(answer)
            done.set()

        self._ask(req, on_answer)
        return box[0] if done.wait(timeout) else None

    def probe(self, kind: str, host: str, port: int, *, path: str = "/", timeout: float = 1.0) -> Future[bool]:
        """A tcp or http readiness check run from inside the namespace; resolves to False if the holder is gone."""
        from concurrent.futures import Future  # only jobs with readiness probes need it

        out: Future[bool] = Future()
        req = {"kind": kind, "host": host, "port": port, "path": path, "timeout": timeout}
        self._ask(req, lambda answer: out.set_result(bool(answer.get("ok"))))
        return out

    def prefetch(self, pods: list[tuple[str, str]]) -> None:
        """Ask for the networks of ``pods`` (name, address) now, without waiting: the holder makes them while the
        caller does other things, and ``pod_network`` then finds them ready."""
        for name, address in pods:
            self._request_pod(name, address)

    def _request_pod(self, name: str, address: str) -> _Pending:
        pending = self._pending.get(name)
        if pending is None:
            pending = self._pending[name] = _Pending()
            self._ask({"kind": "pod", "name": name, "address": address}, pending.set)
        return pending

    def pod_network(self, name: str, address: str, timeout: float = 10.0) -> list[str]:
        """Pod ``name``'s own network namespace (``eth0`` with ``address`` on the TrainJob's bridge), made once;
        returns the prefix that runs a command inside it. Raises ``NamespaceError``."""
        answer = self._request_pod(name, address).get(timeout)
        if answer is None:
            raise NamespaceError(f"pod {name}: its network namespace was not made within {timeout:g}s")
        if not answer.get("ok"):
            self._pending.pop(name, None)  # asked again next time: the pod may start once the cause is gone
            raise NamespaceError(f"could not make the network of {answer.get('error') or 'pod ' + name}")
        net = f"--net=/proc/{int(answer['pid'])}/ns/net"
        if self.rootless:
            return ["nsenter", f"--user={self.user_path}", net, "--preserve-credentials", "--"]
        return ["nsenter", net, "--"]

    def release_pod(self, name: str) -> None:
        """End pod ``name``'s network namespace (the pod was removed); a later ``pod_network`` makes a new one."""
        if self._pending.pop(name, None) is not None:
            self._ask({"kind": "release", "name": name}, lambda answer: None)

    def forward_outbound(self, timeout: float = 10.0) -> None:
        """Route the pods' traffic out through the outbound interface (after ``start_outbound``). Raises
        ``NamespaceError`` saying why it could not."""
        answer = self._call({"kind": "nat"}, timeout)
        if answer is None:
            raise NamespaceError("forwarding the pods' traffic timed out")
        if not answer.get("ok"):
            raise NamespaceError(str(answer.get("error") or "forwarding the pods' traffic failed"))

    def listen(self, host: str, port: int = 0, timeout: float = 10.0) -> socket.socket:
        """A TCP socket listening on ``host:port`` *inside* the namespace (port 0: the kernel picks one), usable
        from this process: pods connect to it as to any address of their network. Raises ``NamespaceError``."""
        if self._control is None:
            raise NamespaceError("this network namespace holder cannot open listening sockets")
        with self._control_lock:
            with self._lock:
                self._next += 1
                rid = self._next
                try:
                    self._stdin.write(json.dumps({"id": rid, "kind": "listen", "host": host, "port": port}).encode())
                    self._stdin.write(b"\n")
                    self._stdin.flush()
                except (OSError, ValueError) as exc:
                    raise NamespaceError(f"the network namespace holder is gone: {exc}") from None
            self._control.settimeout(timeout)
            try:
                msg, fds, _flags, _addr = socket.recv_fds(self._control, 4096, 1)
            except OSError as exc:  # TimeoutError included
                raise NamespaceError(f"no listening socket from the network namespace holder: {exc}") from None
        answer: dict[str, Any] = json.loads(msg or b"{}")
        if not fds:
            raise NamespaceError(
                f"could not listen on {host}:{port} inside the TrainJob's network: {answer.get('error', 'no socket')}"
            )
        return socket.socket(fileno=fds[0])

    def _read_answers(self, out: IO[bytes]) -> None:
        for line in out:
            try:
                ans: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                fut = self._waiting.pop(int(ans.get("id", -1)), None)
            if fut is not None:
                fut(ans)
        with self._lock:
            left, self._waiting = self._waiting, {}
        for fut in left.values():
            fut({"ok": False, "error": "the network namespace holder is gone"})

    def close(self) -> None:
        try:
            self._stdin.close()  # the holder exits on EOF
        except OSError:
            pass
        if self._control is not None:
            self._control.close()
        # Not waited for: the holder exits on EOF (its pods' namespaces with it) and the TrainJob's end does not
        # wait for that; the subprocess module reaps it later. A holder that ignored EOF still dies with us.
        if self._proc.poll() is not None:
            for stream in (self._proc.stdout, self._proc.stderr):
                if stream is not None:
                    stream.close()


@dataclass
class Outbound:
    """User-mode NAT from a TrainJob's network namespace to the host's network (internet for initializers)."""

    proc: subprocess.Popen[bytes]
    exit_w: int

    def stop(self) -> None:
        os.close(self.exit_w)  # slirp4netns exits when this pipe closes, also if the supervisor is killed
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        # Not waited for: the TrainJob's end does not wait for it. The subprocess module reaps a dropped child
        # (it keeps unwaited ones and collects them when it next starts a process).
        self.proc.poll()


def outbound_available() -> bool:
    return which("slirp4netns") is not None


def start_outbound(ns: NetworkNamespace, timeout: float = 10.0) -> Outbound:
    """Attach slirp4netns to ``ns``. Raises ``NamespaceError`` saying why it could not (the caller decides
    whether pods can do without)."""
    exe = which("slirp4netns")
    if exe is None:
        raise NamespaceError("slirp4netns is not installed")
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    os.set_inheritable(exit_w, False)
    argv = [
        exe,
        "--configure",
        "--mtu=65520",
        "--disable-host-loopback",
        "--netns-type=path",
        f"--ready-fd={ready_w}",
        f"--exit-fd={exit_r}",
    ]
    if ns.rootless:
        argv.append(f"--userns-path={ns.user_path}")
    argv += [ns.net_path, "tap0"]
    proc = subprocess.Popen(
        argv,
        pass_fds=(ready_w, exit_r),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(ready_w)
    os.close(exit_r)
    ready, _, _ = select.select([ready_r], [], [], timeout)
    ok = bool(ready) and os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    if not ok:
        os.close(exit_w)
        proc.kill()
        err = proc.communicate(timeout=5)[1].decode(errors="replace").strip()
        hint = ""
        if "/dev/net/tun" in err:
            hint = " (this user may not open /dev/net/tun; its mode is usually 0666)"
        raise NamespaceError(f"slirp4netns failed: {err.splitlines()[0] if err else 'timed out'}{hint}")
    return Outbound(proc, exit_w)
