"""Self-signed webhook certificates: a CA plus a serving certificate for ``<service>.<namespace>.svc``.

The operator keeps them in a ``kubernetes.io/tls`` Secret (so every replica serves the same certificate),
writes them to the webhook server's certificate directory, and puts the CA into the ``caBundle`` of the
webhook configurations. Certificates are renewed ahead of expiry; a new CA is only made when the old one is
close to expiring, and the ``caBundle`` then trusts both for the overlap.

The Kubernetes API calls go through an injected ``CertClient`` (the operator's API client implements it), so
this module is testable without a cluster. With cert-manager (Helm ``webhook.certMode=cert-manager``) none of
this runs: cert-manager fills the Secret and the caBundle, and the server only reloads files.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import datetime as dt
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from kubetrain.pki import CA_VALIDITY, CERT_VALIDITY, generate_ca, generate_serving_cert

log = logging.getLogger(__name__)

# Renew when less than this is left: long enough for a few failed attempts at an hourly check.
RENEW_BEFORE = dt.timedelta(days=30)

# Left in the certificate directory by CertManager, so a restarted container knows the files are its own to
# renew (and not, say, a mounted cert-manager Secret).
MANAGED_MARKER = ".kubetrain-managed"

VALIDATING = "ValidatingWebhookConfiguration"
MUTATING = "MutatingWebhookConfiguration"


@dataclass(frozen=True)
class CertBundle:
    """PEM bytes of the CA and the serving certificate with their private keys."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def not_after(self) -> dt.datetime:
        return x509.load_pem_x509_certificate(self.cert).not_valid_after_utc


def dns_names(service: str, namespace: str) -> list[str]:
    """Every name the API server may use for the Service (it uses ``<svc>.<ns>.svc``)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_bundle(
    service: str,
    namespace: str,
    now: dt.datetime,
    *,
    ca: tuple[bytes, bytes] | None = None,
    cert_valid_for: dt.timedelta = CERT_VALIDITY,
    ca_valid_for: dt.timedelta = CA_VALIDITY,
    extra_names: tuple[str, ...] = (),
) -> CertBundle:
    """A serving certificate for the Service, signed by ``ca`` (or by a new CA).

    ``extra_names`` adds host names or IP addresses. For ``service="localhost"`` (a webhook run outside the
    cluster and registered by URL, as in development and e2e tests) 127.0.0.1 and ::1 are added, since the API
    server checks an IP URL against IP SANs.
    """
    ca_cert, ca_key = ca or generate_ca(now, valid_for=ca_valid_for)
    local = ("127.0.0.1", "::1") if service == "localhost" else ()
    names = [*dns_names(service, namespace), *local, *extra_names]
    cert, key = generate_serving_cert(
        ca_cert, ca_key, names, now, valid_for=cert_valid_for, common_name=f"{service}.{namespace}.svc"
    )
    return CertBundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)


def renewal_reason(
    bundle: CertBundle,
    service: str,
    namespace: str,
    now: dt.datetime,
    *,
    renew_before: dt.timedelta = RENEW_BEFORE,
) -> str | None:
    """Why ``bundle`` must be replaced now, or None while it is fine. Checks expiry, names and signature."""
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
        cert = x509.load_pem_x509_certificate(bundle.cert)
        serialization.load_pem_private_key(bundle.key, password=None)
    except ValueError as exc:
        return f"unreadable certificate or key: {exc}"
    if ca.not_valid_after_utc - now < renew_before:
        return "CA expires soon"
    if cert.not_valid_after_utc - now < renew_before:
        return "serving certificate expires soon"
    if cert.not_valid_before_utc > now:
        return "serving certificate not yet valid"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "serving certificate has no DNS names"
    if f"{service}.{namespace}.svc" not in san.get_values_for_type(x509.DNSName):
        return f"serving certificate is not for {service}.{namespace}.svc"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "serving certificate is not signed by the CA"
    return None


def ensure_bundle(
    existing: CertBundle | None,
    service: str,
    namespace: str,
    now: dt.datetime,
    *,
    renew_before: dt.timedelta = RENEW_BEFORE,
) -> tuple[CertBundle, str | None]:
    """``(bundle to use, reason it was renewed or None)``. Keeps the CA unless it is itself the problem."""
    if existing is None:
        return generate_bundle(service, namespace, now), "no certificate yet"
    reason = renewal_reason(existing, service, namespace, now, renew_before=renew_before)
    if reason is None:
        return existing, None
    ca_is_the_problem = reason in ("CA expires soon", "serving certificate is not signed by the CA") or (
        reason.startswith("unreadable")
    )
    ca = None if ca_is_the_problem else (existing.ca_cert, existing.ca_key)
    return generate_bundle(service, namespace, now, ca=ca), reason


# --- Kubernetes objects ---


def secret_manifest(bundle: CertBundle, name: str, namespace: str) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret (the layout cert-manager also writes: tls.crt, tls.key, ca.crt)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "kubetrain"}},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": b64(bundle.cert),
            "tls.key": b64(bundle.key),
            "ca.crt": b64(bundle.ca_cert),
            "ca.key": b64(bundle.ca_key),
        },
    }


def bundle_from_secret(secret: dict[str, Any] | None) -> CertBundle | None:
    """The bundle stored in a Secret, or None when it is missing or incomplete."""
    data = (secret or {}).get("data") or {}
    try:
        parts = [base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")]
    except (KeyError, ValueError):
        return None
    return CertBundle(*parts)


def ca_bundle_patch(configuration: dict[str, Any], ca_bundle: bytes) -> list[dict[str, Any]]:
    """JSON patch setting ``webhooks[*].clientConfig.caBundle``; empty when every webhook already has it."""
    value = base64.b64encode(ca_bundle).decode()
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(configuration.get("webhooks") or []):
        client = hook.get("clientConfig") or {}
        if client.get("caBundle") != value:
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": value})
    return ops


def write_cert_dir(bundle: CertBundle, directory: str | Path) -> None:
    """Write ``tls.crt``/``tls.key``/``ca.crt`` atomically (a reader never sees a cert without its key)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, data, mode in (
        ("ca.crt", bundle.ca_cert, 0o644),
        ("tls.key", bundle.key, 0o600),
        ("tls.crt", bundle.cert, 0o644),
    ):
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, d / name)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


# --- the loop the operator runs ---


class CertClient(Protocol):
    """The few API calls certificate management needs; the operator's client implements them."""

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def put_secret(self, secret: dict[str, Any]) -> None:
        """Create the Secret, or replace it (``metadata.resourceVersion`` is set when replacing; a conflict
        raises)."""
        ...

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None: ...

    async def update_webhook_configuration(self, config: dict[str, Any]) -> None:
        """Replace (PUT) the configuration; it carries the ``resourceVersion`` it was read with."""
        ...


@dataclass
class CertManager:
    """Keeps the Secret, the certificate directory and the caBundles current.

    Call ``reconcile`` once before starting the webhook server, then ``run`` in the background. ``on_rotate``
    callbacks (e.g. the server's ``reload_certs``) run after the files changed.
    """

    client: CertClient
    service: str
    namespace: str
    secret_name: str
    cert_dir: str | Path
    configurations: Iterable[tuple[str, str]]  # (VALIDATING|MUTATING, name)
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    renew_before: dt.timedelta = RENEW_BEFORE
    on_rotate: tuple[Callable[[], None], ...] = ()
    missing: list[tuple[str, str]] = field(default_factory=list)
    """Webhook configurations the last round did not find (so their caBundle is still unset)."""
    trusted: bytes | None = None
    """The CA that signed the serving certificate, once every webhook configuration's caBundle holds it (the
    API server can then verify this replica); None before that. The server's readiness is gated on it."""

    async def reconcile(self) -> CertBundle:
        now = self.clock()
        stored = await self.client.get_secret(self.namespace, self.secret_name)
        current = bundle_from_secret(stored)
        bundle, reason = ensure_bundle(
            current, self.service, self.namespace, now, renew_before=self.renew_before
        )
        trusted = bundle.ca_cert
        if reason is not None:
            log.info("webhook certificate renewed: %s", reason)
            secret = secret_manifest(bundle, self.secret_name, self.namespace)
            if stored and (stored.get("metadata") or {}).get("resourceVersion"):
                secret["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
            try:
                await self.client.put_secret(secret)
            except Exception:
                # Another replica wrote first: use what it wrote if that is good, else let the caller retry.
                winner = bundle_from_secret(await self.client.get_secret(self.namespace, self.secret_name))
                if winner is None or renewal_reason(winner, self.service, self.namespace, now) is not None:
                    raise
                bundle, trusted = winner, winner.ca_cert
            else:
                if (
                    current is not None
                    and current.ca_cert != bundle.ca_cert
                    and _unexpired(current.ca_cert, now)
                ):
                    # Replicas still serving the old certificate must stay trusted until they reload.
                    trusted = bundle.ca_cert + current.ca_cert
        # caBundle before files: the API server must trust the new CA before anyone serves with it.
        self.missing = []
        for kind, name in self.configurations:
            config = await self.client.get_webhook_configuration(kind, name)
            if config is None:
                self.missing.append((kind, name))  # not installed yet: ``run`` retries soon
                continue
            updated = with_ca_bundle(config, trusted)
            if updated is not None:
                await self.client.update_webhook_configuration(updated)
        self.trusted = None if self.missing else bundle.ca_cert
        if _files_differ(bundle, self.cert_dir):
            write_cert_dir(bundle, self.cert_dir)
            (Path(self.cert_dir) / MANAGED_MARKER).write_text("written by kubetrain.k8s.certs.CertManager\n")
            for callback in self.on_rotate:
                callback()
        return bundle

    async def run(
        self,
        stop: asyncio.Event,
        interval: dt.timedelta = dt.timedelta(minutes=5),
        retry: dt.timedelta = dt.timedelta(seconds=5),
    ) -> None:
        """Reconcile every ``interval`` until ``stop`` is set. A failed round, or one that found a webhook
        configuration missing, is retried after ``retry`` (soon: until then the replica is not ready).
        Frequent rounds are cheap (three GETs) and repair a caBundle that a re-apply of the configurations
        wiped."""
        while not stop.is_set():
            try:
                await self.reconcile()
                delay = (retry if self.missing else interval).total_seconds()
            except Exception:
                log.exception("webhook certificate reconcile failed")
                delay = min(interval, retry).total_seconds()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)


def _unexpired(cert_pem: bytes, now: dt.datetime) -> bool:
    try:
        return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc > now
    except ValueError:
        return False


def with_ca_bundle(config: dict[str, Any], trusted: bytes) -> dict[str, Any] | None:
    """A copy of ``config`` whose webhooks all trust ``trusted``; None when each caBundle already contains the
    first CA in ``trusted`` (the one we sign with), so an overlap bundle is not rewritten every round."""
    first = trusted.split(b"-----END CERTIFICATE-----")[0]
    hooks = config.get("webhooks") or []
    if all(first in base64.b64decode((h.get("clientConfig") or {}).get("caBundle") or "") for h in hooks):
        return None
    value = base64.b64encode(trusted).decode()
    updated = copy.deepcopy(config)
    for hook in updated.get("webhooks") or []:
        hook.setdefault("clientConfig", {})["caBundle"] = value
    return updated


def _files_differ(bundle: CertBundle, directory: str | Path) -> bool:
    d = Path(directory)
    try:
        return (d / "tls.crt").read_bytes() != bundle.cert or (d / "tls.key").read_bytes() != bundle.key
    except FileNotFoundError:
        return True
