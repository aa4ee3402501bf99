"""The local ``watch_trainjobs`` reads only the TrainJobs whose row or pods changed since its last look
(``Store.change_marks``), yet reports every change a watch must: status, pods, deletion, a selector's view, and a
supervisor that died without writing anything (which moves no mark)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from kubetrain.api.views import WatchItem
from kubetrain.cli._backend import local_backend
from tests.ui.harness import StandInJob


def _until(items: Iterator[WatchItem | None], want: str, timeout: float = 30.0) -> list[WatchItem]:
    """Items up to the first whose ``type/name/state`` is ``want`` (the watch heartbeats every look)."""
    seen: list[WatchItem] = []
    deadline = time.monotonic() + timeout
    for item in items:
        if item is not None:
            seen.append(item)
            if f"{item.type}/{item.trainjob.name}/{item.state.state}" == want:
                return seen
        assert time.monotonic() < deadline, f"no {want} in {[(i.type, i.trainjob.name, i.state.state) for i in seen]}"
    raise AssertionError("the watch ended")


def test_changes_deletion_and_a_lost_supervisor() -> None:
    a, b = StandInJob("a"), StandInJob("b", labels={"team": "x"})
    backend = local_backend()
    watch = backend.watch_trainjobs("default")
    try:
        first = []
        for item in watch:
            if item is None:
                break  # the initial list is complete: one None right after it
            first.append((item.type, item.trainjob.name, item.state.state))
        assert first == [("ADDED", "a", "Running"), ("ADDED", "b", "Running")]
        a.report(50, loss=0.5)
        seen = _until(watch, "MODIFIED/a/Running")
        assert seen[-1].trainjob.status is not None and seen[-1].trainjob.status.trainer_status is not None
        a.complete()
        _until(watch, "MODIFIED/a/Complete")
        b.stop_supervisor()  # killed: nothing is written, the watch's own check finds it
        _until(watch, "MODIFIED/b/Failed")
        assert backend.get_trainjob("b", "default").status.conditions[-1].reason == "SupervisorLost"  # type: ignore[union-attr]
        backend.delete_trainjob("a", "default")
        _until(watch, "DELETED/a/Complete")
    finally:
        watch.close()
        a.close()
        b.close()


def test_a_selector_watch_reports_a_job_leaving_it() -> None:
    job = StandInJob("c", labels={"team": "x"})
    backend = local_backend()
    watch = backend.watch_trainjobs("default", selector="team=x")
    try:
        _until(watch, "ADDED/c/Running")
        wire = backend.get_trainjob("c", "default").to_wire()
        wire["metadata"]["labels"] = {"team": "y"}
        job.store.update_trainjob("default", "c", wire)
        _until(watch, "DELETED/c/Running")
    finally:
        watch.close()
        job.close()
