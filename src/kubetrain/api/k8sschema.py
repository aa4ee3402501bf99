"""Schemas of the Kubernetes types the CRDs embed (PodSpec, JobSpec, EnvVar, PersistentVolumeClaim, ...).

They are not written by hand: ``extract`` converts the Kubernetes OpenAPI definitions shipped in the pinned
``kubernetes-validate`` package into *structural* OpenAPI v3 (what a CRD must use) and the result is packaged as
``data/k8s_definitions.json``. ``tests/api/test_k8sschema.py`` fails when the packaged file no longer matches
the package; ``KUBETRAIN_UPDATE_MANIFESTS=1`` regenerates it.

Public:

``K8S_VERSION``
    The Kubernetes version the definitions come from.
``ROOTS``
    The definitions the CRDs use (everything they reference is packaged too).
``extract(definitions, roots) -> dict``
    Pure: ``{name: structural schema}`` for ``roots`` and every definition they reference.
``schema(name, *, patch=False) -> dict``
    One packaged definition with every reference inlined; ``patch=True`` drops its top-level ``required`` (a
    strategic-merge patch need not repeat what it patches, e.g. a pod spec patch without ``containers``).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any, Final

Schema = dict[str, Any]

K8S_VERSION: Final = "v1.37.0"

POD_SPEC: Final = "io.k8s.api.core.v1.PodSpec"
JOB_SPEC: Final = "io.k8s.api.batch.v1.JobSpec"
ENV_VAR: Final = "io.k8s.api.core.v1.EnvVar"
RESOURCES: Final = "io.k8s.api.core.v1.ResourceRequirements"
PVC: Final = "io.k8s.api.core.v1.PersistentVolumeClaim"
METRIC_SPEC: Final = "io.k8s.api.autoscaling.v2.MetricSpec"
LOCAL_OBJECT_REFERENCE: Final = "io.k8s.api.core.v1.LocalObjectReference"
ROOTS: Final = (POD_SPEC, JOB_SPEC, ENV_VAR, RESOURCES, PVC, METRIC_SPEC, LOCAL_OBJECT_REFERENCE)

_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIMES: Final = ("io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime")

# Metadata inside a template is what the controller copies onto the objects it creates; the API server only
# keeps these fields there (the rest of ObjectMeta is server-managed). Same choice as controller-gen's
# embedded ObjectMeta, so the field paths match upstream's CRDs.
EMBEDDED_META_FIELDS: Final = ("annotations", "finalizers", "labels", "name", "namespace")

# A quantity as Kubernetes parses it: a signed decimal number, then an optional binary (Ki..Ei), decimal
# (n, u, m, k, M..E) or exponent suffix. Without the pattern a CRD would accept "2 cores" and leave the
# error to the controller.
QUANTITY_PATTERN: Final = (
    r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)"  # the number
    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?([0-9]+\.?[0-9]*|\.[0-9]+))?$"  # binary, decimal or exponent suffix
)

# The swagger-derived definitions carry no defaults, but a key of an ``x-kubernetes-list-type: map`` list must be
# required or defaulted in a CRD. These are the defaults Kubernetes documents for those keys.
_LIST_MAP_KEY_DEFAULTS: Final[dict[tuple[str, str], Any]] = {
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
    (LOCAL_OBJECT_REFERENCE, "name"): "",
}

_KEEP: Final = frozenset(
    {
        "description", "type", "format", "enum", "default", "required", "minimum", "maximum", "minItems",
        "maxItems", "minLength", "maxLength", "pattern", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
    }
)  # fmt: skip


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _convert(node: Any) -> Any:
    """One swagger-derived JSON schema node as structural OpenAPI v3, ``$ref``s kept as bare names."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        out: Schema = {"$ref": _ref_name(node["$ref"])}
        if "description" in node:
            out["description"] = node["description"]
        return out
    out = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if len(types) != 1:
                raise ValueError(f"cannot express type {value!r} in a structural schema")
            out["type"] = types[0]
        elif key == "properties":
            out["properties"] = {k: _convert(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = _convert(value)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                out["additionalProperties"] = _convert(value)
        elif key in _KEEP:
            out[key] = copy.deepcopy(value)
    return out


def _int_or_string(description: str | None, pattern: str | None = None) -> Schema:
    out: Schema = {}
    if description:
        out["description"] = description
    out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if pattern:
        out["pattern"] = pattern
    out["x-kubernetes-int-or-string"] = True
    return out


def _special(name: str, definitions: dict[str, Any]) -> Schema | None:
    """Definitions that are not plain objects in a CRD: quantities, int-or-string, times, embedded metadata."""
    raw = definitions[name]
    if name == _QUANTITY:
        return _int_or_string(raw.get("description"), QUANTITY_PATTERN)
    if name == _INT_OR_STRING:
        return _int_or_string(raw.get("description"))
    if name in _TIMES:
        out: Schema = {"type": "string", "format": "date-time"}
        if raw.get("description"):
            out["description"] = raw["description"]
        return out
    if name == _OBJECT_META:
        props = {k: _convert(raw["properties"][k]) for k in EMBEDDED_META_FIELDS}
        return {"description": raw.get("description", ""), "type": "object", "properties": props}
    return None


def extract(definitions: dict[str, Any], roots: tuple[str, ...] = ROOTS) -> dict[str, Schema]:
    """``{name: structural schema}`` for ``roots`` and everything they reference (``$ref`` = bare name)."""
    out: dict[str, Schema] = {}
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in out:
            continue
        converted = _special(name, definitions)
        if converted is None:
            converted = _convert(definitions[name])
            for (owner, key), default in _LIST_MAP_KEY_DEFAULTS.items():
                if owner == name:
                    converted["properties"][key]["default"] = default
        out[name] = converted
        stack.extend(_refs(converted))
    return dict(sorted(out.items()))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        for value in node.values():
            found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@cache
def definitions() -> dict[str, Schema]:
    """The packaged definitions (``data/k8s_definitions.json``)."""
    text = (resources.files("kubetrain.api") / "data" / "k8s_definitions.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    defs: dict[str, Schema] = data["definitions"]
    return defs


def _inline(node: Any, defs: dict[str, Schema]) -> Any:
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        resolved: Schema = _inline(defs[node["$ref"]], defs)
        if "description" in node:
            resolved["description"] = node["description"]  # the field's own text describes this use
        return resolved
    return {k: _inline(v, defs) for k, v in node.items()}


def schema(name: str, *, patch: bool = False) -> Schema:
    """The packaged definition ``name`` with every ``$ref`` inlined (a fresh copy the caller may change)."""
    out: Schema = _inline(definitions()[name], definitions())
    if patch:
        out.pop("required", None)
    return out
