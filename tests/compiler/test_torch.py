"""Torch plugin: table cases from the upstream behaviour spec §9.1 (1-7) plus elastic training."""

from __future__ import annotations

import pytest

from kubetrain.api import constants as c
from kubetrain.compiler import validate_trainjob
from tests.builders import RuntimeBuilder, TrainJobBuilder, container, env, env_names, jobset, rjob

RANK_REF = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def torch_runtime(num_proc: object = None, **container_fields: object) -> RuntimeBuilder:
    torch = {} if num_proc is None else {"numProcPerNode": num_proc}
    return RuntimeBuilder().ml(numNodes=1, torch=torch).trainer(**container_fields)


def test_cpu_resources_set_nproc_and_master_env() -> None:
    tj = TrainJobBuilder().resources(requests={"cpu": 4}).build()
    node = container(jobset(tj, torch_runtime().build()), "node")
    assert env(node) == {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "4",
        "PET_NODE_RANK": RANK_REF,
        "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
        "PET_MASTER_PORT": "29500",
    }
    assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"requests": {"cpu": "2.5"}}, "3"),
        ({"requests": {"cpu": "2500m"}}, "3"),
        ({"requests": {"cpu": "0.7"}}, "1"),
        ({"requests": {"cpu": "3.7"}}, "4"),
        ({}, "1"),
        ({"requests": {"cpu": "3"}}, "3"),
        ({"limits": {"cpu": "5"}}, "5"),
        ({"requests": {"example.com/gpu": 2}}, "auto"),
        ({"requests": {"cpu": 6, "example.com/gpu": 2}}, "auto"),
        ({"requests": {"memory": "4Gi"}}, "1"),
    ],
)
def test_nproc_rounding(resources: dict[str, object], expected: str) -> None:
    tj = TrainJobBuilder().trainer(resourcesPerNode=resources).build()
    assert env(container(jobset(tj, torch_runtime().build()), "node"))["PET_NPROC_PER_NODE"] == expected


@pytest.mark.parametrize(
    ("runtime_value", "trainjob_value", "resources", "expected"),
    [
        (None, 3, {"requests": {"cpu": 8}}, "3"),
        ("cpu", None, {"requests": {"cpu": 8}}, "8"),
        ("gpu", None, {"requests": {"cpu": 8}}, "gpu"),
        (4, None, {}, "4"),
        ("auto", "cpu", {"limits": {"cpu": 2}}, "2"),
        (2, "auto", {"limits": {"nvidia.com/gpu": 1}}, "auto"),
    ],
)
def test_nproc_policy_and_override(
    runtime_value: object, trainjob_value: object, resources: dict[str, object], expected: str
) -> None:
    b = TrainJobBuilder().trainer(resourcesPerNode=resources)
    if trainjob_value is not None:
        b.trainer(numProcPerNode=trainjob_value)
    js = jobset(b.build(), torch_runtime(runtime_value).build())
    assert env(container(js, "node"))["PET_NPROC_PER_NODE"] == expected


def test_num_nodes_with_gpu_keeps_auto() -> None:
    tj = TrainJobBuilder().trainer(numNodes=4).resources(requests={"cpu": 8, "memory": "16Gi", "nvidia.com/gpu": 4})
    js = jobset(tj.build(), torch_runtime().build())
    assert env(container(js, "node"))["PET_NNODES"] == "4"
    assert env(container(js, "node"))["PET_NPROC_PER_NODE"] == "auto"
    job = rjob(js, "node")["template"]["spec"]
    assert (job["parallelism"], job["completions"]) == (4, 4)


def test_integration_runtime_100_nodes_env_order_and_image() -> None:
    rt = RuntimeBuilder().ml(numNodes=100, torch={}).trainer(
        resources={"requests": {"cpu": 1, "memory": "4Gi"}}, env=[{"name": "RUNTIME_ENV", "value": "x"}]
    )
    tj = TrainJobBuilder(name="alpha").trainer(
        image="test:trainjob", command=["trainjob"], args=["trainjob"], env=[{"name": "TRAIN_JOB", "value": "value"}]
    )
    js = jobset(tj.build(), rt.build())
    node_rjob = rjob(js, "node")
    assert node_rjob["replicas"] == 1
    assert node_rjob["template"]["spec"]["parallelism"] == 100
    assert node_rjob["template"]["spec"]["completions"] == 100
    node = container(js, "node")
    assert node["image"] == "test:trainjob"
    assert node["command"] == ["trainjob"] and node["args"] == ["trainjob"]
    assert env_names(node) == [
        "RUNTIME_ENV", "TRAIN_JOB", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert env(node)["PET_NNODES"] == "100"
    assert env(node)["PET_NPROC_PER_NODE"] == "1"
    assert env(node)["PET_MASTER_ADDR"] == "alpha-node-0-0.alpha"


def test_env_injection_into_init_container() -> None:
    rt = (
        RuntimeBuilder()
        .ml(numNodes=2, torch={"envInjection": {"targets": [
            {"jobName": "worker", "containerNames": ["worker-check"]}]}})
        .trainer()
        .rjob("worker", containers=[{"name": "worker", "image": "w"}],
              init_containers=[{"name": "worker-check", "image": "chk"}])
    )
    js = jobset(TrainJobBuilder().build(), rt.build())
    check = container(js, "worker", "worker-check", init=True)
    assert env_names(check) == ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                                "PET_MASTER_PORT"]
    assert env(check)["PET_NNODES"] == "2"


def test_no_trainer_spec_means_no_pet_env() -> None:
    js = jobset(TrainJobBuilder().build(), torch_runtime().build())
    assert "env" not in container(js, "node")


def test_reserved_env_is_rejected() -> None:
    tj = TrainJobBuilder().trainer(env=[{"name": "PET_NNODES", "value": "3"},
                                        {"name": "PET_MASTER_PORT", "value": "1"}])
    result = validate_trainjob(tj.build(), torch_runtime().build())
    assert [(e.path, e.message) for e in result.errors] == [
        ("spec.trainer.env", "must not have reserved envs, invalid envs configured: [PET_MASTER_PORT PET_NNODES]")
    ]


def test_elastic_policy_sets_range_and_rendezvous() -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 2, "maxNodes": 4, "maxRestarts": 5}}).trainer()
    js = jobset(TrainJobBuilder().trainer(command=["torchrun", "t.py"]).build(), rt.build())
    node = env(container(js, "node"))
    assert node["PET_NNODES"] == "2:4"
    assert node["PET_MAX_RESTARTS"] == "5"
    assert node["PET_RDZV_BACKEND"] == "c10d"
    assert node["PET_RDZV_ENDPOINT"] == "test-job-node-0-0.test-job:29500"
    # Workers' store published by rank 0 in every round; a 5 s last call instead of torch's 30 s.
    assert node["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert node["PET_RDZV_CONF"] == "last_call_timeout=5"
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 4
    # maxRestarts also bounds the node pods' own failures.
    assert rjob(js, "node")["template"]["spec"]["backoffLimit"] == 5


def test_elastic_tuning_is_the_users_to_override() -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"maxNodes": 2}}).trainer()
    tj = TrainJobBuilder().trainer(env=[{"name": "PET_RDZV_CONF", "value": "join_timeout=900"},
                                        {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}])
    js = jobset(tj.build(), rt.build())
    node = env(container(js, "node"))
    assert node["PET_RDZV_CONF"] == "join_timeout=900"
    assert node["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"
    # Without maxRestarts the Job keeps Kubernetes' default backoffLimit.
    assert "backoffLimit" not in rjob(js, "node")["template"]["spec"]


def test_elastic_runtime_backoff_limit_wins() -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"maxNodes": 2, "maxRestarts": 1}}).trainer()
    rt.obj["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 9
    js = jobset(TrainJobBuilder().build(), rt.build())
    assert rjob(js, "node")["template"]["spec"]["backoffLimit"] == 9


@pytest.mark.parametrize(
    ("before", "after", "error"),
    [
        (2, 3, None),
        (2, None, None),  # unset: back to maxNodes
        (None, 1, None),
        (2, 9, "must be between elasticPolicy minNodes (1) and maxNodes (8), got 9"),
        (2, 0, "must be between elasticPolicy minNodes (1) and maxNodes (8), got 0"),
    ],
)
def test_elastic_num_nodes_may_change_within_bounds(before: int | None, after: int | None, error: str | None) -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 1, "maxNodes": 8}}).trainer().build()
    old = TrainJobBuilder().trainer(numNodes=before).build()
    result = validate_trainjob(TrainJobBuilder().trainer(numNodes=after).build(), rt, old=old)
    assert [(e.path, e.message) for e in result.errors] == ([("spec.trainer.numNodes", error)] if error else [])


def test_static_num_nodes_may_not_change() -> None:
    old = TrainJobBuilder().trainer(numNodes=2).build()
    result = validate_trainjob(TrainJobBuilder().trainer(numNodes=3).build(), torch_runtime().build(), old=old)
    assert [(e.path, e.message) for e in result.errors] == [
        (
            "spec.trainer.numNodes",
            'numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, and ClusterTrainingRuntime '
            '"test-runtime" has none (numNodes 2 -> 3)',
        )
    ]


def test_elastic_num_nodes_outside_bounds_is_an_error() -> None:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 2, "maxNodes": 4}}).trainer()
    result = validate_trainjob(TrainJobBuilder().trainer(numNodes=6).build(), rt.build())
    assert [e.path for e in result.errors] == ["spec.trainer.numNodes"]
    assert "between elasticPolicy minNodes (2) and maxNodes (4)" in result.errors[0].message


def test_runtime_keeps_its_own_env_position() -> None:
    rt = torch_runtime(env=[{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}])
    tj = TrainJobBuilder().trainer(env=[{"name": "B", "value": "job"}, {"name": "C", "value": "job"}])
    node = container(jobset(tj.build(), rt.build()), "node")
    assert env_names(node)[:3] == ["A", "B", "C"]
    assert env(node)["B"] == "job"


def test_master_address_ignores_network_subdomain_but_endpoints_use_it() -> None:
    rt = torch_runtime().jobset(network={"subdomain": "custom"})
    js = jobset(TrainJobBuilder().trainer(numNodes=2).build(), rt.build())
    assert env(container(js, "node"))["PET_MASTER_ADDR"] == "test-job-node-0-0.test-job"
    assert c.DEFAULT_PORT == 29500


CPU_80 = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}


def test_elastic_metrics_give_an_hpa_owned_by_the_trainjob() -> None:
    from tests.builders import compile_objects

    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 2, "maxNodes": 8, "metrics": [CPU_80]}}).trainer()
    objects = compile_objects(TrainJobBuilder().trainer(numNodes=3).build(), rt.build())
    hpa = objects["HorizontalPodAutoscaler/test-job"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "test-job"},
        "minReplicas": 2,
        "maxReplicas": 8,
        "metrics": [CPU_80],
    }
    owner = hpa["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "test-job", True)
    # The HPA comes after the objects pods need, and only with metrics.
    assert list(objects)[-1] == "HorizontalPodAutoscaler/test-job"
    no_metrics = RuntimeBuilder().ml(torch={"elasticPolicy": {"maxNodes": 8}}).trainer()
    assert not any(k.startswith("HorizontalPodAutoscaler") for k in compile_objects(TrainJobBuilder().build(),
                                                                                   no_metrics.build()))
