"""Load manifests from YAML: syntax errors with file and line, legacy apiVersions converted with a warning,
misplaced or misspelt fields diagnosed instead of dumped as a schema error."""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding, Result
from kubetrain.api.fields import aliases, child_model, locations, suggest
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob

Manifest = TrainJob | TrainingRuntime | ClusterTrainingRuntime
KINDS: dict[str, type[BaseModel]] = {
    c.KIND_TRAINJOB: TrainJob,
    c.KIND_TRAINING_RUNTIME: TrainingRuntime,
    c.KIND_CLUSTER_TRAINING_RUNTIME: ClusterTrainingRuntime,
}
# apiVersions used by the documents kubetrain grew from; accepted and converted with a warning.
LEGACY_API_VERSIONS = ("kubeflow.org/v2alpha1", "trainer.kubeflow.org/v2alpha1", "trainer.kubeflow.org/v2",
                       "ome.io/v1beta1")
LEGACY_GROUPS = ("kubeflow.org", "ome.io")
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")

LineMap = dict[tuple[Any, ...], int]


@dataclass
class Loaded:
    objects: list[Manifest] = field(default_factory=list)
    result: Result = field(default_factory=Result)
    sources: list[str] = field(default_factory=list)  # "file:line" of each object, same order as objects
    lines: list[LineMap] = field(default_factory=list)  # field path -> line, same order as objects
    files: list[str] = field(default_factory=list)

    def locate(self, index: int, path: str) -> str | None:
        """``file:line`` of a field path (``spec.trainer.numNodes``) in object ``index``, or its nearest parent."""
        return _where(self.lines[index], parse_path(path), self.files[index])


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\[([^\]]+)\]")


def parse_path(path: str) -> tuple[Any, ...]:
    """Inverse of ``path_text``: ``a.b[0].c`` -> ``("a", "b", 0, "c")``; ``labels[x/y]`` keeps the key."""
    out: list[Any] = []
    for name, index, key in _PATH_PART.findall(path):
        out.append(name if name else int(index) if index else key)
    return tuple(out)


def load_file(path: str | Path) -> Loaded:
    """Load every document of a file (``-`` reads standard input)."""
    if str(path) == "-":
        return load_text(sys.stdin.read(), "<stdin>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _failed(str(path), "file not found", "check the path given to -f")
    except IsADirectoryError:
        loaded = Loaded()
        for child in sorted(p.glob("*.y*ml")):
            sub = load_file(child)
            loaded.objects += sub.objects
            loaded.sources += sub.sources
            loaded.lines += sub.lines
            loaded.files += sub.files
            loaded.result.extend(sub.result)
        return loaded
    except (OSError, UnicodeDecodeError) as exc:
        return _failed(str(path), f"cannot read: {exc}", None)
    return load_text(text, str(path))


def _failed(source: str, message: str, fix: str | None) -> Loaded:
    loaded = Loaded()
    loaded.result.errors.append(Finding("", message, fix, source=source))
    return loaded


def load_text(text: str, source: str = "<stdin>") -> Loaded:
    loaded = Loaded()
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        loaded.result.errors.append(_yaml_error(exc, text, source))
        return loaded
    for node, doc in zip(nodes, docs, strict=True):
        if doc is None:
            continue
        lines: LineMap = {}
        _line_map(node, (), lines)
        line = node.start_mark.line + 1 if node is not None else 1
        obj, result = parse_manifest(doc, source=f"{source}:{line}", lines=lines, file=source)
        loaded.result.extend(result)
        if obj is not None:
            loaded.objects.append(obj)
            loaded.sources.append(f"{source}:{line}")
            loaded.lines.append(lines)
            loaded.files.append(source)
    return loaded


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> Finding:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    lines = text.splitlines()
    for i, raw in enumerate(lines):
        if raw.strip() == "..." and i < len(lines) and (line is None or abs(line - (i + 1)) <= 2):
            return Finding(
                "",
                f"line {i + 1} is '...', a placeholder from documentation, not YAML",
                "delete the '...' line (or replace it with the fields you meant)",
                source=f"{source}:{i + 1}",
            )
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    message = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
    fix = "check the indentation on this line and the one above: nested fields need more indentation"
    if problem and "found '?'" in problem:
        fix = ("this line is indented less than the block above it: the fields of a list item must line up with "
               "the first field after its '- '")
    if problem and ("tab" in problem or "\\t" in problem or "\t" in problem):
        fix = "indent with spaces, not tabs"
    return Finding("", message, fix, source=f"{source}:{line}" if line else source)


def _line_map(node: yaml.Node | None, path: tuple[Any, ...], out: LineMap) -> None:
    if node is None:
        return
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
            out[(*path, key)] = k.start_mark.line + 1
            _line_map(v, (*path, key), out)
            out[(*path, key)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _line_map(v, (*path, i), out)


def _where(lines: LineMap | None, path: tuple[Any, ...], file: str | None) -> str | None:
    if lines is None or file is None:
        return None
    p = path
    while p not in lines and p:
        p = p[:-1]
    return f"{file}:{lines[p]}" if p in lines else None


def path_text(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_manifest(
    doc: Any, *, source: str | None = None, lines: LineMap | None = None, file: str | None = None
) -> tuple[Manifest | None, Result]:
    """One document -> a typed object (or None) and the findings of parsing it."""
    result = Result()

    def error(path: tuple[Any, ...], message: str, fix: str | None = None) -> None:
        result.errors.append(Finding(path_text(path), message, fix, source=_where(lines, path, file) or source))

    def warn(path: tuple[Any, ...], message: str, fix: str | None = None) -> None:
        result.warnings.append(
            Finding(path_text(path), message, fix, "warning", source=_where(lines, path, file) or source)
        )

    if not isinstance(doc, dict):
        error((), f"expected a Kubernetes object (a mapping), got a {type(doc).__name__}",
              "each YAML document must start with apiVersion: and kind:")
        return None, result
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    for key, value in (("apiVersion", api_version), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            error((key,), f"{key} must be a string, got {value!r}", f"write e.g. {key}: "
                  + (c.API_VERSION if key == "apiVersion" else "TrainJob"))
            return None, result
    if not kind or not api_version:
        missing = " and ".join(k for k in ("apiVersion", "kind") if not doc.get(k))
        keys = ", ".join(str(k) for k in list(doc)[:4])
        error((), f"not a whole manifest: {missing} missing (top-level keys: {keys})",
              f"add apiVersion: {c.API_VERSION} and kind: TrainJob | TrainingRuntime | ClusterTrainingRuntime "
              "(a fragment belongs inside such an object)")
        return None, result
    if kind not in KINDS:
        close = suggest(str(kind), KINDS)
        if close:
            error(("kind",), f"unknown kind {kind!r}", f"did you mean {close!r}?")
        else:
            warn(("kind",), f"skipped {kind} {_mapping(doc.get('metadata')).get('name')!r}: not a kubetrain kind "
                 "(TrainJob, TrainingRuntime, ClusterTrainingRuntime)")
        return None, result
    doc = copy.deepcopy(doc)
    if api_version != c.API_VERSION:
        if api_version in LEGACY_API_VERSIONS:
            warn(("apiVersion",), f"apiVersion {api_version} is not served; loaded as {c.API_VERSION}",
                 f"change apiVersion to {c.API_VERSION}")
        else:
            error(("apiVersion",), f"apiVersion {api_version!r} is not served for {kind}",
                  f"use apiVersion: {c.API_VERSION}")
            return None, result
        doc["apiVersion"] = c.API_VERSION
        if kind != c.KIND_TRAINJOB and api_version.startswith("ome.io/"):
            _convert_ome_runtime(doc, warn)
    if kind == c.KIND_TRAINJOB:
        ref = _mapping(doc.get("spec")).get("runtimeRef")
        if isinstance(ref, dict) and ref.get("apiGroup") in LEGACY_GROUPS:
            warn(("spec", "runtimeRef", "apiGroup"), f"apiGroup {ref['apiGroup']} is a legacy group; using {c.GROUP}",
                 f"set apiGroup: {c.GROUP}")
            ref["apiGroup"] = c.GROUP

    misplaced = _misplaced_top_level(doc, str(kind), error)
    model = KINDS[kind]
    try:
        obj = model.model_validate(doc)
    except ValidationError as exc:
        reported: set[tuple[Any, ...]] = set()
        for err in exc.errors():
            path, message, fix = _explain(err, doc, model, str(kind))
            if path in reported:
                continue  # one message per field: a union reports each branch that failed
            reported.add(path)
            if path[:1] == ("spec",) and misplaced and err["type"] in ("missing", "model_type", "dict_type"):
                continue  # already explained as misplaced structure
            error(path, message, fix)
        return None, result
    if misplaced:
        return None, result
    return obj, result  # type: ignore[return-value]


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _misplaced_top_level(doc: dict[str, Any], kind: str, error: Any) -> bool:
    spec_fields = set(aliases(KINDS[kind].model_fields["spec"].annotation))  # type: ignore[arg-type]
    found = False
    for key in list(doc):
        if key in TOP_LEVEL:
            continue
        if key in spec_fields:
            empty = " (and spec is empty)" if not doc.get("spec") else ""
            error((key,), f"`{key}` is at the top level{empty}; it belongs under `spec`",
                  f"indent `{key}:` and everything below it under `spec:`")
            found = True
            doc.pop(key)
    return found


def _explain(
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
        got = "nothing (an empty value)" if value is None else f"a {type(value).__name__}"
        return path, f"expected an object with fields, got {got}", "check the indentation of the fields below it"
    if etype == "list_type":
        return path, f"expected a list, got {type(value).__name__}", "write list items with a leading '- '"
    if etype in ("string_type",):
        return path, f"expected a string, got {value!r}", "quote the value"
    if etype in ("greater_than_equal", "greater_than"):
        return path, f"{err['msg'].lower()}, got {value!r}", None
    if etype == "bool_parsing":
        return path, f"expected true or false, got {value!r}", None
    return path, err["msg"], None


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


def _convert_ome_runtime(doc: dict[str, Any], warn: Any) -> None:
    """OME runtimes do not label their steps; pick the trainer job the way a reader of the document would."""
    rjobs = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")
    if not isinstance(rjobs, list) or not rjobs or not all(isinstance(r, dict) for r in rjobs):
        return

    def labels(rj: dict[str, Any]) -> dict[str, Any]:
        tmpl = rj.setdefault("template", {}) if isinstance(rj.get("template", {}), dict) else {}
        meta = tmpl.setdefault("metadata", {}) or {}
        tmpl["metadata"] = meta
        return meta.setdefault("labels", {}) or {}

    if any(c.LABEL_ANCESTOR in ((r.get("template") or {}).get("metadata") or {}).get("labels", {}) or {}
           for r in rjobs):
        return
    chosen = None
    if len(rjobs) == 1:
        chosen = rjobs[0]
    else:
        chosen = next((r for r in rjobs if r.get("name") == c.LAUNCHER), None)
    if chosen is None:
        return
    idx = rjobs.index(chosen)
    lab = labels(chosen)
    lab[c.LABEL_ANCESTOR] = c.ANCESTOR_TRAINER
    chosen["template"]["metadata"]["labels"] = lab
    warn(("spec", "template", "spec", "replicatedJobs", idx),
         f"replicated job {chosen.get('name')!r} has no {c.LABEL_ANCESTOR} label; using it as the trainer step",
         f"add the label {c.LABEL_ANCESTOR}: trainer to its template metadata")
    pod = (((chosen.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = pod.get("containers")
    if isinstance(containers, list) and len(containers) == 1 and isinstance(containers[0], dict):
        old = containers[0].get("name")
        if old and old != c.NODE:
            containers[0]["name"] = c.NODE
            warn(("spec", "template", "spec", "replicatedJobs", idx),
                 f"container {old!r} renamed to 'node', the name the trainer step's container must have",
                 "rename the container to node in the runtime")
