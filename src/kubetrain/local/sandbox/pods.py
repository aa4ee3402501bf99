"""Starting, probing and stopping one pod's containers as sandboxed process groups."""

from __future__ import annotations

import ctypes
import errno
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths
from kubetrain.local.images import choose
from kubetrain.local.images.rootfs import ImageRoot
from kubetrain.local.plan import GATEWAY, PodPlan
from kubetrain.local.sandbox import gpus as gpus_
from kubetrain.local.sandbox import known_images
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.sandbox.env import ObjectIndex, command_line, container_env
from kubetrain.local.sandbox.namespaces import Bind, bwrap_argv
from kubetrain.local.sandbox.programs import which
from kubetrain.local.sandbox.volumes import container_binds

# Variables of the supervisor's own environment that describe *its* distributed context, never a pod's.
_SCRUB_PREFIXES = ("PET_", "OMPI_", "PMIX_", "TORCHELASTIC_", "KUBETRAIN_", "I_MPI_", "HYDRA_")
_SCRUB = {
    "CUDA_VISIBLE_DEVICES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "ROLE_RANK",
    "HOSTNAME",
}


class PodError(KubetrainError):
    pass


def proc_start_time(pid: int) -> str | None:
    """Kernel start time of ``pid``: with the pid it identifies a process even after pid reuse."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def alive(pid: int | None, start: str | None) -> bool:
    """``pid`` still runs the process that had start time ``start`` (a zombie counts as gone)."""
    if pid is None or start is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X") and fields[19] == start


def image_env_prefix(image: str | None) -> str:
    """The Python environment standing in for ``image`` when it does not run in the real image
    (``kubetrain.local.images.choose``: ``$KUBETRAIN_HOME/images.yaml``; the default is the current environment)."""
    return choose.env_prefix(image)


def base_env(image: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith(_SCRUB_PREFIXES)}
    prefix = image_env_prefix(image)
    env["PATH"] = f"{prefix}/bin:{env.get('PATH', '/usr/local/bin:/usr/bin:/bin')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rsh_agent() -> str:
    """A stable executable for OpenMPI's ``plm_rsh_agent`` (it must be one path, not a command line)."""
    path = paths.home() / "bin" / "kubetrain-rsh"
    text = f"#!{sys.executable}\nfrom kubetrain.local.sandbox.rsh import main\nmain()\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o755)
        tmp.replace(path)
    return str(path)


# MPI implementations run by Hydra, recognised by the hostfile variable the compiler gives their launcher.
HYDRA_HOSTFILE_ENV = {"I_MPI_HYDRA_HOST_FILE": "Intel", "HYDRA_HOST_FILE": "MPICH"}
_GENERIC_LAUNCHERS = ("mpirun", "mpiexec")
# Programs that Intel MPI and MPICH install beside their launcher, whatever their packaging (oneAPI, the `impi-rt`
# wheel; Debian's mpich, the `mpich` wheel, a source build). Both launchers are named mpiexec.hydra, so what lies
# beside one says whose it is.
_INTEL_MARKERS = ("impi_info",)
_MPICH_MARKERS = ("mpichversion",)
# What to install, said in the error when an implementation's launcher is missing (the pins the tests run with).
_INSTALL = {
    "Intel": "pip install impi-rt==2021.17.0 into the Python environment standing in for the image, or install "
             "Intel MPI (oneAPI) and set I_MPI_ROOT",
    "MPICH": "pip install mpich==5.0.2 into the Python environment standing in for the image, or install the "
             "Debian package mpich",
}


def mpi_implementation(env: dict[str, str]) -> str | None:
    """``Intel`` or ``MPICH`` for a launcher container of such a runtime; None otherwise (OpenMPI)."""
    return next((impl for var, impl in HYDRA_HOSTFILE_ENV.items() if var in env), None)


def _intel_dir(path: str) -> bool:
    low = os.path.realpath(path).lower()
    return "/intel" in low or "oneapi" in low


def hydra_of(launcher: str) -> str | None:
    """Whose Hydra ``launcher`` (an ``mpiexec.hydra`` or one of Debian's ``mpiexec.mpich`` names) is: ``Intel``,
    ``MPICH``, or None when nothing beside it says (then it is taken for MPICH's, the other Hydra)."""
    real = os.path.realpath(launcher)
    for directory in dict.fromkeys((os.path.dirname(launcher), os.path.dirname(real))):
        if any(os.path.exists(os.path.join(directory, m)) for m in _INTEL_MARKERS):
            return "Intel"
        if any(os.path.exists(os.path.join(directory, m)) for m in _MPICH_MARKERS):
            return "MPICH"
    return "Intel" if _intel_dir(real) else None


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def hydra_launcher(
    impl: str, search_path: str, i_mpi_root: str | None = None, host_i_mpi_root: str | None = None
) -> str:
    """The implementation's own ``mpiexec``: never another MPI's, whose ranks would ignore the hostfile and all
    start on the launcher. The pod's ``PATH`` is searched in order, so the MPI of the environment standing in for
    the image (first on it) wins over one of the machine's. ``i_mpi_root`` is the pod's ``I_MPI_ROOT`` (looked at
    first, as Intel's own scripts do), ``host_i_mpi_root`` this machine's (looked at last: a oneAPI install that
    is not on the PATH). Raises ``PodError`` naming what is missing and how to install it."""
    names = ("mpiexec.hydra",) if impl == "Intel" else ("mpiexec.mpich", "mpirun.mpich", "mpiexec.hydra")
    # (path, whether where it is already says it is the implementation's: I_MPI_ROOT names Intel MPI's home)
    candidates: list[tuple[str, bool]] = []
    if impl == "Intel" and i_mpi_root:
        candidates.append((os.path.join(i_mpi_root, "bin", "mpiexec.hydra"), True))
    for directory in search_path.split(os.pathsep):
        if directory:
            candidates += [(os.path.join(directory, name), False) for name in names]
    if impl == "Intel" and host_i_mpi_root:
        candidates.append((os.path.join(host_i_mpi_root, "bin", "mpiexec.hydra"), True))
    for candidate, trusted in candidates:
        if not _runnable(candidate):
            continue
        whose = hydra_of(candidate)
        if trusted or whose == impl or (impl == "MPICH" and whose is None):
            return candidate
    import shutil

    wanted = "Intel MPI's mpiexec.hydra" if impl == "Intel" else "MPICH's mpiexec.hydra (mpiexec.mpich)"
    other = shutil.which("mpirun", path=search_path)
    seen = f"; the mpirun here is {os.path.realpath(other)}, another MPI whose ranks would ignore the hostfile" if (
        other) else ""
    raise PodError(
        f"mpiImplementation {impl}: its launcher, {wanted}, is not installed on this machine{seen}. kubetrain does "
        f"not fall back to another MPI (fix: {_INSTALL[impl]}, or use mpiImplementation: OpenMPI)"
    )


def hydra_shim(impl: str, launcher: str) -> str:
    """A directory whose ``mpirun``/``mpiexec`` start ``launcher``, put first on the launcher pod's PATH so the
    runtime's ``mpirun ...`` (even inside ``sh -c``) starts the right MPI. Scripts that exec it, not symlinks:
    Hydra finds its proxy next to the path it was started as. One directory per launcher: TrainJobs whose images
    map to different environments (each with its own MPI) may start at the same time."""
    import hashlib

    digest = hashlib.sha256(launcher.encode()).hexdigest()[:12]
    shim = paths.home() / "bin" / f"mpi-{impl.lower()}-{digest}"
    shim.mkdir(parents=True, exist_ok=True)
    text = f'#!/bin/sh\nexec {shlex.quote(launcher)} "$@"\n'
    for name in _GENERIC_LAUNCHERS:
        script = shim / name
        if not script.exists() or script.read_text() != text:
            tmp = shim / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(script)
    return str(shim)


def hydra_env(impl: str, launcher: str) -> dict[str, str]:
    """Environment that makes Hydra reach the other pods through the local rsh stand-in instead of ssh."""
    agent = rsh_agent()
    if impl == "Intel":
        return {"I_MPI_HYDRA_BOOTSTRAP": "rsh", "I_MPI_HYDRA_BOOTSTRAP_EXEC": agent}
    return {"HYDRA_LAUNCHER": "rsh", "HYDRA_LAUNCHER_EXEC": agent}


@dataclass
class Container:
    name: str
    spec: dict[str, Any]
    argv: list[str]
    env: dict[str, str]
    program: str = ""  # the container's own command[0] (before any local wrapping), checked before the start
    security: sc.Security | None = None
    enter: list[str] = field(default_factory=list)  # the prefix entering the pod's network namespace
    binds: list[Bind] = field(default_factory=list)  # kubetrain's own, besides the volumes
    devices: gpus_.DeviceView | None = None  # its /dev's NVIDIA nodes (None: the machine's /dev as it is)
    proc: subprocess.Popen[bytes] | None = None
    pidfd: int | None = None  # readable when the process exits (the supervisor waits on it)
    ready: bool = False
    next_probe: float = 0.0
    failures: int = 0
    image: ImageRoot | None = None  # runs in this image (else in the host's filesystem, an environment first)
    rootfs: Path | None = None  # the container's own overlay directories (upper, work, merged), in its image
    workdir: str | None = None  # in its image: the working directory (the container's, or the image's)
    shared_shm: bool = False  # in its image: the machine's /dev/shm (NCCL between pods with GPUs of their own)


@dataclass
class PodContext:
    """Everything about the TrainJob a pod needs to start."""

    namespace: str
    uid: str
    network: Callable[[str, str], list[str]] | None  # (pod, address) -> the prefix entering the pod's network
    rootless: bool
    hosts_file: str
    workdir: str
    index: ObjectIndex
    mpi: bool
    rsh_port: int
    extra_env: dict[str, str] = field(default_factory=dict)
    resolv_conf: str | None = None  # DNS through the TrainJob's outbound NAT, when there is one
    reported: set[str] = field(default_factory=set)  # securityContext notices already given (once per TrainJob)


def _is_sshd(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) == "sshd"


def container_security(
    pod: PodPlan, c: dict[str, Any], ctx: PodContext, where: str, image: ImageRoot | None = None
) -> sc.Security:
    """The container's merged securityContext (``security_context.resolve``), judged against ``image``'s user when
    it runs in one."""
    return sc.resolve(
        pod.spec,
        c,
        pod=sc.pod_ref(pod.name, ctx.namespace, ctx.uid),
        where=where,
        pod_where=where.rsplit(".", 1)[0],
        rootless=ctx.rootless,
        image=image,
    )


def prepare_container(
    pod: PodPlan,
    c: dict[str, Any],
    ctx: PodContext,
    *,
    restart_attempt: int,
    where: str,
    gpus: gpus_.Grant | None,
    scratch: Path | None = None,
) -> Container:
    """``scratch``: the pod's own directory on this machine (per restart attempt), for what a container keeps
    in its private filesystem on a node but would share through the host's /tmp here (MPI's session files).
    A container that runs in its image is prepared by ``in_image.prepare_container``."""
    security = container_security(pod, c, ctx, where)
    meta = pod.meta(ctx.namespace, ctx.uid, restart_attempt)
    env = container_env(
        c, meta, ctx.index, base=base_env(c.get("image")), pod_ip=pod.address, host_ip=GATEWAY, where=where
    )
    env.update(ctx.extra_env)
    env["HOSTNAME"] = pod.name
    if security.home is not None and not any(e.get("name") == "HOME" for e in c.get("env") or []):
        # Running as another host user (root only): its HOME, as the runtime takes it from the image's passwd.
        env["HOME"] = security.home
    env.update(gpus_.visible_env(gpus.own if gpus is not None else None))
    for name, value in gpus_.nccl_env(gpus, image_env_prefix(c.get("image"))).items():
        env.setdefault(name, value)  # the container's own setting wins
    argv = command_line(known_images.with_entrypoint(c), env)
    extra: list[Bind] = []
    program = argv[0] if argv else ""
    if ctx.mpi:
        from kubetrain.local.sandbox import rsh

        env.update(
            {
                "OMPI_MCA_plm_rsh_agent": rsh_agent(),
                "PRTE_MCA_plm_ssh_agent": rsh_agent(),  # OpenMPI 5 (PRRTE) reads its own name for the agent
                rsh.PORT_ENV: str(ctx.rsh_port),
                # Pods of one TrainJob reach each other through their eth0 (its pod network), as on a cluster.
                "OMPI_MCA_btl_tcp_if_include": "eth0",
                "OMPI_MCA_oob_tcp_if_include": "eth0",
                "PRTE_MCA_oob_tcp_if_include": "eth0",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
            }
        )
        if security.uid == 0:
            env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        if scratch is not None:
            # OpenMPI's session directory (/tmp/ompi.<hostname>.<uid>) private to the pod, as on a node, where it
            # is in the container's /tmp: here the host's /tmp is shared, and an earlier run of a TrainJob of the
            # same name by another user (or uid mapping) would have left it unwritable. mpirun hands the same
            # path to the daemons it starts on the node pods, so every MPI pod has one there.
            session = scratch / "mpi"
            session.mkdir(parents=True, exist_ok=True)
            session.chmod(0o1777)  # for a runAsUser other than this user's, as /tmp is
            extra.append(Bind(str(session), MPI_SESSION_DIR))
            env.setdefault("OMPI_MCA_orte_tmpdir_base", MPI_SESSION_DIR)  # OpenMPI 4
            env.setdefault("PRTE_MCA_prte_tmpdir_base", MPI_SESSION_DIR)  # OpenMPI 5 (PRRTE)
        impl = mpi_implementation(env)
        if impl is not None:
            launcher = hydra_launcher(impl, env.get("PATH", ""), env.get("I_MPI_ROOT"), os.environ.get("I_MPI_ROOT"))
            env.update(hydra_env(impl, launcher))
            # `mpirun`/`mpiexec` (also inside `sh -c`) now start the implementation's own launcher.
            env["PATH"] = f"{hydra_shim(impl, launcher)}:{env.get('PATH', '')}"
        serve = [sys.executable, "-m", "kubetrain.local.sandbox.rsh", "serve"]
        if _is_sshd(argv):
            # The runtime's sshd is replaced by the local transport, which also answers the tcp readiness probe.
            argv = serve
        elif argv:
            argv = ["/bin/sh", "-c", f'{shlex.join(serve)} --quiet & exec "$@"', "kubetrain-pod", *argv]
    if not argv:
        fix = (
            "set spec.trainer.command in the TrainJob (e.g. [torchrun, train.py]) or command in the runtime"
            if c.get("name") == "node"
            else "set command on this container in the runtime"
        )
        raise PodError(
            f"{where}: no command. Locally there is no entrypoint to fall back to for image {c.get('image')!r} "
            f"(kubetrain knows those of {', '.join(k.repository for k in known_images.KNOWN_IMAGES)}); {fix}"
        )
    enter = ctx.network(pod.name, pod.address) if ctx.network is not None else []
    return Container(
        name=c.get("name", ""), spec=c, argv=argv, env=env, program=program, security=security, enter=enter,
        binds=extra, devices=gpus_.device_view(gpus),
    )


def _reach(container: Container, ctx: PodContext, chdir: str) -> list[str]:
    """What a pod running as another host user (root only) must be able to enter: its working directory, the
    Python environment standing in for its image (and the interpreter that environment links to), kubetrain's
    own code and, for MPI, the rsh stand-in."""
    prefix = image_env_prefix(container.spec.get("image"))
    out = [chdir, prefix, sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    for name in ("python3", "python"):
        exe = os.path.join(prefix, "bin", name)
        if os.path.exists(exe):
            out.append(os.path.dirname(os.path.dirname(os.path.realpath(exe))))
            break
    out.append(str(Path(__file__).resolve().parents[2]))  # the directory holding the kubetrain package
    if ctx.mpi:
        out.append(str(paths.home() / "bin"))
    return [os.path.realpath(p) for p in out]


def _through_volumes(
    chdir: str | None, needed: list[str], spec: dict[str, Any], where: str, read_only: bool
) -> list[Bind]:
    """What stands in for the image stays visible when a volume covers one of its parents (an emptyDir at /tmp,
    as restricted runtimes have, with the manifest or this checkout's Python environment under /tmp): the
    manifest's directory (``chdir``, the local default working directory) and the ``needed`` host paths (the
    Python environment, kubetrain's code) are bound again on top of the volume, as an image's files would sit
    beside it. A volume mounted at the working directory itself would hide it either way: that is said instead
    of an unexplained crash."""
    mounts = [(os.path.normpath(m.get("mountPath") or "/"), m.get("name")) for m in spec.get("volumeMounts") or []]
    for dest, name in mounts:
        if chdir == dest:
            raise PodError(
                f"{where}: its working directory defaults to the manifest's directory {chdir}, and the volume "
                f"{name!r} is mounted at exactly that path inside the pod. Fix: keep the manifest (and the "
                f"files it runs) in a directory below or beside {dest}, or set workingDir"
            )
    covered = sorted(
        {p for p in ([chdir] if chdir else []) + needed if any(p.startswith(d.rstrip("/") + "/") for d, _ in mounts)}
    )
    out: list[str] = []
    for p in covered:  # a path below one already bound comes with it
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return [Bind(p, p, read_only) for p in out]


SandboxArgv = Callable[..., tuple[list[str], list[str]]]
"""(pod, container, ctx, *, volumes, where) -> (the command run inside, the whole argv around it)."""


def start_container(
    pod: PodPlan,
    container: Container,
    ctx: PodContext,
    *,
    volumes: dict[str, Path],
    log: Path,
    where: str,
    sandbox: SandboxArgv | None = None,
) -> None:
    """Start a container on this machine's files, or in the sandbox ``sandbox`` builds (``in_image.sandbox_argv``
    for one in its image)."""
    command, argv = (sandbox or _on_host_argv)(pod, container, ctx, volumes=volumes, where=where)
    spawn(container, ctx, argv, command, log, where)


def _on_host_argv(
    pod: PodPlan, container: Container, ctx: PodContext, *, volumes: dict[str, Path], where: str
) -> tuple[list[str], list[str]]:
    binds = container_binds(container.spec, volumes, where) + container.binds
    chdir = container.spec.get("workingDir") or ctx.workdir
    security = container.security
    read_only = security is not None and security.read_only_root
    default_dir = None if container.spec.get("workingDir") else chdir
    needed = [p for p in _reach(container, ctx, chdir)[1:] if os.path.isdir(p)]
    binds += _through_volumes(default_dir, needed, container.spec, where, read_only)
    other_user = security is not None and not security.rootless and security.uid != 0
    if other_user:
        assert security is not None
        sc.check_workdir(security, chdir, where)
    if container.program and not _is_sshd([container.program]):
        check_program(
            container.program, container.env.get("PATH", ""), chdir, binds, where,
            security=security if other_user else None,
        )
    check_exec_size(container.argv, container.env, where)
    command = [*(security.exec_prefix() if security is not None else []), *container.argv]
    argv = bwrap_argv(
        enter=container.enter,
        hostname=pod.name,
        binds=binds,
        hosts_file=ctx.hosts_file,
        chdir=chdir,
        resolv_conf=ctx.resolv_conf,
        command=command,
        security=security,
        reach=_reach(container, ctx, chdir) if other_user else (),
        devices=container.devices,
    )
    return command, argv


def spawn(container: Container, ctx: PodContext, argv: list[str], command: list[str], log: Path, where: str) -> None:
    """Start ``argv`` (a sandbox around ``command``) as the container's process, its output into ``log``."""
    # The sandbox options (hundreds of binds) go through an fd so `ps` shows the pod's command, not them.
    start = argv.index("bwrap") + 1
    end = len(argv) - len(command) - 1
    if argv and not os.path.isabs(argv[0]):
        # Found on kubetrain's PATH, not on the pod's (an image's PATH need not hold nsenter or bwrap).
        argv = [which(argv[0]) or argv[0], *argv[1:]]
    fd = os.memfd_create("kubetrain-bwrap-args")
    try:
        os.write(fd, b"".join(os.fsencode(a) + b"\0" for a in argv[start:end]))
        os.lseek(fd, 0, os.SEEK_SET)
        argv = [*argv[:start], "--args", str(fd), "--unsetenv", SANDBOX_ENV, *argv[end:]]
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab", buffering=0) as out:
            try:
                container.proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**container.env, SANDBOX_ENV: ctx.uid},
                    start_new_session=True,
                    pass_fds=(fd,),
                    preexec_fn=_dies_with(os.getpid()),
                )
            except OSError as exc:
                if exc.errno == errno.E2BIG:
                    raise PodError(f"{where}: {_too_big(container.argv, container.env)}") from None
                raise PodError(f"{where}: could not start the pod sandbox ({argv[0]}): {exc.strerror}") from None
    finally:
        os.close(fd)


def exit_code(returncode: int | None) -> int | None:
    """A container's exit code as the kubelet reports it: a process ended by signal N is ``128 + N`` (137 for
    SIGKILL), whether the sandbox's init saw the signal first or the sandbox itself was killed (``-N``)."""
    if returncode is not None and returncode < 0:
        return 128 - returncode
    return returncode


MPI_SESSION_DIR = "/.kubetrain-mpi"
"""Where an MPI pod's OpenMPI session files go: a top-level directory of the sandbox, bound to the pod's own."""

SANDBOX_ENV = "KUBETRAIN_SANDBOX_OF"
"""Set (to the TrainJob's uid) in each sandbox's own environment, and unset for the pod's command: it marks the
sandbox's processes, so they can be found when their supervisor died before recording them (``reaper``)."""

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _dies_with(parent: int) -> Callable[[], None]:
    """Run in the forked child before exec: SIGKILL when the forking thread dies, and exit if it already has.

    bwrap's ``--die-with-parent`` covers the pod only once bwrap has started; a supervisor killed (kill -9) in
    between, right after the fork, would otherwise leave a pod that no one has recorded and no one stops."""

    def child() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return child


class ExecError(PodError):
    """The container's command cannot be executed: ``code`` is what a shell would exit with (127, 126)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def host_path(path: str, binds: list[Bind]) -> str:
    """Where a path inside the sandbox lives on the host, through the volume binds (the longest match wins)."""
    best: Bind | None = None
    for b in binds:
        dest = b.dest.rstrip("/") or "/"
        if (path == dest or path.startswith(dest + "/")) and (best is None or len(dest) > len(best.dest)):
            best = b
    if best is None:
        return path
    rest = path[len(best.dest.rstrip("/")) :]
    return best.src + rest


def check_program(
    program: str,
    path_env: str,
    chdir: str,
    binds: list[Bind],
    where: str,
    *,
    security: sc.Security | None = None,
    locate: Callable[[str], str | None] | None = None,
    image: str | None = None,
) -> None:
    """Exit codes 127 (not found) and 126 (not executable), like a shell, found before any sandbox is built.
    ``security``: judge "executable" for that identity (a root-mode pod running as another user). ``locate``: where
    a path inside the pod is on this machine (through the volumes, else in the image); None: not there. ``image``:
    the image the pod runs in, named in the message."""
    if "/" in program:
        candidates = [program if os.path.isabs(program) else os.path.normpath(os.path.join(chdir, program))]
    else:
        candidates = [
            os.path.normpath(os.path.join(chdir, d, program)) for d in path_env.split(":")
        ]  # an empty or relative PATH entry is relative to the working directory, as for execvp
    not_executable: str | None = None
    for cand in candidates:
        host = locate(cand) if locate is not None else host_path(cand, binds)
        if host is not None and os.path.isfile(host):
            if security.may(os.stat(host), os.X_OK) if security is not None else os.access(host, os.X_OK):
                return
            not_executable = not_executable or cand
    if not_executable is not None:
        raise ExecError(
            f'{where}.command: exec: "{program}": permission denied ({not_executable} is not executable; '
            f"`chmod +x` it, or run it through its interpreter, e.g. [python, {program}])",
            126,
        )
    if "/" in program:
        msg = f'exec: "{program}": no such file or directory (looked for {candidates[0]})'
    else:
        first = path_env.split(":")[0]
        fix = f"the image {image} does not have it in any of {path_env}" if image else (
            f"the pod's PATH starts with {first}; install it in that environment")
        msg = f'exec: "{program}": executable file not found in $PATH ({fix}; or give its full path)'

    raise ExecError(f"{where}.command: {msg}", 127)


# Linux limits for execve(): one string at most MAX_ARG_STRLEN, all of argv + envp together at most ARG_MAX.
MAX_ARG_STRLEN = 32 * 4096


def _too_big(argv: list[str], env: dict[str, str]) -> str:
    sizes = sorted(((len(k) + len(v) + 2, k) for k, v in env.items()), reverse=True)
    biggest = ", ".join(f"{k} ({n} bytes)" for n, k in sizes[:3])
    total = sum(len(a) + 1 for a in argv) + sum(n for n, _ in sizes)
    return (
        f"the command line and environment ({total} bytes; largest variables: {biggest}) exceed what Linux "
        f"lets a process start with ({os.sysconf('SC_ARG_MAX')} bytes in total, {MAX_ARG_STRLEN} bytes per "
        "variable or argument). Fix: pass large values through a file (a ConfigMap volume or the working "
        "directory) instead of env or args"
    )


def check_exec_size(argv: list[str], env: dict[str, str], where: str) -> None:
    total = sum(len(a) + 1 for a in argv) + sum(len(k) + len(v) + 2 for k, v in env.items())
    # Room for the pointers and the sandbox's few fixed arguments (the rest travel through an fd).
    overhead = 8 * (len(argv) + len(env) + 64) + 4096
    if (
        total + overhead > os.sysconf("SC_ARG_MAX")
        or any(len(a) + 1 > MAX_ARG_STRLEN for a in argv)
        or any(len(k) + len(v) + 2 > MAX_ARG_STRLEN for k, v in env.items())
    ):
        raise PodError(f"{where}: {_too_big(argv, env)}")


def _port(probe: dict[str, Any], container: dict[str, Any]) -> int:
    port = probe.get("port")
    if isinstance(port, int) or (isinstance(port, str) and port.isdigit()):
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise PodError(f"readinessProbe port {port!r} is neither a number nor a named port of the container")


def probe_target(probe: dict[str, Any], container: Container, address: str) -> tuple[str, str, int, str, float]:
    """(kind, host, port, path, timeout) of a tcpSocket or httpGet probe."""
    timeout = float(probe.get("timeoutSeconds", 1))
    if "tcpSocket" in probe:
        t = probe["tcpSocket"]
        return "tcp", t.get("host") or address, _port(t, container.spec), "/", timeout
    g = probe["httpGet"]
    return "http", g.get("host") or address, _port(g, container.spec), g.get("path", "/"), timeout


def run_exec_probe(probe: dict[str, Any], container: Container, ctx: PodContext) -> bool:
    """An exec readiness check inside the pod's own namespaces."""
    timeout = float(probe.get("timeoutSeconds", 1))
    proc = container.proc
    if proc is None or proc.poll() is not None:
        return False
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            inner = f.read().split()
    except OSError:
        return False
    if not inner:
        return False
    # The probe runs as the container does (its ids and capabilities), not with what nsenter gives.
    sec = container.security
    command = [*(sec.exec_prefix(entering=True) if sec is not None else []), *probe["exec"]["command"]]
    if ctx.rootless:
        # The pod's user namespace is a child of the TrainJob's; only from inside the TrainJob's (where the pod's
        # network already is) may we enter it, so: TrainJob namespaces first, then the pod's own.
        spaces = ["-U", "--preserve-credentials", "-m", "-u", "-i", "-p"]
        argv = [*container.enter, "nsenter", "-t", inner[0], *spaces, "--", *command]
    else:
        argv = ["nsenter", "-t", inner[0], "-m", "-u", "-i", "-n", "-p", "--", *command]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=max(timeout, 1), env=container.env, check=False)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return done.returncode == 0
