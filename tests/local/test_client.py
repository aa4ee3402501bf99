"""``kubetrain.Client``: train a function or a command, wait, read logs, delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.api import KubetrainError
from kubetrain.client import Client

from .conftest import container, needs_namespaces, needs_torch, py, rjob, runtime

pytestmark = needs_namespaces


def greet(greeting: str, times: int) -> None:
    import os
    import sys

    # One write per line: pods run unbuffered, so print() would write each piece separately and the output of
    # two processes sharing a pod's log could interleave mid-line.
    for _ in range(times):
        sys.stdout.write(f"{greeting} {os.environ.get('JOB_INDEX')}\n")
        sys.stdout.flush()


def test_train_a_function_with_args_then_wait_logs_and_delete(kt_home: Path, tmp_path: Path) -> None:
    client = Client()
    env = [
        {
            "name": "JOB_INDEX",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        }
    ]
    rt = runtime("plain", [rjob("node", [container(py("pass"), env=env)], ancestor="trainer", parallelism=2)])
    client._backend.apply([rt], namespace="default")
    name = client.train(runtime="plain", func=greet, func_args={"greeting": "hello", "times": 2})
    tj = client.wait(name, timeout=120)
    assert tj.state == "Complete"
    lines = client.logs(name)
    assert sorted(lines) == ["[node-0/0] hello 0"] * 2 + ["[node-0/1] hello 1"] * 2
    assert [j.name for j in client.list_jobs()] == [name]
    logs_dir = client._backend.logs_dir(name, "default")
    client.delete(name, keep_logs=True)
    assert client.list_jobs() == []
    assert (logs_dir / "node-0-1.log").read_text().count("hello 1") == 2, "kept on request"


def test_function_without_source_is_a_clear_error(kt_home: Path) -> None:
    with pytest.raises(KubetrainError, match="cannot be read"):
        Client().train(func=print)


@needs_torch
def test_train_a_function_under_torchrun(kt_home: Path, tmp_path: Path) -> None:
    client = Client()
    name = client.train(
        func=greet, func_args={"greeting": "rank", "times": 1}, num_nodes=1, num_proc_per_node=2
    )
    assert client.wait(name, timeout=300).state == "Complete"
    assert sum(1 for line in client.logs(name) if line.startswith("rank ")) == 2
