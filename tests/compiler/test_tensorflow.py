"""The TensorFlow policy (kubetrain's own): TF_CONFIG for MultiWorkerMirroredStrategy, per pod from a shared
template, and its validation."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api.validation import validate_runtime_object
from kubetrain.compiler import validate_trainjob
from kubetrain.runtimes import builtin_runtime
from tests.builders import RuntimeBuilder, TrainJobBuilder, container, env, env_names, jobset, rjob

INDEX_REF = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def tf_runtime() -> RuntimeBuilder:
    return RuntimeBuilder().label("trainer.kubeflow.org/framework", "tensorflow").ml(tensorflow={}).trainer()


def pod_env(node: dict[str, Any], index: int) -> dict[str, str]:
    """What a kubelet gives the container of the pod with this completion index: env in order, fieldRefs
    resolved, ``$(VAR)`` expanded against the variables defined before it."""
    out: dict[str, str] = {}
    for item in node.get("env") or []:
        if "valueFrom" in item:
            assert item["valueFrom"] == INDEX_REF, item
            out[item["name"]] = str(index)
        else:
            out[item["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                       lambda m: out.get(m.group(1), m.group(0)), item.get("value", ""))
    return out


def test_every_pod_gets_the_workers_and_its_own_index() -> None:
    js = jobset(TrainJobBuilder(name="mnist").trainer(numNodes=3).build(), tf_runtime().build())
    node = container(js, "node")
    assert env_names(node) == ["TF_TASK_INDEX", "TF_CONFIG"]  # the index first: the kubelet expands backwards only
    assert env(node)["TF_TASK_INDEX"] == INDEX_REF
    workers = ["mnist-node-0-0.mnist:29500", "mnist-node-0-1.mnist:29500", "mnist-node-0-2.mnist:29500"]
    for i in range(3):
        assert json.loads(pod_env(node, i)["TF_CONFIG"]) == {
            "cluster": {"worker": workers},
            "task": {"type": "worker", "index": i},
        }
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 3
    assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]  # each worker on its own pod's 29500


def test_runtime_num_nodes_and_jobset_subdomain() -> None:
    rt = tf_runtime().ml(numNodes=2, tensorflow={}).jobset(network={"subdomain": "tf"}).build()
    node = container(jobset(TrainJobBuilder(name="job").build(), rt), "node")
    config = json.loads(pod_env(node, 1)["TF_CONFIG"])
    assert config["cluster"]["worker"] == ["job-node-0-0.tf:29500", "job-node-0-1.tf:29500"]


def test_runtime_env_is_replaced_and_trainjob_env_kept() -> None:
    rt = RuntimeBuilder().ml(tensorflow={}).trainer(
        env=[{"name": "TF_CONFIG", "value": "{}"}, {"name": "KEEP", "value": "1"}]).build()
    tj = TrainJobBuilder().trainer(numNodes=2, env=[{"name": "EPOCHS", "value": "3"}]).build()
    node = container(jobset(tj, rt), "node")
    assert env_names(node) == ["KEEP", "TF_TASK_INDEX", "TF_CONFIG", "EPOCHS"]
    assert json.loads(pod_env(node, 0)["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}


def test_reserved_env_names_the_entry() -> None:
    tj = TrainJobBuilder().trainer(env=[{"name": "OK", "value": "1"}, {"name": "TF_CONFIG", "value": "{}"},
                                        {"name": "TF_TASK_INDEX", "value": "0"}]).build()
    errors = validate_trainjob(tj, tf_runtime().build()).errors
    assert [(f.path, f.message) for f in errors] == [
        ("spec.trainer.env[1]", "TF_CONFIG is reserved for the TensorFlow runtime"),
        ("spec.trainer.env[2]", "TF_TASK_INDEX is reserved for the TensorFlow runtime"),
    ]
    assert "kubetrain sets TF_CONFIG" in (errors[0].fix or "")


def test_trainer_without_node_container_is_an_error() -> None:
    rt = RuntimeBuilder().ml(tensorflow={}).rjob(
        "node", ancestor="trainer", containers=[{"name": "worker", "image": "img"}]).build()
    errors = validate_trainjob(TrainJobBuilder().trainer(numNodes=2).build(), rt).errors
    assert [f.path for f in errors] == ["spec.runtimeRef"]
    assert "replicated job 'node' has no container named 'node'" in errors[0].message


def test_num_proc_per_node_is_a_warning() -> None:
    result = validate_trainjob(TrainJobBuilder().trainer(numNodes=2, numProcPerNode=4).build(),
                               tf_runtime().build())
    assert result.errors == []
    assert [(f.path, f.message.split(" (")[0]) for f in result.warnings] == [
        ("spec.trainer.numProcPerNode", "has no effect with the TensorFlow runtime")]


def test_only_one_policy() -> None:
    rt = RuntimeBuilder().ml(tensorflow={}, jax={}).trainer().build()
    errors = validate_runtime_object(rt).errors
    assert [(f.path, f.message) for f in errors] == [
        ("spec.mlPolicy", "Only one of the policy can be configured (found jax, tensorflow)")]


def test_builtin_runtime() -> None:
    rt = builtin_runtime("tensorflow-distributed")
    assert rt is not None and rt.labels["trainer.kubeflow.org/framework"] == "tensorflow"
    assert validate_runtime_object(rt).errors == []
    node = container(jobset(TrainJobBuilder(name="t", runtime=rt.name).trainer(numNodes=2).build(), rt), "node")
    assert node["image"].startswith("tensorflow/tensorflow:")
    assert len(json.loads(pod_env(node, 0)["TF_CONFIG"])["cluster"]["worker"]) == 2


@given(nodes=st.integers(1, 64), name=st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True))
def test_tf_config_is_json_with_every_worker_for_every_index(nodes: int, name: str) -> None:
    node = container(jobset(TrainJobBuilder(name=name).trainer(numNodes=nodes).build(), tf_runtime().build()),
                     "node")
    seen = []
    for i in range(nodes):
        config = json.loads(pod_env(node, i)["TF_CONFIG"])
        assert config["task"] == {"type": "worker", "index": i}
        seen.append(config["cluster"]["worker"])
    workers = seen[0]
    assert all(w == workers for w in seen) and len(workers) == nodes
    hosts = [w.rsplit(":", 1)[0] for w in workers]
    ports = [int(w.rsplit(":", 1)[1]) for w in workers]
    assert len(set(hosts)) == nodes and set(ports) == {29500}
    assert hosts[0] == f"{name}-node-0-0.{name}"
