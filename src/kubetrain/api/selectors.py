"""Label selectors as kubectl's ``-l`` takes them (``a=b,c!=d,e in (x,y),f notin (z),g,!h``), and field
selectors as its ``--field-selector`` does (``status.phase=Running,metadata.name!=x``).

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


def _split(text: str, *, escapes: bool = False) -> list[str]:
    """Commas separate terms, except inside ``in (a,b)`` (label selectors) or after a backslash (``escapes``:
    field selectors, where ``a=x\\,y`` is one term; the backslash stays for ``_unescape``)."""
    parts, depth, cur, escaped = [], 0, "", False
    for ch in text:
        if escaped:
            escaped = False
        elif escapes and ch == "\\":
            escaped = True
        elif not escapes and ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
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


# Field selectors (``--field-selector``): the fields the API server lets each kind be selected by; every kind has
# metadata.name and metadata.namespace (custom resources have only those).
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
SELECTABLE_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        *_COMMON_FIELDS,
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Event": (
        *_COMMON_FIELDS,
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Secret": (*_COMMON_FIELDS, "type"),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # = | !=
    value: str

    def matches(self, obj: Mapping[str, object]) -> bool:
        return (field_value(obj, self.field) == self.value) == (self.op == "=")


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...]
    text: str

    def matches(self, obj: Mapping[str, object]) -> bool:
        return all(r.matches(obj) for r in self.requirements)


def field_value(obj: Mapping[str, object], path: str) -> str:
    """The text the API server compares a field selector with (``false`` for an unset ``spec.hostNetwork``, an
    event's ``source`` is its component)."""
    if path == "source":
        path = "source.component"
    cur: object = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if path == "spec.hostNetwork":
        return "true" if cur is True else "false"
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_fields(text: str, kind: str, plural: str) -> FieldSelector:
    """``status.phase=Running,metadata.name!=x`` for ``kind``; raises ``KubetrainError`` naming the bad term or the
    unsupported field, with the fields ``kind`` has, as the API server refuses them."""
    allowed = SELECTABLE_FIELDS.get(kind, _COMMON_FIELDS)
    reqs: list[FieldRequirement] = []
    for term in _split(text.strip(), escapes=True) if text.strip() else []:
        m = re.match(r"^\s*([^=!\s]+)\s*(==|!=|=)(.*)$", term)
        if m is None:
            raise KubetrainError(
                f"invalid field selector {text!r}: cannot parse {term.strip()!r} "
                "(fix: use field=value, field==value or field!=value, joined by commas, e.g. status.phase=Running)"
            )
        field, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        if field not in allowed:
            raise KubetrainError(
                f"invalid field selector {text!r}: field label not supported for {plural}: {field!r} "
                f"(fix: use one of {', '.join(allowed)})"
            )
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
    return FieldSelector(tuple(reqs), text.strip())
