"""``start(client=...)``, as the operator calls it: lookups through the API client and self-signed certificate
management against the project's fake API server, then a real TLS review."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp

from kubetrain.k8s.certs import MUTATING, VALIDATING, bundle_from_secret
from kubetrain.k8s.webhook import names, start, webhook_configurations
from kubetrain.k8s.webhook.wiring import _WEBHOOK_CONFIGS
from kubetrain.testing.fakeapi.server import default_resources
from tests.k8s.helpers import fake_env, run, torch_runtime
from tests.k8s.webhook.conftest import trainjob

NS = "kubeflow-system"


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": obj["kind"]},
            "operation": "CREATE",
            "namespace": "default",
            "object": obj,
        },
    }


def test_self_signed_mode_end_to_end(tmp_path: Path) -> None:
    async def scenario() -> None:
        resources = [
            *default_resources(),
            (_WEBHOOK_CONFIGS[VALIDATING], False),
            (_WEBHOOK_CONFIGS[MUTATING], False),
        ]
        async with fake_env(resources=resources) as env:
            for config in webhook_configurations(names.DEFAULT_SERVICE, NS):
                await env.client.create(config, resource=_WEBHOOK_CONFIGS[config["kind"]])
            await env.client.create(torch_runtime())
            server = await start(client=env.client, cert_dir=tmp_path, host="127.0.0.1", port=0, namespace=NS)
            try:
                secret = env.get("secrets", names.DEFAULT_SECRET, NS, group="")
                bundle = bundle_from_secret(secret)
                assert bundle is not None
                assert (tmp_path / "tls.crt").read_bytes() == bundle.cert
                assert (tmp_path / ".kubetrain-managed").exists()
                for plural in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
                    for config in env.items(plural, group="admissionregistration.k8s.io"):
                        for hook in config["webhooks"]:
                            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle.ca_cert

                ctx = ssl.create_default_context(cadata=bundle.ca_cert.decode())
                url = f"https://127.0.0.1:{server.port}{names.VALIDATE_TRAINJOB}"
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
                    for runtime, allowed in (("torch-distributed", True), ("missing", False)):
                        async with http.post(
                            url,
                            data=json.dumps(_review(trainjob(runtime=runtime))),
                            server_hostname=f"{names.DEFAULT_SERVICE}.{NS}.svc",
                        ) as resp:
                            assert resp.status == 200
                            body = await resp.json()
                        assert body["response"]["allowed"] is allowed, body
            finally:
                await server()  # the handle is its own stop function (the operator's hook point relies on it)
            assert server.stopping.is_set()

    run(scenario)


def test_cert_manager_mode_only_reads_files(tmp_path: Path) -> None:
    """With certificates already mounted (cert-manager), start() makes no Secret and touches no caBundle."""
    import datetime as dt

    from kubetrain.k8s.certs import generate_bundle, write_cert_dir

    write_cert_dir(generate_bundle(names.DEFAULT_SERVICE, NS, dt.datetime.now(dt.UTC)), tmp_path)

    async def scenario() -> None:
        async with fake_env() as env:
            server = await start(client=env.client, cert_dir=tmp_path, host="127.0.0.1", port=0, namespace=NS)
            await server.stop()
            assert not [m for m, p in env.api.requests if "secrets" in p or "webhookconfigurations" in p]

    run(scenario)


def test_cert_mode_detection(tmp_path: Path, monkeypatch: Any) -> None:
    import datetime as dt

    from kubetrain.k8s.certs import MANAGED_MARKER, generate_bundle, write_cert_dir
    from kubetrain.k8s.webhook.server import _self_signed

    monkeypatch.delenv("KUBETRAIN_WEBHOOK_CERT_MODE", raising=False)
    assert _self_signed(tmp_path) is True  # empty directory: ours to fill
    write_cert_dir(generate_bundle("localhost", "dev", dt.datetime.now(dt.UTC)), tmp_path)
    assert _self_signed(tmp_path) is False  # someone else's certificate
    (tmp_path / MANAGED_MARKER).write_text("")
    assert _self_signed(tmp_path) is True  # ours, from before a container restart
    monkeypatch.setenv("KUBETRAIN_WEBHOOK_CERT_MODE", "cert-manager")
    assert _self_signed(tmp_path) is False
    monkeypatch.setenv("KUBETRAIN_WEBHOOK_CERT_MODE", "self-signed")
    assert _self_signed(tmp_path / "elsewhere") is True
