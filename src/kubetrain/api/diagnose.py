"""Pydantic validation errors in the words of the manifest (path, message, fix), and salvaging what a document
that failed to load would have been without its failing fields, so later checks can still run on the rest."""

from __future__ import annotations

import copy
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


def explain(
    err: Any, doc: dict[str, Any], root: type[BaseModel], kind: str
) -> tuple[tuple[Any, ...], str, str | None]:
    """A pydantic error -> (data path, message, fix) in the words of the manifest, not of Python."""
    path, model, value = _data_path(err["loc"], doc, root)
    etype, here = err["type"], path_text(path)
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
        expected = err.get("ctx", {}).get("expected", "")
        return path, f"invalid value {value!r}", f"expected one of {expected}"
    if etype in ("int_parsing", "int_type", "int_from_float"):
        if here.endswith("numProcPerNode"):
            return path, f"must have an int value or [auto cpu gpu], got {value!r}", "e.g. numProcPerNode: 2"
        return path, f"expected an integer, got {value!r}", None
    if etype in ("dict_type", "model_type", "model_attributes_type"):
        got = "nothing (an empty value)" if value is None else _kind(value)
        return path, f"expected an object with fields, got {got}", "check the indentation of the fields below it"
    if etype == "list_type":
        return path, f"expected a list, got {_kind(value)}", "write list items with a leading '- '"
    if etype in ("string_type",):
        return path, f"expected a string, got {value!r}", "quote the value"
    if etype in ("greater_than_equal", "greater_than"):
        return path, f"{err['msg'].lower()}, got {value!r}", None
    if etype == "bool_parsing":
        return path, f"expected true or false, got {value!r}", None
    return path, err["msg"], None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
             float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")


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
