"""Fixtures for the local backend: an isolated ``$KUBETRAIN_HOME``, skips for missing system features, and
helpers that build runtimes/TrainJobs and run them to completion in-process."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from kubetrain.local.supervisor.controller import Supervisor

Obj = dict[str, Any]

def _namespaces_usable() -> bool:
    if not all(shutil.which(t) for t in ("bwrap", "nsenter")):
        return False
    if os.geteuid() == 0:
        return True
    probe = ["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


HAVE_NAMESPACES = _namespaces_usable()
needs_namespaces = pytest.mark.skipif(
    not HAVE_NAMESPACES,
    reason="needs bwrap and nsenter (make system-deps) and root or unprivileged user namespaces for pod namespaces",
)
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch not installed (.[train])"
)
needs_mpi = pytest.mark.skipif(
    shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs OpenMPI's mpirun (make system-deps) and mpi4py (.[train])",
)


@pytest.fixture
def kt_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "kthome"
    monkeypatch.setenv("KUBETRAIN_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def image_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' own small image (``images/testimage``) as a docker-archive, built once per session."""
    from .images.testimage import SmallImage

    return SmallImage().docker_archive(tmp_path_factory.mktemp("images") / "test.tar")


@pytest.fixture
def backend(kt_home: Path) -> Iterator[LocalBackend]:
    b = LocalBackend(Store())
    yield b
    b.store.close()


def py(code: str) -> list[str]:
    """A container command running ``code`` in the current interpreter."""
    return [sys.executable, "-c", code]


def container(command: list[str], name: str = "node", **extra: Any) -> Obj:
    return {"name": name, "image": "python:3.11", "command": command, **extra}


def rjob(
    name: str,
    containers: list[Obj],
    *,
    ancestor: str | None = None,
    parallelism: int = 1,
    depends_on: list[tuple[str, str]] | None = None,
    backoff_limit: int | None = None,
    volumes: list[Obj] | None = None,
    restart_policy: str | None = None,
) -> Obj:
    pod: Obj = {"containers": containers}
    if volumes:
        pod["volumes"] = volumes
    if restart_policy:
        pod["restartPolicy"] = restart_policy
    job: Obj = {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod}}
    if backoff_limit is not None:
        job["backoffLimit"] = backoff_limit
    out: Obj = {"name": name, "template": {"spec": job}}
    if ancestor:
        out["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}}
    if depends_on:
        out["dependsOn"] = [{"name": n, "status": s} for n, s in depends_on]
    return out


def runtime(
    name: str, rjobs: list[Obj], *, ml: Obj | None = None, pod_group: Obj | None = None, **jobset: Any
) -> Obj:
    spec: Obj = {"template": {"spec": {"replicatedJobs": rjobs, **jobset}}}
    if ml is not None:
        spec["mlPolicy"] = ml
    if pod_group is not None:
        spec["podGroupPolicy"] = pod_group
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": spec,
    }


def trainjob(name: str, runtime_name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runtimeRef": {"name": runtime_name}, **spec},
    }


def run_to_end(backend: LocalBackend, manifests: list[Obj], workdir: Path) -> Obj:
    """Apply (runtimes first) and supervise the single TrainJob in this thread; returns its final status."""
    names = backend.apply(manifests, namespace="default", workdir=str(workdir), detach=False)
    name = next(n.split("/", 1)[1].split()[0] for n in names if n.startswith("trainjob/"))
    return Supervisor(backend.store, "default", name).run()


def condition(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)
