"""Property tests: arbitrary and mutated manifests never escape as an uncaught exception from
load/validate/compile, and compiling is deterministic."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubetrain.api.errors import KubetrainError
from kubetrain.api.loader import load_text, parse_manifest
from kubetrain.api.runtime import ClusterTrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import validate_runtime_object
from kubetrain.compiler import compile_trainjob, fixed_keygen, resolve_runtime, validate_trainjob
from kubetrain.compiler.merge import strategic_merge
from kubetrain.runtimes import builtin_runtimes

RUNTIMES = builtin_runtimes()
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.text(max_size=12),
                    st.sampled_from(["auto", "gpu", "cpu", "2", "500m", "4Gi", "node", "trainer", "-1"]))
KEYS = st.sampled_from([
    "name", "numNodes", "numProcPerNode", "image", "command", "args", "env", "value", "trainer", "runtimeRef",
    "kind", "apiGroup", "resourcesPerNode", "limits", "requests", "cpu", "nvidia.com/gpu", "mlPolicy", "torch",
    "mpi", "replicatedJobs", "template", "spec", "metadata", "labels", "containers", "suspend", "initializer",
    "dataset", "storageUri", "runtimePatches", "manager", "podTemplateOverrides", "targetJobs", "elasticPolicy",
    "minNodes", "maxNodes", "unknownField",
])
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4)), max_leaves=20)

BASE_TRAINJOB: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
    "metadata": {"name": "prop", "namespace": "default"},
    "spec": {"runtimeRef": {"name": "torch-distributed"},
             "trainer": {"numNodes": 2, "command": ["torchrun", "t.py"], "env": [{"name": "A", "value": "1"}],
                         "resourcesPerNode": {"requests": {"cpu": 2}}}},
}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    if not path:
        return doc
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


def _pipeline(doc: Any) -> None:
    obj, result = parse_manifest(doc)
    if obj is None:
        assert result.errors or result.warnings
        return
    if isinstance(obj, TrainJob):
        runtime, _ = resolve_runtime(obj, RUNTIMES)
        checked = validate_trainjob(obj, runtime)
        if runtime is not None and checked.ok:
            try:
                compile_trainjob(obj, runtime, keygen=fixed_keygen())
            except KubetrainError:
                pass
    else:
        validate_runtime_object(obj)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_trainjobs_never_crash(data: st.DataObject) -> None:
    paths = _paths(BASE_TRAINJOB)
    path = data.draw(st.sampled_from(paths))
    _pipeline(_mutate(BASE_TRAINJOB, path, data.draw(JSONISH)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_runtimes_never_crash(data: st.DataObject) -> None:
    runtime = data.draw(st.sampled_from(RUNTIMES)).to_wire()
    path = data.draw(st.sampled_from(_paths(runtime)))
    mutated = _mutate(runtime, path, data.draw(JSONISH))
    _pipeline(mutated)
    # The mutated runtime must also never break compilation of a TrainJob that references it.
    obj, _ = parse_manifest(mutated)
    if isinstance(obj, ClusterTrainingRuntime) and validate_runtime_object(obj).ok:
        tj = TrainJob.model_validate({**BASE_TRAINJOB, "spec": {**BASE_TRAINJOB["spec"],
                                                                "runtimeRef": {"name": obj.name}}})
        if validate_trainjob(tj, obj).ok:
            try:
                compile_trainjob(tj, obj, keygen=fixed_keygen())
            except KubetrainError:
                pass


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_arbitrary_documents_never_crash(doc: Any) -> None:
    _pipeline(doc)
    _pipeline({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "x"},
               "spec": doc})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes_the_loader(text: str) -> None:
    loaded = load_text(text, "fuzz.yaml")
    assert loaded.result.ok or loaded.result.errors[0].render()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 50), st.sampled_from(RUNTIMES))
def test_compile_is_deterministic(nodes: int, runtime: ClusterTrainingRuntime) -> None:
    tj = TrainJob.model_validate({**BASE_TRAINJOB, "spec": {"runtimeRef": {"name": runtime.name},
                                                            "trainer": {"numNodes": nodes}}})
    first = compile_trainjob(tj, runtime, keygen=fixed_keygen())
    second = compile_trainjob(tj, runtime, keygen=fixed_keygen())
    assert yaml.safe_dump_all(first) == yaml.safe_dump_all(second)
    # Compiling must not mutate its inputs.
    assert tj.spec.trainer is not None and tj.spec.trainer.num_nodes == nodes
    assert runtime == next(r for r in builtin_runtimes() if r.name == runtime.name)


ENV = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["A", "B", "C", "D"]), "value": st.text(max_size=3)}),
               max_size=5)


@given(ENV.map(lambda env: list({e["name"]: e for e in env}.values())), ENV)
def test_env_merge_keeps_base_order_and_patch_wins(base: list[dict[str, str]], patch: list[dict[str, str]]) -> None:
    merged = strategic_merge({"env": base}, {"env": patch})["env"]
    names = [e["name"] for e in merged]
    assert len(names) == len(set(names))
    last = {e["name"]: e["value"] for e in patch}
    for e in merged:
        if e["name"] in last:
            assert e["value"] == last[e["name"]]
    base_names = list(dict.fromkeys(e["name"] for e in base))
    assert [n for n in dict.fromkeys(names) if n in base_names] == base_names


@given(JSONISH, JSONISH)
def test_merge_does_not_mutate_inputs(a: Any, b: Any) -> None:
    a0, b0 = copy.deepcopy(a), copy.deepcopy(b)
    strategic_merge(a, b)
    assert a == a0 and b == b0
