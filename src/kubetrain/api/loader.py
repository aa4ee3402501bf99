"""Load manifests from YAML: syntax errors with file and line, legacy apiVersions converted with a warning,
misplaced or misspelt fields diagnosed instead of dumped as a schema error."""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from kubetrain.api import constants as c
from kubetrain.api.core import CORE_API_VERSION, CORE_KINDS, ConfigMap, PersistentVolumeClaim, Secret
from kubetrain.api.diagnose import explain_all, path_text, salvage
from kubetrain.api.errors import Finding, Result
from kubetrain.api.fields import aliases, suggest
from kubetrain.api.legacy import convert_ome_runtime
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob

Manifest = (
    TrainJob | TrainingRuntime | ClusterTrainingRuntime | OptimizationJob | ConfigMap | Secret | PersistentVolumeClaim
)
KINDS: dict[str, type[BaseModel]] = {
    c.KIND_TRAINJOB: TrainJob,
    c.KIND_TRAINING_RUNTIME: TrainingRuntime,
    c.KIND_CLUSTER_TRAINING_RUNTIME: ClusterTrainingRuntime,
    c.KIND_OPTIMIZATIONJOB: OptimizationJob,
    # The core objects pods reference, applied and used locally like on a cluster.
    "ConfigMap": ConfigMap,
    "Secret": Secret,
    "PersistentVolumeClaim": PersistentVolumeClaim,
}
KINDS_TEXT = (
    "TrainJob, TrainingRuntime, ClusterTrainingRuntime, OptimizationJob, ConfigMap, Secret, PersistentVolumeClaim"
)
# apiVersions used by the documents kubetrain grew from; accepted and converted with a warning.
LEGACY_API_VERSIONS = ("kubeflow.org/v2alpha1", "trainer.kubeflow.org/v2alpha1", "trainer.kubeflow.org/v2",
                       "ome.io/v1beta1")
LEGACY_GROUPS = ("kubeflow.org", "ome.io")
TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec", "status")

LineMap = dict[tuple[Any, ...], int]


@dataclass(frozen=True)
class Identity:
    """Which object a document meant to be, read from it even when it failed to load."""

    kind: str
    name: str
    namespace: str | None = None


@dataclass
class Partial:
    """A document that failed to load, rebuilt without the fields that failed (``pruned``) so the rules that do
    not depend on them can still run: every error of a file is reported in one go. Never applied anywhere."""

    obj: Manifest
    source: str
    lines: LineMap
    file: str
    pruned: tuple[str, ...]


@dataclass
class Loaded:
    objects: list[Manifest] = field(default_factory=list)
    result: Result = field(default_factory=Result)
    sources: list[str] = field(default_factory=list)  # "file:line" of each object, same order as objects
    lines: list[LineMap] = field(default_factory=list)  # field path -> line, same order as objects
    files: list[str] = field(default_factory=list)
    partial: list[Partial] = field(default_factory=list)
    rejected: list[Identity] = field(default_factory=list)  # documents that failed to load, partial or not

    def locate(self, index: int, path: str) -> str | None:
        """``file:line`` of a field path (``spec.trainer.numNodes``) in object ``index``, or its nearest parent."""
        return locate(self.lines[index], self.files[index], path)

    def extend(self, other: Loaded) -> None:
        self.objects += other.objects
        self.sources += other.sources
        self.lines += other.lines
        self.files += other.files
        self.partial += other.partial
        self.rejected += other.rejected
        self.result.extend(other.result)


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
        return _not_empty(load_text(sys.stdin.read(), "<stdin>"), "<stdin>")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _failed(str(path), "file not found", "check the path given to -f")
    except IsADirectoryError:
        loaded = Loaded()
        children = sorted(p.glob("*.y*ml"))
        if not children:
            return _failed(str(path), "no manifests: the directory holds no *.yaml or *.yml file",
                           "pass a directory with manifests, or the manifest files themselves")
        for child in children:
            loaded.extend(load_file(child))
        return loaded
    except (OSError, UnicodeDecodeError) as exc:
        return _failed(str(path), f"cannot read: {exc}", None)
    return _not_empty(load_text(text, str(path)), str(path))


def _not_empty(loaded: Loaded, source: str) -> Loaded:
    """A file with no document at all is a mistake (a wrong path, an unsaved editor buffer), never "valid"."""
    if not (loaded.objects or loaded.partial or loaded.rejected or loaded.result.errors or loaded.result.warnings):
        loaded.result.errors.append(Finding(
            "", "no objects: the file is empty (or holds only comments)",
            "pass a file with at least one TrainJob, TrainingRuntime or ClusterTrainingRuntime", source=source))
    return loaded


def _failed(source: str, message: str, fix: str | None) -> Loaded:
    loaded = Loaded()
    loaded.result.errors.append(Finding("", message, fix, source=source))
    return loaded


_DOC_START = re.compile(r"^---(\s|$)")


def load_text(text: str, source: str = "<stdin>") -> Loaded:
    loaded = Loaded()
    try:
        pairs = _documents(text)
    except yaml.YAMLError:
        # One broken document must not hide the others: parse each `---` section on its own, keeping line numbers.
        pairs = []
        for chunk in _sections(text):
            try:
                pairs += _documents(chunk)
            except yaml.YAMLError as exc:
                loaded.result.errors.append(_yaml_error(exc, chunk, source))
    for node, doc in pairs:
        if doc is None:
            continue
        lines: LineMap = {}
        _line_map(node, (), lines)
        line = node.start_mark.line + 1 if node is not None else 1
        parsed = parse_document(doc, source=f"{source}:{line}", lines=lines, file=source)
        who = _who(identity_of(doc))
        for findings in (parsed.result.errors, parsed.result.warnings):
            findings[:] = [replace(f, obj=f.obj or who) for f in findings]
        loaded.result.extend(parsed.result)
        if parsed.obj is not None:
            loaded.objects.append(parsed.obj)
            loaded.sources.append(f"{source}:{line}")
            loaded.lines.append(lines)
            loaded.files.append(source)
            continue
        if parsed.identity is not None:
            loaded.rejected.append(parsed.identity)
        if parsed.partial is not None:
            loaded.partial.append(Partial(parsed.partial, f"{source}:{line}", lines, source, parsed.pruned))
    return loaded


def _who(identity: Identity | None) -> str | None:
    """How findings name an object: ``TrainJob team-a/job``, ``ClusterTrainingRuntime torch``."""
    if identity is None:
        return None
    return f"{identity.kind} {identity.namespace + '/' if identity.namespace else ''}{identity.name}"


MAX_EXPANDED_NODES = 100_000
"""A document whose aliases expand it beyond this many nodes (and tenfold what is written) is refused, as the API
server's YAML decoder refuses "excessive aliasing": nine nested lists of ten aliases are 10^9 nodes."""


class ExcessiveAliasing(yaml.YAMLError):
    def __init__(self, node: yaml.Node, expanded: int, written: int):
        super().__init__(f"its aliases (*name) expand {written} written nodes to {expanded}")
        self.problem = str(self)
        self.problem_mark = node.start_mark


def _check_aliasing(node: yaml.Node | None) -> None:
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        # An alias is the same node object again: counted once written, as often as it is used expanded.
        if id(n) not in sizes:
            sizes[id(n)] = 0  # a recursive alias is refused by the YAML composer before this
            children = [x for pair in n.value for x in pair] if isinstance(n, yaml.MappingNode) else (
                n.value if isinstance(n, yaml.SequenceNode) else [])
            sizes[id(n)] = 1 + sum(size(c) for c in children)
        return sizes[id(n)]

    if node is None:
        return
    expanded = size(node)
    if expanded > MAX_EXPANDED_NODES and expanded > 10 * len(sizes):
        raise ExcessiveAliasing(node, expanded, len(sizes))


def _documents(text: str) -> list[tuple[yaml.Node | None, Any]]:
    nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    for node in nodes:
        _check_aliasing(node)  # before anything walks the expanded document
    docs = list(yaml.safe_load_all(text))
    return list(zip(nodes, docs, strict=True))


def _sections(text: str) -> list[str]:
    """The text split at document markers; each section is padded with the newlines before it, so the line
    numbers YAML reports stay those of the whole file."""
    lines = text.splitlines(keepends=True)
    starts = [0] + [i for i, line in enumerate(lines) if i and _DOC_START.match(line)]
    ends = [*starts[1:], len(lines)]
    return ["\n" * a + "".join(lines[a:b]) for a, b in zip(starts, ends, strict=True)]


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> Finding:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    if isinstance(exc, ExcessiveAliasing):
        return Finding("", f"excessive aliasing: {exc}", "write the repeated parts out, or nest fewer aliases",
                       source=f"{source}:{line}")
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


def locate(lines: LineMap, file: str, path: str) -> str | None:
    """``file:line`` of a field path in an object's line map, or of its nearest parent."""
    return _where(lines, parse_path(path), file)


def _where(lines: LineMap | None, path: tuple[Any, ...], file: str | None) -> str | None:
    if lines is None or file is None:
        return None
    p = path
    while p not in lines and p:
        p = p[:-1]
    return f"{file}:{lines[p]}" if p in lines else None


@dataclass
class Parsed:
    obj: Manifest | None
    result: Result
    identity: Identity | None = None  # set when the document failed to load but says what it meant to be
    partial: Manifest | None = None  # the document without the fields that failed (see ``Partial``)
    pruned: tuple[str, ...] = ()


def parse_manifest(
    doc: Any, *, source: str | None = None, lines: LineMap | None = None, file: str | None = None
) -> tuple[Manifest | None, Result]:
    """One document -> a typed object (or None) and the findings of parsing it."""
    parsed = parse_document(doc, source=source, lines=lines, file=file)
    return parsed.obj, parsed.result


def identity_of(doc: Any) -> Identity | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return None
    meta = _mapping(doc.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        return None
    if doc["kind"] == c.KIND_CLUSTER_TRAINING_RUNTIME or not isinstance(namespace, str):
        namespace = None
    return Identity(doc["kind"], name, namespace)


def parse_document(
    doc: Any, *, source: str | None = None, lines: LineMap | None = None, file: str | None = None
) -> Parsed:
    """Like ``parse_manifest``, and for a document that fails: what it meant to be and a partial object."""
    result = Result()

    def error(path: tuple[Any, ...], message: str, fix: str | None = None) -> None:
        result.errors.append(Finding(path_text(path), message, fix, source=_where(lines, path, file) or source))

    def warn(path: tuple[Any, ...], message: str, fix: str | None = None) -> None:
        result.warnings.append(
            Finding(path_text(path), message, fix, "warning", source=_where(lines, path, file) or source)
        )

    if not isinstance(doc, dict):
        got = "an empty document" if doc is None else f"{'a list' if isinstance(doc, list) else 'a single value'}"
        error((), f"expected a Kubernetes object (a mapping), got {got}",
              "each YAML document must start with apiVersion: and kind:")
        return Parsed(None, result)
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    for key, value in (("apiVersion", api_version), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            error((key,), f"{key} must be a string, got {value!r}", f"write e.g. {key}: "
                  + (c.API_VERSION if key == "apiVersion" else "TrainJob"))
            return Parsed(None, result)
    if not kind or not api_version:
        missing = " and ".join(k for k in ("apiVersion", "kind") if not doc.get(k))
        keys = ", ".join(str(k) for k in list(doc)[:4])
        error((), f"not a whole manifest: {missing} missing (top-level keys: {keys})",
              f"add apiVersion: {c.API_VERSION} and kind: TrainJob | TrainingRuntime | ClusterTrainingRuntime "
              "(a fragment belongs inside such an object)")
        return Parsed(None, result)
    if kind not in KINDS:
        close = suggest(str(kind), KINDS)
        if close:
            error(("kind",), f"unknown kind {kind!r}", f"did you mean {close!r}?")
        else:
            warn(("kind",), f"skipped {kind} {_mapping(doc.get('metadata')).get('name')!r}: not a kubetrain kind "
                 f"({KINDS_TEXT})")
        return Parsed(None, result)
    doc = copy.deepcopy(doc)
    if kind in CORE_KINDS:
        return _parse_core(doc, str(kind), api_version, result, error)
    if api_version != c.API_VERSION:
        if api_version in LEGACY_API_VERSIONS:
            warn(("apiVersion",), f"apiVersion {api_version} is not served; loaded as {c.API_VERSION}",
                 f"change apiVersion to {c.API_VERSION}")
        else:
            error(("apiVersion",), f"apiVersion {api_version!r} is not served for {kind}",
                  f"use apiVersion: {c.API_VERSION}")
            return Parsed(None, result)
        doc["apiVersion"] = c.API_VERSION
        if kind != c.KIND_TRAINJOB and api_version.startswith("ome.io/"):
            convert_ome_runtime(doc, warn)
    meta = doc.get("metadata")
    if kind == c.KIND_CLUSTER_TRAINING_RUNTIME and isinstance(meta, dict) and meta.get("namespace") is not None:
        warn(("metadata", "namespace"),
             f"a ClusterTrainingRuntime is cluster-scoped: namespace {meta['namespace']!r} is ignored (the API "
             "server drops it)",
             "remove metadata.namespace, or make it a TrainingRuntime to serve only that namespace")
        del meta["namespace"]
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
        for path, message, fix, etype in explain_all(exc.errors(), doc, model, str(kind)):
            if path[:1] == ("spec",) and misplaced and etype in ("missing", "model_type", "dict_type"):
                continue  # already explained as misplaced structure
            error(path, message, fix)
        partial, pruned = salvage(doc, model, misplaced)
        return Parsed(None, result, identity_of(doc), partial, pruned)
    if misplaced:
        partial, pruned = salvage(doc, model, misplaced)
        return Parsed(None, result, identity_of(doc), partial, pruned)
    return Parsed(obj, result)  # type: ignore[arg-type]


def _parse_core(doc: dict[str, Any], kind: str, api_version: str, result: Result, error: Any) -> Parsed:
    """A ConfigMap, Secret or PersistentVolumeClaim: ``v1`` only, no legacy conversions."""
    if api_version != CORE_API_VERSION:
        error(("apiVersion",), f"apiVersion {api_version!r} is not served for {kind}",
              f"use apiVersion: {CORE_API_VERSION}")
        return Parsed(None, result, identity_of(doc))
    model = KINDS[kind]
    try:
        obj = model.model_validate(doc)
    except ValidationError as exc:
        for path, message, fix, _ in explain_all(exc.errors(), doc, model, kind):
            error(path, message, fix)
        return Parsed(None, result, identity_of(doc))
    return Parsed(obj, result)  # type: ignore[arg-type]


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _misplaced_top_level(doc: dict[str, Any], kind: str, error: Any) -> dict[str, Any]:
    """Spec fields written at the top level, removed from ``doc`` and returned."""
    spec_fields = set(aliases(KINDS[kind].model_fields["spec"].annotation))  # type: ignore[arg-type]
    found: dict[str, Any] = {}
    for key in list(doc):
        if key in TOP_LEVEL:
            continue
        if key in spec_fields:
            empty = " (and spec is empty)" if not doc.get("spec") else ""
            error((key,), f"`{key}` is at the top level{empty}; it belongs under `spec`",
                  f"indent `{key}:` and everything below it under `spec:`")
            found[key] = doc.pop(key)
    return found
