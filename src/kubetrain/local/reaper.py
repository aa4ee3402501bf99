"""Reconcile TrainJobs whose supervisor died without recording an outcome (``kill -9``, OOM, reboot)."""

from __future__ import annotations

import logging
import signal
import time

from kubetrain.local import namespaces, pods, status
from kubetrain.local.store import PodRow, Store, TrainJobRow

log = logging.getLogger("kubetrain.local.reaper")


def supervisor_alive(row: TrainJobRow) -> bool:
    return pods.alive(row.supervisor_pid, row.supervisor_start)


def kill_pods(store: Store, row: TrainJobRow, message: str) -> None:
    """Stop every still-running process group of the TrainJob (identified by pid *and* start time)."""
    live = [p for p in store.list_pods(row.namespace, row.name) if pods.alive(p.pid, p.pid_start)]
    for p in live:
        assert p.pid is not None
        pods.kill_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while live and time.monotonic() < deadline:
        live = [p for p in live if pods.alive(p.pid, p.pid_start)]
        time.sleep(0.05)
    for p in live:
        assert p.pid is not None
        pods.kill_group(p.pid, signal.SIGKILL)
    for p in store.list_pods(row.namespace, row.name):
        if p.state in ("Running", "Pending"):
            store.put_pod(
                PodRow(
                    p.namespace,
                    p.trainjob,
                    p.name,
                    p.rjob,
                    "Failed",
                    p.pid,
                    None,
                    p.exit_code,
                    p.restarts,
                    message,
                    p.log,
                )
            )


def reap(store: Store) -> list[str]:
    """Returns ``namespace/name`` of each TrainJob it recorded as failed."""
    reaped = []
    for row in store.list_trainjobs(None):
        st = row.trainjob.get("status") or {}
        if status.finished(st) or supervisor_alive(row):
            continue
        who = f"pid {row.supervisor_pid}" if row.supervisor_pid else "not started"
        msg = (
            f"the local supervisor ({who}) exited without recording an outcome; kubetrain stopped the "
            "TrainJob's remaining processes"
        )
        kill_pods(store, row, "stopped: the supervisor was lost")
        namespaces.delete_netns(namespaces.netns_name(row.namespace, row.name, row.uid))
        status.fail(st, status.REASON_SUPERVISOR_LOST, msg)
        row.trainjob["status"] = st
        store.update_trainjob(row.namespace, row.name, row.trainjob)
        store.add_event(row.namespace, row.name, "Warning", status.REASON_SUPERVISOR_LOST, msg)
        store.set_supervisor(row.namespace, row.name, None, None)
        log.warning("reaped trainjob=%s/%s supervisor=%s", row.namespace, row.name, row.supervisor_pid)
        reaped.append(f"{row.namespace}/{row.name}")
    return reaped
