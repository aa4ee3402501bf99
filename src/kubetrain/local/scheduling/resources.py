"""What pods request and what this machine has: quantities, per-pod requests, capacity, shortfalls.

The local scheduler (``kubetrain.local.scheduling.scheduler``) accounts these across every TrainJob on the machine.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.sandbox import gpus

GPU = "nvidia.com/gpu"
_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


class QuantityError(KubetrainError):
    pass


def parse_quantity(value: int | float | str, where: str = "quantity") -> float:
    if isinstance(value, int | float):
        return float(value)
    m = _QTY.match(value.strip())
    if not m or (m.group(2) and m.group(2) not in _SUFFIX):
        raise QuantityError(f"{where}: {value!r} is not a Kubernetes quantity (e.g. 2, 500m, 4Gi)")
    return float(m.group(1)) * _SUFFIX.get(m.group(2), 1)


def gpu_count() -> int:
    """This machine's GPUs (``nvidia-smi``; ``KUBETRAIN_GPUS`` pretends a count without hardware)."""
    return len(gpus.machine_gpus())


def _memory_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


def _disk_bytes(path: str) -> float:
    try:
        st = os.statvfs(path)
    except OSError:
        return float("inf")
    return float(st.f_blocks * st.f_frsize)


@dataclass
class Capacity:
    """Resource name → amount the machine offers pods. Names not present have capacity 0."""

    resources: dict[str, float]

    @classmethod
    def of_machine(cls, configured: dict[str, Any] | None = None, home: str = "/") -> Capacity:
        res = {
            "cpu": float(len(os.sched_getaffinity(0))),
            "memory": _memory_bytes(),
            "ephemeral-storage": _disk_bytes(home),
            GPU: float(gpu_count()),
        }
        for name, value in (configured or {}).items():
            res[name] = parse_quantity(value, f"config.yaml capacity.{name}")
        return cls(res)

    def get(self, name: str) -> float:
        return self.resources.get(name, 0.0)

    @property
    def gpus(self) -> int:
        return int(self.get(GPU))


def fmt(resource: str, value: float) -> str:
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{value / 2**30:.1f}Gi"
    return f"{value:g}"


def pod_requests(spec: dict[str, Any]) -> dict[str, float]:
    """Requests of one pod as the scheduler counts them: max(sum of containers, largest init container); a
    resource with only a limit requests its limit. Zero amounts are left out."""

    def of(c: dict[str, Any]) -> dict[str, float]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: parse_quantity(v, f"container {c.get('name')} resources.{k}") for k, v in merged.items()}

    total: dict[str, float] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, 0.0), v)
    return {k: v for k, v in total.items() if v > 0}


def add(total: dict[str, float], more: dict[str, float]) -> dict[str, float]:
    out = dict(total)
    for k, v in more.items():
        out[k] = out.get(k, 0.0) + v
    return out


SHARED = ("cpu", "memory", "ephemeral-storage")
"""What an over-committed gang may ask beyond this machine's size: shared by time and pages, as on an overloaded
node. GPUs too, among the over-committed TrainJob's own pods (``shareable``); other extended resources never."""


def shareable(resource: str, capacity: Capacity, overcommit: bool) -> bool:
    """May an over-committed TrainJob ask ``resource`` beyond this machine's size? cpu, memory and ephemeral storage;
    and GPUs when there is at least one: its pods then share the machine's GPUs among themselves (time-sliced, as
    NVIDIA's device plugin shares a GPU between pods when told to), never one another TrainJob holds."""
    return overcommit and (resource in SHARED or (resource == GPU and capacity.get(GPU) >= 1))


def never_fits(required: dict[str, float], capacity: Capacity, overcommit: bool = False) -> list[str]:
    """Shortfalls even on an idle machine, e.g. ``nvidia.com/gpu: requested 1, this machine has 0``; with
    ``overcommit``, not what may be shared beyond the machine's size (``shareable``)."""
    out = []
    for res, want in sorted(required.items()):
        have = capacity.get(res)
        if want > have + 1e-9 and not shareable(res, capacity, overcommit):
            hint = ""
            if res not in capacity.resources:
                hint = " (extended resources exist locally only when declared under `capacity:` in config.yaml)"
            out.append(f"{res}: requested {fmt(res, want)}, this machine has {fmt(res, have)}{hint}")
    return out


def find_podgroup(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    for o in objects:
        if o.get("kind") == "PodGroup":
            return o
    return None
