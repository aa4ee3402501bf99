"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml`` under one field manager."""

from __future__ import annotations

import json
from typing import Any

from kubetrain.k8s.client.resources import Resource, for_object
from kubetrain.k8s.client.session import ApiSession

APPLY_PATCH = "application/apply-patch+yaml"


async def apply(
    session: ApiSession,
    obj: dict[str, Any],
    *,
    field_manager: str,
    force: bool = True,
    resource: Resource | None = None,
    subresource: str | None = None,
) -> dict[str, Any]:
    """Apply ``obj`` as this manager's full intent (fields it stops sending are released).

    Returns the live object.

    JSON is valid YAML, so the body is sent as JSON under the apply-patch content type.
    """
    res = resource or for_object(obj)
    meta = obj.get("metadata") or {}
    path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"], subresource)
    params = {"fieldManager": field_manager, "force": "true" if force else "false"}
    return await session.request("PATCH", path, params=params, body=json.dumps(obj).encode(), content_type=APPLY_PATCH)
