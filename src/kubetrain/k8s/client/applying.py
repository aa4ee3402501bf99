"""Server-side apply: ``PATCH`` with ``application/apply-patch+yaml`` under one field manager."""

from __future__ import annotations

import json
import re
from typing import Any

from kubetrain.k8s.client.resources import Resource, for_object
from kubetrain.k8s.client.session import ApiSession

APPLY_PATCH = "application/apply-patch+yaml"

# What the API server's YAML reader (go-yaml) refuses raw or changes: DEL, the C1 controls (a raw NEL becomes a
# space), U+FFFE/U+FFFF and lone surrogates. Inside a JSON string each is sent as a \uXXXX escape instead.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def yaml_safe_json(obj: Any) -> bytes:
    """``obj`` as JSON that the API server reads back unchanged as YAML: characters beyond the BMP (emoji in a
    script of a ConfigMap) as UTF-8, because go-yaml refuses the surrogate-pair escapes ``json.dumps`` writes for
    them by default (``found invalid Unicode character escape code``)."""
    text = json.dumps(obj, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


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

    JSON is valid YAML, so the body is sent as JSON under the apply-patch content type (``yaml_safe_json``).
    """
    res = resource or for_object(obj)
    meta = obj.get("metadata") or {}
    path = res.path(meta.get("namespace") if res.namespaced else None, meta["name"], subresource)
    params = {"fieldManager": field_manager, "force": "true" if force else "false"}
    return await session.request("PATCH", path, params=params, body=yaml_safe_json(obj), content_type=APPLY_PATCH)
