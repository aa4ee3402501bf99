"""The fake API server's state: objects, resourceVersions, the watch event log, field owners and GC.

Synchronous and single-threaded (it runs on the server's event loop), so every operation is atomic, like one
etcd transaction.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import datetime as dt
import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.api.selectors import parse_fields
from kubetrain.k8s.client.resources import Resource
from kubetrain.testing.fakeapi import ssa

Key = tuple[str, str]  # (namespace or "", name)
FOREGROUND = "foregroundDeletion"
Hook = Callable[[str, Resource, dict[str, Any]], None]


class StoreError(Exception):
    """Becomes a ``Status`` response: ``code`` and ``reason`` as the real server would send them."""

    def __init__(self, code: int, reason: str, message: str):
        self.code, self.reason, self.message = code, reason, message
        super().__init__(message)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Table:
    """All objects of one resource, plus the bounded event history watches resume from."""

    resource: Resource
    has_status: bool
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    owners: dict[Key, ssa.Owners] = field(default_factory=dict)
    history: deque[tuple[int, str, dict[str, Any]]] = field(default_factory=lambda: deque(maxlen=50_000))
    compacted_rv: int = 0
    watchers: list[tuple[str | None, asyncio.Queue[tuple[int, str, dict[str, Any]] | None]]] = field(
        default_factory=list
    )
    held: list[tuple[int, str, dict[str, Any]]] | None = None
    """Events not yet sent to open watches (``hold_watches``): a watcher that lags behind the store."""


class Store:
    def __init__(self, resources: list[tuple[Resource, bool]], history: int = 50_000) -> None:
        self.tables = {(r.group, r.plural): Table(r, has_status) for r, has_status in resources}
        for t in self.tables.values():
            t.history = deque(maxlen=history)
        self._rv = itertools.count(1)
        self.rv = 0
        self.hooks: list[Hook] = []
        """``hook(event_type, resource, object)`` after every change (benchmarks time JobSets here)."""
        self.created_at: dict[tuple[str, str, str, str], float] = {}
        self.logs: dict[Key, str] = {}

    # -- helpers -------------------------------------------------------------------------------------------
    def table(self, group: str, plural: str) -> Table:
        try:
            return self.tables[(group, plural)]
        except KeyError:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({plural})") from None

    def _next_rv(self) -> int:
        self.rv = next(self._rv)
        return self.rv

    def _emit(self, table: Table, type_: str, obj: dict[str, Any], rv: int) -> None:
        snapshot = copy.deepcopy(obj)
        table.history.append((rv, type_, snapshot))
        if table.held is not None:
            table.held.append((rv, type_, snapshot))
        else:
            self._send(table, (rv, type_, snapshot))
        for hook in self.hooks:
            hook(type_, table.resource, snapshot)

    @staticmethod
    def _send(table: Table, event: tuple[int, str, dict[str, Any]]) -> None:
        ns = event[2]["metadata"].get("namespace")
        for want_ns, queue in table.watchers:
            if want_ns is None or want_ns == ns:
                queue.put_nowait(event)

    def _commit(self, table: Table, key: Key, obj: dict[str, Any], type_: str) -> dict[str, Any]:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        owners = table.owners.get(key, {})
        obj["metadata"]["managedFields"] = ssa.managed_fields(owners, table.resource.api_version, _now())
        table.objects[key] = obj
        self._emit(table, type_, obj, rv)
        return copy.deepcopy(obj)

    def _key(self, table: Table, namespace: str | None, name: str) -> Key:
        return (namespace or "" if table.resource.namespaced else "", name)

    def _existing(self, table: Table, key: Key) -> dict[str, Any]:
        obj = table.objects.get(key)
        if obj is None:
            what = f"{table.resource.plural}.{table.resource.group}" if table.resource.group else table.resource.plural
            raise StoreError(404, "NotFound", f'{what} "{key[1]}" not found')
        return obj

    @staticmethod
    def _check_rv(obj: dict[str, Any], live: dict[str, Any]) -> None:
        want = (obj.get("metadata") or {}).get("resourceVersion")
        if want and want != live["metadata"]["resourceVersion"]:
            raise StoreError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {live.get("kind")} "{live["metadata"]["name"]}": '
                "the object has been modified; please apply your changes to the latest version and try again",
            )

    @staticmethod
    def _spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
        skip = {"metadata", "status", "apiVersion", "kind"}
        return {k: v for k, v in old.items() if k not in skip} != {k: v for k, v in new.items() if k not in skip}

    def _finish(self, table: Table, old: dict[str, Any] | None, new: dict[str, Any], subresource: str | None) -> None:
        """Status-subresource rules: the main resource cannot change status; ``/status`` only status."""
        if table.has_status and old is not None:
            if subresource == "status":
                kept = {k: v for k, v in old.items() if k != "status"}
                status = new.get("status")
                new.clear()
                new.update(copy.deepcopy(kept))
                if status is not None:
                    new["status"] = status
            elif "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        if old is not None:
            for k in ("uid", "creationTimestamp", "namespace", "name"):
                meta[k] = old["metadata"].get(k)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):  # set by DELETE only, never undone
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                else:
                    meta.pop(k, None)
            meta["generation"] = old["metadata"].get("generation", 1) + (1 if self._spec_changed(old, new) else 0)

    # -- verbs ---------------------------------------------------------------------------------------------
    def get(self, group: str, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        table = self.table(group, plural)
        return copy.deepcopy(self._existing(table, self._key(table, namespace, name)))

    def list(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[builtins.list[dict[str, Any]], int]:
        table = self.table(group, plural)
        try:
            selector = parse_selector(label_selector or "")
        except KubetrainError as exc:  # the real server refuses a selector it cannot parse
            raise StoreError(400, "BadRequest", f"unable to parse requirement: {exc}") from None
        try:
            # the fields the real server lets this kind be selected by; others are a 400 there too
            fields = parse_fields(field_selector or "", table.resource.kind, plural)
        except KubetrainError as exc:
            raise StoreError(400, "BadRequest", str(exc)) from None
        items = [
            copy.deepcopy(obj)
            for key, obj in sorted(table.objects.items())
            if (namespace is None or key[0] == namespace)
            and selector.matches(obj["metadata"].get("labels"))
            and fields.matches(obj)
        ]
        return items, self.rv

    def create(
        self, group: str, plural: str, namespace: str | None, obj: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        table = self.table(group, plural)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise StoreError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        if table.resource.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        key = self._key(table, meta.get("namespace"), meta["name"])
        if key in table.objects:
            raise StoreError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        obj.setdefault("apiVersion", table.resource.api_version)
        obj.setdefault("kind", table.resource.kind)
        if table.has_status:
            obj.pop("status", None)  # status is written only through /status
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        meta.pop("resourceVersion", None)
        table.owners[key] = {}
        ssa.record_update(None, obj, table.owners[key], manager)
        self.created_at[(group, plural, key[0], key[1])] = time.monotonic()
        return self._commit(table, key, obj, "ADDED")

    def replace(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        name: str,
        obj: dict[str, Any],
        manager: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self._update(group, plural, namespace, name, obj, manager, subresource, lambda live: copy.deepcopy(obj))

    def merge_patch(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        manager: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        def patched(live: dict[str, Any]) -> dict[str, Any]:
            new = copy.deepcopy(live)
            _merge_patch(new, patch)
            return new

        return self._update(group, plural, namespace, name, patch, manager, subresource, patched)

    def _update(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        name: str,
        request: dict[str, Any],
        manager: str,
        subresource: str | None,
        make: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """An update (PUT or merge patch): ``request``'s resourceVersion checked, ``make(live)`` stored."""
        table = self.table(group, plural)
        key = self._key(table, namespace, name)
        live = self._existing(table, key)
        self._check_rv(request, live)
        new = make(live)
        self._finish(table, live, new, subresource)
        ssa.record_update(live, new, table.owners.setdefault(key, {}), manager)
        return self._updated(table, key, new)

    def apply(
        self,
        group: str,
        plural: str,
        namespace: str | None,
        name: str,
        applied: dict[str, Any],
        manager: str,
        force: bool,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        table = self.table(group, plural)
        key = self._key(table, namespace, name)
        if (applied.get("metadata") or {}).get("name", name) != name:
            raise StoreError(400, "BadRequest", "the name of the object does not match the name on the URL")
        live = table.objects.get(key)
        if live is None:
            obj = copy.deepcopy(applied)
            obj.setdefault("metadata", {})["name"] = name
            created = self.create(group, plural, namespace, {**obj, "metadata": {**obj["metadata"]}}, manager)
            table.owners[key] = {}
            ssa.apply(None, applied, table.owners[key], manager, force=True)
            table.objects[key]["metadata"]["managedFields"] = ssa.managed_fields(
                table.owners[key], table.resource.api_version, _now()
            )
            created["metadata"]["managedFields"] = table.objects[key]["metadata"]["managedFields"]
            return created
        if table.has_status:
            applied = {k: v for k, v in applied.items() if (k == "status") == (subresource == "status")} | {
                "metadata": applied.get("metadata") or {}
            }
        owners = table.owners.setdefault(key, {})
        try:
            new = ssa.apply(live, applied, owners, manager, force=force)
        except ssa.ApplyConflict as exc:
            raise StoreError(409, "Conflict", str(exc)) from None
        self._finish(table, live, new, subresource)
        if new == {**live, "metadata": {**live["metadata"], "generation": new["metadata"].get("generation")}}:
            return copy.deepcopy(live)  # a no-op apply does not bump the resourceVersion, as on a real server
        return self._updated(table, key, new)

    def _updated(self, table: Table, key: Key, new: dict[str, Any]) -> dict[str, Any]:
        """Commit an update; a terminating object whose last finalizer it removed is gone afterwards."""
        out = self._commit(table, key, new, "MODIFIED")
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            self._remove(table, key)
        return out

    def delete(
        self, group: str, plural: str, namespace: str | None, name: str, propagation: str = "Background"
    ) -> dict[str, Any]:
        """DELETE: gone at once without finalizers; otherwise marked (``deletionTimestamp``) until the last
        finalizer is removed. ``Foreground`` adds ``foregroundDeletion``: the dependents are deleted first and
        the owner goes once none is left, as the garbage collector does it."""
        table = self.table(group, plural)
        key = self._key(table, namespace, name)
        live = self._existing(table, key)
        meta = live["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Foreground" and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if not finalizers:
            return self._remove(table, key)
        out = copy.deepcopy(live)
        if not meta.get("deletionTimestamp") or finalizers != meta.get("finalizers"):
            new = copy.deepcopy(live)
            new["metadata"]["finalizers"] = finalizers
            new["metadata"].setdefault("deletionTimestamp", _now())
            new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            out = self._commit(table, key, new, "MODIFIED")
        if FOREGROUND in finalizers:
            self._delete_dependents(meta["uid"])
            self._release_foreground()
        return out

    def _remove(self, table: Table, key: Key) -> dict[str, Any]:
        live = table.objects.pop(key)
        table.owners.pop(key, None)
        rv = self._next_rv()
        live["metadata"]["resourceVersion"] = str(rv)
        self._emit(table, "DELETED", live, rv)
        self._collect(live["metadata"]["uid"])
        self._release_foreground()
        return copy.deepcopy(live)

    def _dependents(self, owner_uid: str) -> builtins.list[tuple[Table, Key, dict[str, Any]]]:
        return [
            (table, key, obj)
            for table in self.tables.values()
            for key, obj in list(table.objects.items())
            if any(r.get("uid") == owner_uid for r in obj["metadata"].get("ownerReferences") or [])
        ]

    def _delete_dependents(self, owner_uid: str) -> None:
        """The dependents of an owner deleted in the foreground: those with dependents of their own in the
        foreground too (the GC propagates it down), the rest in the background."""
        for table, key, obj in self._dependents(owner_uid):
            if key not in table.objects or obj["metadata"].get("deletionTimestamp"):
                continue
            policy = "Foreground" if self._dependents(obj["metadata"]["uid"]) else "Background"
            self.delete(table.resource.group, table.resource.plural, key[0] or None, key[1], policy)

    def _release_foreground(self) -> None:
        """Owners waiting in ``foregroundDeletion`` whose dependents are all gone lose that finalizer (and go,
        when it was the last)."""
        for table in self.tables.values():
            for key, obj in list(table.objects.items()):
                meta = obj["metadata"]
                if key not in table.objects or FOREGROUND not in (meta.get("finalizers") or []):
                    continue
                if meta.get("deletionTimestamp") and not self._dependents(meta["uid"]):
                    new = copy.deepcopy(obj)
                    new["metadata"]["finalizers"] = [f for f in meta["finalizers"] if f != FOREGROUND]
                    self._updated(table, key, new)

    def _collect(self, owner_uid: str) -> None:
        """Background-propagation GC: dependents whose last owner is gone are deleted (recursively)."""
        for table, key, obj in self._dependents(owner_uid):
            if key not in table.objects:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            remaining = [r for r in refs if r.get("uid") != owner_uid]
            if remaining:
                obj["metadata"]["ownerReferences"] = remaining
                self._commit(table, key, obj, "MODIFIED")
            elif not obj["metadata"].get("deletionTimestamp"):
                self.delete(table.resource.group, table.resource.plural, key[0] or None, key[1])

    # -- watch ---------------------------------------------------------------------------------------------
    def subscribe(
        self, group: str, plural: str, namespace: str | None, since: int | None
    ) -> tuple[builtins.list[tuple[int, str, dict[str, Any]]], asyncio.Queue[tuple[int, str, dict[str, Any]] | None]]:
        """Backlog after ``since`` (``None``: synthetic ADDED for all objects) and a queue of later events."""
        table = self.table(group, plural)
        if since is None:
            backlog = [
                (int(o["metadata"]["resourceVersion"]), "ADDED", copy.deepcopy(o))
                for k, o in sorted(table.objects.items())
                if namespace is None or k[0] == namespace
            ]
        else:
            oldest = table.history[0][0] if table.history else self.rv + 1
            if since < table.compacted_rv or (table.history.maxlen == len(table.history) and since < oldest - 1):
                raise StoreError(410, "Expired", f"too old resource version: {since} ({table.compacted_rv})")
            backlog = [
                e
                for e in table.history
                if e[0] > since and (namespace is None or e[2]["metadata"].get("namespace") == namespace)
            ]
        queue: asyncio.Queue[tuple[int, str, dict[str, Any]] | None] = asyncio.Queue()
        table.watchers.append((namespace, queue))
        return backlog, queue

    def unsubscribe(self, group: str, plural: str, queue: asyncio.Queue[Any]) -> None:
        table = self.table(group, plural)
        table.watchers = [w for w in table.watchers if w[1] is not queue]

    def _selected(self, plural: str | None) -> builtins.list[Table]:
        return [t for t in self.tables.values() if plural is None or t.resource.plural == plural]

    def compact(self, plural: str | None = None) -> None:
        """Forget the event history (of one resource, or all): watches resuming from before get 410 Gone."""
        for table in self._selected(plural):
            table.history.clear()
            table.compacted_rv = self.rv

    def hold_watches(self, plural: str) -> None:
        """Stop sending ``plural``'s events to open watches until ``release_watches``: the API server's watch
        cache lagging behind, so a client's cache of that kind is stale while its other kinds are current."""
        for table in self._selected(plural):
            table.held = []

    def release_watches(self, plural: str) -> None:
        for table in self._selected(plural):
            held, table.held = table.held or [], None
            for event in held:
                self._send(table, event)

    def held_from(self, group: str, plural: str) -> int | None:
        """The resourceVersion of the first event held back (a bookmark must not pass it)."""
        held = self.table(group, plural).held
        return held[0][0] if held else None

    def drop_watches(self, plural: str | None = None) -> None:
        """End open watch streams (as an API server restart or a load balancer timeout would)."""
        for table in self._selected(plural):
            for _, queue in table.watchers:
                queue.put_nowait(None)


def _merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
