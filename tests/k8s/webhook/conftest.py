"""A real webhook server on 127.0.0.1 over TLS, with a generated CA, and an HTTPS client that trusts only that
CA and checks the Service DNS name the way the API server does."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import json
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.runtime import AnyRuntime
from kubetrain.k8s.certs import CertBundle, generate_bundle, write_cert_dir
from kubetrain.k8s.webhook import WebhookServer, start
from kubetrain.runtimes import builtin_runtime

SERVICE, NAMESPACE = "kubetrain-operator", "kubeflow-system"
SNI = f"{SERVICE}.{NAMESPACE}.svc"
NOW = dt.datetime(2026, 11, 22, 3, 0, 0, tzinfo=dt.UTC)
STAMP = "2026-11-22T03:00:00Z"


def _runtime(name: str, **labels: str) -> AnyRuntime:
    rt = builtin_runtime("torch-distributed")
    assert rt is not None
    rt.metadata.name = name
    rt.metadata.labels = {**(rt.metadata.labels or {}), **labels}
    return rt


@dataclass
class Cluster:
    """What the injected lookups see; tests add to it."""

    runtimes: dict[tuple[str, str, str | None], Any] = field(default_factory=dict)
    jobsets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    trainjobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    fail_lookups: bool = False
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    async def runtime(self, kind: str, name: str, namespace: str | None) -> Any:
        self.calls.append((kind, name, namespace))
        if self.fail_lookups:
            raise ConnectionError("apiserver unreachable")
        return self.runtimes.get((kind, name, namespace))

    async def jobset(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.jobsets.get((name, namespace))

    async def trainjob(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.trainjobs.get((name, namespace))

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        if self.fail_lookups:
            raise ConnectionError("apiserver unreachable")
        return self.namespaces.get(name)


@dataclass
class Served:
    server: WebhookServer
    loop: asyncio.AbstractEventLoop
    bundle: CertBundle
    client_ctx: ssl.SSLContext
    cluster: Cluster
    cert_dir: Path

    def post(self, path: str, body: bytes | str, sni: str = SNI) -> tuple[int, bytes]:
        conn = _Conn(self.server.port, self.client_ctx, sni)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def review(
        self,
        path: str,
        obj: dict[str, Any] | None,
        *,
        old: dict[str, Any] | None = None,
        operation: str = "CREATE",
        namespace: str | None = "default",
    ) -> dict[str, Any]:
        kind = (obj or old or {}).get("kind", "TrainJob")
        request = {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": kind},
            "resource": {
                "group": "trainer.kubeflow.org",
                "version": "v1alpha1",
                "resource": kind.lower() + "s",
            },
            "operation": operation,
            "namespace": namespace,
            "name": meta.get("name") if isinstance(meta := (obj or old or {}).get("metadata"), dict) else None,
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": "tester"},
        }
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        )
        status, raw = self.post(path, body)
        assert status == 200, raw
        review = json.loads(raw)
        assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
        assert review["response"]["uid"] == request["uid"]
        out: dict[str, Any] = review["response"]
        return out

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)


class _Conn(http.client.HTTPSConnection):
    """Connects to 127.0.0.1 but verifies the certificate for the Service name (SNI), like the API server."""

    def __init__(self, port: int, ctx: ssl.SSLContext, sni: str):
        super().__init__("127.0.0.1", port, context=ctx, timeout=10)
        self._sni = sni

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self._sni)  # type: ignore[attr-defined]


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    ctx.check_hostname = True
    return ctx


@pytest.fixture(scope="session")
def bundle() -> CertBundle:
    # Real time: the TLS handshake checks validity against the system clock.
    return generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC))


@pytest.fixture(scope="module")
def served(bundle: CertBundle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    cert_dir = tmp_path_factory.mktemp("certs")
    write_cert_dir(bundle, cert_dir)
    cluster = Cluster()
    cluster.runtimes[("ClusterTrainingRuntime", "torch-distributed", None)] = builtin_runtime(
        "torch-distributed"
    )
    cluster.runtimes[("ClusterTrainingRuntime", "old-torch", None)] = _runtime(
        "old-torch", **{"trainer.kubeflow.org/support": "deprecated"}
    )
    team_rt = _runtime("team-torch").to_wire() | {"kind": "TrainingRuntime"}
    team_rt["metadata"]["namespace"] = "team-a"
    cluster.runtimes[("TrainingRuntime", "team-torch", "team-a")] = (
        team_rt  # a dict, as a raw API client returns
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        start(
            cluster.runtime,
            cert_dir=cert_dir,
            host="127.0.0.1",
            port=0,
            jobset_lookup=cluster.jobset,
            namespace_lookup=cluster.namespace_labels,
            trainjob_lookup=cluster.trainjob,
            clock=lambda: NOW,
        ),
        loop,
    ).result(timeout=30)
    yield Served(server, loop, bundle, client_context(bundle.ca_cert), cluster, cert_dir)
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


def trainjob(name: str = "job", runtime: str = "torch-distributed", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "runtimeRef": {
                "name": runtime,
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            **spec,
        },
    }
