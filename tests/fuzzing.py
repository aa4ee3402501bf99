"""What every fuzz test shares: the seed manifests, the hypothesis strategies that mutate them, the profiles, the
crash oracle and the tally of examples run.

Inputs are structured mutations of real manifests (the built-in runtimes, the examples, the golden inputs, the
seed documents' snippets, upstream's shipped runtimes and a few ConfigMaps, Secrets and claims) plus arbitrary
JSON-like trees and character-level edits of the seed texts. The entry points fed with them are
``tests/api/test_fuzz.py`` (loader, validation, compiler), ``tests/cli/test_fuzz_entry_points.py`` (``validate``,
``render``, ``apply``, ``run``) and ``tests/k8s/webhook/test_fuzz_review.py`` (the admission handlers).

Profiles, chosen by ``KUBETRAIN_FUZZ_PROFILE``: ``ci`` (default: a fixed, derandomized sample of a few dozen to
a hundred examples per test, so a red build is never luck) and ``fuzz`` (``make fuzz``: 10,000 per test,
random; ``KUBETRAIN_FUZZ_EXAMPLES`` changes the number).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kubetrain.api import constants as c
from kubetrain.api.loader import LEGACY_API_VERSIONS
from tests.conftest import REPO, SHARED

Obj = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

FUZZ_EXAMPLES = int(os.environ.get("KUBETRAIN_FUZZ_EXAMPLES", "10000"))
PROFILE_NAME = os.environ.get("KUBETRAIN_FUZZ_PROFILE", "ci")


def fuzz_settings(ci_examples: int) -> Callable[[F], F]:
    """``@settings`` for a fuzz test: ``ci_examples`` derandomized examples in CI, 10,000 random ones under
    ``make fuzz``. Health checks are off: seeds are large and some examples are slow on purpose."""
    if PROFILE_NAME == "fuzz":
        chosen = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    else:
        chosen = settings(max_examples=ci_examples, deadline=None, suppress_health_check=list(HealthCheck),
                          database=None, derandomize=True)
    return chosen  # type: ignore[return-value]


COUNTS: dict[str, int] = {}
"""Examples run per fuzz target; ``tests/conftest.py`` prints them in the terminal summary."""


REACHED: dict[str, int] = {}
"""How many examples got how far (e.g. a TrainJob submitted): the tally shows the fuzz is not all rejections."""


def count(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def reached(name: str) -> None:
    REACHED[name] = REACHED.get(name, 0) + 1


# ---------------------------------------------------------------------------------------------------------------
# Seeds

API_VERSIONS = (c.API_VERSION, *LEGACY_API_VERSIONS, "v1", "trainer.kubeflow.org/v9")
KINDS = (c.KIND_TRAINJOB, c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME, "ConfigMap", "Secret",
         "PersistentVolumeClaim", "Trainjob", "Deployment")
MANAGED_BY = (c.MANAGED_BY_DEFAULT, c.MANAGED_BY_MULTIKUEUE, c.MANAGED_BY_MULTIKUEUE, "example.com/other", "")
BUILTIN_NAMES = ("torch-distributed", "torch-distributed-restricted", "deepspeed-distributed", "mlx-distributed",
                 "jax-distributed", "xgboost-distributed", "torchtune-llama3.2-1b")

# The core kinds pods reference: none of the seed files has one, so they are written here.
CORE_SEEDS: list[Obj] = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "train-config"},
     "data": {"config.yaml": "lr: 0.01\n", "EPOCHS": "3"}, "binaryData": {"blob": "AAEC"}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "type": "Opaque",
     "stringData": {"HF_TOKEN": "hf_xxx"}, "data": {"user": "dXNlcg=="}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
     "data": {"tls.crt": "eA==", "tls.key": "eA=="}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "datasets"},
     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
              "volumeMode": "Filesystem"}},
]
# A TrainJob that uses them through a pod template override, so their names and keys meet the volumes.
CORE_USER: Obj = {
    "apiVersion": c.API_VERSION, "kind": c.KIND_TRAINJOB, "metadata": {"name": "uses-core"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 1, "command": ["torchrun", "train.py"],
                    "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}]},
        "podTemplateOverrides": [{
            "targetJobs": [{"name": "node"}],
            "spec": {
                "volumes": [{"name": "cfg", "configMap": {"name": "train-config"}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
                "containers": [{"name": "node", "volumeMounts": [{"name": "cfg", "mountPath": "/etc/train"},
                                                                 {"name": "data", "mountPath": "/data"}]}],
            },
        }],
    },
}


def _seed_files() -> Iterator[Path]:
    yield from sorted((REPO / "src" / "kubetrain" / "runtimes").glob("*.yaml"))
    yield from sorted((REPO / "examples").rglob("*.yaml"))
    yield from sorted((REPO / "tests" / "compiler" / "golden").glob("*.input.yaml"))
    yield from sorted((REPO / "tests" / "compiler" / "golden" / "optimization").glob("*.input.yaml"))
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
    docs += [*copy.deepcopy(CORE_SEEDS), copy.deepcopy(CORE_USER)]
    return texts, docs


SEED_TEXTS, SEED_DOCS = _seeds()
RUNTIME_SEEDS = [d for d in SEED_DOCS if d.get("kind") in (c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME)]
TRAINJOB_SEEDS = [d for d in SEED_DOCS if d.get("kind") == c.KIND_TRAINJOB]
OPTIMIZATION_SEEDS = [d for d in SEED_DOCS if d.get("kind") == c.KIND_OPTIMIZATIONJOB]


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

# ---------------------------------------------------------------------------------------------------------------
# Strategies

scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
    | st.sampled_from(["", "0", "1.5", "500m", "4Gi", "10XB", "auto", "gpu", "node", "launcher", "-1", "1e3",
                       "trainer", "OpenMPI", "Intel", "MPICH", "deprecated", "[x]", "a/b", "ALL", "SYS_ADMIN",
                       "RuntimeDefault", "Unconfined", "Always", "/", "hf://org/model"])
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
def mutated(draw: st.DrawFn, seeds: list[Obj], *, api_version: bool = True, edits: int = 5) -> Obj:
    """A real manifest after up to ``edits`` structural edits: values replaced by arbitrary trees, keys deleted or
    added (often with real field names, in the wrong place), items duplicated, types changed."""
    doc: Obj = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, edits))):
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


def _spec(doc: Any) -> Obj | None:
    spec = doc.get("spec") if isinstance(doc, dict) else None
    return spec if isinstance(spec, dict) else None


@st.composite
def batches(draw: st.DrawFn) -> list[Any]:
    """A (mutated) runtime and a (mutated) TrainJob that references it, in either order."""
    runtime = draw(mutated(RUNTIME_SEEDS))
    trainjob = draw(mutated(TRAINJOB_SEEDS))
    meta = runtime.get("metadata")
    spec = _spec(trainjob)
    if isinstance(meta, dict) and spec is not None and draw(st.booleans()):
        spec["runtimeRef"] = {"name": meta.get("name"), "kind": runtime.get("kind")}
    pair = [runtime, trainjob]
    return pair if draw(st.booleans()) else pair[::-1]


@st.composite
def manifests(draw: st.DrawFn) -> list[Any]:
    """What a user hands to ``-f``: a TrainJob (mutated, usually referencing a runtime of the batch or a
    built-in one, sometimes managed by another controller), often its runtime, sometimes ConfigMaps, Secrets and
    claims, sometimes a stray document; in any order. Half the batches are edited lightly (at most one edit per
    document), so that many get past validation to compiling, the Pod Security lint and submitting."""
    edits = draw(st.sampled_from([1, 5]))
    heavy = edits > 1  # light batches keep their apiVersions, or take a legacy one the loader converts

    def legacy(doc: Any) -> Any:
        if not heavy and isinstance(doc, dict) and draw(st.integers(0, 3)) == 0:
            doc["apiVersion"] = draw(st.sampled_from(LEGACY_API_VERSIONS))
        return doc

    out: list[Any] = []
    runtime = legacy(draw(mutated(RUNTIME_SEEDS, edits=edits, api_version=heavy))) if draw(st.integers(0, 2)) else None
    if runtime is not None:
        out.append(runtime)
    if draw(st.integers(0, 9)) > 0:
        trainjob = legacy(draw(mutated(TRAINJOB_SEEDS, edits=edits, api_version=heavy)))
        spec = _spec(trainjob)
        if spec is not None:
            ref = draw(st.integers(0, 3))
            meta = runtime.get("metadata") if isinstance(runtime, dict) else None
            if ref == 0 and isinstance(meta, dict):
                spec["runtimeRef"] = {"name": meta.get("name"), "kind": runtime.get("kind")}  # type: ignore[union-attr]
            elif ref == 1:
                spec["runtimeRef"] = {"name": draw(st.sampled_from(BUILTIN_NAMES))}
            if draw(st.integers(0, 4)) == 0:
                spec["managedBy"] = draw(st.sampled_from(MANAGED_BY))
            if draw(st.integers(0, 5)) == 0:
                spec["suspend"] = True
        out.append(trainjob)
    if OPTIMIZATION_SEEDS and draw(st.integers(0, 3)) == 0:
        out.append(draw(_search(runtime, edits, heavy)))
    for _ in range(draw(st.integers(0, 2)) if draw(st.booleans()) else 0):
        out.append(draw(mutated(CORE_SEEDS, edits=edits, api_version=heavy)))
    if draw(st.integers(0, 5)) == 0:
        out.append(draw(documents))
    if not out:
        out.append(draw(documents))
    return draw(st.permutations(out))


@st.composite
def _search(draw: st.DrawFn, runtime: Any, edits: int, heavy: bool) -> Any:
    """A (mutated) OptimizationJob whose trial template often names the batch's runtime or a built-in one."""
    search = draw(mutated(OPTIMIZATION_SEEDS, edits=edits, api_version=heavy))
    template = _spec(search)
    template = template.get("trainJobTemplate") if template is not None else None
    trial = _spec(template)
    if trial is not None:
        ref = draw(st.integers(0, 2))
        meta = runtime.get("metadata") if isinstance(runtime, dict) else None
        if ref == 0 and isinstance(meta, dict):
            trial["runtimeRef"] = {"name": meta.get("name"), "kind": runtime.get("kind")}
        elif ref == 1:
            trial["runtimeRef"] = {"name": draw(st.sampled_from(BUILTIN_NAMES))}
    return search


@st.composite
def manifest_files(draw: st.DrawFn) -> str:
    """The text of a ``-f`` file: usually ``manifests()`` as YAML, sometimes a seed file with broken
    characters."""
    if draw(st.integers(0, 4)):
        return yaml.safe_dump_all(draw(manifests()), sort_keys=False, allow_unicode=True)
    return draw(texts())


# ---------------------------------------------------------------------------------------------------------------
# The oracle

# What Python or pydantic say, never the product: a message with one of these is a crash that was caught and
# printed instead of explained.
RAW_MARKERS = (
    "Traceback (most recent call last)",
    "validation error for",
    "errors.pydantic.dev",
    "Input should be",
    "Value error,",
    "object has no attribute",
    "object is not iterable",
    "object is not subscriptable",
    "object is not callable",
    "unhashable type",
    "NoneType",
    "KeyError",
    "TypeError",
    "AttributeError",
    "IndexError",
    "internal error",
)


def assert_clear(text: str, context: object) -> None:
    """``text`` (what a user sees) carries no Python or pydantic internals."""
    for marker in RAW_MARKERS:
        assert marker not in text, f"raw {marker!r} reaches the user:\n{text}\n--- input:\n{context}"
