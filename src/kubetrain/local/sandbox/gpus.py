"""This machine's NVIDIA GPUs and what a pod given some of them sees, as the kubelet and NVIDIA's device plugin
give them: the devices by UUID in ``NVIDIA_VISIBLE_DEVICES`` (and ``CUDA_VISIBLE_DEVICES``), the device nodes
under ``/dev`` (``device_view``: what the sandbox binds and hides), and what NCCL needs between pods of one
machine (``nccl_env``).

Why UUIDs and not indices: ``nvidia-smi`` numbers GPUs in PCI bus order while CUDA numbers them fastest first
(unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), so an index can name another GPU inside the pod; a UUID names one GPU for
every program, and keeps naming it when the pod sees only its own device nodes (an image's sandbox), where
indices start again at 0. The device plugin hands out UUIDs for the same reason.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
from dataclasses import dataclass, field

from kubetrain.local.sandbox.programs import which

DEV = "/dev"
PROC_GPUS = "/proc/driver/nvidia/gpus"
"""The driver's per-GPU directories (``<pci bus id>/information``: ``GPU UUID``, ``Device Minor``)."""
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")
"""Device nodes every process using a GPU opens besides its GPUs' own ``nvidia<minor>`` (``nvidia-caps``: MIG)."""
FAKE_COUNT_ENV = "KUBETRAIN_GPUS"
"""Pretend this many GPUs (indices only, no UUIDs, no device nodes): for tests and CI without hardware."""
QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader"]
_GPU_NODE = re.compile(r"^nvidia[0-9]+$")
_LIST_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[^)]+)\)")


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's (PCI bus order): the scheduler's books name GPUs by it
    uuid: str = ""  # GPU-...; empty when pretended (KUBETRAIN_GPUS)
    name: str = ""
    memory: str = ""
    minor: int | None = None  # /dev/nvidia<minor>; None when pretended

    @property
    def node(self) -> str | None:
        return None if self.minor is None else os.path.join(DEV, f"nvidia{self.minor}")


@dataclass(frozen=True)
class Grant:
    """The GPUs (machine indices) a pod was given: ``own`` are its devices; ``peers`` those of the other pods of
    its TrainJob running beside it (NCCL maps their memory for P2P, so their device nodes are there too, as when
    each rank of one machine is restricted by ``CUDA_VISIBLE_DEVICES`` alone); ``shared``: one of ``own`` is also
    another pod's (``--overcommit``)."""

    own: tuple[int, ...]
    peers: tuple[int, ...] = ()
    shared: bool = False


@dataclass(frozen=True)
class DeviceView:
    """What the sandbox makes of ``/dev`` for a pod: the machine's GPU device nodes in ``hide`` are left out, the
    ``(host path, path in the pod)`` pairs of ``nodes`` are bound."""

    hide: frozenset[str] = frozenset()
    nodes: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def _minors() -> dict[str, int]:
    """GPU UUID -> device minor, from the driver's ``information`` files."""
    out: dict[str, int] = {}
    for info in glob.glob(os.path.join(PROC_GPUS, "*", "information")):
        try:
            with open(info) as f:
                text = f.read()
        except OSError:
            continue
        uuid = re.search(r"^GPU UUID:\s*(\S+)", text, re.M)
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
        if uuid and minor:
            out[uuid.group(1)] = int(minor.group(1))
    return out


def parse_query(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader``."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit() and parts[1].startswith(("GPU-", "MIG-")):
            out.append(Gpu(int(parts[0]), parts[1], ", ".join(parts[2:-1]), parts[-1]))
    return out


def parse_list(text: str) -> list[Gpu]:
    """``nvidia-smi -L``: ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`` (MIG lines below a GPU are skipped)."""
    return [Gpu(int(m[1]), m[3], m[2]) for m in map(_LIST_LINE.match, text.splitlines()) if m]


def _run(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout if r.returncode == 0 else ""


@functools.cache
def _detected() -> tuple[Gpu, ...]:
    exe = which("nvidia-smi")
    if exe is None:
        return ()
    gpus = parse_query(_run([exe, *QUERY[1:]])) or parse_list(_run([exe, "-L"]))
    minors = _minors()
    return tuple(
        Gpu(g.index, g.uuid, g.name, g.memory, minors.get(g.uuid, g.index)) for g in sorted(gpus, key=lambda g: g.index)
    )


def machine_gpus() -> tuple[Gpu, ...]:
    """This machine's GPUs, as ``nvidia-smi`` lists them (none without it)."""
    fake = os.environ.get(FAKE_COUNT_ENV)
    if fake is not None:
        return tuple(Gpu(i) for i in range(int(fake)))
    return _detected()


def _by_index() -> dict[int, Gpu]:
    return {g.index: g for g in machine_gpus()}


def visible_env(own: tuple[int, ...] | None) -> dict[str, str]:
    """The variables naming a pod's GPUs: by UUID, as the device plugin names them (``NVIDIA_VISIBLE_DEVICES``)
    and for CUDA. ``None``: this machine has no GPU, nothing is said; ``()``: the pod asked for none and sees
    none."""
    if own is None:
        return {}
    if not own:
        return {"CUDA_VISIBLE_DEVICES": ""}
    by_index = _by_index()
    names = [by_index[i].uuid if i in by_index and by_index[i].uuid else str(i) for i in own]
    return {"NVIDIA_VISIBLE_DEVICES": ",".join(names), "CUDA_VISIBLE_DEVICES": ",".join(names)}


def machine_nodes() -> set[str]:
    """This machine's NVIDIA device nodes (``/dev/nvidia*``), GPUs' and control ones."""
    try:
        return {os.path.join(DEV, e) for e in os.listdir(DEV) if e.startswith("nvidia")}
    except OSError:
        return set()


def device_view(grant: Grant | None) -> DeviceView | None:
    """A pod's ``/dev``: the control nodes and its TrainJob's GPUs' nodes when it has GPUs, none of the machine's
    NVIDIA nodes otherwise, as a kubelet gives them. ``None``: nothing to change (no NVIDIA device on this
    machine)."""
    present = machine_nodes()
    if not present:
        return None
    keep: set[str] = set()
    if grant is not None and grant.own:
        by_index = _by_index()
        keep = {os.path.join(DEV, n) for n in CONTROL_NODES}
        keep |= {node for i in (*grant.own, *grant.peers) if i in by_index and (node := by_index[i].node)}
    def in_pod(path: str) -> str:
        return os.path.join("/dev", os.path.basename(path))

    return DeviceView(
        hide=frozenset(in_pod(p) for p in present - keep), nodes=tuple((p, in_pod(p)) for p in sorted(keep & present))
    )


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "kubetrain-local"


def nccl_version(prefix: str) -> tuple[int, ...] | None:
    """The NCCL of the Python environment ``prefix`` (NVIDIA's ``nvidia-nccl-cu*`` wheel, what torch's CUDA
    builds use), None when it has none that can be read."""
    found = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "nvidia_nccl_cu*-*.dist-info"))
    versions = []
    for path in found:
        m = re.search(r"-(\d+)\.(\d+)\.(\d+)[^-]*\.dist-info$", path)
        if m:
            versions.append(tuple(int(x) for x in m.groups()))
    return max(versions) if versions else None


def nccl_env(grant: Grant | None, prefix: str | None) -> dict[str, str]:
    """What NCCL needs to treat the pods of one machine as one host (shared memory and P2P between them instead
    of TCP sockets over the pod network), for a pod with GPUs of its own.

    NCCL counts ranks as one host when their host hashes match: by default the hostname plus the boot id, and every
    pod has its own hostname, so ``NCCL_HOSTID`` (the machine's boot id) replaces it. Its SHM transport also needs
    the same ``/dev/shm`` (every pod sees the machine's). Since 2.19 NCCL passes memory handles between processes
    over Unix sockets in the abstract namespace, which belongs to a network namespace, so each pod would see only
    its own: from NCCL 2.29, ``NCCL_IPC_USE_ABSTRACT_SOCKET=0`` puts them under ``/tmp`` (shared by the pods);
    before that, or when the version cannot be read, ``NCCL_CUMEM_ENABLE=0`` keeps NCCL on legacy CUDA IPC and
    ``/dev/shm`` files, which need no socket. Not for a pod sharing a GPU with another (``--overcommit``): NCCL
    refuses two ranks of one host on one GPU, so those pods stay hosts of their own and use sockets."""
    if grant is None or not grant.own or grant.shared:
        return {}
    out = {"NCCL_HOSTID": _boot_id()}
    version = nccl_version(prefix) if prefix is not None else None
    if version is not None and version >= (2, 29):
        out["NCCL_IPC_USE_ABSTRACT_SOCKET"] = "0"
    else:
        out["NCCL_CUMEM_ENABLE"] = "0"
    return out
