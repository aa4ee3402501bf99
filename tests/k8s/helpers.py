"""Shared builders for the Kubernetes-backend tests: a fake API server, a client, runtimes and TrainJobs."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from kubetrain.compiler import fixed_keygen
from kubetrain.k8s.client import Client
from kubetrain.k8s.client.config import ClusterConfig
from kubetrain.k8s.operator import Operator, OperatorSettings
from kubetrain.testing.fakeapi import FakeApiServer

GROUP = "trainer.kubeflow.org"
API = f"{GROUP}/v1alpha1"


def torch_runtime(name: str = "torch-distributed", image: str = "pytorch/pytorch:2.13.0") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}},
                            },
                        }
                    ]
                }
            },
        },
    }


def mpi_runtime(name: str = "mpi", coscheduling: bool = True) -> dict[str, Any]:
    node_spec = {"containers": [{"name": "node", "image": "mpi:1"}]}
    rt = {
        "apiVersion": API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
        "spec": {
            "mlPolicy": {"numNodes": 2, "mpi": {"numProcPerNode": 1, "mpiImplementation": "OpenMPI"}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "launcher",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"template": {"spec": copy.deepcopy(node_spec)}},
                            },
                        },
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": copy.deepcopy(node_spec)}}},
                        },
                    ]
                }
            },
        },
    }
    if coscheduling:
        rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    return rt


def trainjob(name: str = "job", runtime: str = "torch-distributed", namespace: str = "default", **spec: Any):
    body: dict[str, Any] = {"runtimeRef": {"name": runtime}}
    body.update(spec)
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll until ``predicate()`` is truthy. The timeout only bounds a hang; no test asserts on timing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class Env:
    api: FakeApiServer
    client: Client

    def get(self, plural: str, name: str, namespace: str | None = "default", group: str = GROUP) -> dict[str, Any]:
        return self.api.store.get(group, plural, namespace, name)

    def find(self, plural: str, name: str, namespace: str | None = "default", group: str = GROUP):
        try:
            return self.get(plural, name, namespace, group)
        except Exception:
            return None

    def items(self, plural: str, group: str = GROUP, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.api.store.list(group, plural, namespace)[0]


def client_for(api: FakeApiServer, **kw: Any) -> Client:
    return Client(ClusterConfig(server=api.url, token=api.token), **kw)


@asynccontextmanager
async def fake_env(**api_kw: Any) -> AsyncIterator[Env]:
    async with FakeApiServer(**api_kw) as api:
        client = client_for(api, qps=0)
        try:
            yield Env(api, client)
        finally:
            await client.close()


@asynccontextmanager
async def running_operator(
    env: Env, *, clock: Callable[[], Any] | None = None, **settings: Any
) -> AsyncIterator[Operator]:
    opts: dict[str, Any] = {
        "leader_election": False,
        "health_port": None,
        "backoff_base": 0.01,
        "watch_timeout": 30,
    }
    opts.update(settings)
    # The operator's rate limit lives in its client (the CLI builds it from the same settings).
    client = client_for(env.api, qps=opts.get("qps", 0), burst=opts.get("burst", 100))
    extra: dict[str, Any] = {"clock": clock} if clock else {}
    op = Operator(client, OperatorSettings(**opts), keygen=fixed_keygen(), **extra)
    stop = asyncio.Event()
    task = asyncio.create_task(op.run(stop))
    await wait_for(lambda: op.started.is_set() or task.done(), what="operator start")
    try:
        yield op
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await client.close()


@asynccontextmanager
async def operator_env(**settings: Any) -> AsyncIterator[tuple[Env, Operator]]:
    """The in-memory API server with the torch runtime (``torch_runtime()``) and the operator running on it."""
    async with fake_env() as env:
        await env.client.create(torch_runtime())
        async with running_operator(env, **settings) as op:
            yield env, op


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro_fn())  # type: ignore[arg-type]


async def add_pod(env: Env, job: str, name: str | None = None, namespace: str = "default") -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name or f"{job}-node-0-0-abcde",
            "namespace": namespace,
            "labels": {"jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
        },
        "spec": {"containers": [{"name": "node", "image": "busybox"}]},
    }
    return await env.client.create(pod)


async def token_for(env: Env, pod: dict[str, Any] | None, audience: str = "trainer.kubeflow.org") -> str:
    body: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"audiences": [audience], "expirationSeconds": 3600}}  # fmt: skip
    if pod is not None:
        body["spec"]["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                          "uid": pod["metadata"]["uid"]}  # fmt: skip
    ns = (pod or {}).get("metadata", {}).get("namespace", "default")
    answer = await env.client.session.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/default/token",
                                              body=body)  # fmt: skip
    return str(answer["status"]["token"])
