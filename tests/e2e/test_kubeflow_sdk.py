"""The Kubeflow SDK flow against the operator on a real API server (no nodes: pods are played by the test)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import OperatorProcess, call, get, torch_runtime, wait_until

pytestmark = pytest.mark.e2e
pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed")


def train_fn() -> None:
    print("hello from the SDK")


def test_sdk_list_train_get_wait_delete(kubeconfig: str, namespace: str, operator: OperatorProcess) -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    runtime = torch_runtime("kt-e2e-sdk", namespace=namespace)
    call(lambda c: c.apply(runtime))
    client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace=namespace))
    assert "kt-e2e-sdk" in [rt.name for rt in client.list_runtimes()]
    name = client.train(runtime="kt-e2e-sdk", trainer=CustomTrainer(func=train_fn, num_nodes=2))
    js = wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
    assert client.get_job(name).status == "Created"
    done: dict[str, Any] = {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    call(lambda c: c.patch_status(r.JOBSET, name, namespace, {"conditions": [done]}))
    assert client.wait_for_job_status(name, {"Complete"}, timeout=60, polling_interval=1).status == "Complete"
    client.delete_job(name)
    wait_until(lambda: get(r.TRAINJOB, name, namespace) is None, what="TrainJob deleted")
