"""Refusals at submit for a replicated job that waits for others and could never start here: nothing is
recorded, one message names every shortfall."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubetrain.api.errors import KubetrainError
from kubetrain.local.backend import LocalBackend

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob

pytestmark = needs_namespaces


def waiting_runtime(node: dict[str, object]) -> dict[str, object]:
    return runtime("waits", [
        rjob("prepare", [container(py("pass"), name="prepare")]),
        rjob("node", [node], ancestor="trainer", depends_on=[("prepare", "Complete")]),
    ])


def test_refused_with_every_shortfall_and_nothing_recorded(
    backend: LocalBackend, kt_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "0")
    node = container(["no-such-trainer-cli", "go"], resources={"limits": {"nvidia.com/gpu": 1}})
    with pytest.raises(KubetrainError) as err:
        backend.apply([waiting_runtime(node), trainjob("w", "waits")], namespace="default", workdir=str(tmp_path),
                      detach=False)
    assert str(err.value) == (
        "TrainJob w cannot run on this machine, so it was not created (the steps before would run for nothing): "
        "replicated job node (it waits for prepare) asks for nvidia.com/gpu: requested 1, this machine has 0; "
        "replicated job node (it waits for prepare): its container node runs `no-such-trainer-cli`, which is not "
        f"installed in the Python environment standing in for image python:3.11 ({sys.prefix}; map images to "
        f"environments in {kt_home}/images.yaml). Fix: ask for what this machine has "
        "(spec.trainer.resourcesPerNode sets the trainer's requests and limits; 0 drops one), install what is "
        "missing, or run it on a cluster (--context)"
    )
    assert backend.list_trainjobs("default") == []


def test_what_fits_is_admitted_and_the_first_step_is_left_to_the_scheduler(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "1")
    ok = container([sys.executable, "-c", "pass"], resources={"limits": {"nvidia.com/gpu": 1}})
    backend.apply([waiting_runtime(ok), trainjob("fits", "waits")], namespace="default", workdir=str(tmp_path),
                  detach=False)
    monkeypatch.setenv("KUBETRAIN_GPUS", "0")
    first = runtime("first", [rjob("node", [ok], ancestor="trainer")])
    # Not behind dependsOn: nothing would run before it, so it fails as Unschedulable when it starts (as before).
    backend.apply([first, trainjob("first", "first")], namespace="default", workdir=str(tmp_path), detach=False)
    assert sorted(tj.name for tj in backend.list_trainjobs("default")) == ["first", "fits"]

