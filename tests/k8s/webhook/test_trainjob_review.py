"""TrainJob admission over real TLS: allowed, denied (403, aggregated field errors), warnings, lookups."""

from __future__ import annotations

from kubetrain.api.runtime import MPIPolicy
from kubetrain.k8s.webhook import names
from kubetrain.runtimes import builtin_runtime
from tests.k8s.webhook.conftest import Served, trainjob

V = names.VALIDATE_TRAINJOB
# Upstream's notice is 200 characters; the API server wants warnings of at most 120, key words first.
DEPRECATED = 'deprecated runtime: ClusterTrainingRuntime "old-torch" will be removed in a future release'


def test_valid_trainjob_is_allowed_without_warnings(served: Served) -> None:
    resp = served.review(V, trainjob(trainer={"numNodes": 2, "image": "pytorch/pytorch:2.13.0"}))
    assert resp == {"uid": resp["uid"], "allowed": True}


def test_runtime_is_looked_up_by_kind_name_and_namespace(served: Served) -> None:
    served.cluster.calls.clear()
    served.review(V, trainjob())
    assert served.cluster.calls == [("ClusterTrainingRuntime", "torch-distributed", None)]


def test_missing_cluster_runtime_is_denied_with_403(served: Served) -> None:
    resp = served.review(V, trainjob(runtime="nope"))
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert resp["status"]["reason"] == "Forbidden"
    assert resp["status"]["message"].startswith(
        'spec.runtimeRef.name: ClusterTrainingRuntime "nope" not found: specified clusterTrainingRuntime '
        "must be created before the TrainJob is created"
    )


def test_namespaced_runtime_found_in_the_trainjob_namespace(served: Served) -> None:
    job = trainjob(runtime="team-torch")
    job["metadata"]["namespace"] = "team-a"
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert served.review(V, job, namespace="team-a")["allowed"] is True
    job["metadata"]["namespace"] = "team-b"
    resp = served.review(V, job, namespace="team-b")
    assert resp["allowed"] is False
    assert 'TrainingRuntime "team-torch" not found' in resp["status"]["message"]


def test_namespace_comes_from_the_request_when_the_object_has_none(served: Served) -> None:
    job = trainjob(runtime="team-torch")
    del job["metadata"]["namespace"]
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert served.review(V, job, namespace="team-a")["allowed"] is True


def test_unsupported_runtime_kind(served: Served) -> None:
    job = trainjob()
    job["spec"]["runtimeRef"]["kind"] = "FancyRuntime"
    resp = served.review(V, job)
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        "spec.runtimeRef: unsupported runtime: FancyRuntime.trainer.kubeflow.org"
    )


def test_deprecated_runtime_warns_but_allows(served: Served) -> None:
    resp = served.review(V, trainjob(runtime="old-torch"))
    assert resp["allowed"] is True
    assert resp["warnings"] == [DEPRECATED]
    # Also on update (upstream warns on both).
    resp = served.review(
        V, trainjob(runtime="old-torch"), old=trainjob(runtime="old-torch"), operation="UPDATE"
    )
    assert resp["warnings"] == [DEPRECATED]


def test_several_errors_are_aggregated_in_one_message(served: Served) -> None:
    resp = served.review(V, trainjob(name="Bad_Name", runtime="nope"))
    assert resp["allowed"] is False
    msg = resp["status"]["message"]
    assert msg.startswith("[") and msg.endswith("]"), msg
    assert "metadata.name: metadata.name must match RFC 1035 DNS label format" in msg
    assert 'spec.runtimeRef.name: ClusterTrainingRuntime "nope" not found' in msg


def test_schema_errors_stop_before_the_runtime_checks(served: Served) -> None:
    resp = served.review(V, trainjob(trainer={"numNodes": -1}))
    assert (
        resp["status"]["message"]
        == "spec.trainer.numNodes: input should be greater than or equal to 0, got -1"
    )


def test_schema_errors_name_the_field(served: Served) -> None:
    resp = served.review(V, trainjob(trainer={"numNodes": "two"}))
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith("spec.trainer.numNodes: ")


def test_immutable_fields_on_update(served: Served) -> None:
    old = trainjob(trainer={"numNodes": 1})
    new = trainjob(trainer={"numNodes": 1, "image": "other:1"})  # numNodes: see test_scale.py
    resp = served.review(V, new, old=old, operation="UPDATE")
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith("spec.trainer: field is immutable")


def _patched(suspend: bool, selector: str) -> dict[str, object]:
    patch = {
        "manager": "acme.io/queue",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"spec": {"nodeSelector": {"pool": selector}}}}
                            },
                        }
                    ]
                }
            }
        },
    }
    return trainjob(suspend=suspend, runtimePatches=[patch])


def test_runtime_patches_change_only_while_suspended(served: Served) -> None:
    resp = served.review(V, _patched(False, "b"), old=_patched(False, "a"), operation="UPDATE")
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        "spec.runtimePatches: RuntimePatches can only be modified when the TrainJob is suspended before or "
        "after the update"
    )
    assert (
        served.review(V, _patched(True, "b"), old=_patched(True, "a"), operation="UPDATE")["allowed"] is True
    )


def test_runtime_patches_frozen_while_the_jobset_is_still_active(served: Served) -> None:
    served.cluster.jobsets[("job", "default")] = {
        "status": {"replicatedJobsStatus": [{"name": "node", "active": 2, "ready": 0}]}
    }
    try:
        resp = served.review(V, _patched(True, "b"), old=_patched(True, "a"), operation="UPDATE")
    finally:
        del served.cluster.jobsets[("job", "default")]
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        "spec.runtimePatches: RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is "
        "still active"
    )


def test_lookup_failure_is_an_internal_error_not_a_verdict(served: Served) -> None:
    served.cluster.fail_lookups = True
    try:
        resp = served.review(V, trainjob())
    finally:
        served.cluster.fail_lookups = False
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 500
    assert "apiserver unreachable" in resp["status"]["message"]


def test_delete_is_allowed_untouched(served: Served) -> None:
    resp = served.review(V, None, old=trainjob(), operation="DELETE")
    assert resp == {"uid": resp["uid"], "allowed": True}


def test_update_of_an_object_being_deleted_is_not_blocked(served: Served) -> None:
    """Finalizer removal on the way out must pass even when the runtime is gone."""
    old = trainjob(runtime="deleted-meanwhile")
    old["metadata"]["finalizers"] = ["example.com/cleanup"]
    new = trainjob(runtime="deleted-meanwhile")
    new["metadata"]["deletionTimestamp"] = "2026-11-22T03:00:00Z"
    assert served.review(V, new, old=old, operation="UPDATE")["allowed"] is True
    assert served.review(V, old, old=old, operation="UPDATE")["allowed"] is False


def test_a_stored_runtime_that_cannot_be_read_is_not_called_missing(served: Served) -> None:
    key = ("ClusterTrainingRuntime", "broken", None)
    served.cluster.runtimes[key] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
                                    "metadata": {"name": "broken"}, "spec": {"mlPolicy": {"numNodes": "x"}}}
    try:
        resp = served.review(V, trainjob(runtime="broken"))
    finally:
        del served.cluster.runtimes[key]
    assert resp["allowed"] is False
    message = resp["status"]["message"]
    assert message.startswith('spec.runtimeRef: ClusterTrainingRuntime "broken" exists but cannot be read: '
                              "spec.mlPolicy.numNodes: expected an integer, got 'x'")
    assert "not found" not in message


def test_a_stored_runtime_that_breaks_a_rule_is_named_invalid(served: Served) -> None:
    key = ("ClusterTrainingRuntime", "two", None)
    rt = builtin_runtime("torch-distributed")
    assert rt is not None
    rt.metadata.name = "two"
    rt.spec.ml_policy = rt.spec.ml_policy.model_copy(update={"mpi": MPIPolicy()})  # type: ignore[union-attr]
    served.cluster.runtimes[key] = rt
    try:
        resp = served.review(V, trainjob(runtime="two"))
    finally:
        del served.cluster.runtimes[key]
    assert resp["status"]["message"].startswith(
        'spec.runtimeRef: ClusterTrainingRuntime "two" is invalid: spec.mlPolicy: Only one of the policy can be '
        "configured (found torch, mpi)")


def test_a_denial_lists_schema_errors_and_rule_errors_together(served: Served) -> None:
    resp = served.review(V, trainjob(name="Job_1", trainer={"numNodes": -3}))
    message = resp["status"]["message"]
    assert "spec.trainer.numNodes: input should be greater than or equal to 0, got -3" in message
    assert "metadata.name: metadata.name must match RFC 1035 DNS label format, got 'Job_1'" in message


def test_tensorflow_trainjob_is_judged_by_the_same_rules(served: Served) -> None:
    # kubetrain's own TensorFlow policy goes through the one validation path, as every other policy does.
    served.cluster.runtimes[("ClusterTrainingRuntime", "tensorflow-distributed", None)] = builtin_runtime(
        "tensorflow-distributed"
    )
    ok = trainjob(runtime="tensorflow-distributed", trainer={"numNodes": 2, "command": ["python", "train.py"]})
    assert served.review(V, ok)["allowed"] is True
    bad = trainjob(runtime="tensorflow-distributed",
                   trainer={"numNodes": 2, "env": [{"name": "TF_CONFIG", "value": "{}"}]})
    resp = served.review(V, bad)
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        "spec.trainer.env[0]: TF_CONFIG is reserved for the TensorFlow runtime (fix: remove it"
    )
