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

Pods have network namespaces of their own, as on a node: the TrainJob's namespace holds a bridge (``kt0``, the
gateway ``GATEWAY``) and each pod's namespace a veth ``eth0`` with the pod's address on the bridge's subnet, so
``hostname -I``, MPI's interface discovery and a pod's own ``localhost`` behave as in a cluster, and two pods may
bind the same port. ``{"id", "kind": "pod", "name", "address"}`` makes one (a keeper process forked from here
holds it, so it keeps the holder's capabilities) and answers ``{"id", "ok", "pid"}``; ``{"id", "kind": "release",
"name"}`` ends it. ``{"id", "kind": "nat"}`` forwards the pods' traffic to the outbound interface (``tap0``,
slirp4netns) with masquerading, through ``nft``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading

import _netlink as nl  # a sibling file: this script runs with -S, outside the package
from _userns import map_own_ids

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
CAP_NET_ADMIN = 12
BRIDGE = "kt0"
GATEWAY, PREFIX, SUBNET = "10.250.0.1", 16, "10.250.0.0/16"
OUTBOUND = "tap0"
# The pod network's MTU: loopback's order of size (65536), so pod-to-pod traffic costs about what it costs between
# processes of one machine (fewer, larger segments through the veths and the bridge), and slirp4netns's largest
# (its tap0, the way out, gets the same), so nothing leaving the TrainJob needs fragmenting.
MTU = 65520
# The bridge's netfilter calls: a bridged packet between two pods would otherwise go through the nat hooks of the
# outbound rule (and connection tracking) too. Only routed traffic (to tap0) needs them.
_BRIDGE_NF = ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables")

# Loaded once, before any thread exists: a keeper forked while a probe thread resolves a host name (NSS loads
# libraries, holding the dynamic loader's lock) must never call dlopen itself, or it waits for that lock forever.
_libc = ctypes.CDLL(None, use_errno=True)
_keepers: dict[str, tuple[int, int]] = {}  # pod name -> (keeper pid, the pipe end whose closing ends it)
_veths = 0


def _fail(message: str) -> None:
    sys.stdout.write(f"error {message}\n")
    sys.stdout.flush()
    os._exit(1)


def _setup() -> None:
    libc = _libc
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    uid, gid = os.geteuid(), os.getegid()
    rootless = uid != 0
    if libc.unshare(CLONE_NEWNET | (CLONE_NEWUSER if rootless else 0)) != 0:
        err = ctypes.get_errno()
        _fail(f"unshare({'user+' if rootless else ''}network namespace): {os.strerror(err)}")
    if rootless:
        try:
            map_own_ids(uid, gid)
        except OSError as exc:
            _fail(f"mapping uid {uid} into the new user namespace: {exc.strerror}")
    if rootless:
        _keep_net_admin(libc)
    try:
        nl.set_up("lo")
        nl.create_bridge(BRIDGE, MTU)
        nl.add_address(BRIDGE, GATEWAY, PREFIX)
        nl.set_up(BRIDGE)
    except OSError as exc:
        _fail(f"setting up the TrainJob's network (loopback, bridge {BRIDGE}): {exc.strerror or exc}")
    for name in _BRIDGE_NF:
        try:
            with open(f"/proc/sys/net/bridge/{name}", "w") as f:
                f.write("0")
        except OSError:
            pass  # no br_netfilter in this kernel: bridged packets never reach netfilter anyway
    try:
        # Forwarding even without outbound network: a pod's packet to an address outside the TrainJob then gets
        # "network unreachable" at once, instead of vanishing and leaving its connect or DNS query to time out.
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write("1")
    except OSError:
        pass


def _pod(req: dict[str, object]) -> dict[str, object]:
    """A network namespace for one pod, with ``eth0`` on the bridge; held by a forked keeper until released."""
    global _veths
    name, address = str(req["name"]), str(req["address"])
    if name in _keepers:
        return {"ok": True, "pid": _keepers[name][0]}
    up_r, up_w = os.pipe()  # keeper -> holder: b"n" namespace made, b"k" configured, else an error text
    go_r, go_w = os.pipe()  # holder -> keeper: b"v" veth made; EOF: exit
    pid = os.fork()
    if pid == 0:  # the keeper: only syscalls from here on, then os._exit
        try:
            # Only its two pipes: a keeper forked while another thread runs a program (nft) would otherwise hold
            # that program's pipes open for ever, and with them the holder waiting for the program's end.
            low, high = sorted((up_w, go_r))
            os.closerange(3, low)
            os.closerange(low + 1, high)
            os.closerange(high + 1, 1 << 20)
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):  # the holder's pipes to the supervisor are not the keeper's to hold open
                os.dup2(devnull, fd)
            os.close(devnull)
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == 1:
                os._exit(0)  # the holder died before the line above
            if _libc.unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare(network namespace)")
            nl.set_up("lo")
            os.write(up_w, b"n")
            if os.read(go_r, 1) != b"v":
                os._exit(0)
            nl.add_address("eth0", address, PREFIX)
            nl.set_up("eth0")
            nl.add_default_route(GATEWAY, "eth0")
            os.write(up_w, b"k")
            os.close(up_w)
            while os.read(go_r, 1):
                pass
        except BaseException as exc:
            try:
                os.write(up_w, f"{exc}".encode()[:200] or b"failed")
            except OSError:
                pass
        os._exit(0)
    os.close(up_w)
    os.close(go_r)
    try:
        if os.read(up_r, 200) != b"n":
            raise OSError("the pod's network namespace could not be made")
        _veths += 1
        host = f"kt{_veths}"
        nl.create_veth(host, "eth0", pid, MTU)
        nl.set_up(host, master=BRIDGE)
        os.write(go_w, b"v")
        answer = os.read(up_r, 200)
        if answer != b"k":
            raise OSError(answer.decode(errors="replace") or "the pod's network could not be configured")
    except OSError as exc:
        os.close(go_w)
        os.close(up_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return {"ok": False, "error": f"pod {name}: {exc.strerror or exc}"}
    os.close(up_r)
    _keepers[name] = (pid, go_w)
    return {"ok": True, "pid": pid}


def _release(req: dict[str, object]) -> dict[str, object]:
    keeper = _keepers.pop(str(req["name"]), None)
    if keeper is not None:
        os.close(keeper[1])  # the keeper reads EOF and exits; its namespace (and veth) go with it
        os.waitpid(keeper[0], 0)
    return {"ok": True}


_nat_result: list[dict[str, object]] = []
_nat_thread: threading.Thread | None = None


def _nat_later() -> None:
    """Set up forwarding while the supervisor does other things: the rule names the outbound interface, so it
    may exist before slirp4netns attaches it. ``{"kind": "nat"}`` then only collects the result."""
    global _nat_thread
    _nat_thread = threading.Thread(target=lambda: _nat_result.append(_nat()), daemon=True)
    _nat_thread.start()


def _nat_answer() -> dict[str, object]:
    if _nat_thread is not None:
        _nat_thread.join()
    return _nat_result[0] if _nat_result else {"ok": False, "error": "forwarding was not set up"}


def _nat() -> dict[str, object]:
    """Forward the pods' traffic to the outbound interface, masqueraded as its address (slirp4netns NATs only
    what comes from its own subnet)."""
    nft = _program("nft")
    if nft is None:
        return {"ok": False, "error": "nft (nftables) is not installed"}
    rules = (
        "table ip kubetrain {\n chain postrouting {\n  type nat hook postrouting priority 100; policy accept;\n"
        f'  ip saddr {SUBNET} oifname "{OUTBOUND}" masquerade\n }}\n}}\n'
    )
    try:
        done = subprocess.run([nft, "-f", "-"], input=rules.encode(), capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error": f"nft: {exc}"}
    if done.returncode != 0:
        return {"ok": False, "error": f"nft: {done.stderr.decode(errors='replace').strip()}"}
    return {"ok": True}


def _program(name: str) -> str | None:
    """``name`` on PATH or in the sbin directories, which an ordinary user's PATH often lacks (Debian)."""
    for d in [*os.get_exec_path(), "/usr/local/sbin", "/usr/sbin", "/sbin"]:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _keep_net_admin(libc: ctypes.CDLL) -> None:
    """Keep CAP_NET_ADMIN across exec as an ambient capability, for ``nft``: a non-root uid loses every
    capability at exec otherwise. Only ``nft`` is ever executed from here (keepers are forked, never exec)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable}
    if libc.capget(header, data) != 0:
        return
    data[2] |= 1 << CAP_NET_ADMIN
    if libc.capset(header, data) == 0:
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0)


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
    _nat_later()
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        kind = req.get("kind")
        if kind == "listen":
            if control is not None:
                _listen(control, req)
            continue
        if kind in ("pod", "release", "nat"):
            # In this (the main) thread: forking a keeper must not race another fork or request.
            answer = _pod(req) if kind == "pod" else _release(req) if kind == "release" else _nat_answer()
            with _write:
                sys.stdout.write(json.dumps({"id": req["id"], **answer}) + "\n")
                sys.stdout.flush()
            continue
        threading.Thread(target=_answer, args=(req,), daemon=True).start()
    os._exit(0)


if __name__ == "__main__":
    main()
