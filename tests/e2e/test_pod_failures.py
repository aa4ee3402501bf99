"""A failing TrainJob on a real cluster with a node: real pods crash, the kubelet restarts them, the Job controller
gives up and deletes the pod, JobSet fails. The TrainJob must still say why (``status.podFailures``, PodFailed
events, the ``Failed`` message with the step, exit code, reason and last log lines), and ``kubetrain describe``
must show it after the pod is gone.

Runs on the bed (conftest): real pods on the training image (``KUBETRAIN_E2E_IMAGE``, with ``sh`` and ``python3``),
the JobSet controller, and the installed operator in its pod.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import IMAGE, REPO, DeployedOperator, call, get, uniq, wait_until

pytestmark = pytest.mark.e2e
LABEL = "jobset.sigs.k8s.io/jobset-name"


@pytest.fixture
def cluster_operator(fresh_namespace: str, operator: DeployedOperator) -> str:
    """A namespace where the installed operator reconciles TrainJobs and real pods run."""
    return fresh_namespace


def runtime(name: str, ns: str, pod_spec: dict[str, Any], backoff_limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"backoffLimit": backoff_limit, "template": {"spec": pod_spec}},
                            },
                        }
                    ]
                }
            },
        },
    }


def node_container(command: str, **extra: Any) -> dict[str, Any]:
    return {"name": "node", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", command],
            **extra}  # fmt: skip


def start(ns: str, pod_spec: dict[str, Any], backoff_limit: int) -> str:
    name = uniq("fail")
    rt = runtime(f"{name}-rt", ns, pod_spec, backoff_limit)
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"name": f"{name}-rt", "kind": "TrainingRuntime"}},
    }

    async def go(client: Client) -> None:
        await client.apply(rt)
        await client.create(tj)

    call(go)
    return name


def status(name: str, ns: str) -> dict[str, Any]:
    return (get(r.TRAINJOB, name, ns) or {}).get("status") or {}


def failed(name: str, ns: str) -> dict[str, Any] | None:
    return next((c for c in status(name, ns).get("conditions") or [] if c["type"] == "Failed"), None)


def pods(name: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = call(lambda c: c.list(r.POD, ns, label_selector=f"{LABEL}={name}"))[0]
    return items


def events(name: str, ns: str) -> list[dict[str, Any]]:
    items, _ = call(lambda c: c.list(r.EVENT, ns))
    about = ("TrainJob", name)
    return [e for e in items if (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) == (
        *about, "PodFailed")]  # fmt: skip


def kubetrain(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", *args, "--kubeconfig", os.environ["KUBETRAIN_E2E_KUBECONFIG"]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_crash_loop_is_visible_while_it_runs_and_readable_after_the_pod_is_gone(cluster_operator: str) -> None:
    ns = cluster_operator
    # The two streams reach the kubelet's log through separate pipes: a pause keeps their order.
    script = 'echo "epoch 0 loss 2.30"; sleep 1; echo "ValueError: boom" >&2; exit 3'
    pod_spec = {"restartPolicy": "OnFailure", "containers": [node_container(script)]}
    name = start(ns, pod_spec, backoff_limit=2)  # two or three runs, ~10 s and ~20 s of CrashLoopBackOff apart

    # While it loops, the record follows every restart (a condition would make the SDK stop saying Running).
    seen: set[tuple[int, int]] = set()

    def progressed() -> bool:
        for e in status(name, ns).get("podFailures") or []:
            seen.add((int(e.get("restarts") or 0), int(e.get("failures") or 0)))
        return failed(name, ns) is not None

    wait_until(progressed, 300, "the TrainJob to fail")
    assert len({f for _, f in seen}) >= 2, f"the record did not follow the restarts: {sorted(seen)}"

    cond = failed(name, ns)
    assert cond is not None and cond["reason"] == "FailedJobs"
    message = cond["message"]
    first, _, rest = message.partition("\n")
    assert first.startswith("node-0-0 exited with code 3 (Error) after "), message
    assert f"Job {name}-node-0: BackoffLimitExceeded" in first, message
    assert rest.startswith("Last log lines of node-0-0 (pod "), message
    assert rest.splitlines()[-2:] == ["epoch 0 loss 2.30", "ValueError: boom"], message
    (entry,) = status(name, ns)["podFailures"]
    assert (entry["step"], entry["exitCode"], entry["reason"]) == ("node-0-0", 3, "Error")
    assert entry["failures"] >= 2  # the Job controller counts restarts against backoffLimit 2
    assert "logTail" not in entry  # finished: the lines are in the Failed message
    assert len(events(name, ns)) == entry["failures"]

    # The Job controller deleted the pod; describe still says why.
    wait_until(lambda: not pods(name, ns), 120, "the Job controller to delete the pod")
    text = kubetrain("describe", "trainjob", name, "-n", ns)
    state = next(line for line in text.splitlines() if line.startswith("State:"))
    assert "Failed (FailedJobs: node-0-0 exited with code 3 (Error) after " in state, text
    assert "\nFailures:\n" in text and "Pods:         (none)" in text, text
    lines = text.split("Last log lines of node-0-0, exit code 3:")[1].splitlines()[1:3]
    assert [line.strip() for line in lines] == ["epoch 0 loss 2.30", "ValueError: boom"], text
    wide = kubetrain("get", "trainjobs", name, "-n", ns, "-o", "wide")
    assert "node-0-0 exited with code 3 (Error)" in wide.splitlines()[1], wide


def test_an_oomkilled_pod_is_named_as_such(cluster_operator: str) -> None:
    ns = cluster_operator
    grow = "python3 -c 'b = b\"x\" * (1024 * 1024 * 1024); print(len(b))'"
    container = node_container(f"echo allocating; {grow}", resources={"limits": {"memory": "64Mi", "cpu": "500m"}})
    name = start(ns, {"restartPolicy": "Never", "containers": [container]}, backoff_limit=0)
    cond = wait_until(lambda: failed(name, ns), 300, "the TrainJob to fail")
    first, _, rest = cond["message"].partition("\n")
    assert first.startswith("node-0-0 was OOMKilled (exit code 137)"), cond["message"]
    assert "allocating" in rest, cond["message"]
    (entry,) = status(name, ns)["podFailures"]
    assert (entry["reason"], entry["signal"], entry["exitCode"]) == ("OOMKilled", "SIGKILL", 137)
