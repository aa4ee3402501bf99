"""Pod templates checked against the Kubernetes PodTemplateSpec structure.

The API server silently prunes unknown fields, so a typo such as ``comand`` would simply vanish on a cluster.
kubetrain reports it instead, with a suggestion. The structure (no descriptions) is the core/v1 PodTemplateSpec
schema JobSet embeds, stored in ``data/pod_template_schema.json``.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from kubetrain.api.errors import Finding
from kubetrain.api.fields import suggest
from kubetrain.api.resources import check_pod_resources, format_problem

Schema = dict[str, Any]
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "integer": (int,),
    "number": (int, float),
}


@cache
def pod_template_schema() -> Schema:
    text = (resources.files("kubetrain.api") / "data" / "pod_template_schema.json").read_text(encoding="utf-8")
    schema: Schema = json.loads(text)
    return schema


def check_pod_template(template: Any, path: str) -> list[Finding]:
    """Findings for a pod template (``{metadata, spec}``) at ``path``."""
    out: list[Finding] = []
    _walk(template, pod_template_schema(), path, out)
    if isinstance(template, dict):
        out += check_pod_resources(template.get("spec"), f"{path}.spec", formats=False)
    return out


def check_pod_spec(spec: Any, path: str, *, partial: bool = False) -> list[Finding]:
    """``partial``: a patch, where required fields may be absent (they come from what it patches)."""
    out: list[Finding] = []
    _walk(spec, pod_template_schema()["properties"]["spec"], path, out, partial)
    return out + check_pod_resources(spec, path, partial=partial, formats=False)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number"}
    return names.get(type(value), "a value of another type")


def _shown(value: Any) -> str:
    """The value as the manifest wrote it (``true``, ``[1]``; strings quoted), cut to 40 characters."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _walk(value: Any, schema: Schema, path: str, out: list[Finding], partial: bool = False) -> None:
    if len(out) >= 20:  # a badly shifted block would otherwise produce hundreds of findings
        return
    if schema.get("x-kubernetes-int-or-string") and "pattern" in schema:  # a quantity (the only such pattern)
        problem = format_problem(value)
        if problem is not None:
            out.append(Finding(path, *problem))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            out.append(Finding(path, f"expected an integer or a string, got {_kind(value)}", None))
        return
    if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
        return
    expected = schema.get("type")
    if expected in _TYPES:
        ok = isinstance(value, _TYPES[expected]) and not (expected in ("integer", "number") and isinstance(value, bool))
        if not ok:
            if value is None and expected in ("object", "array"):
                return  # an empty key (``env:``) is null in YAML; Kubernetes treats it as unset
            fixes = {"string": "quote it", "array": "write list items with a leading '- '",
                     "object": "check the indentation of the fields below it"}
            fix = fixes.get(expected)
            got = f"{_kind(value)} ({_shown(value)})"
            out.append(Finding(path, f"expected {_kind(_example(expected))}, got {got}", fix))
            return
    if "enum" in schema and value not in schema["enum"]:
        out.append(Finding(path, f"invalid value {value!r}", f"expected one of {', '.join(map(str, schema['enum']))}"))
    if isinstance(value, dict):
        props: Schema = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = f"{path}.{key}"
            if key in props:
                _walk(item, props[key], sub, out, partial)
            elif isinstance(extra, dict):
                _walk(item, extra, f"{path}[{key}]", out, partial)
            elif props:
                close = suggest(str(key), props)
                hint = f"did you mean {close!r}?" if close else f"known fields: {', '.join(sorted(props))}"
                out.append(Finding(sub, f"unknown field {key!r}", hint))
        for req in () if partial else schema.get("required") or []:
            if req not in value:
                out.append(Finding(f"{path}.{req}", f"required field `{req}` is missing", f"add {req}"))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            if item is None and schema["items"].get("type") in ("object", "array"):
                # Unlike an empty key, an empty list item is not "unset": the API server refuses the null.
                out.append(Finding(f"{path}[{i}]", f"expected {_kind(_example(schema['items']['type']))}, got an "
                                   "empty list item (null)", "remove the empty '- ' line, or fill the item in"))
                continue
            _walk(item, schema["items"], f"{path}[{i}]", out, partial)


def _example(type_name: str) -> Any:
    return {"object": {}, "array": [], "string": "", "boolean": True, "integer": 0, "number": 0.5}[type_name]
