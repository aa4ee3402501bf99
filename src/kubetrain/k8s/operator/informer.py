"""List + watch one resource into a local cache, resuming by resourceVersion and relisting on 410 Gone.

Handlers get ``(event_type, obj, initial)``; ``initial`` is true for objects delivered by a (re)list rather
than a watch event, which the operator queues at low priority so that a relist never delays fresh work.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Callable
from typing import Any

from kubetrain.k8s.client import ApiError, Client, Gone, NotFound, Resource

log = logging.getLogger("kubetrain.operator.informer")

Key = tuple[str, str]
Handler = Callable[[str, dict[str, Any], bool], None]
Transform = Callable[[dict[str, Any]], dict[str, Any] | None]


def obj_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any] | None:
    # managedFields can be as large as the object itself and the operator never reads them.
    (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


_INTERN_MAX = 128


def compact(value: Any) -> Any:
    """``value`` with every key and short string shared with equal ones already in memory (``sys.intern``).

    Cached objects repeat the same strings thousands of times (apiVersion, kind, namespace, condition types,
    reasons and messages, the TrainJob's UID in each owner reference, timestamps of one busy second); each JSON
    document decodes them as new objects. Sharing them is a large part of keeping 10,000 TrainJobs, their
    JobSets and snapshots under the operator's memory target.
    """
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


class Informer:
    def __init__(
        self,
        client: Client,
        resource: Resource,
        *,
        namespace: str | None = None,
        transform: Transform = strip_managed_fields,
        watch_timeout: int = 300,
        missing_retry: float = 60.0,
        label_selector: str | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.transform = self._compacting(transform)
        self.watch_timeout = watch_timeout
        self.missing_retry = missing_retry
        self.store: dict[Key, dict[str, Any]] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.available = True
        """False while the server does not serve the resource (e.g. the PodGroup CRD is not installed)."""
        self.resource_version = ""
        self.relists = 0

    @staticmethod
    def _compacting(transform: Transform) -> Transform:
        def run(obj: dict[str, Any]) -> dict[str, Any] | None:
            kept = transform(obj)
            return compact(kept) if kept is not None else None

        return run

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.store.get((namespace or "", name))

    def remember(self, obj: dict[str, Any]) -> None:
        """Write-through after our own write, so the next reconcile does not act on a stale cache."""
        kept = self.transform(obj)
        if kept is not None:
            self.store[obj_key(kept)] = kept

    def forget(self, namespace: str | None, name: str) -> None:
        self.store.pop((namespace or "", name), None)

    def _notify(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        for handler in self.handlers:
            try:
                handler(type_, obj, initial)
            except Exception:  # a broken handler must not kill the watch loop
                log.exception("informer handler failed", extra={"resource": self.resource.plural})

    async def _relist(self) -> None:
        """Replace the cache with a fresh list.

        On the first list every object is ``initial``. On a relist (after 410 Gone) only unchanged objects
        are; objects that changed, appeared or vanished while we were not watching are reported as ordinary
        events, so their owners are reconciled at normal priority.
        """
        first = self.relists == 0
        # Transformed page by page: a relist of 10,000 JobSets must not hold them all in full at once.
        items, rv = await self.client.list(
            self.resource, self.namespace, label_selector=self.label_selector, transform=self.transform
        )
        fresh: dict[Key, dict[str, Any]] = {obj_key(kept): kept for kept in items}
        old = self.store
        gone = [old[k] for k in old.keys() - fresh.keys()]
        self.store = fresh
        self.resource_version = rv
        self.relists += 1
        for obj in gone:
            self._notify("DELETED", obj, first)
        for key, obj in fresh.items():
            before = old.get(key)
            same = before is not None and _rv(before) == _rv(obj)
            self._notify("ADDED" if before is None else "MODIFIED", obj, first or same)

    def _on_event(self, type_: str, obj: dict[str, Any]) -> None:
        if type_ == "BOOKMARK":
            return
        key = obj_key(obj)
        if type_ == "DELETED":
            old = self.store.pop(key, None)
            self._notify("DELETED", old or obj, False)
            return
        kept = self.transform(obj)
        if kept is None:
            if self.store.pop(key, None) is not None:  # no longer ours (e.g. ownerReference removed)
                self._notify("DELETED", obj, False)
            return
        self.store[key] = kept
        self._notify(type_, kept, False)

    async def run(self) -> None:
        """Run until cancelled. Never raises for API errors: it backs off and retries."""
        failures = 0
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    self.available = True
                    need_list = False
                    self.synced.set()
                async for event in self.client.watch(
                    self.resource,
                    self.namespace,
                    resource_version=self.resource_version,
                    timeout_seconds=self.watch_timeout,
                    label_selector=self.label_selector,
                ):
                    rv = event.resource_version
                    if rv:
                        self.resource_version = rv
                    self._on_event(event.type, event.object)
                failures = 0  # a clean server-side timeout: resume from the last version seen
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("watch expired; relisting", extra={"resource": self.resource.plural})
                need_list = True
            except NotFound:
                # The CRD is not installed (yet); report synced-but-unavailable and look again later.
                if self.available:
                    log.warning("resource not served by the API server", extra={"resource": self.resource.plural})
                self.available = False
                self.synced.set()
                need_list = True
                await asyncio.sleep(self.missing_retry)
            except (ApiError, OSError, ValueError) as exc:
                failures += 1
                delay = min(30.0, 0.5 * 2 ** min(failures, 6)) * (0.5 + random.random() / 2)
                log.warning(
                    "watch failed (%s); retrying in %.1fs",
                    exc,
                    delay,
                    extra={"resource": self.resource.plural},
                )
                await asyncio.sleep(delay)
            except Exception as exc:  # aiohttp payload errors and the like: same recovery as above
                failures += 1
                log.warning("watch stream broke (%r); resuming", exc, extra={"resource": self.resource.plural})
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
