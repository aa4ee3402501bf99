"""Label selectors as the API server parses them (equality and set-based, comma-separated)."""

from __future__ import annotations

import re
from collections.abc import Callable

Matcher = Callable[[dict[str, str]], bool]

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")


def _split(selector: str) -> list[str]:
    # Commas inside "in (a, b)" do not separate requirements.
    parts, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _one(req: str) -> Matcher:
    if m := _SET.match(req):
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in req:
            key, value = (s.strip() for s in req.split(op, 1))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if req.startswith("!"):
        key = req[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: req in labels


def parse(selector: str | None) -> Matcher:
    matchers = [_one(r) for r in _split(selector or "")]
    return lambda labels: all(m(labels) for m in matchers)
