"""e2e against a real API server: runs only when ``KUBETRAIN_E2E_KUBECONFIG`` names a kubeconfig.

The cluster needs a kube-apiserver with the JobSet CRD (no nodes, no JobSet controller). These fixtures
install kubetrain's CRDs if missing, make one namespace per session, and run ``kubetrain operator`` as a
local process (the webhook too, when a test asks for it: the API server calls it on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import from_kubeconfig

KUBECONFIG = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")

SKIP_REASON = "e2e needs a real API server: set KUBETRAIN_E2E_KUBECONFIG to a kubeconfig (JobSet CRD installed)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KUBECONFIG:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


REPO = Path(__file__).resolve().parents[2]


def call(coro_fn: Any) -> Any:
    """Run one async step with a fresh client (tests stay synchronous and simple)."""

    async def wrapper() -> Any:
        assert KUBECONFIG, SKIP_REASON
        async with Client(from_kubeconfig(KUBECONFIG), qps=0) as client:
            return await coro_fn(client)

    return asyncio.run(wrapper())


def wait_until(predicate: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def get(res: r.Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
    async def go(client: Client) -> dict[str, Any] | None:
        try:
            return await client.get(res, name, namespace)
        except NotFound:
            return None

    return call(go)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _install_crds() -> None:
    async def go(client: Client) -> None:
        try:
            await client.list(r.TRAINJOB, None)
            return
        except NotFound:
            pass
        text = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "crds"], check=True, capture_output=True, text=True
        ).stdout
        for doc in yaml.safe_load_all(text):
            if doc:
                await client.apply(doc)
        for _ in range(120):
            try:
                await client.list(r.TRAINJOB, None)
                return
            except ApiError:
                await asyncio.sleep(0.5)
        raise RuntimeError("TrainJob CRD did not become served")

    call(go)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    assert KUBECONFIG
    _install_crds()
    return KUBECONFIG


@pytest.fixture(scope="session")
def namespace(kubeconfig: str) -> Iterator[str]:
    ns = f"kt-e2e-{uuid.uuid4().hex[:6]}"
    call(lambda c: c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    yield ns

    async def cleanup(client: Client) -> None:
        try:
            await client.delete(r.NAMESPACE, ns)
        except ApiError:
            pass

    call(cleanup)


class OperatorProcess:
    """``kubetrain operator`` as a child process, restartable."""

    def __init__(self, kubeconfig: str, namespace: str, *extra: str) -> None:
        self.kubeconfig, self.namespace, self.extra = kubeconfig, namespace, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.status_port = 0

    def start(self) -> OperatorProcess:
        self.health_port = free_port()
        # Its own status endpoint port (other e2e runs may share the machine), reachable at 127.0.0.1.
        self.status_port = self.status_port or free_port()
        status = ["--status-port", str(self.status_port), "--status-url", f"https://127.0.0.1:{self.status_port}"]
        cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", self.kubeconfig]
        cmd += ["--lease-namespace", self.namespace, "--health-port", str(self.health_port), *status, *self.extra]
        self.proc = subprocess.Popen(cmd, cwd=REPO)
        import urllib.request

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_until(ready, 60, "operator /readyz")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        self.proc = None


@pytest.fixture
def operator(kubeconfig: str, namespace: str) -> Iterator[OperatorProcess]:
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace).start()
    try:
        yield op
    finally:
        op.stop()


def torch_runtime(name: str, image: str = "busybox:1.36", namespace: str | None = None) -> dict[str, Any]:
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}},
        },
    }
    kind = "TrainingRuntime" if namespace else "ClusterTrainingRuntime"
    meta: dict[str, Any] = {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def trainjob(name: str, namespace: str, runtime: str, kind: str = "TrainingRuntime", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": kind}}
    body.update(spec)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }
