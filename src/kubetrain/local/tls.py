"""A certificate authority per TrainJob for its local status endpoint.

Each supervisor makes a fresh CA and a serving certificate for the endpoint's name and address, and gives the
pods only the CA certificate: a report is encrypted, and no other TrainJob's CA can vouch for this endpoint. The
CA key never leaves the supervisor's memory (the serving key is written, mode 0600, for ``ssl`` to load).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=3650)
"""A TrainJob may run for months; the certificates die with its supervisor anyway."""


@dataclass(frozen=True)
class ServingPair:
    ca_cert: bytes
    cert: bytes
    key: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_serving_pair(names: list[str], now: dt.datetime, *, label: str) -> ServingPair:
    """A new CA (``kubetrain <label> CA``) and a certificate for ``names`` (host names or IP addresses)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    start, end = now - dt.timedelta(minutes=5), now + VALIDITY
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(f"kubetrain {label} CA"))
        .issuer_name(_name(f"kubetrain {label} CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return ServingPair(ca.public_bytes(pem), cert.public_bytes(pem), key_pem)
