"""The fake's ``pods/{name}/log``: what a kubelet serves, with the parameters kubectl and kubetrain send.

Tests stand in for the container runtime: :meth:`PodLogs.write` appends text to a container's log (each piece
stamped with the time it was written, like a CRI log entry), :meth:`PodLogs.restart` ends the current instance
(its followers see the end of the stream, ``previous=true`` then reads it). Followers also end when the pod's
status says the container terminated, as the kubelet's do.

Parameters: ``container`` (required when the pod has several), ``follow``, ``previous``, ``tailLines``,
``sinceSeconds``, ``sinceTime``, ``timestamps``, ``limitBytes``. A container that has not started yet answers 400
``container "x" in pod "y" is waiting to start: <reason>``, as the real server does.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kubetrain.api.logtext import parse_rfc3339, rfc3339nano
from kubetrain.k8s.client.resources import Resource
from kubetrain.testing.fakeapi.store import Store, StoreError

Key = tuple[str, str, str]  # namespace, pod, container


@dataclass
class Instance:
    """One run of a container: its log entries ``(time, text)`` and whether it has ended."""

    entries: list[tuple[float, str]] = field(default_factory=list)
    ended: bool = False


class PodLogs:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.current: dict[Key, Instance] = {}
        self.previous: dict[Key, Instance] = {}
        self.following: dict[Key, int] = {}  # open ``follow=true`` streams per container
        self._changed = asyncio.Event()
        store.hooks.append(self._on_change)

    # -- the test's side (the container runtime) ------------------------------------------------------------
    def write(
        self, namespace: str, pod: str, text: str, *, container: str | None = None, at: float | None = None
    ) -> None:
        """Append ``text`` (any number of lines, maybe an unterminated one) to the container's current log."""
        name = container or self._default_container(namespace, pod, None)
        inst = self.current.setdefault((namespace, pod, name), Instance())
        when = time.time() if at is None else at
        # One entry per line (and one for an unterminated rest), as a CRI runtime records them.
        inst.entries += [(when, line) for line in text.splitlines(keepends=True)]
        self._notify()

    def restart(self, namespace: str, pod: str, *, container: str | None = None) -> None:
        """The container exited and the kubelet starts it again: the current log becomes ``previous``."""
        key = (namespace, pod, container or self._default_container(namespace, pod, None))
        inst = self.current.pop(key, Instance())
        inst.ended = True
        self.previous[key] = inst
        self.current[key] = Instance()
        self._notify()

    # -- helpers --------------------------------------------------------------------------------------------
    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _on_change(self, type_: str, res: Resource, obj: dict[str, Any]) -> None:
        if res.plural == "pods":
            self._notify()

    async def _wait(self, timeout: float) -> None:
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            pass

    def _pod(self, namespace: str, pod: str) -> dict[str, Any]:
        return self.store.get("", "pods", namespace, pod)

    def _default_container(self, namespace: str, pod: str, wanted: str | None) -> str:
        try:
            obj = self._pod(namespace, pod)
        except StoreError:
            if wanted:
                return wanted
            raise
        spec = obj.get("spec") or {}
        names = [str(c.get("name", "")) for c in spec.get("containers") or []]
        inits = [str(c.get("name", "")) for c in spec.get("initContainers") or []]
        if wanted:
            if wanted not in names + inits:
                raise StoreError(400, "BadRequest", f"container {wanted} is not valid for pod {pod}")
            return wanted
        if len(names) == 1:
            return names[0]
        raise StoreError(
            400,
            "BadRequest",
            f"a container name must be specified for pod {pod}, choose one of: [{' '.join(names)}]"
            + (f" or one of the init containers: [{' '.join(inits)}]" if inits else ""),
        )

    def _container_status(self, namespace: str, pod: str, container: str) -> dict[str, Any]:
        status = self._pod(namespace, pod).get("status") or {}
        for s in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
            if s.get("name") == container:
                return dict(s)
        return {}

    def _terminated(self, namespace: str, pod: str, container: str) -> bool:
        try:
            obj = self._pod(namespace, pod)
        except StoreError:
            return True  # a deleted pod's stream ends
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return True
        return "terminated" in (self._container_status(namespace, pod, container).get("state") or {})

    def _legacy(self, namespace: str, pod: str, container: str) -> None:
        # ``store.logs[(ns, pod)] = "text"``: the older, whole-text way tests set a pod's log.
        text = self.store.logs.pop((namespace, pod), None)
        if text is not None:
            entries = [(0.0, line) for line in text.splitlines(keepends=True)]
            inst = self.current.setdefault((namespace, pod, container), Instance())
            inst.entries[:0] = entries

    # -- the API --------------------------------------------------------------------------------------------
    async def serve(self, request: web.Request, namespace: str, pod: str) -> web.StreamResponse:
        q = request.query
        self._pod(namespace, pod)  # 404 for a missing pod
        container = self._default_container(namespace, pod, q.get("container"))
        self._legacy(namespace, pod, container)
        key = (namespace, pod, container)
        previous = q.get("previous") == "true"
        if previous:
            inst = self.previous.get(key)
            if inst is None:
                raise StoreError(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{pod}" not found'
                )
        else:
            state = self._container_status(namespace, pod, container).get("state") or {}
            if key not in self.current and not state.get("running") and not state.get("terminated"):
                reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
                raise StoreError(
                    400, "BadRequest", f'container "{container}" in pod "{pod}" is waiting to start: {reason}'
                )
            inst = self.current.setdefault(key, Instance())
        follow = q.get("follow") == "true" and not previous
        stamps = q.get("timestamps") == "true"
        since: float | None = None
        if q.get("sinceSeconds"):
            since = time.time() - float(q["sinceSeconds"])
        elif q.get("sinceTime"):
            since = parse_rfc3339(q["sinceTime"])
        limit = int(q["limitBytes"]) if q.get("limitBytes") else None
        start = self._start(inst, q.get("tailLines"), since)

        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        sent = 0
        at_line_start = True
        pos = start
        if follow:
            self.following[key] = self.following.get(key, 0) + 1
        try:
            while True:
                out: list[str] = []
                while pos < len(inst.entries):
                    ts, text = inst.entries[pos]
                    pos += 1
                    if since is not None and ts < since:
                        continue
                    if stamps:
                        text = _stamp(text, rfc3339nano(ts), at_line_start)
                    at_line_start = text.endswith("\n")
                    out.append(text)
                if out:
                    data = "".join(out).encode()
                    if limit is not None:
                        data = data[: max(0, limit - sent)]
                    sent += len(data)
                    await resp.write(data)
                if not follow or (limit is not None and sent >= limit):
                    break
                if inst.ended or self._terminated(namespace, pod, container):
                    if pos >= len(inst.entries):
                        break
                    continue
                await self._wait(1.0)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            if follow:
                self.following[key] -= 1
        return resp

    @staticmethod
    def _start(inst: Instance, tail: str | None, since: float | None) -> int:
        if tail is None or int(tail) < 0:
            return 0
        return max(0, len(inst.entries) - int(tail))


def _stamp(text: str, ts: str, at_line_start: bool) -> str:
    """``ts`` before an entry that starts a line, as the kubelet writes with ``timestamps=true``."""
    return f"{ts} {text}" if at_line_start else text
