"""TrainingRuntime / ClusterTrainingRuntime admission over real TLS."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.k8s.webhook import names
from kubetrain.runtimes import builtin_runtimes
from tests.k8s.webhook.conftest import Served

CTR = names.VALIDATE_CLUSTER_TRAINING_RUNTIME
TR = names.VALIDATE_TRAINING_RUNTIME


def runtime(kind: str = "ClusterTrainingRuntime", **labels: str) -> dict[str, Any]:
    rt = next(r for r in builtin_runtimes() if r.name == "torch-distributed").to_wire()
    rt["kind"] = kind
    rt["metadata"] = {"name": "my-torch", "labels": {"trainer.kubeflow.org/framework": "torch", **labels}}
    if kind == "TrainingRuntime":
        rt["metadata"]["namespace"] = "default"
    return rt


@pytest.mark.parametrize("rt", [r.to_wire() for r in builtin_runtimes()], ids=lambda r: r["metadata"]["name"])
def test_every_builtin_runtime_is_admitted(served: Served, rt: dict[str, Any]) -> None:
    resp = served.review(CTR, rt, namespace=None)
    assert resp["allowed"] is True, resp
    assert "warnings" not in resp


@pytest.mark.parametrize(("path", "kind"), [(CTR, "ClusterTrainingRuntime"), (TR, "TrainingRuntime")])
def test_trainer_rjob_needs_one_replica(served: Served, path: str, kind: str) -> None:
    rt = runtime(kind)
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    resp = served.review(path, rt)
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert resp["status"]["message"].startswith(
        "spec.template.spec.replicatedJobs[0].replicas: always must be 1"
    )


def test_deprecated_cluster_runtime_warns_on_create_only(served: Served) -> None:
    rt = runtime(**{"trainer.kubeflow.org/support": "deprecated"})
    resp = served.review(CTR, rt, namespace=None)
    assert resp["allowed"] is True
    assert resp["warnings"] == ['deprecated: ClusterTrainingRuntime "my-torch" will be removed in a future release']
    resp = served.review(CTR, rt, old=rt, operation="UPDATE", namespace=None)
    assert resp["allowed"] is True
    assert "warnings" not in resp


def test_missing_framework_label_is_a_warning(served: Served) -> None:
    rt = runtime()
    del rt["metadata"]["labels"]["trainer.kubeflow.org/framework"]
    resp = served.review(CTR, rt, namespace=None)
    assert resp["allowed"] is True
    assert len(resp["warnings"]) == 1
    assert "trainer.kubeflow.org/framework" in resp["warnings"][0]


def test_two_ml_policies_are_denied(served: Served) -> None:
    rt = runtime()
    rt["spec"]["mlPolicy"]["mpi"] = {"numProcPerNode": 1}
    resp = served.review(CTR, rt, namespace=None)
    assert resp["allowed"] is False
    assert "spec.mlPolicy" in resp["status"]["message"]


def test_unknown_field_is_denied_with_its_path(served: Served) -> None:
    rt = runtime()
    rt["spec"]["mlPolicy"]["numNode"] = 3
    resp = served.review(CTR, rt, namespace=None)
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith("spec.mlPolicy.numNode")


def test_finalizer_removal_from_a_deleted_invalid_runtime_passes(served: Served) -> None:
    """The operator strips upstream's legacy finalizer; an old runtime that our rules reject must still go."""
    rt = runtime()
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    old = {**rt, "metadata": {**rt["metadata"], "finalizers": ["trainer.kubeflow.org/resource-in-use"]}}
    new = {**rt, "metadata": {**rt["metadata"], "deletionTimestamp": "2026-11-22T03:00:00Z"}}
    assert served.review(CTR, new, old=old, operation="UPDATE", namespace=None)["allowed"] is True
