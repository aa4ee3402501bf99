"""POST a new object. ``Conflict.already_exists`` tells a create-once caller the work is already done."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client.resources import Resource, for_object
from kubetrain.k8s.client.session import ApiSession


async def create(
    session: ApiSession,
    obj: dict[str, Any],
    *,
    field_manager: str | None = None,
    resource: Resource | None = None,
) -> dict[str, Any]:
    res = resource or for_object(obj)
    ns = (obj.get("metadata") or {}).get("namespace") if res.namespaced else None
    params = {"fieldManager": field_manager} if field_manager else None
    return await session.request("POST", res.path(ns), params=params, body=obj)
