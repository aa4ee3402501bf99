"""Keeping a CLI's view of cluster objects current: list once, then watch (resume, relist on ``410 Gone``).

``Mirror`` is the CLI's small informer: one resource, one namespace (or all), a label/field selector sent to the
server and re-checked here (the in-memory test server ignores selectors on watches). ``watch_trainjobs`` feeds
``kubetrain get -w`` and ``kubetrain wait``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from kubetrain.api import TrainJob
from kubetrain.api import constants as c
from kubetrain.api.selectors import Selector
from kubetrain.api.views import StateView, WatchItem
from kubetrain.k8s.client import ApiError, Client, Gone
from kubetrain.k8s.client import resources as r

log = logging.getLogger("kubetrain.k8s.cli")

Key = tuple[str, str]
OnChange = Callable[[str, dict[str, Any]], None]


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Mirror:
    """The objects of one resource that match, kept current; ``on_change(type, obj)`` after each change."""

    def __init__(
        self,
        client: Client,
        res: r.Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        keep: Callable[[dict[str, Any]], bool] = lambda _o: True,
        on_change: OnChange | None = None,
    ) -> None:
        self.client, self.res, self.namespace = client, res, namespace
        self.label_selector, self.field_selector = label_selector, field_selector
        self.keep = keep
        self.on_change = on_change
        self.objects: dict[Key, dict[str, Any]] = {}
        self.rv = ""

    def _emit(self, type_: str, obj: dict[str, Any]) -> None:
        if self.on_change is not None:
            self.on_change(type_, obj)

    async def sync(self) -> None:
        """(Re)list; differences from what we had become ADDED/MODIFIED/DELETED changes."""
        items, self.rv = await self.client.list(
            self.res, self.namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )
        fresh = {key_of(o): o for o in items if self.keep(o)}
        for k, old in list(self.objects.items()):
            if k not in fresh:
                del self.objects[k]
                self._emit("DELETED", old)
        for k, obj in fresh.items():
            prev = self.objects.get(k)
            self.objects[k] = obj
            if prev is None:
                self._emit("ADDED", obj)
            elif (prev.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
                "resourceVersion"
            ):
                self._emit("MODIFIED", obj)

    async def run(self) -> None:
        """Watch forever (until cancelled). Transient errors back off and retry; others are raised."""
        delay = 0.5
        while True:
            try:
                async for ev in self.client.watch(
                    self.res,
                    self.namespace,
                    resource_version=self.rv,
                    timeout_seconds=300,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                ):
                    delay = 0.5
                    if ev.resource_version:
                        self.rv = ev.resource_version
                    if ev.type == "BOOKMARK":
                        continue
                    k = key_of(ev.object)
                    if ev.type == "DELETED" or not self.keep(ev.object):
                        if self.objects.pop(k, None) is not None:
                            self._emit("DELETED", ev.object)
                        continue
                    type_ = "MODIFIED" if k in self.objects else "ADDED"
                    self.objects[k] = ev.object
                    self._emit(type_, ev.object)
            except Gone:
                await self.sync()
            except ApiError as exc:
                if exc.status not in (0, 429, 500, 502, 503, 504):
                    raise
                log.debug("watch of %s interrupted (%s); retrying", self.res.plural, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                try:
                    await self.sync()
                except ApiError:
                    pass


def jobset_name_of(pod: dict[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(c.LABEL_JOBSET_NAME) or "")


async def watch_trainjobs(
    client: Client,
    namespace: str | None,
    *,
    names: list[str] | None,
    selector: Selector | None,
    parse: Callable[[dict[str, Any]], TrainJob],
    state_of: Callable[[TrainJob, list[dict[str, Any]]], StateView | Awaitable[StateView]],
    heartbeat: float = 0.5,
) -> AsyncIterator[WatchItem | None]:
    """TrainJobs (with their pods, for the state) as ADDED, then each change of a job or of its state."""
    changed: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
    wanted = set(names or [])

    def keep_job(obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if wanted and meta.get("name") not in wanted:
            return False
        return selector is None or selector.matches(meta.get("labels"))

    jobs = Mirror(
        client,
        r.TRAINJOB,
        namespace,
        label_selector=selector.text if selector is not None and selector.text else None,
        field_selector=f"metadata.name={names[0]}" if names and len(names) == 1 else None,
        keep=keep_job,
        on_change=lambda t, o: changed.put_nowait(("job", o) if t != "DELETED" else ("gone", o)),
    )
    pods = Mirror(
        client,
        r.POD,
        namespace,
        label_selector=c.LABEL_JOBSET_NAME,
        keep=lambda o: bool(jobset_name_of(o)) and (not wanted or jobset_name_of(o) in wanted),
        on_change=lambda _t, o: changed.put_nowait(("pod", o)),
    )
    await jobs.sync()
    await pods.sync()
    while not changed.empty():
        changed.get_nowait()  # the initial lists are reported below, once, as ADDED

    def pods_of(job_key: Key) -> list[dict[str, Any]]:
        return [p for p in pods.objects.values() if (key_of(p)[0], jobset_name_of(p)) == job_key]

    shown: dict[Key, tuple[str, StateView]] = {}

    async def item(type_: str, obj: dict[str, Any]) -> WatchItem | None:
        k = key_of(obj)
        tj = parse(obj)
        found = state_of(tj, pods_of(k))
        # Awaitable for a job whose state needs another read (a MultiKueue job's Workload).
        st = await found if inspect.isawaitable(found) else found
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if type_ != "DELETED" and shown.get(k) == (rv, st):
            return None
        if type_ == "DELETED":
            shown.pop(k, None)
        else:
            shown[k] = (rv, st)
        return WatchItem(type_, tj, st)

    for obj in sorted(jobs.objects.values(), key=key_of):
        added = await item("ADDED", obj)
        if added is not None:
            yield added
    yield None  # the initial list is complete (a UI shows it now rather than after the first quiet half second)
    tasks = [asyncio.ensure_future(jobs.run()), asyncio.ensure_future(pods.run())]
    try:
        while True:
            try:
                got = await asyncio.wait_for(_next(changed, tasks), heartbeat)
            except TimeoutError:
                yield None
                continue
            if got is None:
                continue
            kind, obj = got
            if kind == "gone":
                gone = await item("DELETED", obj)
                if gone is not None:
                    yield gone
                continue
            if kind == "pod":
                job = jobs.objects.get((key_of(obj)[0], jobset_name_of(obj)))
                if job is None:
                    continue
                obj = job
            out = await item("MODIFIED", obj)
            if out is not None:
                yield out
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _next(
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None], tasks: Sequence[asyncio.Future[None]]
) -> tuple[str, dict[str, Any]] | None:
    """The next change; a watch task that died with an error raises it here instead of hanging."""
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    return await queue.get()
