"""JSON merge patches: status updates (as upstream: a merge patch on ``/status``) and small metadata edits."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.session import ApiSession

MERGE_PATCH = "application/merge-patch+json"


async def merge_patch(
    session: ApiSession,
    res: Resource,
    name: str,
    namespace: str | None,
    patch: dict[str, Any],
    *,
    subresource: str | None = None,
    field_manager: str | None = None,
) -> dict[str, Any]:
    params = {"fieldManager": field_manager} if field_manager else None
    return await session.request(
        "PATCH", res.path(namespace, name, subresource), params=params, body=patch, content_type=MERGE_PATCH
    )

