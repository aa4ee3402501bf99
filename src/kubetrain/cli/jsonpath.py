"""The simple JSONPath subset kubectl users type for ``--sort-by`` and ``wait --for=jsonpath=``:
``{.metadata.creationTimestamp}``, ``.status.conditions[0].type``, ``.metadata.labels.team``."""

from __future__ import annotations

import re
from typing import Any

from kubetrain.api import KubetrainError

_TOKEN = re.compile(r"\.((?:[^.\[\]\\]|\\.)+)|\[(\d+)\]|\['([^']+)'\]")


def parse(expr: str, flag: str) -> list[str | int]:
    """``{.a.b[0]}`` -> ``["a", "b", 0]``; filters (``[?(...)]``) and wildcards are not supported."""
    text = expr.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text and not text.startswith((".", "[")):
        text = "." + text
    path: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise KubetrainError(
                f"{flag}: cannot read {expr!r} at {text[pos:]!r} (fix: a simple path such as "
                "'{.metadata.creationTimestamp}' or '.status.conditions[0].type'; filters and * are not supported)"
            )
        if m.group(1) is not None:
            path.append(m.group(1).replace("\\.", "."))
        elif m.group(2) is not None:
            path.append(int(m.group(2)))
        else:
            path.append(m.group(3))
        pos = m.end()
    if not path:
        raise KubetrainError(f"{flag}: empty path {expr!r} (fix: e.g. '{{.metadata.name}}')")
    return path


_MISSING = object()


def get(obj: Any, path: list[str | int]) -> Any:
    """The value at ``path``, or ``None`` when any step is missing."""
    cur = obj
    for step in path:
        if isinstance(step, int):
            if not isinstance(cur, list) or step >= len(cur):
                return None
            cur = cur[step]
        else:
            if not isinstance(cur, dict) or step not in cur:
                return None
            cur = cur[step]
    return cur


def sort_key(value: Any) -> tuple[int, Any]:
    """Missing values first (as kubectl), then numbers by value, then everything else as text."""
    if value is None:
        return (0, "")
    if isinstance(value, bool):
        return (2, str(value).lower())
    if isinstance(value, int | float):
        return (1, value)
    return (2, value if isinstance(value, str) else str(value))
