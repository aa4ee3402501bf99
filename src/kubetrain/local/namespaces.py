"""Linux namespaces for local pods: one network namespace per TrainJob, one bubblewrap sandbox per pod.

Why: pods must reach each other by their Kubernetes hostnames (``PET_MASTER_ADDR``, MPI hostfiles) and two
TrainJobs both listening on 29500 must not collide; ``mountPath``s must work as written without touching the host.
The sandbox root is a tmpfs into which the host's top-level directories are bind-mounted; a directory that must
receive a new mount point (``/etc/mpi``, ``/home/mpiuser/.ssh``) is itself rebuilt as a tmpfs of binds, so no
directory is ever created on the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api.errors import KubetrainError


class NamespaceError(KubetrainError):
    pass


def which(program: str) -> str | None:
    """``shutil.which`` without importing shutil (and its compression modules) on every command's start."""
    for d in os.get_exec_path():
        path = os.path.join(d, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


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
    missing = [t for t in ("bwrap", "nsenter") if which(t) is None]
    if missing:
        raise NamespaceError(
            f"the local backend needs {', '.join(missing)} to give pods their own mount and network namespaces "
            "(install with `make system-deps`, i.e. `apt-get install -y bubblewrap util-linux`)"
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
    enter: list[str],
    hostname: str,
    binds: list[Bind],
    hosts_file: str,
    chdir: str,
    command: list[str],
    resolv_conf: str | None = None,
) -> list[str]:
    argv = [*enter, "bwrap"]
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
