"""The official Kubeflow SDK (``kubeflow`` 0.5.0), unchanged, against the operator and the fake API server.

The SDK is synchronous (the ``kubernetes`` client), so the fake server and the operator run on a background
thread. With no kubelet, the test plays the node's part: it creates the pods the JobSet would get (with the
labels the SDK selects on) and their logs, and marks the JobSet Completed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

trainer = pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed")

from tests.k8s.helpers import torch_runtime  # noqa: E402
from tests.k8s.threaded import Background, background_api  # noqa: E402

JS = "jobset.x-k8s.io"


def train_fn() -> None:
    print("training")


def wait(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("timed out")


def add_pod(bg: Background, job: str, index: int) -> str:
    name = f"{job}-node-0-{index}-x1y2z"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}]},
    }

    async def create() -> None:
        created = bg.api.store.create("", "pods", "default", pod, "kubelet")
        created["status"] = {"phase": "Running"}
        bg.api.store.replace("", "pods", "default", name, created, "kubelet", "status")

    bg.call(create())
    bg.api.store.logs[("default", name)] = f"rank {index} training\nrank {index} done\n"
    return name


def test_sdk_list_train_get_logs_wait_delete(tmp_path: Path) -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    with background_api(tmp_path, operator=True) as (bg, kubeconfig):

        async def seed() -> None:
            bg.api.store.create("trainer.kubeflow.org", "clustertrainingruntimes", None, torch_runtime(), "admin")
            cm = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubeflow-trainer-public", "namespace": "kubeflow-system"},
                "data": {"kubeflow_trainer_version": "v2.3.0"},
            }
            bg.api.store.create("", "configmaps", "kubeflow-system", cm, "admin")

        bg.call(seed())
        client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace="default"))

        runtimes = client.list_runtimes()
        assert [rt.name for rt in runtimes] == ["torch-distributed"]
        assert runtimes[0].trainer.framework == "torch"

        name = client.train(runtime="torch-distributed", trainer=CustomTrainer(func=train_fn, num_nodes=2))
        wait(lambda: bg.api.store.list(JS, "jobsets", "default")[0])
        jobset = bg.api.store.get(JS, "jobsets", "default", name)
        rjob = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert rjob["parallelism"] == 2 and rjob["completions"] == 2
        command = rjob["template"]["spec"]["containers"][0]["command"]
        assert "torchrun" in " ".join(command) and "def train_fn" in " ".join(command)

        assert client.get_job(name).status == "Created"
        for i in range(2):
            add_pod(bg, name, i)
        job = client.get_job(name)
        assert job.status == "Running" and job.num_nodes == 2
        assert [s.name for s in job.steps] == ["node-0", "node-1"]
        assert list(client.get_job_logs(name, step="node-1")) == ["rank 1 training", "rank 1 done"]

        async def complete() -> None:
            bg.api.store.merge_patch(
                JS,
                "jobsets",
                "default",
                name,
                {
                    "status": {
                        "conditions": [
                            {
                                "type": "Completed",
                                "status": "True",
                                "reason": "AllJobsCompleted",
                                "message": "jobset completed successfully",
                                "lastTransitionTime": "2026-01-01T00:00:00Z",
                            }
                        ]
                    }
                },
                "jobset-controller",
                "status",
            )

        bg.call(complete())
        done = client.wait_for_job_status(name, {"Complete"}, timeout=30, polling_interval=1)
        assert done.status == "Complete"

        client.delete_job(name)
        wait(lambda: not bg.api.store.list(JS, "jobsets", "default")[0])
        assert [j.name for j in client.list_jobs()] == []


def test_sdk_reads_a_failed_job_and_its_pod_failure_events(tmp_path: Path) -> None:
    """``status.podFailures`` and the composed Failed message are beyond upstream: the SDK must still parse the
    TrainJob (Running while a pod crash-loops, then Failed), and its events carry the reason."""
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    from tests.k8s.kubelet import Kubelet, crash_loop, pod_manifest, running

    with background_api(tmp_path, operator=True) as (bg, kubeconfig):

        async def seed() -> None:
            bg.api.store.create("trainer.kubeflow.org", "clustertrainingruntimes", None, torch_runtime(), "admin")

        bg.call(seed())
        client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace="default"))
        name = client.train(runtime="torch-distributed", trainer=CustomTrainer(func=train_fn, num_nodes=1))
        wait(lambda: bg.api.store.list(JS, "jobsets", "default")[0])
        kubelet = Kubelet(bg)
        pod = kubelet.create_pod(pod_manifest(name, "node"), running())
        kubelet.log(pod, "loading data\nValueError: boom\n")
        kubelet.restart(pod)
        kubelet.set_status(pod, crash_loop(1, 3))

        def recorded() -> list:
            tj = bg.api.store.get("trainer.kubeflow.org", "trainjobs", "default", name)
            return [e for e in (tj.get("status") or {}).get("podFailures") or [] if e.get("logTail")]

        wait(recorded)
        assert client.get_job(name).status == "Running"  # no condition was added: the SDK still says Running

        kubelet.delete_pod(pod)  # the Job controller, past its backoffLimit
        kubelet.complete_jobset(name, failed=True)
        with pytest.raises(RuntimeError, match="is Failed"):
            client.wait_for_job_status(name, {"Complete"}, timeout=30, polling_interval=1)
        assert client.get_job(name).status == "Failed"
        events = [e for e in client.get_job_events(name) if e.reason == "PodFailed"]
        assert len(events) == 1 and events[0].involved_object_kind == "TrainJob"
        assert events[0].message.startswith("node-0-0 exited with code 3 (Error) after 1 restart")
        assert events[0].message.endswith("ValueError: boom")
