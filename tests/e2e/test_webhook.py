"""The admission webhook, served by the operator process on 127.0.0.1 and called by the real API server."""

from __future__ import annotations

import base64
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.k8s.client import ApiError, Client, Resource
from tests.e2e.conftest import OperatorProcess, call, free_port, torch_runtime, trainjob

pytestmark = pytest.mark.e2e
certs = pytest.importorskip("kubetrain.k8s.certs", reason="webhook certificates module not installed")
names = pytest.importorskip("kubetrain.k8s.webhook.names", reason="webhook package not installed")

CTR = Resource("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False)
VWC = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", namespaced=False)


@pytest.fixture
def webhook(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    """The operator with its webhook, registered for this test namespace only (URL clientConfig)."""
    # The API server calls https://127.0.0.1:<port>, so the serving certificate needs that IP as a SAN.
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = certs.generate_ca(now)
    cert, key = certs.generate_serving_cert(ca_cert, ca_key, ["127.0.0.1", "localhost"], now)
    bundle = certs.CertBundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)
    cert_dir = tmp_path / "certs"
    certs.write_cert_dir(bundle, cert_dir)
    port = free_port()
    op = OperatorProcess(
        kubeconfig,
        namespace,
        "--namespace",
        namespace,
        "--webhook-port",
        str(port),
        "--webhook-cert-dir",
        str(cert_dir),
    ).start()
    config_name = f"kt-e2e-{uuid.uuid4().hex[:6]}"
    hooks = []
    for hook_name, path, plural in (
        (names.WEBHOOK_VALIDATOR_TRAINJOB, names.VALIDATE_TRAINJOB, "trainjobs"),
        (names.WEBHOOK_VALIDATOR_TRAINING_RUNTIME, names.VALIDATE_TRAINING_RUNTIME, "trainingruntimes"),
    ):
        hooks.append(
            {
                "name": hook_name,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}{path}",
                    "caBundle": base64.b64encode(bundle.ca_cert).decode(),
                },
                "rules": [
                    {
                        "apiGroups": ["trainer.kubeflow.org"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [plural],
                    }
                ],
            }
        )
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": hooks,
    }
    call(lambda c: c.create(body, resource=VWC))
    try:
        yield namespace
    finally:
        call(lambda c: c.delete(VWC, config_name))
        op.stop()


def test_bad_trainjob_is_rejected_with_the_field_error(webhook: str) -> None:
    async def go(client: Client) -> ApiError:
        try:
            await client.create(trainjob("bad", webhook, "does-not-exist"))
        except ApiError as exc:
            return exc
        raise AssertionError("the API server accepted a TrainJob referencing a missing runtime")

    err = call(go)
    assert err.status == 403
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in err.message
    assert 'TrainingRuntime "does-not-exist" not found' in err.message


def test_deprecated_cluster_runtime_returns_a_warning(webhook: str) -> None:
    rt_name = f"kt-old-{uuid.uuid4().hex[:5]}"
    rt = torch_runtime(rt_name)
    rt["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"

    async def go(client: Client) -> list[str]:
        await client.apply(rt)
        try:
            client.session.warnings.clear()
            await client.create(trainjob("uses-old", webhook, rt_name, kind="ClusterTrainingRuntime"))
            return list(client.session.warnings)
        finally:
            await client.delete(CTR, rt_name, missing_ok=True)

    warnings = call(go)
    assert any(f'Referenced ClusterTrainingRuntime "{rt_name}" is deprecated' in w for w in warnings), warnings
