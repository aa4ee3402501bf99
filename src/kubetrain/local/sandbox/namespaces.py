"""Linux namespaces for local pods: one network namespace per TrainJob, one bubblewrap sandbox per pod.

Why: pods must reach each other by their Kubernetes hostnames (``PET_MASTER_ADDR``, MPI hostfiles) and two
TrainJobs both listening on 29500 must not collide; ``mountPath``s must work as written without touching the host.
The sandbox root is a tmpfs into which the host's top-level directories are bind-mounted; a directory that must
receive a new mount point (``/etc/mpi``, ``/home/mpiuser/.ssh``) is itself rebuilt as a tmpfs of binds, so no
directory is ever created on the host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubetrain.api.errors import KubetrainError
from kubetrain.local.sandbox.programs import which

if TYPE_CHECKING:
    from kubetrain.local.sandbox.gpus import DeviceView
    from kubetrain.local.sandbox.security_context import Security


class NamespaceError(KubetrainError):
    pass


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def userns_help() -> str:
    """One paragraph: why pods cannot get their namespaces as this user, the setting to blame and the fix."""
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        cause = "the sysctl kernel.unprivileged_userns_clone is 0"
        fix = "`sudo sysctl -w kernel.unprivileged_userns_clone=1` (persist it in /etc/sysctl.d/)"
    elif _read("/proc/sys/user/max_user_namespaces") == "0":
        cause = "the sysctl user.max_user_namespaces is 0"
        fix = "`sudo sysctl -w user.max_user_namespaces=15000` (persist it in /etc/sysctl.d/)"
    elif _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        cause = (
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, "
            "Ubuntu 23.10 and later)"
        )
        fix = (
            "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile allowing "
            "`userns` for this Python"
        )
    else:
        cause = "creating a user namespace was refused (for example inside a container started without them)"
        fix = "allow user namespaces where this runs (e.g. a container's seccomp/AppArmor profile)"
    return (
        f"Without root, kubetrain gives each TrainJob's pods their own user, mount, PID and network namespaces "
        f"(bubblewrap), and {cause}. Fix: {fix}; or run kubetrain as root; or use a Kubernetes cluster "
        "(--kubeconfig). Pods are never run without isolation."
    )


def check_available() -> None:
    """Fail with a fix instead of running pods without isolation (which would write into the host's paths)."""
    missing = [t for t in ("bwrap", "nsenter", "setpriv") if which(t) is None]
    if missing:
        raise NamespaceError(
            f"the local backend needs {', '.join(missing)} to give pods their own mount and network namespaces "
            "and their securityContext (install with `make system-deps`, i.e. `apt-get install -y bubblewrap "
            "util-linux`)"
        )
    if os.geteuid() != 0 and (
        _read("/proc/sys/kernel/unprivileged_userns_clone") == "0"
        or _read("/proc/sys/user/max_user_namespaces") == "0"
    ):
        raise NamespaceError(userns_help())


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


def closed_ancestors(paths: Iterable[str], security: Security) -> dict[str, set[str]]:
    """Directories on the way to ``paths`` that ``security``'s uid may not enter (root-mode pods running as another
    user, e.g. a Python environment under /root), each with the children on the way: the sandbox rebuilds them
    holding only those, so the pod reaches what it runs and nothing else of them."""
    closed: dict[str, set[str]] = {}
    for path in paths:
        for a in _ancestors(path)[:-1]:
            try:
                st = os.stat(a)
            except OSError:
                break
            if not security.may(st, os.X_OK):
                child = path[len(a) + 1 :].split("/", 1)[0]
                closed.setdefault(a, set()).add(child)
    return closed


def _emit_dir(d: str, shadow: set[str], skip: set[str], out: list[str], *, bind: str) -> None:
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
            _emit_dir(p, shadow, skip, out, bind=bind)
        elif os.path.isdir(p) or os.path.isfile(p):
            out += [bind, p, p]


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _emit_closed(closed: dict[str, set[str]], out: list[str], *, bind: str) -> None:
    """Each closed directory is covered by an enterable tmpfs holding only the children on the way (binds are
    taken from the host's tree, so they reach under the cover)."""
    for d in sorted(closed, key=lambda d: len(Path(d).parts)):
        out += ["--perms", "0755", "--tmpfs", d]
        for child in sorted(closed[d]):
            p = os.path.join(d, child)
            if p in closed:
                continue  # covered by its own tmpfs, next
            if os.path.islink(p):
                out += ["--symlink", os.readlink(p), p]
            elif os.path.isdir(p) or os.path.isfile(p):
                out += [bind, p, p]


def _dev(devices: DeviceView | None) -> list[str]:
    """The machine's ``/dev`` as it is, or (``devices``) rebuilt entry by entry without the device nodes a pod must
    not reach (other pods' GPUs), as a kubelet gives a pod only its own: ``/dev/shm``, ``pts`` and the rest stay
    the machine's."""
    if devices is None:
        return ["--dev-bind", "/dev", "/dev"]
    out = ["--perms", "0755", "--tmpfs", "/dev"]
    bound = {dest for _, dest in devices.nodes}
    try:
        entries = sorted(os.listdir("/dev"))
    except OSError:
        entries = []
    for e in entries:
        p = os.path.join("/dev", e)
        if p in devices.hide or p in bound:
            continue
        out += ["--symlink", os.readlink(p), p] if os.path.islink(p) else ["--dev-bind", p, p]
    for src, dest in devices.nodes:
        out += ["--dev-bind", src, dest]
    return out


def bwrap_argv(
    *,
    enter: list[str],
    hostname: str,
    binds: list[Bind],
    hosts_file: str,
    chdir: str,
    command: list[str],
    resolv_conf: str | None = None,
    security: Security | None = None,
    reach: Iterable[str] = (),
    devices: DeviceView | None = None,
) -> list[str]:
    """The pod's sandbox. With ``security``: its ids and capabilities, a read-only root filesystem for
    ``readOnlyRootFilesystem``, and for a root-mode pod running as another user the directories on the way to
    ``reach`` (its Python environment, working directory) made enterable (``closed_ancestors``). ``devices``: the
    machine's ``/dev`` without the NVIDIA nodes it hides, with the ones it binds."""
    argv = [*enter, "bwrap"]
    files = [Bind(hosts_file, "/etc/hosts", True)]
    if resolv_conf is not None:
        files.append(Bind(resolv_conf, "/etc/resolv.conf", True))
    everything = files + binds
    shadow = _shadowed(everything)
    # Symlinked destinations inside a rebuilt directory are left out so the bind lands on the sandbox's tmpfs.
    skip = {b.dest for b in everything if os.path.islink(b.dest) and os.path.dirname(b.dest) in shadow}
    read_only = security is not None and security.read_only_root
    bind = "--ro-bind" if read_only else "--dev-bind"
    root: list[str] = []
    _emit_dir("/", shadow, skip, root, bind=bind)
    argv += root
    sys_bind = "--bind" if security is not None and security.privileged else "--ro-bind"
    argv += ["--proc", "/proc", *_dev(devices), sys_bind, "/sys", "/sys"]
    closed: dict[str, set[str]] = {}
    if security is not None and not security.rootless and security.uid != 0:
        closed = closed_ancestors(reach, security)
        # What a volume covers (an emptyDir at /tmp) needs no way through: the pod cannot see it anyway.
        closed = {d: c for d, c in closed.items() if not any(_within(d, b.dest) for b in everything)}
        _emit_closed(closed, argv, bind=bind)
    for b in sorted(everything, key=lambda b: len(Path(b.dest).parts)):
        argv += ["--ro-bind" if b.read_only else "--bind", b.src, b.dest]
    if read_only:
        # Volumes stay as mounted; everything else (the tmpfs root, rebuilt directories, host binds) is read-only.
        dests = {b.dest for b in everything}
        for d in sorted((shadow | set(closed)) - dests, key=lambda d: -len(Path(d).parts)):
            argv += ["--remount-ro", d]
        argv += ["--remount-ro", "/"]
    if security is not None:
        argv += security.bwrap_options()
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


def bwrap_image_argv(
    *,
    merged: str,
    hostname: str,
    binds: list[Bind],
    chdir: str,
    make_chdir: bool,
    command: list[str],
    security: Security | None = None,
    devices: DeviceView | None = None,
    shared_shm: bool = False,
) -> list[str]:
    """The sandbox of a pod running in its image: ``merged`` (the container's overlayfs of the image's layers,
    mounted by ``_rootfs``) is its root; then the kernel filesystems, a container's minimal ``/dev`` with its own
    ``/dev/shm``, kubetrain's files (``/etc/hosts``, ``/etc/resolv.conf``, ``/etc/hostname``, the tools) and the
    volumes on top, as a container runtime mounts them. ``readOnlyRootFilesystem`` makes the root read-only once
    every mount point exists. ``devices``: the GPU device nodes the pod is given (``gpus.device_view``), bound into
    that ``/dev``; ``shared_shm``: the machine's ``/dev/shm`` instead of its own, which NCCL's shared-memory
    transport between the pods of one machine needs (``gpus.nccl_env``)."""
    sys_bind = "--bind" if security is not None and security.privileged else "--ro-bind"
    shm = ["--bind", "/dev/shm", "/dev/shm"] if shared_shm else ["--perms", "1777", "--tmpfs", "/dev/shm"]
    argv = ["bwrap", "--bind", merged, "/", "--proc", "/proc", "--dev", "/dev", *shm, sys_bind, "/sys", "/sys"]
    for src, dest in devices.nodes if devices is not None else ():
        argv += ["--dev-bind", src, dest]
    for b in sorted(binds, key=lambda b: len(Path(b.dest).parts)):
        argv += ["--ro-bind" if b.read_only else "--bind", b.src, b.dest]
    if make_chdir:
        argv += ["--dir", chdir]
    if security is not None and security.read_only_root:
        argv += ["--remount-ro", "/"]
    if security is not None:
        argv += security.bwrap_options()
    argv += ["--unshare-pid", "--unshare-uts", "--unshare-ipc", "--hostname", hostname, "--die-with-parent",
             "--chdir", chdir, "--"]
    return argv + command
