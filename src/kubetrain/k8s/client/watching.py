"""One watch request: a stream of ``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK`` events.

Resuming after a dropped connection and relisting after ``410 Gone`` is the informer's job; this module only
turns one HTTP response into events and raises :class:`Gone` when the server says the version is too old.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from kubetrain.k8s.client.errors import error_for
from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.session import ApiSession


@dataclass(frozen=True)
class WatchEvent:
    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


class WatchOptions(TypedDict, total=False):
    """A watch's options besides where it starts (``Client.watch`` takes the same)."""

    timeout_seconds: int
    """The server ends the watch after this long (default 300 s); callers watch again from the last version."""
    label_selector: str | None
    field_selector: str | None


async def watch(
    session: ApiSession,
    res: Resource,
    namespace: str | None = None,
    *,
    resource_version: str,
    **options: Unpack[WatchOptions],
) -> AsyncIterator[WatchEvent]:
    timeout_seconds = options.get("timeout_seconds", 300)
    label_selector, field_selector = options.get("label_selector"), options.get("field_selector")
    params = {
        "watch": "1",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(timeout_seconds),
    }
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    # sock_read a little above the server timeout: a silent half-open connection must not hang us forever.
    async with session.stream(res.path(namespace), params=params, timeout=timeout_seconds + 30) as resp:
        async for raw in resp.content:
            line = raw.strip()
            if not line:
                continue
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                raise error_for(int(obj.get("code") or 500), obj)
            if event.get("type") != "BOOKMARK":
                obj.setdefault("apiVersion", res.api_version)
                obj.setdefault("kind", res.kind)
            yield WatchEvent(event.get("type", ""), obj)
