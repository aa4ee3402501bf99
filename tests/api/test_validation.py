"""Object-level validation: runtime rules (§6.4, CEL §1.6), TrainJob rules (§1.2-1.3, §9.1 case 20), wording."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import constants as c
from kubetrain.api.validation import validate_runtime_object, validate_trainjob_object
from kubetrain.compiler import resolve_runtime, validate_trainjob
from kubetrain.runtimes import builtin_runtimes
from tests.builders import RuntimeBuilder, TrainJobBuilder

POLICY_URL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"


def errors(result: object) -> dict[str, str]:
    return {e.path: e.message for e in result.errors}  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["Invalid-Name", "1abc", "abc-", "a" * 64, "a_b"])
def test_bad_trainjob_names(name: str) -> None:
    result = validate_trainjob_object(TrainJobBuilder(name=name).build())
    assert "metadata.name" in errors(result)


def test_63_char_name_is_fine() -> None:
    assert validate_trainjob_object(TrainJobBuilder(name="a" * 63).build()).ok


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ({"managedBy": "me"}, "spec.managedBy", "ManagedBy must be trainer.kubeflow.org/trainjob-controller or "
                                                "kueue.x-k8s.io/multikueue if set, got 'me'"),
        ({"initializer": {"dataset": {"storageUri": "not a uri"}}}, "spec.initializer.dataset.storageUri",
         "storageUri may be empty, or it must be a valid URI (scheme://...), got 'not a uri'"),
        ({"trainer": {"numProcPerNode": 0}}, "spec.trainer.numProcPerNode",
         "numProcPerNode must be greater than or equal to 1, got 0"),
        ({"trainer": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}}, "spec.trainer.env",
         "duplicate env name 'A'"),
    ],
)
def test_trainjob_rules(spec: dict[str, object], path: str, message: str) -> None:
    assert errors(validate_trainjob_object(TrainJobBuilder().spec(**spec).build())) == {path: message}


def test_num_nodes_zero_is_accepted_negative_rejected_at_load() -> None:
    from kubetrain.api.loader import parse_manifest

    assert validate_trainjob_object(TrainJobBuilder().trainer(numNodes=0).build()).ok
    obj, result = parse_manifest(TrainJobBuilder().trainer(numNodes=-1).obj)
    assert obj is None
    assert result.errors[0].path == "spec.trainer.numNodes"
    assert "greater than or equal to 0" in result.errors[0].message


@pytest.mark.parametrize("field", ["runtimeRef", "managedBy", "trainer", "initializer", "activeDeadlineSeconds"])
def test_immutable_fields(field: str) -> None:
    old = TrainJobBuilder().build()
    changes = {"runtimeRef": {"name": "other"}, "managedBy": c.MANAGED_BY_MULTIKUEUE, "trainer": {"image": "x:1"},
               "initializer": {"dataset": {"storageUri": "hf://x"}}, "activeDeadlineSeconds": 5}
    new = TrainJobBuilder().spec(**{field: changes[field]}).build()
    assert errors(validate_trainjob_object(new, old=old)) == {f"spec.{field}": "field is immutable"}


def test_num_nodes_is_the_trainer_field_that_may_change() -> None:
    # Whether it may change for this TrainJob depends on its runtime (elastic or not): the compiler decides.
    old = TrainJobBuilder().trainer(numNodes=2, image="x:1").build()
    assert validate_trainjob_object(TrainJobBuilder().trainer(numNodes=3, image="x:1").build(), old=old).ok
    assert validate_trainjob_object(TrainJobBuilder().trainer(image="x:1").build(), old=old).ok
    # A trainer that only carries numNodes appears or disappears without touching anything immutable.
    assert validate_trainjob_object(TrainJobBuilder().trainer(numNodes=3).build(), old=TrainJobBuilder().build()).ok
    changed = TrainJobBuilder().trainer(numNodes=3, image="x:2").build()
    assert errors(validate_trainjob_object(changed, old=old)) == {"spec.trainer": "field is immutable"}


def test_runtime_patches_change_only_while_suspended() -> None:
    old = TrainJobBuilder().build()
    patched = {"runtimePatches": [{"manager": "acme.io/m"}]}
    result = validate_trainjob_object(TrainJobBuilder().spec(**patched).build(), old=old)
    assert errors(result) == {"spec.runtimePatches": "RuntimePatches can only be modified when the TrainJob is "
                                                      "suspended before or after the update"}
    assert validate_trainjob_object(TrainJobBuilder().spec(suspend=True, **patched).build(), old=old).ok


def test_runtime_one_policy_and_elastic_rules() -> None:
    rt = RuntimeBuilder().ml(numNodes=2, torch={"elasticPolicy": {"maxNodes": 3}}, mpi={}).trainer().build()
    found = errors(validate_runtime_object(rt))
    assert found["spec.mlPolicy"].startswith("Only one of the policy can be configured")
    assert found["spec.mlPolicy.numNodes"] == "numNodes should not be set if torch.elasticPolicy is configured"


def test_runtime_ancestor_rules() -> None:
    rt = (RuntimeBuilder()
          .rjob("node", ancestor="trainer", replicas=2, containers=[{"name": "main", "image": "x"}])
          .rjob("dataset-initializer", ancestor="dataset-initializer", containers=[{"name": "x", "image": "x"}])
          .build())
    found = errors(validate_runtime_object(rt))
    base = "spec.template.spec.replicatedJobs"
    assert found[f"{base}[0].replicas"] == "always must be 1 (got 2)"
    assert found[f"{base}[0].template.spec.template.spec.containers"].startswith(
        "must contain the required container for the ancestor: trainer")
    assert found[f"{base}[1].template.spec.template.spec.containers"].startswith(
        "must contain the required container for the ancestor: dataset-initializer")


def test_runtime_depends_on_rules() -> None:
    rt = (RuntimeBuilder().trainer(depends_on=None)
          .rjob("a", depends_on=[("ghost", "Ready")], containers=[{"name": "a", "image": "a"}])
          .rjob("b", depends_on=[("c", "Complete")], containers=[{"name": "b", "image": "b"}])
          .rjob("c", containers=[{"name": "c", "image": "c"}]).build())
    found = errors(validate_runtime_object(rt))
    assert "does not exist" in found["spec.template.spec.replicatedJobs[1].dependsOn[0].name"]
    assert "'c' must come before 'b'" in found["spec.template.spec.replicatedJobs[2].dependsOn[0].name"]


def test_framework_label_and_deprecation_warnings() -> None:
    rt = RuntimeBuilder(name="old").label(c.LABEL_SUPPORT, "deprecated").trainer().build()
    rt.metadata.labels.pop(c.LABEL_FRAMEWORK)  # type: ignore[union-attr]
    warnings = [w.message for w in validate_runtime_object(rt).warnings]
    assert 'ClusterTrainingRuntime "old" has no trainer.kubeflow.org/framework label: the Kubeflow SDK will not ' \
           "list it" in warnings
    assert ('ClusterTrainingRuntime "old" is deprecated and will be removed in a future release of Kubeflow '
            f"Trainer. See runtime deprecation policy: {POLICY_URL}") in warnings


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
def test_referencing_a_deprecated_runtime_warns_for_both_kinds(kind: str) -> None:
    rt = RuntimeBuilder(name="old", kind=kind, namespace="default").label(c.LABEL_SUPPORT, "deprecated").trainer()
    result = validate_trainjob(TrainJobBuilder(runtime="old", kind=kind).build(), rt.build())
    assert result.ok
    assert [w.message for w in result.warnings] == [
        f'Referenced {kind} "old" is deprecated and will be removed in a future release of Kubeflow Trainer. '
        f"See runtime deprecation policy: {POLICY_URL}"]


def test_resolve_unknown_kind_and_typos() -> None:
    tj = TrainJobBuilder(runtime="torch-distributed", kind="torch-cluster-runtime").build()
    _, result = resolve_runtime(tj, builtin_runtimes())
    assert errors(result) == {"spec.runtimeRef": "unsupported runtime: torch-cluster-runtime.trainer.kubeflow.org"}
    _, result = resolve_runtime(TrainJobBuilder(runtime="torch-distributd").build(), builtin_runtimes())
    assert result.errors[0].fix is not None and "did you mean 'torch-distributed'" in result.errors[0].fix
    _, result = resolve_runtime(TrainJobBuilder(runtime="torch-distributed", kind="TrainingRuntime").build(),
                                builtin_runtimes())
    assert result.errors[0].fix == ('a ClusterTrainingRuntime named "torch-distributed" exists: set '
                                    "spec.runtimeRef.kind: ClusterTrainingRuntime")


def test_pod_spec_typos_and_types_are_reported() -> None:
    rt = RuntimeBuilder().rjob("node", ancestor="trainer", containers=[
        {"name": "node", "image": "i", "comand": ["python"], "env": [{"name": "N", "value": 3}]}]).build()
    found = errors(validate_runtime_object(rt))
    base = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
    assert found[f"{base}.comand"] == "unknown field 'comand'"
    assert found[f"{base}.env[0].value"] == "expected a string, got an integer (3)"
    fixes = {e.path: e.fix for e in validate_runtime_object(rt).errors}
    assert fixes[f"{base}.comand"] == "did you mean 'command'?"


def test_patch_and_override_pod_specs_are_checked() -> None:
    tj = TrainJobBuilder().spec(
        podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"nodeSelecter": {"a": "b"}}}],
        runtimePatches=[{"manager": "acme.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {"tolerations": {"key": "x"}}}}}}]}}}}],
    ).build()
    found = errors(validate_trainjob_object(tj))
    assert found["spec.podTemplateOverrides[0].spec.nodeSelecter"] == "unknown field 'nodeSelecter'"
    assert found["spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec."
                 "template.spec.tolerations"].startswith("expected a list, got an object")


def warnings_of(result: object) -> dict[str, tuple[str, str | None]]:
    return {w.path: (w.message, w.fix) for w in result.warnings}  # type: ignore[attr-defined]


def test_a_self_dependency_is_named_as_such() -> None:
    rt = RuntimeBuilder().rjob("init", depends_on=[("init", "Complete")], containers=[{"name": "init", "image": "i"}])
    found = errors(validate_runtime_object(rt.trainer().build()))
    assert found["spec.template.spec.replicatedJobs[0].dependsOn[0].name"] == (
        "replicated job 'init' depends on itself, so it could never start")
    assert not any("move" in m for m in found.values())


def test_failure_policy_rules_must_name_existing_jobs() -> None:
    rules = [{"name": "stop", "action": "FailJobSet", "targetReplicatedJobs": ["node", "ghost"]},
             {"name": "9bad", "action": "RestartJobSet"}, {"name": "stop", "action": "RestartJobSet"}]
    rt = RuntimeBuilder().trainer().jobset(failurePolicy={"rules": rules}, coordinator={"replicatedJob": "nope"})
    found = errors(validate_runtime_object(rt.build()))
    base = "spec.template.spec.failurePolicy.rules"
    assert found[f"{base}[0].targetReplicatedJobs[1]"] == (
        "invalid replicatedJob name 'ghost' in failure policy does not appear in .spec.ReplicatedJobs")
    assert found[f"{base}[1].name"].startswith("rule name '9bad' must match ^[A-Za-z]")
    assert found[f"{base}[2].name"] == "duplicate rule name 'stop'"
    assert found["spec.template.spec.coordinator.replicatedJob"] == "replicated job 'nope' does not exist"


def test_a_misspelt_support_label_warns() -> None:
    rt = RuntimeBuilder().trainer().label(c.LABEL_SUPPORT, "deprecatd").build()
    message, fix = warnings_of(validate_runtime_object(rt))[f"metadata.labels[{c.LABEL_SUPPORT}]"]
    assert message.startswith("unknown value 'deprecatd': the only value with a meaning is 'deprecated'")
    assert fix == "did you mean 'deprecated'?"


@pytest.mark.parametrize(("policy", "variable"), [({"torch": {}}, "PET_MASTER_ADDR"),
                                                  ({"jax": {}}, "JAX_COORDINATOR_ADDRESS"),
                                                  ({"xgboost": {}}, "DMLC_TRACKER_URI")])
def test_a_trainer_job_not_named_node_warns(policy: dict[str, object], variable: str) -> None:
    rt = RuntimeBuilder().ml(**policy).trainer(name="trainer").build()
    message, fix = warnings_of(validate_runtime_object(rt))["spec.template.spec.replicatedJobs[0].name"]
    assert f"points {variable} at <trainjob>-node-0-0" in message
    assert fix == "rename the replicated job 'trainer' to 'node'"
    assert "spec.template.spec.replicatedJobs[0].name" not in warnings_of(
        validate_runtime_object(RuntimeBuilder().ml(**policy).trainer().build()))


def test_runtime_num_proc_per_node_zero_is_an_error() -> None:
    rt = RuntimeBuilder().ml(torch={"numProcPerNode": 0}).trainer().build()
    assert errors(validate_runtime_object(rt))["spec.mlPolicy.torch.numProcPerNode"] == (
        "NumProcPerNode must be equal to auto, cpu, gpu, or int value")


def test_resources_per_node_quantities() -> None:
    tj = TrainJobBuilder().resources(requests={"cpu": "lots", "nvidia.com/gpu": "1.5"}).build()
    found = errors(validate_trainjob_object(tj))
    assert found["spec.trainer.resourcesPerNode.requests[cpu]"] == "invalid quantity 'lots': not a quantity"
    assert found["spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]"] == "must be an integer, got 1500m ('1.5')"


def test_resources_per_node_merged_into_the_runtime_container_must_stay_valid() -> None:
    rt = RuntimeBuilder().ml(torch={}).trainer(resources={"limits": {"nvidia.com/gpu": 1}}).build()
    tj = TrainJobBuilder().resources(requests={"nvidia.com/gpu": 2}).build()
    found = errors(validate_trainjob(tj, rt))
    assert found["spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]"] == (
        "after merging into the runtime's node container: must be equal to nvidia.com/gpu limit of 1")


@pytest.mark.parametrize(
    ("metric", "path", "message"),
    [
        ({"type": "Cpu"}, "[0].type", "must be one of Resource, ContainerResource, Pods, Object, External, got 'Cpu'"),
        ({"type": "Resource"}, "[0].resource", "a Resource metric needs `resource`"),
        ({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
         "[0].resource.target.averageUtilization", "a Utilization target needs averageUtilization"),
        ({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}},
         "[0].resource.target.averageUtilization", "must be a whole percentage of at least 1, got 0"),
        ({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "Utilization",
                                                                          "averageUtilization": 5}}},
         "[0].pods.target.type", "Utilization is a percentage of the pods' requests: only Resource and "
         "ContainerResource metrics have it"),
        ({"type": "External", "external": {"metric": {}, "target": {"type": "Value", "value": "1"}}},
         "[0].external.metric.name", "the metric name is missing"),
        ({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                          "averageValue": "lots"}}},
         "[0].pods.target.averageValue", "'lots' is not a quantity"),
    ],
)
def test_elastic_metrics_are_metric_specs(metric: dict[str, Any], path: str, message: str) -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"maxNodes": 4, "metrics": [metric]}}).trainer().build()
    found = errors(validate_runtime_object(rt))
    assert found == {"spec.mlPolicy.torch.elasticPolicy.metrics" + path: message}


LIMIT = "must be at most 100000 (Kubernetes runs an Indexed Job of at most that many pods), got 100001"


@pytest.mark.parametrize(("runtime", "path", "message"), [
    (RuntimeBuilder().ml(numNodes=100_001, torch={}).trainer(), "spec.mlPolicy.numNodes", LIMIT),
    (RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 100_001, "maxNodes": 100_001}}).trainer(),
     "spec.mlPolicy.torch.elasticPolicy.minNodes", LIMIT),
    (RuntimeBuilder().ml(numNodes=1, torch={}).trainer().rjob("w", parallelism=100_001),
     "spec.template.spec.replicatedJobs[1].template.spec.parallelism", LIMIT),
    (RuntimeBuilder().ml(numNodes=1, torch={}).trainer().rjob("w", replicas=1000, parallelism=101),
     "spec.template.spec.replicatedJobs[1].replicas",
     "1000 Jobs x 101 pod(s) = 101000 pods, more than the 100000 kubetrain runs per replicated job"),
])  # fmt: skip
def test_pod_counts_are_bounded_before_anything_makes_one_name_per_pod(
    runtime: RuntimeBuilder, path: str, message: str
) -> None:
    assert errors(validate_runtime_object(runtime.build()))[path] == message


def test_a_trainjob_of_too_many_nodes_is_not_built_against_its_runtime() -> None:
    from kubetrain.compiler import Subject, validate_objects

    tj = TrainJobBuilder(runtime="torch-distributed").trainer(numNodes=100_001).build()
    (result,) = validate_objects([Subject(tj)], installed=builtin_runtimes())
    assert errors(result) == {"spec.trainer.numNodes": LIMIT}
    assert result.warnings[0].message.startswith('not checked against ClusterTrainingRuntime "torch-distributed": '
                                                 "spec.trainer.numNodes is invalid")
