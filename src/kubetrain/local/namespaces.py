"""Linux namespaces for local pods: one network namespace per TrainJob, one bubblewrap sandbox per pod.

Why: pods must reach each other by their Kubernetes hostnames (``PET_MASTER_ADDR``, MPI hostfiles) and two
TrainJobs both listening on 29500 must not collide; ``mountPath``s must work as written without touching the host.
The sandbox root is a tmpfs into which the host's top-level directories are bind-mounted; a directory that must
receive a new mount point (``/etc/mpi``, ``/home/mpiuser/.ssh``) is itself rebuilt as a tmpfs of binds, so no
directory is ever created on the host.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import select
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api import KubetrainError

NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000


class NamespaceError(KubetrainError):
    pass


def check_available() -> None:
    """Fail with a fix instead of running pods without isolation (which would write into the host's paths)."""
    missing = [t for t in ("bwrap", "ip", "nsenter") if shutil.which(t) is None]
    if missing:
        raise NamespaceError(
            f"the local backend needs {', '.join(missing)} to give pods their own mount and network namespaces "
            "(install with `make system-deps`, i.e. `apt-get install -y bubblewrap iproute2 util-linux`)"
        )
    if os.geteuid() != 0:
        raise NamespaceError(
            "the local backend needs root (CAP_SYS_ADMIN) to create a network namespace per TrainJob; "
            "run kubetrain as root, or use a Kubernetes cluster (--kubeconfig)"
        )


def netns_name(namespace: str, name: str, uid: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}/{uid}".encode()).hexdigest()[:12]
    return f"kubetrain-{digest}"


def create_netns(ns: str) -> None:
    if (NETNS_DIR / ns).exists():
        delete_netns(ns)
    for argv in (["ip", "netns", "add", ns], ["ip", "-n", ns, "link", "set", "lo", "up"]):
        r = subprocess.run(argv, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise NamespaceError(
                f"could not create network namespace {ns}: `{' '.join(argv)}`: {r.stderr.strip()}"
            )


def delete_netns(ns: str) -> None:
    subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)


def enter_netns_thread(ns: str) -> None:
    """Move the calling thread (only) into ``ns``: readiness probes connect from inside the TrainJob network."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise NamespaceError(f"setns({ns}) failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Bind:
    src: str
    dest: str
    read_only: bool = False


_SPECIAL = {"/proc", "/dev", "/sys"}


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _shadowed(binds: list[Bind]) -> set[str]:
    """Host directories that must be rebuilt as tmpfs because a mount point has to be created inside them
    (the destination does not exist, or is a symlink, which a bind would follow out of the sandbox)."""
    shadow: set[str] = set()
    for b in binds:
        if os.path.lexists(b.dest) and not os.path.islink(b.dest):
            continue
        anc = [a for a in _ancestors(b.dest)[:-1] if os.path.isdir(a) and not os.path.islink(a)]
        if anc and anc[-1] not in _SPECIAL:
            shadow.update(anc)
    return shadow


def _emit_dir(d: str, shadow: set[str], skip: set[str], out: list[str]) -> None:
    try:
        entries = sorted(os.listdir(d))
    except OSError:
        return
    for e in entries:
        p = os.path.join(d, e)
        if (d == "/" and p in _SPECIAL) or p in skip:
            continue
        if os.path.islink(p):
            out += ["--symlink", os.readlink(p), p]
        elif p in shadow:
            st = os.stat(p)
            out += ["--perms", f"{st.st_mode & 0o7777:04o}", "--tmpfs", p]
            _emit_dir(p, shadow, skip, out)
        elif os.path.isdir(p) or os.path.isfile(p):
            out += ["--dev-bind", p, p]


def bwrap_argv(
    *,
    netns: str,
    hostname: str,
    binds: list[Bind],
    hosts_file: str,
    chdir: str,
    command: list[str],
    resolv_conf: str | None = None,
) -> list[str]:
    argv = ["nsenter", f"--net={NETNS_DIR / netns}", "--", "bwrap"]
    files = [Bind(hosts_file, "/etc/hosts", True)]
    if resolv_conf is not None:
        files.append(Bind(resolv_conf, "/etc/resolv.conf", True))
    everything = files + binds
    shadow = _shadowed(everything)
    # Symlinked destinations inside a rebuilt directory are left out so the bind lands on the sandbox's tmpfs.
    skip = {b.dest for b in everything if os.path.islink(b.dest) and os.path.dirname(b.dest) in shadow}
    root: list[str] = []
    _emit_dir("/", shadow, skip, root)
    argv += root
    argv += ["--proc", "/proc", "--dev-bind", "/dev", "/dev", "--ro-bind", "/sys", "/sys"]
    for b in sorted(everything, key=lambda b: len(Path(b.dest).parts)):
        argv += ["--ro-bind" if b.read_only else "--bind", b.src, b.dest]
    argv += [
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-ipc",
        "--hostname",
        hostname,
        "--die-with-parent",
        "--chdir",
        chdir,
        "--",
    ]
    return argv + command


# slirp4netns's fixed addresses: the gateway NATs to the host's network, 10.0.2.3 forwards DNS.
SLIRP_DNS = "10.0.2.3"


@dataclass
class Outbound:
    """User-mode NAT from a TrainJob's network namespace to the host's network (internet for initializers)."""

    proc: subprocess.Popen[bytes]
    exit_w: int

    def stop(self) -> None:
        os.close(self.exit_w)  # slirp4netns exits when this pipe closes, also if the supervisor is killed
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_outbound(ns: str, timeout: float = 10.0) -> Outbound | None:
    """Attach slirp4netns to ``ns``; ``None`` when it is not installed (pods then only reach each other)."""
    exe = shutil.which("slirp4netns")
    if exe is None:
        return None
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
        str(NETNS_DIR / ns),
        "tap0",
    ]
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
        raise NamespaceError(f"slirp4netns could not give {ns} outbound network: {err or 'timed out'}")
    return Outbound(proc, exit_w)
