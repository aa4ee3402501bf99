"""What each local pod uses, read from ``/proc`` (pods are process trees, not cgroups): CPU in cores over the last
interval and memory in bytes (proportional set size, so libraries the workers share are not counted twice; the
resident size where ``smaps_rollup`` cannot be read).

This is what a cluster's metrics pipeline gives the HPA (cAdvisor through the metrics API), measured the way one
machine can: a pod's usage is that of every process in its tree at the moment of the sample.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Usage:
    cpu: float  # cores, averaged over the interval since the previous sample
    memory: float  # bytes


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, user+system ticks) of a process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[11]) + int(fields[12])


def _memory(pid: int) -> int:
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def process_tree() -> dict[int, list[int]]:
    """Every process's children, from one pass over ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        st = _stat(int(entry.name))
        if st is not None:
            children.setdefault(st[0], []).append(int(entry.name))
    return children


def descendants(roots: list[int], children: dict[int, list[int]]) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


@dataclass
class Sampler:
    """CPU needs two samples: the sampler keeps each process's ticks from the previous one."""

    _ticks: dict[int, int] = field(default_factory=dict)
    _at: float | None = None

    def sample(self, pods: dict[str, list[int]], now: float) -> dict[str, Usage]:
        """Usage per pod (``pods``: pod -> its containers' root pids). The first sample of a pod has no CPU
        interval yet: the pod is left out until the next one (as the HPA ignores pods without a full sample)."""
        children = process_tree()
        ticks: dict[int, int] = {}
        out: dict[str, Usage] = {}
        interval = None if self._at is None else now - self._at
        for pod, roots in pods.items():
            pids = descendants(roots, children)
            used, known, memory = 0, False, 0
            for pid in pids:
                st = _stat(pid)
                if st is None:
                    continue
                ticks[pid] = st[1]
                memory += _memory(pid)
                if pid in self._ticks:
                    known = True
                    used += max(0, st[1] - self._ticks[pid])
                else:
                    used += st[1]  # a process born since the last sample: all its time falls in the interval
            if interval and interval > 0 and known:
                out[pod] = Usage(cpu=used / _TICKS / interval, memory=float(memory))
        self._ticks, self._at = ticks, now
        return out
