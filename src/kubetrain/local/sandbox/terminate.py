"""Stopping pods like the kubelet: SIGTERM to the pod's processes, ``terminationGracePeriodSeconds`` to finish
(a checkpoint-on-SIGTERM handler gets its time), then SIGKILL.

A pod is an outer ``bwrap`` (our child) whose child is the pod's PID 1 (bubblewrap's init); the container's
processes live in that PID namespace. Signalling the outer process group would kill the outer ``bwrap`` first,
and with it (``--die-with-parent``) the whole namespace, before any handler could run. So SIGTERM goes to every
process *inside* the PID namespace except its init; once the main process has exited, init exits and the outer
``bwrap`` follows. After the grace period the outer process group gets SIGKILL, which takes the namespace down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

DEFAULT_GRACE = 30.0
_POLL = 0.02


def signal_until_gone(pid: int, alive: Callable[[], bool], steps: tuple[tuple[int, float], ...]) -> None:
    """Send each ``(signal, seconds)`` of ``steps`` in turn to ``pid`` and wait that long for ``alive()`` to turn
    false (a supervisor's or controller's stop: SIGTERM, again, then SIGKILL)."""
    for sig, wait in steps:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive():
                return
            time.sleep(0.05)


def kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def pod_processes(outer_pid: int) -> list[int]:
    """Host pids of the processes in the PID namespace under ``outer_pid`` (a pod's outer bwrap), except the
    namespace's init; empty when the container has not started (or has ended)."""
    inits = _children(outer_pid)
    if not inits:
        return []
    init = inits[0]
    try:
        ns = os.stat(f"/proc/{init}/ns/pid").st_ino
        mine = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return []
    if ns == mine:
        return []  # the sandbox has not unshared its PID namespace yet
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == init:
            continue
        try:
            if os.stat(f"/proc/{entry.name}/ns/pid").st_ino == ns:
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _signal_pod(outer_pid: int, sig: int) -> bool:
    pids = pod_processes(outer_pid)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return bool(pids)


def grace_of(pod_spec: dict[str, object]) -> float:
    value = pod_spec.get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE if value is None else max(0.0, float(str(value)))


def stop(
    procs: list[tuple[subprocess.Popen[bytes], float]],
    *,
    force: Callable[[], bool] | None = None,
) -> None:
    """Stop each process (a pod's outer bwrap) with its own grace period; returns when all have exited.
    ``force()`` turning true (a second Ctrl-C) cuts every remaining grace period short."""
    start = time.monotonic()
    live: list[tuple[subprocess.Popen[bytes], float]] = []
    for proc, grace in procs:
        if proc.poll() is not None:
            continue
        if grace > 0 and _signal_pod(proc.pid, signal.SIGTERM):
            live.append((proc, grace))
        else:
            # Grace 0, or the container has not started yet: nothing could handle SIGTERM.
            kill_group(proc.pid, signal.SIGKILL)
            live.append((proc, 0.0))
    killed: dict[int, float] = {}
    while live:
        forced = force() if force is not None else False
        now = time.monotonic()
        waiting = []
        for proc, grace in live:
            if proc.poll() is not None:
                continue
            if proc.pid not in killed and (forced or now - start >= grace):
                _signal_pod(proc.pid, signal.SIGKILL)
                kill_group(proc.pid, signal.SIGKILL)
                killed[proc.pid] = now
            if proc.pid in killed and now - killed[proc.pid] > 10:
                continue  # unkillable (e.g. stuck in the kernel): stop waiting for it
            waiting.append((proc, grace))
        live = waiting
        if live:
            time.sleep(_POLL)
    for proc, _ in procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
