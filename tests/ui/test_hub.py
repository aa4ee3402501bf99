"""The list hub's bookkeeping: what a page rendered at a version must change (rows, deletions, rows that left its
selector), and the whole list again for a page too far behind."""

from __future__ import annotations

import asyncio
from typing import Any

from kubetrain.api import TrainJob
from kubetrain.api.selectors import parse
from kubetrain.api.views import StateView, WatchItem
from kubetrain.ui import hub as hub_module
from kubetrain.ui.hub import Hub


def _item(kind: str, name: str, state: str = "Running", **labels: str) -> WatchItem:
    tj = TrainJob.model_validate({
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default", "labels": labels,
                     "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    })
    return WatchItem(kind, tj, StateView(state))


def _hub() -> Hub:
    async def make() -> Hub:
        return Hub(backends=Any, namespace="default")  # type: ignore[arg-type]  # never started here

    return asyncio.run(make())


def test_changes_since_a_version() -> None:
    h = _hub()
    for name in ("a", "bb", "ccc"):
        h._apply(_item("ADDED", name, team="x"), ("default", name))
    h._initial_done({("default", n) for n in ("a", "bb", "ccc")})
    v = h.version
    assert h.changes(v, None).rows == [] and h.changes(v, None).deleted == []
    h._apply(_item("MODIFIED", "bb", "Complete", team="x"), ("default", "bb"))
    h._apply(_item("MODIFIED", "bb", "Complete", team="x"), ("default", "bb"))  # the same again: no change
    h._apply(_item("DELETED", "a"), ("default", "a"))
    h._apply(_item("MODIFIED", "ccc", team="y"), ("default", "ccc"))
    changed = h.changes(v, parse("team=x"))
    assert [r["name"] for r in changed.rows] == ["bb"] and changed.rows[0]["state"] == "Complete"
    assert sorted(changed.deleted) == [("default", "a"), ("default", "ccc")]  # ccc left the selector
    assert changed.version == v + 3 and not changed.reset
    assert h.changes(h.version, None).rows == []
    # A page from another incarnation of the server (a version it never had) gets everything.
    assert h.changes(h.version + 5, None).reset


def test_a_page_too_far_behind_gets_the_whole_list(monkeypatch: Any) -> None:
    monkeypatch.setattr(hub_module, "MAX_TOMBSTONES", 2)
    h = _hub()
    names = ["a", "bb", "ccc", "dddd"]
    for name in names:
        h._apply(_item("ADDED", name), ("default", name))
    h._initial_done({("default", n) for n in names})
    v = h.version
    for name in names[:3]:
        h._apply(_item("DELETED", name), ("default", name))
    late = h.changes(v, None)
    assert late.reset and [r["name"] for r in late.rows] == ["dddd"]
    assert not h.changes(h.version - 1, None).reset
