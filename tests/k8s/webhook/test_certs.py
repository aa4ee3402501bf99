"""Self-signed webhook certificates: contents, renewal, Secret/caBundle objects and the reconcile loop."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from typing import Any

import pytest
from cryptography import x509

from kubetrain import pki
from kubetrain.k8s import certs
from kubetrain.k8s.certs import (
    MUTATING,
    VALIDATING,
    CertManager,
    bundle_from_secret,
    ca_bundle_patch,
    ensure_bundle,
    generate_bundle,
    renewal_reason,
    secret_manifest,
    with_ca_bundle,
)
from kubetrain.k8s.webhook import webhook_configurations

T0 = dt.datetime(2026, 11, 22, 3, 0, tzinfo=dt.UTC)
SVC, NS = "kubetrain-operator", "kubeflow-system"


@pytest.fixture(scope="module")
def bundle() -> certs.CertBundle:
    return generate_bundle(SVC, NS, T0)


def test_serving_cert_names_the_service_and_is_signed_by_the_ca(bundle: certs.CertBundle) -> None:
    cert = x509.load_pem_x509_certificate(bundle.cert)
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        SVC,
        f"{SVC}.{NS}",
        f"{SVC}.{NS}.svc",
        f"{SVC}.{NS}.svc.cluster.local",
    ]
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.not_valid_after_utc == T0 + pki.CERT_VALIDITY
    assert ca.not_valid_after_utc == T0 + pki.CA_VALIDITY
    assert cert.not_valid_before_utc < T0  # back-dated for clock skew


def test_fresh_bundle_needs_no_renewal(bundle: certs.CertBundle) -> None:
    assert renewal_reason(bundle, SVC, NS, T0 + dt.timedelta(days=1)) is None
    assert ensure_bundle(bundle, SVC, NS, T0 + dt.timedelta(days=1)) == (bundle, None)


def test_serving_cert_renewed_before_expiry_with_the_same_ca(bundle: certs.CertBundle) -> None:
    later = T0 + pki.CERT_VALIDITY - certs.RENEW_BEFORE + dt.timedelta(hours=1)
    assert renewal_reason(bundle, SVC, NS, later) == "serving certificate expires soon"
    renewed, reason = ensure_bundle(bundle, SVC, NS, later)
    assert reason == "serving certificate expires soon"
    assert renewed.ca_cert == bundle.ca_cert and renewed.cert != bundle.cert
    assert renewal_reason(renewed, SVC, NS, later) is None


def test_ca_replaced_when_it_nears_expiry() -> None:
    short_ca = generate_bundle(SVC, NS, T0, ca_valid_for=dt.timedelta(days=40))
    later = T0 + dt.timedelta(days=15)
    renewed, reason = ensure_bundle(short_ca, SVC, NS, later)
    assert reason == "CA expires soon"
    assert renewed.ca_cert != short_ca.ca_cert


def test_serving_cert_never_outlives_its_ca() -> None:
    b = generate_bundle(SVC, NS, T0, ca_valid_for=dt.timedelta(days=10))
    assert b.not_after() == x509.load_pem_x509_certificate(b.ca_cert).not_valid_after_utc


def test_cert_for_another_service_is_replaced(bundle: certs.CertBundle) -> None:
    assert (
        renewal_reason(bundle, "other", NS, T0) == "serving certificate is not for other.kubeflow-system.svc"
    )


def test_cert_from_another_ca_is_replaced(bundle: certs.CertBundle) -> None:
    other = generate_bundle(SVC, NS, T0)
    mixed = certs.CertBundle(bundle.ca_cert, bundle.ca_key, other.cert, other.key)
    assert renewal_reason(mixed, SVC, NS, T0) == "serving certificate is not signed by the CA"


def test_secret_round_trip(bundle: certs.CertBundle) -> None:
    secret = secret_manifest(bundle, "kubetrain-webhook-cert", NS)
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert bundle_from_secret(secret) == bundle
    del secret["data"]["ca.key"]
    assert bundle_from_secret(secret) is None
    assert bundle_from_secret(None) is None


def test_ca_bundle_patch_only_for_webhooks_that_lack_it(bundle: certs.CertBundle) -> None:
    validating, mutating = webhook_configurations(SVC, NS)
    ops = ca_bundle_patch(validating, bundle.ca_cert)
    assert [o["path"] for o in ops] == [f"/webhooks/{i}/clientConfig/caBundle" for i in range(4)]
    assert base64.b64decode(ops[0]["value"]) == bundle.ca_cert
    injected = webhook_configurations(SVC, NS, ca_bundle=bundle.ca_cert)[1]
    assert ca_bundle_patch(injected, bundle.ca_cert) == []
    assert len(ca_bundle_patch(mutating, bundle.ca_cert)) == 1


def test_with_ca_bundle_sets_every_webhook_and_leaves_the_input_alone(bundle: certs.CertBundle) -> None:
    validating, _ = webhook_configurations(SVC, NS)
    updated = with_ca_bundle(validating, bundle.ca_cert)
    assert updated is not None
    assert {base64.b64decode(h["clientConfig"]["caBundle"]) for h in updated["webhooks"]} == {bundle.ca_cert}
    assert "caBundle" not in validating["webhooks"][0]["clientConfig"]
    assert with_ca_bundle(updated, bundle.ca_cert) is None
    # A bundle that trusts old and new CA is accepted as current for the new CA.
    other = generate_bundle(SVC, NS, T0)
    overlap = with_ca_bundle(validating, other.ca_cert + bundle.ca_cert)
    assert overlap is not None and with_ca_bundle(overlap, other.ca_cert) is None


class FakeClient:
    """In-memory Secret and webhook configurations, with an optional write conflict."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.configs = {(c["kind"], c["metadata"]["name"]): c for c in webhook_configurations(SVC, NS)}
        self.patches: list[tuple[str, str]] = []
        self.conflict_with: dict[str, Any] | None = None
        self.version = 0

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.secrets.get((namespace, name))

    async def put_secret(self, secret: dict[str, Any]) -> None:
        key = (secret["metadata"]["namespace"], secret["metadata"]["name"])
        if self.conflict_with is not None:
            self.secrets[key], self.conflict_with = self.conflict_with, None
            raise RuntimeError("409 Conflict")
        self.version += 1
        secret["metadata"]["resourceVersion"] = str(self.version)
        self.secrets[key] = secret

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.configs.get((kind, name))

    async def update_webhook_configuration(self, config: dict[str, Any]) -> None:
        key = (config["kind"], config["metadata"]["name"])
        self.patches.append(key)
        self.configs[key] = config


def manager(client: FakeClient, tmp_path: Any, clock: list[dt.datetime], rotated: list[int]) -> CertManager:
    return CertManager(
        client,
        service=SVC,
        namespace=NS,
        secret_name="kubetrain-webhook-cert",
        cert_dir=tmp_path,
        configurations=[
            (VALIDATING, "validator.trainer.kubeflow.org"),
            (MUTATING, "defaulter.trainer.kubeflow.org"),
        ],
        clock=lambda: clock[0],
        on_rotate=(lambda: rotated.append(1),),
    )


def trusted_cas(client: FakeClient) -> set[bytes]:
    out = set()
    for config in client.configs.values():
        for hook in config["webhooks"]:
            out.add(base64.b64decode(hook["clientConfig"]["caBundle"]))
    return out


def test_reconcile_creates_writes_injects_and_then_settles(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    mgr = manager(client, tmp_path, clock, rotated)
    first = asyncio.run(mgr.reconcile())
    assert sorted(client.patches) == [
        ("MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org"),
        ("ValidatingWebhookConfiguration", "validator.trainer.kubeflow.org"),
    ]
    assert bundle_from_secret(client.secrets[(NS, "kubetrain-webhook-cert")]) == first
    assert (tmp_path / "tls.crt").read_bytes() == first.cert
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert trusted_cas(client) == {first.ca_cert}
    assert rotated == [1]
    client.patches.clear()
    assert asyncio.run(mgr.reconcile()) == first
    assert client.patches == [] and rotated == [1]


def test_reconcile_renews_serving_cert_without_touching_ca_bundles(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    mgr = manager(client, tmp_path, clock, rotated)
    first = asyncio.run(mgr.reconcile())
    client.patches.clear()
    clock[0] = T0 + pki.CERT_VALIDITY - dt.timedelta(days=1)
    second = asyncio.run(mgr.reconcile())
    assert second.ca_cert == first.ca_cert and second.cert != first.cert
    assert client.patches == []
    assert (tmp_path / "tls.crt").read_bytes() == second.cert
    assert rotated == [1, 1]


def test_new_ca_is_trusted_alongside_the_old_one(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    old = generate_bundle(SVC, NS, T0, ca_valid_for=dt.timedelta(days=40))
    client.secrets[(NS, "kubetrain-webhook-cert")] = secret_manifest(old, "kubetrain-webhook-cert", NS)
    clock[0] = T0 + dt.timedelta(days=20)
    new = asyncio.run(manager(client, tmp_path, clock, rotated).reconcile())
    assert new.ca_cert != old.ca_cert
    assert trusted_cas(client) == {new.ca_cert + old.ca_cert}


def test_conflicting_writer_wins_and_we_use_its_certificate(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    theirs = generate_bundle(SVC, NS, T0)
    client.conflict_with = secret_manifest(theirs, "kubetrain-webhook-cert", NS)
    got = asyncio.run(manager(client, tmp_path, clock, rotated).reconcile())
    assert got == theirs
    assert (tmp_path / "tls.crt").read_bytes() == theirs.cert
    assert trusted_cas(client) == {theirs.ca_cert}


def test_run_loop_stops_when_asked(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    mgr = manager(client, tmp_path, clock, rotated)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(mgr.run(stop, interval=dt.timedelta(seconds=0.01)))
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, timeout=5)

    asyncio.run(scenario())
    assert rotated == [1]  # many rounds, one rotation


def test_missing_configuration_is_retried_soon_and_then_injected(tmp_path: Any) -> None:
    client, clock, rotated = FakeClient(), [T0], []
    later = dict(client.configs)
    client.configs.clear()  # the operator started before the webhook configurations were applied
    mgr = manager(client, tmp_path, clock, rotated)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            mgr.run(stop, interval=dt.timedelta(hours=1), retry=dt.timedelta(seconds=0.01))
        )
        await asyncio.sleep(0.05)
        assert len(mgr.missing) == 2
        assert mgr.trusted is None  # the API server could not verify a replica yet: it must not be Ready
        client.configs.update(later)
        for _ in range(200):
            await asyncio.sleep(0.01)
            if not mgr.missing:
                break
        stop.set()
        await asyncio.wait_for(task, timeout=5)

    asyncio.run(scenario())
    assert mgr.missing == []
    assert len(trusted_cas(client)) == 1
    assert mgr.trusted is not None and mgr.trusted in trusted_cas(client)
