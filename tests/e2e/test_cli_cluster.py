"""The CLI against a real API server (issue #13): ``run`` waits and explains, ``get`` shows the state with its
reason, ``describe`` lists the events, ``wait`` follows conditions, ``logs -f`` waits for pods.

A real kube-apiserver with no nodes, no scheduler and no JobSet controller: the test stands in for them. Pods are
created by hand with JobSet's labels (no owner, so the garbage collector leaves them alone) and their status is
written through the status subresource, as a kubelet would; the JobSet's status is written the same way. Without a
kubelet the API server serves a pod's log as empty, so log *contents* are tested against the in-memory server
(``tests/k8s/test_cli_follow.py``); here we check that waiting, states and explanations are right.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import OperatorProcess, call, get, torch_runtime, trainjob, wait_until

pytestmark = pytest.mark.e2e
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def kt(kubeconfig: str, namespace: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KUBETRAIN, *args, "--kubeconfig", kubeconfig, "-n", namespace],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write(tmp_path: Path, *docs: dict[str, Any]) -> str:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def make_pod(namespace: str, job: str, index: int, status: dict[str, Any]) -> str:
    name = f"{job}-node-{index}-0-{uuid.uuid4().hex[:5]}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/job-index": str(index),
                "batch.kubernetes.io/job-completion-index": "0",
            },
        },
        "spec": {"containers": [{"name": "node", "image": "busybox:1.36"}]},
    }

    async def go(c: Client) -> None:
        await c.create(pod)
        await c.patch_status(r.POD, name, namespace, status)

    call(go)
    return name


def set_pod_status(namespace: str, pod: str, status: dict[str, Any]) -> None:
    call(lambda c: c.patch_status(r.POD, pod, namespace, status))


def running() -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": "node",
                "image": "busybox:1.36",
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now()}},
            }
        ],
    }


def unschedulable(message: str) -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": now(),
            }
        ],
    }


def image_pull_backoff() -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
        "containerStatuses": [
            {
                "name": "node",
                "image": "busybox:1.36",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {
                    "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "busybox:1.36"'}
                },
            }
        ],
    }


def failed(code: int) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "node",
                "image": "busybox:1.36",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "reason": "Error", "startedAt": now(), "finishedAt": now()}},
            }
        ],
    }


def complete_jobset(namespace: str, name: str) -> None:
    status = {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": now(),
            }
        ]
    }
    call(lambda c: c.patch_status(r.JOBSET, name, namespace, status))


def event(namespace: str, kind: str, name: str, reason: str, message: str) -> None:
    ev = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "firstTimestamp": now(),
        "lastTimestamp": now(),
        "count": 1,
        "source": {"component": "e2e"},
    }
    call(lambda c: c.create(ev))


def test_run_without_an_operator_times_out_naming_no_jobset(kubeconfig: str, namespace: str, tmp_path: Path) -> None:
    rt = uniq("rt")
    name = uniq("tj")
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), trainjob(name, namespace, rt))
    r_ = kt(kubeconfig, namespace, "run", "-f", f, "--timeout", "3s")
    assert r_.returncode == 124, r_.stderr
    flat = " ".join(r_.stderr.split())
    assert (
        f"timed out after 3s waiting for trainjob {namespace}/{name}; state then: Created (NoPods: no JobSet yet)"
        in flat
    )
    assert get(r.TRAINJOB, name, namespace) is not None  # it keeps running
    r_ = kt(kubeconfig, namespace, "run", "-f", f, "--timeout", "1s", "--delete-on-timeout")
    assert r_.returncode == 124 and "deleted it (--delete-on-timeout)" in r_.stderr
    wait_until(lambda: get(r.TRAINJOB, name, namespace) is None, 30, "TrainJob deleted")


def test_run_waits_explains_and_ends_with_the_jobs_result(
    kubeconfig: str, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    rt = uniq("rt")
    name = uniq("tj")
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), trainjob(name, namespace, rt, trainer={"numNodes": 2}))
    proc = subprocess.Popen(
        [*KUBETRAIN, "run", "-f", f, "--kubeconfig", kubeconfig, "-n", namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: get(r.JOBSET, name, namespace), 60, "the operator's JobSet")
        time.sleep(3)  # run sees the JobSet and no pods (no JobSet controller here)
        p0 = make_pod(namespace, name, 0, unschedulable("0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))
        p1 = make_pod(namespace, name, 1, image_pull_backoff())
        time.sleep(2)
        set_pod_status(namespace, p0, running())
        set_pod_status(namespace, p1, running())
        time.sleep(2)
        complete_jobset(namespace, name)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    title = f"trainjob {namespace}/{name}"
    assert f"{title}: Created (NoPods: JobSet created; waiting for its Jobs to create pods)" in err
    assert (
        f"{title}: Pending (Unschedulable: node-0-0 Pending: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.)"
        in err
    )
    assert 'step node-1-0: Pending (ImagePullBackOff: Back-off pulling image "busybox:1.36")' in err
    assert f"{title}: Running (2/2 trainer pods running)" in err
    assert err.rstrip().endswith(f"{title}: Complete (AllJobsCompleted: jobset completed successfully)")
    r_ = kt(kubeconfig, namespace, "wait", "trainjob", name, "--for=condition=Complete", "--timeout=30s")
    assert r_.returncode == 0 and "condition met" in r_.stdout


def test_get_describe_wait_and_logs_follow(
    kubeconfig: str, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    rt = uniq("rt")
    name = uniq("tj")
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), trainjob(name, namespace, rt))
    assert kt(kubeconfig, namespace, "apply", "-f", f).returncode == 0
    wait_until(lambda: get(r.JOBSET, name, namespace), 60, "JobSet")

    # logs -f waits for a pod instead of failing; Ctrl-C ends it cleanly.
    follow = subprocess.Popen(
        [*KUBETRAIN, "logs", name, "-f", "--kubeconfig", kubeconfig, "-n", namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(4)
    assert follow.poll() is None
    follow.send_signal(signal.SIGINT)
    _, ferr = follow.communicate(timeout=30)
    assert follow.returncode == 130 and "Traceback" not in ferr
    assert f"trainjob {namespace}/{name}: Created (NoPods: JobSet created" in ferr

    pod = make_pod(namespace, name, 0, unschedulable("0/1 nodes are available: 1 Insufficient cpu."))
    out = kt(kubeconfig, namespace, "get", "trainjob", name, "-o", "wide").stdout
    assert "Pending" in out and "Unschedulable" in out and "0/1 nodes are available: 1 Insufficient cpu." in out

    set_pod_status(namespace, pod, failed(3))
    event(namespace, "Pod", pod, "BackOff", "Back-off restarting failed container")
    event(namespace, "JobSet", name, "FailedCreate", "e2e: an event on the JobSet")
    desc = kt(kubeconfig, namespace, "describe", "trainjob", name).stdout
    assert "node-0-0" in desc and "Failed" in desc
    assert "Back-off restarting failed container" in desc and "e2e: an event on the JobSet" in desc
    assert "Last log lines of node-0-0, exit code 3:" in desc

    r_ = kt(kubeconfig, namespace, "wait", "trainjob", name, "--for=condition=Complete", "--timeout=2s")
    assert r_.returncode == 1 and f"timed out waiting for the condition on trainjobs/{name}" in r_.stderr
    waiter = subprocess.Popen(
        [*KUBETRAIN, "wait", "tj", name, "--for=delete", "--timeout=60s", "--kubeconfig", kubeconfig, "-n", namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)
    d = kt(kubeconfig, namespace, "delete", "trainjob", name, "not-there")
    assert d.returncode == 1 and f'"{name}" deleted' in d.stdout and '"not-there" not found' in d.stderr
    wout, werr = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, werr
    assert wout == f"trainjob.trainer.kubeflow.org/{name} condition met\n"
    call(lambda c: c.delete(r.POD, pod, namespace, missing_ok=True))
