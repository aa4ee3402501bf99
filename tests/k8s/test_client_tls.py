"""The client over TLS as a kubeconfig describes it: CA data, client certificate data, insecure mode."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import ssl
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import from_kubeconfig
from kubetrain.testing.fakeapi import FakeApiServer
from tests.k8s.helpers import run

NOW = dt.datetime.now(dt.UTC)


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert(
    subject: str, key, issuer_name, issuer_key, *, ca: bool, usage=None, ip: str | None = None
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(minutes=5))
        .not_valid_after(NOW + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if ip:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False)
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes | str]:
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = _cert("test-ca", ca_key, ca_name, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("apiserver", srv_key, ca_name, ca_key, ca=False, usage=ExtendedKeyUsageOID.SERVER_AUTH, ip="127.0.0.1")
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("admin", cli_key, ca_name, ca_key, ca=False, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    pem = serialization.Encoding.PEM
    (d / "srv.crt").write_bytes(srv.public_bytes(pem))
    (d / "srv.key").write_bytes(_pem(srv_key))
    return {
        "dir": str(d),
        "ca": ca.public_bytes(pem),
        "client_cert": cli.public_bytes(pem),
        "client_key": _pem(cli_key),
    }


def server_context(pki: dict, *, require_client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(f"{pki['dir']}/srv.crt", f"{pki['dir']}/srv.key")
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=pki["ca"].decode())
    return ctx


def kubeconfig(tmp_path: Path, server: str, cluster: dict, user: dict) -> str:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_client_certificate_and_ca_from_kubeconfig_data(tmp_path: Path, pki: dict) -> None:
    async def body() -> None:
        async with FakeApiServer(ssl_context=server_context(pki, require_client_cert=True)) as api:
            path = kubeconfig(
                tmp_path,
                api.url,
                {"certificate-authority-data": b64(pki["ca"])},
                {"client-certificate-data": b64(pki["client_cert"]), "client-key-data": b64(pki["client_key"])},
            )
            async with Client(from_kubeconfig(path), qps=0) as client:
                items, _ = await client.list(r.CONFIGMAP, "default")
                assert items == []

    run(body)


def test_server_not_signed_by_the_configured_ca_is_refused(tmp_path: Path, pki: dict) -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    other_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "other-ca")])
    other_ca = _cert("other-ca", other, other_name, other, ca=True).public_bytes(serialization.Encoding.PEM)

    async def body() -> None:
        async with FakeApiServer(ssl_context=server_context(pki, require_client_cert=False)) as api:
            path = kubeconfig(tmp_path, api.url, {"certificate-authority-data": b64(other_ca)}, {"token": "t"})
            async with Client(from_kubeconfig(path), qps=0) as client:
                client.session.max_retries = 0
                with pytest.raises(ApiError) as exc:
                    await client.list(r.CONFIGMAP, "default")
                assert exc.value.status == 0 and "certificate" in exc.value.message.lower()
            insecure = kubeconfig(tmp_path, api.url, {"insecure-skip-tls-verify": True}, {"token": "t"})
            async with Client(from_kubeconfig(insecure), qps=0) as client:
                assert (await client.list(r.CONFIGMAP, "default"))[0] == []

    run(body)
