"""DELETE one object; dependents are left to the garbage collector (background propagation)."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client.errors import NotFound
from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.session import ApiSession


async def delete(
    session: ApiSession,
    res: Resource,
    name: str,
    namespace: str | None = None,
    *,
    propagation: str = "Background",
    missing_ok: bool = False,
) -> dict[str, Any] | None:
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
    try:
        return await session.request("DELETE", res.path(namespace, name), body=body)
    except NotFound:
        if missing_ok:
            return None
        raise
