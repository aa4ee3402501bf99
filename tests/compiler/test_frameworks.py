"""XGBoost, JAX and plain runtimes (§9.1 cases 14-15)."""

from __future__ import annotations

from kubetrain.compiler import validate_trainjob
from tests.builders import RuntimeBuilder, TrainJobBuilder, container, env, jobset, rjob

RANK_REF = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def test_xgboost_gpu_workers() -> None:
    rt = RuntimeBuilder().ml(numNodes=1, xgboost={}).trainer(resources={"limits": {"example.com/gpu": 1}}).build()
    tj = TrainJobBuilder(name="gpu-job").trainer(numNodes=2, resourcesPerNode={"limits": {"example.com/gpu": 4}})
    node = container(jobset(tj.build(), rt), "node")
    assert env(node) == {
        "DMLC_TRACKER_URI": "gpu-job-node-0-0.gpu-job",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": RANK_REF,
        "DMLC_NUM_WORKER": "8",
    }


def test_xgboost_cpu_and_trainjob_gpu_wins() -> None:
    rt = RuntimeBuilder().ml(xgboost={}).trainer(resources={"limits": {"example.com/gpu": 1}}).build()
    node = container(jobset(TrainJobBuilder().trainer(numNodes=3, resourcesPerNode={}).build(), rt), "node")
    assert env(node)["DMLC_NUM_WORKER"] == "3"
    node = container(jobset(TrainJobBuilder().trainer(
        numNodes=2, resourcesPerNode={"limits": {"example.com/gpu": 3}}).build(), rt), "node")
    assert env(node)["DMLC_NUM_WORKER"] == "6"


def test_xgboost_reserved_env() -> None:
    rt = RuntimeBuilder().ml(xgboost={}).trainer().build()
    tj = TrainJobBuilder().trainer(env=[{"name": "OK", "value": "1"}, {"name": "DMLC_TASK_ID", "value": "1"}]).build()
    assert [(e.path, e.message) for e in validate_trainjob(tj, rt).errors] == [
        ("spec.trainer.env[1]", "DMLC_TASK_ID is reserved for the XGBoost runtime")]


def test_jax_env() -> None:
    rt = RuntimeBuilder().ml(jax={}).trainer().build()
    node = container(jobset(TrainJobBuilder(name="multi-node-job").trainer(numNodes=4).build(), rt), "node")
    assert env(node) == {
        "JAX_NUM_PROCESSES": "4",
        "JAX_PROCESS_ID": RANK_REF,
        "JAX_COORDINATOR_ADDRESS": "multi-node-job-node-0-0.multi-node-job:29500",
    }
    assert node["ports"][0]["containerPort"] == 29500


def test_plain_runtime_uses_parallelism_and_num_nodes() -> None:
    rt = RuntimeBuilder().rjob("node", ancestor="trainer", parallelism=3).build()
    js = jobset(TrainJobBuilder().build(), rt)
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 3
    js = jobset(TrainJobBuilder().trainer(numNodes=5, env=[{"name": "A", "value": "b"}]).build(), rt)
    assert rjob(js, "node")["template"]["spec"]["completions"] == 5
    assert env(container(js, "node")) == {"A": "b"}
