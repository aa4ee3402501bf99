"""Fuzzing every loader path: YAML text, documents of every apiVersion (current and legacy), the one validation
entry point, and compilation of whatever validation accepts.

Inputs are structured mutations of real manifests (the built-in runtimes, the examples, the golden inputs, the
seed documents' snippets and upstream's shipped runtimes) plus arbitrary JSON-like trees. The property: nothing
raises. Bad input ends as findings; input validation accepts compiles.

Profiles: ``ci`` (default, a few dozen examples per test) and ``fuzz`` (``make fuzz``: 10,000 per test), chosen by
``KUBETRAIN_FUZZ_PROFILE``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.loader import LEGACY_API_VERSIONS, parse_document
from kubetrain.compiler import Subject, compile_trainjob, fixed_keygen, validate_objects
from tests.conftest import REPO, SHARED

# CI sees the same small sample every run (derandomized: a red build is never luck); `make fuzz` explores.
settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
)
settings.register_profile("fuzz", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
PROFILE = settings.get_profile(os.environ.get("KUBETRAIN_FUZZ_PROFILE", "ci"))

API_VERSIONS = (c.API_VERSION, *LEGACY_API_VERSIONS, "v1", "trainer.kubeflow.org/v9")
KINDS = (c.KIND_TRAINJOB, c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME, "ConfigMap", "Trainjob")
Obj = dict[str, Any]


def _seed_files() -> Iterator[Path]:
    yield from sorted((REPO / "src" / "kubetrain" / "runtimes").glob("*.yaml"))
    yield from sorted((REPO / "examples").rglob("*.yaml"))
    yield from sorted((REPO / "tests" / "compiler" / "golden").glob("*.input.yaml"))
    for sub in ("seeds/snippets", "reference/upstream/runtimes"):
        if (SHARED / sub).is_dir():
            yield from sorted((SHARED / sub).rglob("*.yaml"))


def _seeds() -> tuple[list[str], list[Obj]]:
    texts, docs = [], []
    for path in _seed_files():
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        try:
            docs += [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue  # some seed snippets are deliberately broken YAML: they still feed the text fuzzer
    return texts, docs


SEED_TEXTS, SEED_DOCS = _seeds()
RUNTIME_SEEDS = [d for d in SEED_DOCS if d.get("kind") in (c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME)]
TRAINJOB_SEEDS = [d for d in SEED_DOCS if d.get("kind") == c.KIND_TRAINJOB]


def _keys(node: Any, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            out.add(str(k))
            _keys(v, out)
    elif isinstance(node, list):
        for v in node:
            _keys(v, out)
    return out


FIELD_NAMES = sorted(_keys(SEED_DOCS, set()))

scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
    | st.sampled_from(["", "0", "1.5", "500m", "4Gi", "10XB", "auto", "gpu", "node", "launcher", "-1", "1e3",
                       "trainer", "OpenMPI", "Intel", "MPICH", "deprecated", "[x]", "a/b"])
)
keys = st.sampled_from(FIELD_NAMES) | st.text(max_size=8)
trees = st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys, kids, max_size=3),
                     max_leaves=8)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*here, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*here, i))


def _get(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Obj], *, api_version: bool = True) -> Obj:
    """A real manifest after a few structural edits: values replaced by arbitrary trees, keys deleted or added
    (often with real field names, in the wrong place), items duplicated, types changed."""
    doc: Obj = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 5))):
        path = draw(st.sampled_from(list(_paths(doc))))
        op = draw(st.sampled_from(["replace", "delete", "add", "wrap", "stringify", "null", "duplicate"]))
        if not path:
            if op == "add":
                doc[draw(keys)] = draw(trees)
            continue
        parent, last = _get(doc, path[:-1]), path[-1]
        value = parent[last]
        if op == "replace":
            parent[last] = draw(trees)
        elif op == "delete":
            del parent[last]
        elif op == "add" and isinstance(value, dict):
            value[draw(keys)] = draw(trees)
        elif op == "add" and isinstance(value, list):
            value.append(draw(trees))
        elif op == "wrap":
            parent[last] = [value]
        elif op == "stringify":
            parent[last] = str(value)
        elif op == "null":
            parent[last] = None
        elif op == "duplicate" and isinstance(value, list) and value:
            value.append(copy.deepcopy(value[0]))
    if api_version and draw(st.booleans()):
        doc["apiVersion"] = draw(st.sampled_from(API_VERSIONS))
    return doc


@st.composite
def arbitrary_manifest(draw: st.DrawFn) -> Any:
    """A JSON-like tree, usually dressed as one of our kinds so it gets past the kind check."""
    tree = draw(trees)
    if isinstance(tree, dict) and draw(st.booleans()):
        tree["apiVersion"] = draw(st.sampled_from(API_VERSIONS))
        tree["kind"] = draw(st.sampled_from(KINDS))
    return tree


documents = mutated(SEED_DOCS) | arbitrary_manifest()


COUNTS: dict[str, int] = {}
"""Examples run per fuzz target; ``tests/api/conftest.py`` prints them in the terminal summary."""


def _count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def _well_formed(result: Result) -> None:
    for f in result.errors + result.warnings:
        assert isinstance(f.message, str) and f.message, f
        assert isinstance(f.path, str), f


@settings(PROFILE)
@given(documents)
def test_documents_of_every_api_version_load_or_explain(doc: Any) -> None:
    _count("documents")
    parsed = parse_document(doc)
    _well_formed(parsed.result)
    if parsed.obj is None:
        assert parsed.result.errors or parsed.result.warnings, doc
    else:
        assert parsed.obj.api_version == c.API_VERSION  # legacy versions are converted, never kept


@st.composite
def texts(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return yaml.safe_dump_all([draw(documents) for _ in range(draw(st.integers(1, 3)))], sort_keys=False)
    if choice == 1:
        text = draw(st.sampled_from(SEED_TEXTS))
        for _ in range(draw(st.integers(1, 4))):  # character edits: broken indentation, tabs, stray markers
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(["\t", "  ", "\n---\n", ":", "- ", "...", "[", "'", ""])) + text[
                at + draw(st.integers(0, 3)):]
        return text
    return draw(st.text(max_size=200))


@settings(PROFILE)
@given(texts())
def test_yaml_text_loads_or_explains(text: str) -> None:
    from kubetrain.api.loader import load_text

    _count("texts")
    loaded = load_text(text, "fuzz.yaml")
    _well_formed(loaded.result)
    assert len(loaded.objects) == len(loaded.sources) == len(loaded.lines) == len(loaded.files)


@st.composite
def batches(draw: st.DrawFn) -> list[Any]:
    """A (mutated) runtime and a (mutated) TrainJob that references it, in either order."""
    runtime = draw(mutated(RUNTIME_SEEDS))
    trainjob = draw(mutated(TRAINJOB_SEEDS))
    meta = runtime.get("metadata")
    spec = trainjob.get("spec")
    if isinstance(meta, dict) and isinstance(spec, dict) and draw(st.booleans()):
        spec["runtimeRef"] = {"name": meta.get("name"), "kind": runtime.get("kind")}
    pair = [runtime, trainjob]
    return pair if draw(st.booleans()) else pair[::-1]


@settings(PROFILE)
@given(batches())
def test_validation_never_crashes_and_what_it_accepts_compiles(batch: list[Any]) -> None:
    _count("batches")
    subjects, rejected = [], []
    for doc in batch:
        parsed = parse_document(doc)
        if parsed.obj is not None:
            subjects.append(Subject(parsed.obj))
        elif parsed.partial is not None:
            subjects.append(Subject(parsed.partial, parsed.pruned))
        if parsed.identity is not None and parsed.obj is None:
            rejected.append(parsed.identity)
    from kubetrain.runtimes import builtin_runtimes

    results = validate_objects(subjects, installed=builtin_runtimes(), rejected=rejected, local="run")
    for result in results:
        _well_formed(result)
    all_valid = all(r.ok for r in results) and not rejected and all(not s.pruned for s in subjects)
    runtimes = [s.obj for s in subjects if not isinstance(s.obj, TrainJob)] + builtin_runtimes()
    for subject, result in zip(subjects, results, strict=True):
        if not isinstance(subject.obj, TrainJob) or not all_valid:
            continue
        from kubetrain.compiler import resolve_runtime

        runtime, _ = resolve_runtime(subject.obj, runtimes)
        assert runtime is not None, result
        try:
            compile_trainjob(subject.obj, runtime, keygen=fixed_keygen())
        except KubetrainError as exc:  # validation said yes: the compiler must agree
            pytest.fail(f"validated TrainJob does not compile: {exc}\n{batch}")
