"""The operator process starts the admission webhook next to the reconcilers (its own client, readiness)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.k8s.helpers import fake_env, run, running_operator, trainjob

pytest.importorskip("kubetrain.k8s.webhook.server", reason="the webhook package is not installed")



def _review(uid: str) -> dict[str, Any]:
    """A CREATE review of a TrainJob whose runtime does not exist (the webhook must deny it)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
            "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "job",
            "object": trainjob("job", runtime="missing"),
        },
    }

def test_operator_serves_the_webhook_over_tls_and_is_ready_only_then(tmp_path: Path) -> None:
    from kubetrain.k8s.webhook import names

    async def body() -> None:
        async with fake_env() as env:
            cert_dir = tmp_path / "certs"
            async with running_operator(env, webhook_port=0, webhook_cert_dir=str(cert_dir)) as op:
                assert op.webhook is not None and op.ready()
                # Ready follows the webhook's own end-to-end check (the API server could not call it) ...
                op.webhook.serving = False
                assert not op.ready()
                assert await op.webhook.self_check() and op.ready()
                # ... and ends when shutdown begins, while the webhook still answers.
                op.stopping = True
                assert not op.ready() and op.webhook.ready()
                op.stopping = False
                # Its lookups use a client of their own, not the reconcilers' rate-limited one.
                assert op._webhook_client is not None and op._webhook_client is not op.client
                review = _review("u1")
                # Certificate verification is the webhook's own tests' subject; here only the wiring matters.
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                url = f"https://127.0.0.1:{op.webhook.port}{names.VALIDATE_TRAINJOB}"
                async with aiohttp.ClientSession() as http, http.post(url, json=review, ssl=ctx) as resp:
                    answer = await resp.json()
                assert answer["response"]["uid"] == "u1"
                assert answer["response"]["allowed"] is False
                assert 'ClusterTrainingRuntime "missing" not found' in answer["response"]["status"]["message"]
            assert op.webhook.stopping.is_set()

    run(body)


def test_operator_serves_the_webhook_with_a_provided_certificate_verified_on_127_0_0_1(tmp_path: Path) -> None:
    """The e2e set-up: certificates in --webhook-cert-dir, the API server calling https://127.0.0.1:<port>."""
    import datetime as dt

    from kubetrain import pki
    from kubetrain.k8s import certs
    from kubetrain.k8s.webhook import names

    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = pki.generate_ca(now)
    cert, key = pki.generate_serving_cert(ca_cert, ca_key, ["127.0.0.1", "localhost"], now)
    cert_dir = tmp_path / "certs"
    certs.write_cert_dir(certs.CertBundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key), cert_dir)

    async def body() -> None:
        async with fake_env() as env, running_operator(env, webhook_port=0, webhook_cert_dir=str(cert_dir)) as op:
            ctx = ssl.create_default_context(cadata=ca_cert.decode())  # full verification, hostname included
            review = _review("u2")
            url = f"https://127.0.0.1:{op.webhook.port}{names.VALIDATE_TRAINJOB}"
            async with aiohttp.ClientSession() as http, http.post(url, json=review, ssl=ctx) as resp:
                answer = await resp.json()
            assert answer["response"]["allowed"] is False
            # cert-manager mode: a provided certificate is used as is, no Secret is written.
            assert not [s for s in env.items("secrets", "") if "webhook" in s["metadata"]["name"]]

    run(body)
