"""TrainJobs whose supervisor died without recording an outcome (``kill -9``, OOM, reboot).

Every reader checks the TrainJobs it reads (``get``, ``describe``, ``logs -f``, ``Client.wait``): a dead
supervisor is seen within one poll, and the TrainJob is recorded ``Failed``/``SupervisorLost`` exactly once
(the re-check runs inside a store transaction, so concurrent readers do not both record it). A TrainJob is never
without a live owner while its supervisor starts: it is created with the pid of the command that creates it,
which hands over to the supervisor only once that one runs (see ``LocalBackend._spawn_supervisor``).
"""

from __future__ import annotations

import logging
import os
import signal
import time

from kubetrain.local.sandbox import pods, terminate
from kubetrain.local.store import status
from kubetrain.local.store.db import PodRow, Store, TrainJobRow

log = logging.getLogger("kubetrain.local.reaper")


def supervisor_alive(row: TrainJobRow) -> bool:
    return pods.alive(row.supervisor_pid, row.supervisor_start)


def lost(row: TrainJobRow) -> bool:
    return not status.finished(row.trainjob.get("status") or {}) and not supervisor_alive(row)


def kill_pods(store: Store, row: TrainJobRow, message: str, grace: float = 5.0) -> None:
    """Stop every still-running process group of the TrainJob (identified by pid *and* start time)."""
    live = [p for p in store.list_pods(row.namespace, row.name) if pods.alive(p.pid, p.pid_start)]
    for p in live:
        assert p.pid is not None
        terminate.kill_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        live = [p for p in live if pods.alive(p.pid, p.pid_start)]
        time.sleep(0.05)
    for p in live:
        assert p.pid is not None
        terminate.kill_group(p.pid, signal.SIGKILL)
    store.put_pods(
        [
            PodRow(
                p.namespace, p.trainjob, p.name, p.rjob, "Failed", p.pid, None, p.exit_code, p.restarts, message, p.log
            )
            for p in store.list_pods(row.namespace, row.name)
            if p.state in ("Running", "Pending")
        ]
    )


def kill_sandboxes_of(uid: str) -> None:
    """SIGKILL every pod sandbox of the TrainJob ``uid`` still running, recorded or not.

    A sandbox's outer bwrap dies with the supervisor, but the init it forks binds its life to the outer one only
    some milliseconds later; a supervisor killed in between leaves that init (and the pod's command under it) with
    no parent and, if the pod was not yet recorded, with no pid anyone knows. Each sandbox carries the TrainJob's
    uid in its own environment (``pods.SANDBOX_ENV``), which is how they are found. Killing a sandbox's init ends
    every process of its PID namespace."""
    mark = f"{pods.SANDBOX_ENV}={uid}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            os.kill(int(entry), signal.SIGKILL)
        except OSError:
            continue  # gone, or another user's process


def check(store: Store, row: TrainJobRow) -> TrainJobRow:
    """``row``, recorded as failed first if its supervisor is gone; returns the current row."""
    if not lost(row):
        return row
    with store.transaction():
        fresh = store.get_trainjob(row.namespace, row.name)
        if fresh is None or fresh.uid != row.uid or not lost(fresh):
            return fresh or row
        who = f"pid {fresh.supervisor_pid}" if fresh.supervisor_pid else "none"
        msg = (
            f"the local supervisor ({who}) exited without recording an outcome (killed?); kubetrain stopped the "
            "TrainJob's remaining processes. Its logs stay readable: kubetrain logs " + fresh.name
        )
        st = fresh.trainjob.get("status") or {}
        status.fail(st, status.REASON_SUPERVISOR_LOST, msg)
        fresh.trainjob["status"] = st
        store.update_trainjob(fresh.namespace, fresh.name, fresh.trainjob)
        store.add_event(fresh.namespace, fresh.name, "Warning", status.REASON_SUPERVISOR_LOST, msg)
        store.set_supervisor(fresh.namespace, fresh.name, None, None)
        kill_pods(store, fresh, "stopped: the supervisor was lost", grace=0.0)
        kill_sandboxes_of(fresh.uid)
    log.info("recorded lost supervisor trainjob=%s/%s pid=%s", row.namespace, row.name, row.supervisor_pid)
    return store.get_trainjob(row.namespace, row.name) or fresh


def check_all(store: Store, rows: list[TrainJobRow]) -> list[TrainJobRow]:
    return [check(store, r) for r in rows]
