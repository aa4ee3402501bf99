"""Label selectors as kubectl's ``-l`` takes them: ``a=b,c!=d,e in (x,y),f notin (z),g,!h``.

Parsed here once so a bad selector gets the same error on both backends; the local backend matches with it, the
cluster backend sends the text to the API server after checking it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubetrain.api.errors import KubetrainError

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # = | != | in | notin | exists | !exists
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        return not has or value not in self.values  # != and notin match objects without the label too


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...]
    text: str

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def _split(text: str) -> list[str]:
    """Commas separate requirements except inside ``in (a,b)``."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse(text: str) -> Selector:
    """Raises ``KubetrainError`` naming the bad requirement and the accepted forms."""
    reqs: list[Requirement] = []
    for part in _split(text.strip()) if text.strip() else []:
        if m := _SET.match(part):
            values = tuple(v.strip() for v in m.group(4).split(",") if v.strip())
            if not values:
                raise _bad(text, part, "a set needs at least one value")
            reqs.append(Requirement(m.group(1), m.group(3), values))
        elif m := _CMP.match(part):
            op = "=" if m.group(3) in ("=", "==") else "!="
            reqs.append(Requirement(m.group(1), op, (m.group(4),)))
        elif m := _EXISTS.match(part):
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise _bad(text, part, "")
    return Selector(tuple(reqs), text.strip())


def _bad(text: str, part: str, why: str) -> KubetrainError:
    return KubetrainError(
        f"invalid label selector {text!r}: cannot parse {part.strip()!r}{': ' + why if why else ''} "
        "(fix: use key=value, key!=value, 'key in (a,b)', 'key notin (a,b)', key or !key, joined by commas)"
    )
