"""Gang scheduling on one machine: a PodGroup's pods start together only when the machine can hold them all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from kubetrain.api import KubetrainError

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
    if os.environ.get("KUBETRAIN_GPUS") is not None:
        # Lets tests and CI pretend a GPU count without hardware.
        return int(os.environ["KUBETRAIN_GPUS"])
    if shutil.which("nvidia-smi") is None:
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))


def _memory_bytes() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float("inf")


@dataclass
class Capacity:
    cpu: float
    memory: float
    gpus: int

    @classmethod
    def of_machine(cls) -> Capacity:
        return cls(cpu=float(os.cpu_count() or 1), memory=_memory_bytes(), gpus=gpu_count())


def _fmt(resource: str, value: float) -> str:
    if resource == "memory":
        return f"{value / 2**30:.1f}Gi"
    return f"{value:g}"


def pod_requests(spec: dict[str, Any]) -> dict[str, float]:
    """Requests of one pod as the scheduler counts them: max(sum of containers, largest init container)."""

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
    return total


def missing_resources(required: dict[str, Any], capacity: Capacity) -> list[str]:
    """Human-readable shortfalls, e.g. ``cpu: requested 64, this machine has 2``; empty when it fits."""
    have = {"cpu": capacity.cpu, "memory": capacity.memory, GPU: float(capacity.gpus)}
    out = []
    for res, want in required.items():
        w = parse_quantity(want, f"PodGroup spec.minResources.{res}")
        if res in have and w > have[res]:
            out.append(f"{res}: requested {_fmt(res, w)}, this machine has {_fmt(res, have[res])}")
    return out


def find_podgroup(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    for o in objects:
        if o.get("kind") == "PodGroup":
            return o
    return None
