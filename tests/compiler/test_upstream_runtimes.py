"""Upstream's shipped runtimes load unchanged, validate, compile; every emitted JobSet and PodGroup is valid
under the real CRD schemas (OpenAPI v3 validator)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from kubetrain.api.loader import load_file
from kubetrain.api.runtime import ClusterTrainingRuntime
from kubetrain.api.validation import validate_runtime_object
from kubetrain.compiler import compile_trainjob, fixed_keygen, validate_trainjob
from kubetrain.runtimes import builtin_runtimes
from tests.builders import TrainJobBuilder
from tests.conftest import SHARED, shared_path

RUNTIME_FILES = sorted((SHARED / "reference" / "upstream" / "runtimes").glob("v*/*.yaml"))


@cache
def crd_validator(*parts: str) -> OAS30Validator:
    crd = yaml.safe_load(shared_path("reference", "upstream", *parts).read_text())
    return OAS30Validator(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def schema_errors(obj: dict[str, Any]) -> list[str]:
    validators = {
        "JobSet": ("jobset", "jobset.x-k8s.io_jobsets.yaml"),
        "PodGroup/scheduling.x-k8s.io/v1alpha1": ("podgroup", "scheduling.x-k8s.io_podgroups.yaml"),
        "PodGroup/scheduling.volcano.sh/v1beta1": ("podgroup", "scheduling.volcano.sh_podgroups.yaml"),
    }
    key = obj["kind"] if obj["kind"] == "JobSet" else f"{obj['kind']}/{obj['apiVersion']}"
    if key not in validators:
        return []
    v = crd_validator(*validators[key])
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]


@pytest.mark.parametrize("path", RUNTIME_FILES, ids=[f"{p.parent.name}/{p.name}" for p in RUNTIME_FILES])
def test_upstream_runtime_loads_validates_and_compiles(path: Path) -> None:
    loaded = load_file(path)
    assert loaded.result.errors == [] and loaded.result.warnings == []
    (runtime,) = loaded.objects
    assert isinstance(runtime, ClusterTrainingRuntime)
    assert validate_runtime_object(runtime).errors == []
    tj = TrainJobBuilder(name="minimal", runtime=runtime.name).build()
    assert validate_trainjob(tj, runtime).errors == []
    objects = compile_trainjob(tj, runtime, keygen=fixed_keygen())
    assert objects[-1]["kind"] == "JobSet"
    for obj in objects:
        assert schema_errors(obj) == []


def test_no_upstream_runtime_missed() -> None:
    assert len(RUNTIME_FILES) >= 16 or not SHARED.exists()


@pytest.mark.parametrize("runtime", builtin_runtimes(), ids=lambda r: r.name)
def test_builtin_runtimes_compile_to_valid_objects(runtime: ClusterTrainingRuntime) -> None:
    assert "trainer.kubeflow.org/framework" in runtime.labels
    tj = TrainJobBuilder(name="big", runtime=runtime.name).trainer(numNodes=3).build()
    for obj in compile_trainjob(tj, runtime, keygen=fixed_keygen()):
        assert schema_errors(obj) == []


def test_podgroups_validate_against_their_crds() -> None:
    from tests.builders import RuntimeBuilder

    for policy in ({"coscheduling": {}}, {"volcano": {"queue": "q", "networkTopology": {"mode": "hard"}}}):
        rt = RuntimeBuilder().ml(numNodes=2, torch={}).pod_group(**policy).trainer(
            resources={"requests": {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": 1}}).build()
        objs = compile_trainjob(TrainJobBuilder().build(), rt, keygen=fixed_keygen())
        pgs = [o for o in objs if o["kind"] == "PodGroup"]
        assert len(pgs) == 1 and schema_errors(pgs[0]) == []


def test_schema_check_can_fail() -> None:
    rt = builtin_runtimes()[0]
    js = compile_trainjob(TrainJobBuilder(runtime=rt.name).build(), rt, keygen=fixed_keygen())[-1]
    js["spec"]["replicatedJobs"][0]["replicas"] = "many"
    assert schema_errors(js)


def _upstream_runtimes(version: str = "v2.3") -> dict[str, ClusterTrainingRuntime]:
    out = {}
    for path in RUNTIME_FILES:
        if path.parent.name == version:
            (runtime,) = load_file(path).objects
            assert isinstance(runtime, ClusterTrainingRuntime)
            out[runtime.name] = runtime
    return out


@pytest.mark.parametrize("runtime", builtin_runtimes(), ids=lambda r: r.name)
def test_builtin_runtime_compiles_exactly_like_upstreams(runtime: ClusterTrainingRuntime) -> None:
    """A cluster gets the same objects from our built-in runtime as from upstream's runtime of that name (kubetrain's
    own runtimes, which upstream does not ship, are skipped)."""
    upstream = _upstream_runtimes().get(runtime.name)
    if upstream is None:
        pytest.skip(f"upstream ships no {runtime.name} runtime")
    # The runtime snapshot records the runtime as written (ours spells out defaults such as numProcPerNode: auto),
    # so it is left out; every object the runtime compiles into is compared whole.
    def without_snapshot(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for o in objects if not o["metadata"]["name"].endswith("-runtime-snapshot")]

    for trainer in ({}, {"numNodes": 2}, {"numNodes": 3, "numProcPerNode": 2, "command": ["python", "t.py"]}):
        tj = TrainJobBuilder(name="job", runtime=runtime.name).trainer(**trainer).build()
        ours = without_snapshot(compile_trainjob(tj, runtime, keygen=fixed_keygen()))
        theirs = without_snapshot(compile_trainjob(tj, upstream, keygen=fixed_keygen()))
        assert ours == theirs, trainer
        assert any(o["kind"] == "JobSet" for o in ours)


def test_kubetrain_only_runtimes_are_the_known_ones() -> None:
    if not SHARED.exists():
        pytest.skip("no shared reference material")
    ours = {r.name for r in builtin_runtimes()} - set(_upstream_runtimes())
    assert ours == {"tensorflow-distributed", "torch-distributed-restricted"}


def test_a_cache_dataset_compiles_and_validates_like_upstreams() -> None:
    """``cache://`` on a cluster: the compiler only hands the URI to the dataset initializer (STORAGE_URI after the
    runtime's CACHE_IMAGE and TRAIN_JOB_NAME), which starts the data cache there. Kubeflow Trainer v2.3's admission
    wants an ``initializer`` volume in that container for any spec.initializer.dataset, which its own data cache
    runtime lacks: both refuse such a TrainJob alike, and accept it once the TrainJob adds the volume."""
    ours = next(r for r in builtin_runtimes() if r.name == "torch-distributed-with-cache")
    theirs = _upstream_runtimes().get("torch-distributed-with-cache")
    if theirs is None:
        pytest.skip("no upstream data cache runtime in the shared reference")
    tj = TrainJobBuilder(name="job", runtime=ours.name).trainer(numNodes=2).initializer(
        dataset={"storageUri": "cache://sales/orders", "env": [{"name": "METADATA_LOC", "value": "s3a://b/m.json"}]})
    objects = compile_trainjob(tj.build(), ours, keygen=fixed_keygen())
    assert objects[1:] == compile_trainjob(tj.build(), theirs, keygen=fixed_keygen())[1:]  # all but the snapshot
    init = objects[-1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert init["serviceAccountName"] == "kubeflow-trainer-cache-initializer"
    assert [e["name"] for e in init["containers"][0]["env"]] == [
        "CACHE_IMAGE", "TRAIN_JOB_NAME", "STORAGE_URI", "METADATA_LOC"]
    assert init["containers"][0]["env"][2] == {"name": "STORAGE_URI", "value": "cache://sales/orders"}
    refused = [(f.path, f.message) for f in validate_trainjob(tj.build(), ours).errors]
    assert refused == [("spec.initializer.dataset", "must have volumeMount with name - initializer in container "
                        "dataset-initializer of the dataset-initializer job")]
    tj.spec(podTemplateOverrides=[{"targetJobs": [{"name": "dataset-initializer"}], "spec": {
        "volumes": [{"name": "initializer", "emptyDir": {}}],
        "containers": [{"name": "dataset-initializer", "volumeMounts": [{"name": "initializer",
                                                                         "mountPath": "/workspace"}]}]}}])
    assert validate_trainjob(tj.build(), ours).errors == []
