"""Certificates for kubetrain's TLS servers: a self-signed CA and serving certificates it signs.

Shared by the operator (webhook and status endpoint, ``k8s/certs``) and the local backend (each TrainJob's status
endpoint, ``local/tls``), which the layers keep from importing each other. Pure cryptography: no files, no API.
"""

from __future__ import annotations

import datetime as dt
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = dt.timedelta(days=3650)
CERT_VALIDITY = dt.timedelta(days=365)
# Certificates start a little in the past so a node whose clock lags the issuer's still accepts them.
_BACKDATE = dt.timedelta(minutes=5)


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256: accepted by every API server and ~100x faster to generate than RSA 2048.
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, start: dt.datetime, end: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _key_usage(*granted: str) -> x509.KeyUsage:
    """A KeyUsage extension with exactly the ``granted`` usages (x509 wants every one of the nine named)."""
    return x509.KeyUsage(**{usage: usage in granted for usage in _KEY_USAGES})


def generate_ca(
    now: dt.datetime, *, common_name: str = "kubetrain-ca", valid_for: dt.timedelta = CA_VALIDITY
) -> tuple[bytes, bytes]:
    """A self-signed CA: ``(cert_pem, key_pem)``."""
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key, now - _BACKDATE, now + valid_for)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage("digital_signature", "key_cert_sign", "crl_sign"), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def generate_serving_cert(
    ca_cert: bytes,
    ca_key: bytes,
    names: list[str],
    now: dt.datetime,
    *,
    valid_for: dt.timedelta = CERT_VALIDITY,
    common_name: str | None = None,
) -> tuple[bytes, bytes]:
    """A server certificate for ``names`` signed by the CA: ``(cert_pem, key_pem)``."""
    ca = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = _key()
    not_after = min(now + valid_for, ca.not_valid_after_utc)  # never outlive the CA
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or names[0])])
    cert = (
        _builder(subject, ca.subject, key, now - _BACKDATE, not_after)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
        )
        .sign(signer, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
