"""The HTTPS server itself: TLS trust and names, bad requests, health, certificate reload."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from pathlib import Path

import pytest

from kubetrain.k8s.certs import generate_bundle, write_cert_dir
from kubetrain.k8s.webhook import names, start
from kubetrain.k8s.webhook.server import LATENCIES
from tests.k8s.webhook.conftest import NAMESPACE, SERVICE, Served, _Conn, client_context, trainjob


def _get(served: Served, path: str) -> tuple[int, bytes]:
    conn = _Conn(served.server.port, served.client_ctx, f"{SERVICE}.{NAMESPACE}.svc")
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_all_four_upstream_paths_answer(served: Served) -> None:
    for path in (
        names.MUTATE_TRAINJOB,
        names.VALIDATE_TRAINJOB,
        names.VALIDATE_TRAINING_RUNTIME,
        names.VALIDATE_CLUSTER_TRAINING_RUNTIME,
    ):
        resp = served.review(path, trainjob(), operation="DELETE")
        assert resp["allowed"] is True, path


def test_every_service_dns_name_verifies(served: Served) -> None:
    for sni in (SERVICE, f"{SERVICE}.{NAMESPACE}", f"{SERVICE}.{NAMESPACE}.svc.cluster.local"):
        status, _ = served.post(names.VALIDATE_TRAINJOB, "{}", sni=sni)
        assert status == 400


def test_certificate_for_another_service_is_rejected(served: Served) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        served.post(names.VALIDATE_TRAINJOB, "{}", sni="other.kubeflow-system.svc")


def test_a_client_trusting_another_ca_is_refused(served: Served) -> None:
    other = generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC))
    conn = _Conn(served.server.port, client_context(other.ca_cert), f"{SERVICE}.{NAMESPACE}.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/healthz")


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        json.dumps({"kind": "Pod"}),
        json.dumps(
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "x"}}
        ),
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    ],
)
def test_malformed_reviews_get_400(served: Served, body: str) -> None:
    status, text = served.post(names.VALIDATE_TRAINJOB, body)
    assert status == 400
    assert text.startswith(b"bad AdmissionReview")


def test_unknown_path_is_404(served: Served) -> None:
    status, _ = served.post("/validate-something-else", "{}")
    assert status == 404


def test_health_and_readiness(served: Served) -> None:
    assert _get(served, "/healthz") == (200, b"ok\n")
    assert _get(served, "/readyz") == (200, b"ok\n")


def test_ready_only_when_a_client_trusting_the_configured_ca_gets_an_answer(served: Served) -> None:
    """Readiness is the API server's view: the server self-checks over TLS with the CA the configurations trust,
    for the Service name; a CA that does not match (a caBundle not yet injected, a wrong certificate) is not
    ready, and neither is a server that is stopping."""
    server = served.server
    assert server.ready()
    other = generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC)).ca_cert
    keep, keep_name = server.trust, server.server_name
    try:
        server.trust = lambda: other
        assert served.run(server.self_check()) is False and not server.ready()
        server.trust, server.server_name = (lambda: served.bundle.ca_cert), f"{SERVICE}.{NAMESPACE}.svc"
        assert served.run(server.self_check()) is True and server.ready()
        server.server_name = f"other.{NAMESPACE}.svc"  # the certificate does not name it
        assert served.run(server.self_check()) is False
    finally:
        server.trust, server.server_name = keep, keep_name
        served.run(server.self_check())
    assert server.ready()


def test_a_server_that_stops_is_not_ready(tmp_path: Path) -> None:
    bundle = generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC))
    write_cert_dir(bundle, tmp_path)

    async def lookup(kind: str, name: str, namespace: str | None) -> None:
        return None

    async def scenario() -> tuple[bool, bool]:
        server = await start(lookup, cert_dir=tmp_path, host="127.0.0.1", port=0)
        before = server.ready()
        await server.stop()
        return before, server.ready()

    assert asyncio.run(scenario()) == (True, False)


def test_warm_up_runs_the_review_path_without_a_cluster() -> None:
    from kubetrain.k8s.webhook.server import warm_up

    class Adapter:
        asked: list[str] = []

        async def namespace_labels(self, name: str) -> dict[str, str]:
            self.asked.append(name)
            return {}

    adapter = Adapter()
    took = asyncio.run(warm_up(adapter, "kubeflow-system"))
    assert took > 0 and adapter.asked == ["kubeflow-system"]  # the lookups' API connection is opened


def test_every_answer_closes_its_connection(served: Served) -> None:
    """No pooled connection may outlive a pod's endpoint (docs/webhook.md#availability)."""
    conn = _Conn(served.server.port, served.client_ctx, f"{SERVICE}.{NAMESPACE}.svc")
    try:
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        assert resp.getheader("Connection", "").lower() == "close"
        resp.read()
        assert resp.will_close
    finally:
        conn.close()
    review = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "object": trainjob(), "namespace": "default",
        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"}}})  # fmt: skip
    conn = _Conn(served.server.port, served.client_ctx, f"{SERVICE}.{NAMESPACE}.svc")
    try:
        conn.request("POST", names.VALIDATE_TRAINJOB, body=review, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("Connection", "").lower() == "close"
    finally:
        conn.close()


def test_latencies_are_recorded_per_path(served: Served) -> None:
    served.review(names.VALIDATE_TRAINJOB, trainjob())
    lat = served.server.app[LATENCIES]
    assert lat.percentile(names.VALIDATE_TRAINJOB, 99) > 0


def test_reload_serves_a_rotated_certificate_without_restart(served: Served) -> None:
    """After rotation to a new CA, clients that trust only the new CA connect; the old CA no longer works."""
    fresh = generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC))
    write_cert_dir(fresh, served.cert_dir)
    served.server.reload_certs()
    try:
        conn = _Conn(served.server.port, client_context(fresh.ca_cert), f"{SERVICE}.{NAMESPACE}.svc")
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
        with pytest.raises(ssl.SSLCertVerificationError):
            _get(served, "/healthz")
    finally:
        write_cert_dir(served.bundle, served.cert_dir)
        served.server.reload_certs()
    assert _get(served, "/healthz")[0] == 200


def test_localhost_certificate_verifies_for_an_ip_url(tmp_path: Path) -> None:
    """A webhook registered by URL https://127.0.0.1:<port>/... (development, e2e) needs an IP SAN."""
    bundle = generate_bundle("localhost", "dev", dt.datetime.now(dt.UTC))
    write_cert_dir(bundle, tmp_path)

    async def lookup(kind: str, name: str, namespace: str | None) -> None:
        return None

    async def scenario() -> int:
        server = await start(lookup, cert_dir=tmp_path, host="127.0.0.1", port=0)
        try:
            ctx = client_context(bundle.ca_cert)
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=ctx, server_hostname="127.0.0.1"
            )
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            status = int((await reader.readline()).split()[1])
            writer.close()
            return status
        finally:
            await server.stop()

    assert asyncio.run(scenario()) == 200
