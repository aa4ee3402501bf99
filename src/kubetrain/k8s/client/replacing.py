"""PUT a whole object; with ``metadata.resourceVersion`` set this is an optimistic-concurrency update."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client.resources import Resource, for_object
from kubetrain.k8s.client.session import ApiSession


async def replace(
    session: ApiSession,
    obj: dict[str, Any],
    *,
    field_manager: str | None = None,
    resource: Resource | None = None,
) -> dict[str, Any]:
    res = resource or for_object(obj)
    meta = obj.get("metadata") or {}
    params = {"fieldManager": field_manager} if field_manager else None
    path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"])
    return await session.request("PUT", path, params=params, body=obj)
