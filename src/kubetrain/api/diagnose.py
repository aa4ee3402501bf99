"""Pydantic validation errors in the words of the manifest (path, message, fix), and salvaging what a document
that failed to load would have been without its failing fields, so later checks can still run on the rest."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from kubetrain.api.fields import aliases, child_model, locations, suggest


def path_text(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_SALVAGE_ROUNDS = 8


def salvage(doc: dict[str, Any], model: type[BaseModel], misplaced: dict[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """The object the document would be without the fields that failed to load: misplaced spec fields moved
    under ``spec`` (what the user meant), failing fields removed (a failing list item takes its whole list with
    it). ``(None, ())`` when a required top-level field would have to go."""
    work = copy.deepcopy(doc)
    if misplaced:
        spec = work.setdefault("spec", {})
        if spec is None:
            spec = work["spec"] = {}
        if not isinstance(spec, dict):
            return None, ()
        for key, value in misplaced.items():
            spec.setdefault(key, value)
    pruned: list[tuple[Any, ...]] = []
    for _ in range(_SALVAGE_ROUNDS):
        try:
            return model.model_validate(work), tuple(path_text(p) for p in pruned)
        except ValidationError as exc:
            targets = set()
            for err in exc.errors():
                path, _, _ = _data_path(err["loc"], work, model)
                target = path[:-1] if err["type"] == "missing" else path
                # Dropping one list item would shift the indices later findings name: drop the whole list.
                while target and isinstance(target[-1], int):
                    target = target[:-1]
                if not target or target in pruned:
                    return None, ()
                targets.add(target)
            for target in sorted(targets, key=len):
                if not any(target[: len(p)] == p for p in pruned):
                    _delete(work, target)
                    pruned.append(target)
    return None, ()


def _delete(doc: Any, path: tuple[Any, ...]) -> None:
    node = doc
    for part in path[:-1]:
        node = node[part] if isinstance(node, dict | list) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def explain_all(
    errors: list[Any], doc: dict[str, Any], root: type[BaseModel], kind: str
) -> list[tuple[tuple[Any, ...], str, str | None, str]]:
    """Every pydantic error of one document as ``(data path, message, fix, error type)``, one per field: the
    branches of a union that all failed (``int | str``) become one "expected an integer or a string" finding."""
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for err in errors:
        path, _, _ = _data_path(err["loc"], doc, root)
        grouped.setdefault(path, []).append(err)
    out = []
    for path, errs in grouped.items():
        kinds = [_EXPECTED[e["type"]] for e in errs if e["type"] in _EXPECTED]
        if len(errs) > 1 and len(kinds) == len(errs):
            value = _data_path(errs[0]["loc"], doc, root)[2]
            out.append((path, *_union(path, value, kinds), errs[0]["type"]))
            continue
        out.append((*explain(errs[0], doc, root, kind), errs[0]["type"]))
    return out


# What each pydantic type error expected, in the manifest's words.
_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "string_type": "a string", "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
    "bool_parsing": "true or false", "dict_type": "an object", "model_type": "an object", "list_type": "a list",
}  # fmt: skip


def _union(path: tuple[Any, ...], value: Any, kinds: list[str]) -> tuple[str, str | None]:
    if len(path) >= 2 and path[-2] in ("limits", "requests"):
        from kubetrain.api.resources import format_problem

        problem = format_problem(value)
        if problem is not None:
            return problem
    expected = " or ".join(dict.fromkeys(kinds))
    return f"expected {expected}, got {_kind(value)} {_short(value)}", f"write {expected} here"


def _short(value: Any) -> str:
    """The value as the manifest wrote it (``true``, ``null``, ``[1]``; strings quoted), cut to 40 characters."""
    if isinstance(value, str):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def explain(
    err: Any, doc: dict[str, Any], root: type[BaseModel], kind: str
) -> tuple[tuple[Any, ...], str, str | None]:
    """A pydantic error -> (data path, message, fix) in the words of the manifest, not of Python."""
    path, model, value = _data_path(err["loc"], doc, root)
    etype, here = err["type"], path_text(path)
    ctx = err.get("ctx") or {}
    if etype == "extra_forbidden":
        name = path[-1]
        siblings = aliases(model) if model is not None else []
        close = suggest(str(name), siblings)
        if close:
            return path, f"unknown field {name!r}", f"did you mean {close!r}?"
        homes = [p for p in locations(kind).get(str(name), ()) if p]
        if homes:
            return path, f"`{name}` does not belong here", f"it belongs under `{homes[0]}`"
        return path, f"unknown field {name!r}", f"known fields here: {', '.join(siblings)}"
    if etype == "missing":
        return path, f"required field `{path[-1]}` is missing", f"add {path_text(path)}"
    if etype == "literal_error":
        expected = ctx.get("expected", "")
        return path, f"invalid value {value!r}", f"expected one of {expected}"
    if etype in ("int_parsing", "int_type", "int_from_float"):
        if here.endswith("numProcPerNode"):
            return path, f"must have an int value or [auto cpu gpu], got {value!r}", "e.g. numProcPerNode: 2"
        return path, f"expected an integer, got {_short(value)}", "write a whole number without quotes, e.g. 2"
    if etype in ("dict_type", "model_type", "model_attributes_type"):
        got = "nothing (an empty value)" if value is None else _kind(value)
        return path, f"expected an object with fields, got {got}", "check the indentation of the fields below it"
    if etype == "list_type":
        return path, f"expected a list, got {_kind(value)}", "write list items with a leading '- '"
    if etype in ("string_type",):
        return path, f"expected a string, got {_short(value)}", "quote the value"
    if etype in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[etype]
        limit = next(iter(ctx.values()), "")
        message = str(err["msg"]).replace("Input should be", "must be")
        return path, f"{message}, got {_short(value)}", f"use a value {bound} {limit}"
    if etype in ("bool_parsing", "bool_type"):
        return path, f"expected true or false, got {_short(value)}", "write true or false without quotes"
    if etype in ("float_type", "float_parsing", "finite_number"):
        return path, f"expected a number, got {_short(value)}", "write a number without quotes, e.g. 1 or 0.5"
    if etype == "string_too_short":
        if ctx.get("min_length") == 1:
            return path, "must not be empty", f"set {here} to a non-empty string"
        return path, f"must have at least {ctx.get('min_length')} characters", f"lengthen {here}"
    if etype in ("string_too_long", "too_long"):
        return path, f"is too long (at most {ctx.get('max_length')})", f"shorten {here}"
    if etype == "too_short":
        return path, f"needs at least {ctx.get('min_length')} item(s)", f"add items to {here}"
    if etype == "string_pattern_mismatch":
        return path, f"{_short(value)} does not match the pattern {ctx.get('pattern')}", f"change {here} to match it"
    if etype in ("value_error", "assertion_error"):
        # Our own validators' messages, without pydantic's prefix.
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        return path, message, None
    return path, _plain(str(err["msg"]), value), None


def _plain(msg: str, value: Any) -> str:
    """Any other pydantic message, turned from "Input should be X" into "expected X, got <value>"."""
    for prefix in ("Input should be ", "Input should have "):
        if msg.startswith(prefix):
            return f"expected {msg[len(prefix):]}, got {_short(value)}"
    return f"invalid value {_short(value)}: {msg[:1].lower()}{msg[1:]}"


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number", type(None): "null (an empty value)"}
    return names.get(type(value), "a value of another type")


_UNION_TAG = re.compile(r"^(int|str|literal\[.*\]|function-.*|.*\[.*\])$")


def _data_path(loc: tuple[Any, ...], doc: Any, root: type[BaseModel]) -> tuple[tuple[Any, ...], Any, Any]:
    """Strip pydantic's union tags from ``loc``; return the path, the model at its parent and the value."""
    path: list[Any] = []
    node: Any = doc
    model: type[BaseModel] | None = root
    parent_model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) and isinstance(node, list):
            path.append(part)
            node = node[part] if part < len(node) else None
            continue
        if isinstance(part, str) and isinstance(node, dict) and (part in node or (
                model is not None and part in aliases(model))):
            path.append(part)
            parent_model = model
            model = child_model(model, part)[0] if model is not None else None
            node = node.get(part)
            continue
        if isinstance(part, str) and (_UNION_TAG.match(part) or part not in (node or {})):
            if isinstance(node, dict) and model is not None and part not in aliases(model):
                path.append(part)
                parent_model = model
                node = None
            continue
    return tuple(path), parent_model, node
