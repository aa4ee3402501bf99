"""The TrainJobs list, kept current by one watch per namespace scope and shared by every open list page.

A hub holds the rows of its scope (a namespace, or all of them) with a version number that grows with every
change; a page is rendered from the rows at once and then asks for what changed after the version it was rendered
at, so a browser is sent each change once and never the whole list again (unless it fell too far behind). The
watch is the backend's ``watch_trainjobs``: a list then a watch on a cluster, a look at the store four times a
second locally (which reads only the TrainJobs that changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.selectors import Selector
from kubetrain.api.views import WatchItem
from kubetrain.ui.bridge import Backends
from kubetrain.ui.errors import UiError, from_exception
from kubetrain.ui.present import Key, trainjob_row

log = logging.getLogger("kubetrain.ui")

MAX_TOMBSTONES = 10_000
"""Deletions remembered for pages that come back after a while; older pages get the whole list again."""
IDLE_SECONDS = 300.0
"""A scope nobody has looked at for this long stops watching (the default scope never does)."""


@dataclass
class Changes:
    version: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[Key] = field(default_factory=list)
    reset: bool = False
    error: UiError | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "rows": self.rows, "deleted": [list(k) for k in self.deleted]}
        if self.reset:
            out["reset"] = True
        error = self.error
        out["error"] = {"status": error.status, "message": error.message, "fix": error.fix} if error else None
        return out


class Hub:
    """The rows of one scope; ``namespace`` None is every namespace."""

    def __init__(self, backends: Backends, namespace: str | None, *, keep: bool = False) -> None:
        self.backends, self.namespace, self.keep = backends, namespace, keep
        self.rows: dict[Key, dict[str, Any]] = {}
        self.row_versions: dict[Key, int] = {}
        self.tombstones: dict[Key, int] = {}
        self.horizon = 0  # changes at or before this version may have been forgotten (tombstones dropped)
        self.version = 0
        self.error: UiError | None = None
        self.ready = asyncio.Event()
        self.used = time.monotonic()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def idle(self) -> bool:
        return not self.keep and time.monotonic() - self.used > IDLE_SECONDS

    async def _run(self) -> None:
        delay = 1.0
        while True:
            stream = self.backends.stream(
                lambda b: b.watch_trainjobs(self.namespace), name=f"watch-{self.namespace or 'all'}"
            )
            initial: set[Key] | None = set()
            try:
                async for item in stream:
                    if item is None:
                        if initial is not None:
                            self._initial_done(initial)
                            initial = None
                            delay = 1.0
                        continue
                    key = (item.trainjob.namespace, item.trainjob.name)
                    if initial is not None:
                        initial.add(key)
                    self._apply(item, key)
                raise UiError(502, "the watch of TrainJobs ended unexpectedly")
            except asyncio.CancelledError:
                stream.close()
                raise
            except Exception as exc:  # shown on every list page of the scope until the watch works again
                stream.close()
                error = from_exception(exc)
                log.warning("trainjob watch failed scope=%s status=%s error=%s", self.namespace or "*", error.status,
                            error.message)
                self._set_error(error)
                await asyncio.sleep(delay)
                delay = min(30.0, delay * 2)

    def _apply(self, item: WatchItem, key: Key) -> None:
        if item.type == "DELETED":
            if self.rows.pop(key, None) is not None:
                self.row_versions.pop(key, None)
                self._bump()
                self.tombstones[key] = self.version
                self._trim()
            return
        row = trainjob_row(item.trainjob, item.state)
        if self.rows.get(key) == row:
            return
        self._bump()
        self.rows[key] = row
        self.row_versions[key] = self.version
        self.tombstones.pop(key, None)

    def _initial_done(self, seen: set[Key]) -> None:
        # After a (re)start of the watch, rows it no longer lists were deleted meanwhile.
        for key in [k for k in self.rows if k not in seen]:
            self.rows.pop(key)
            self.row_versions.pop(key, None)
            self._bump()
            self.tombstones[key] = self.version
        self._trim()
        if self.error is not None:
            self.error = None
            self._bump()
        self.ready.set()
        self._notify()

    def _set_error(self, error: UiError) -> None:
        self.error = error
        self._bump()
        self.ready.set()  # a page shows the error instead of waiting forever

    def _trim(self) -> None:
        if len(self.tombstones) > MAX_TOMBSTONES:
            drop = sorted(self.tombstones.items(), key=lambda kv: kv[1])[: len(self.tombstones) - MAX_TOMBSTONES]
            for key, version in drop:
                del self.tombstones[key]
                self.horizon = max(self.horizon, version)

    def _bump(self) -> None:
        self.version += 1
        self._notify()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, after: int, timeout: float) -> None:
        """Return once the version is past ``after`` (or after ``timeout`` seconds)."""
        self.used = time.monotonic()
        if self.version > after:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def snapshot(self, selector: Selector | None) -> list[dict[str, Any]]:
        """The rows that match ``selector``, newest first (then by namespace and name)."""
        self.used = time.monotonic()
        rows = [r for r in self.rows.values() if selector is None or selector.matches(r["labels"])]
        rows.sort(key=lambda r: (r["namespace"], r["name"]))
        rows.sort(key=lambda r: r["created"] or "", reverse=True)
        return rows

    def changes(self, since: int, selector: Selector | None) -> Changes:
        """What a page rendered at version ``since`` must change to show the current rows."""
        self.used = time.monotonic()
        if since < self.horizon or since > self.version:
            return Changes(self.version, self.snapshot(selector), reset=True, error=self.error)
        out = Changes(self.version, error=self.error)
        for key, version in self.row_versions.items():
            if version > since:
                row = self.rows[key]
                if selector is None or selector.matches(row["labels"]):
                    out.rows.append(row)
                else:
                    out.deleted.append(key)  # its labels changed: it no longer belongs on that page
        out.deleted += [key for key, version in self.tombstones.items() if version > since]
        return out


class Hubs:
    """One hub per scope, made when a page first asks for it; idle ones stop."""

    def __init__(self, backends: Backends) -> None:
        self.backends = backends
        self._hubs: dict[str | None, Hub] = {}

    def get(self, namespace: str | None, *, keep: bool = False) -> Hub:
        hub = self._hubs.get(namespace)
        if hub is None:
            hub = self._hubs[namespace] = Hub(self.backends, namespace, keep=keep)
            hub.start()
        return hub

    async def sweep(self) -> None:
        for scope, hub in list(self._hubs.items()):
            if hub.idle:
                del self._hubs[scope]
                await hub.stop()

    async def close(self) -> None:
        for hub in list(self._hubs.values()):
            await hub.stop()
        self._hubs.clear()
