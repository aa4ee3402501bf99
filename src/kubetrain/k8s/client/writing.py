"""Writing a whole object: POST a new one (``create``), PUT over the stored one (``replace``; with
``metadata.resourceVersion`` set this is an optimistic-concurrency update). ``Conflict.already_exists`` tells a
create-once caller the work is already done."""

from __future__ import annotations

from typing import Any, Literal

from kubetrain.k8s.client.resources import Resource, for_object
from kubetrain.k8s.client.session import ApiSession


async def create(
    session: ApiSession, obj: dict[str, Any], *, field_manager: str | None = None, resource: Resource | None = None
) -> dict[str, Any]:
    return await _write(session, "POST", obj, field_manager, resource)


async def replace(
    session: ApiSession, obj: dict[str, Any], *, field_manager: str | None = None, resource: Resource | None = None
) -> dict[str, Any]:
    return await _write(session, "PUT", obj, field_manager, resource)


async def _write(
    session: ApiSession,
    method: Literal["POST", "PUT"],
    obj: dict[str, Any],
    field_manager: str | None,
    resource: Resource | None,
) -> dict[str, Any]:
    res = resource or for_object(obj)
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") if res.namespaced else None
    path = res.path(ns) if method == "POST" else res.path(ns, meta["name"])  # POST goes to the collection
    params = {"fieldManager": field_manager} if field_manager else None
    return await session.request(method, path, params=params, body=obj)
