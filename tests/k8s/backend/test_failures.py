"""``kubetrain get -o wide`` and ``describe`` on a cluster show why a TrainJob's pods failed: while a pod
crash-loops, and after the Job controller deleted it (the operator's record, ``status.podFailures``, and the
``Failed`` message). The CLI runs as a user runs it, a process against the fake API server and the operator."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, crash_loop, pod_manifest, running
from tests.k8s.threaded import Background, background_api

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def cli(kubeconfig: str, *args: str) -> str:
    env = {**os.environ, "COLUMNS": "250"}  # wide enough that no table cell is wrapped
    done = subprocess.run(
        [*KUBETRAIN, *args, "--kubeconfig", kubeconfig], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def until(pred, what: str, timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def trainjob_status(bg: Background) -> dict:
    return bg.api.store.get("trainer.kubeflow.org", "trainjobs", "default", "job").get("status") or {}


def test_get_and_describe_say_why_while_it_loops_and_after_the_pod_is_gone(tmp_path: Path) -> None:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        kubelet = Kubelet(bg)

        async def seed() -> None:
            bg.api.store.create("trainer.kubeflow.org", "clustertrainingruntimes", None, torch_runtime(), "admin")
            bg.api.store.create("trainer.kubeflow.org", "trainjobs", "default", trainjob("job"), "user")

        bg.call(seed())
        until(lambda: kubelet.has_jobset("job"), "JobSet")
        pod = kubelet.create_pod(pod_manifest("job", "node"), running())
        kubelet.log(pod, "epoch 0 loss 2.3\nValueError: boom\n")
        kubelet.restart(pod)
        kubelet.set_status(pod, crash_loop(2, 3))
        until(lambda: [e for e in trainjob_status(bg).get("podFailures") or [] if e.get("logTail")], "the record")

        wide = cli(kubeconfig, "get", "trainjobs", "-o", "wide")
        row = wide.splitlines()[1]
        assert " Running " in row and " PodFailures " in row
        assert row.endswith("node-0-0 exited with code 3 (Error) after 2 restarts")
        text = cli(kubeconfig, "describe", "trainjob", "job")
        assert "Running (PodFailures: node-0-0 exited with code 3 (Error) after 2 restarts)" in text
        failures = text.split("\nFailures:\n")[1].splitlines()
        row = failures[1].split()
        assert row == ["node-0-0", "node", "3", "-", "Error", "2", "1", row[7], pod]
        assert "Last log lines of node-0-0, exit code 3:" in text and "ValueError: boom" in text

        # Past its backoffLimit the Job controller deletes the pod; JobSet fails. The why stays readable.
        kubelet.delete_pod(pod)
        kubelet.complete_jobset("job", failed=True)
        until(lambda: any(c["type"] == "Failed" for c in trainjob_status(bg).get("conditions") or []), "Failed")
        text = cli(kubeconfig, "describe", "trainjob", "job")
        assert "Pods:" in text and "(none)" in text.split("Pods:")[1].splitlines()[0]
        state = next(line for line in text.splitlines() if line.startswith("State:"))
        assert state.split(None, 1)[1] == (
            "Failed (FailedJobs: node-0-0 exited with code 3 (Error) after 2 restarts; "
            "jobset failed due to one or more job failures)"
        )
        assert "\nFailures:\n" in text
        logs = text.split("Last log lines of node-0-0, exit code 3:")[1].splitlines()[1:]
        assert [line.strip() for line in logs[:2]] == ["epoch 0 loss 2.3", "ValueError: boom"]
        assert "PodFailed" in text.split("Events:")[1]
        wide = cli(kubeconfig, "get", "trainjobs", "-o", "wide")
        assert wide.splitlines()[1].endswith(
            "node-0-0 exited with code 3 (Error) after 2 restarts; jobset failed due to one or more job failures"
        )
        data = cli(kubeconfig, "describe", "trainjob", "job", "-o", "json")
        assert '"exitCode": 3' in data and '"failureLogs"' in data
