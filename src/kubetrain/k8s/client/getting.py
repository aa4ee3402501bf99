"""GET one object, LIST a collection (following ``continue`` tokens)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.session import ApiSession


async def get(
    session: ApiSession,
    res: Resource,
    name: str,
    namespace: str | None = None,
    *,
    subresource: str | None = None,
) -> dict[str, Any]:
    return await session.request("GET", res.path(namespace, name, subresource))


async def list_(
    session: ApiSession,
    res: Resource,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int = 500,
    transform: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """All items (pages joined) and the list's resourceVersion, from which a watch can continue.

    ``transform`` is applied to each item as its page arrives (None drops it), so a caller that keeps only part
    of each object never holds every full object of a large list at once.
    """
    items: list[dict[str, Any]] = []
    params: dict[str, str] = {"limit": str(limit)}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    while True:
        page = await session.request("GET", res.path(namespace), params=params)
        for item in page.get("items") or []:
            # List items omit apiVersion/kind; restore them so every object is self-describing.
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
            kept = transform(item) if transform is not None else item
            if kept is not None:
                items.append(kept)
        meta = page.get("metadata") or {}
        token = meta.get("continue")
        if not token:
            return items, str(meta.get("resourceVersion") or "")
        params["continue"] = token
