"""The status endpoints' certificates kept in $KUBETRAIN_HOME (``kubetrain.local.statusendpoint.tls``):
made once, read after, renewed before they expire, replaced when unusable, and always a CA that vouches for the
endpoint's names."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509

from kubetrain.local.statusendpoint import tls

NAMES = ["kubetrain-status", "127.0.0.1"]
NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def _handshake(pair: tls.ServingPair, tmp: Path, host: str = "kubetrain-status") -> None:
    """A TLS connection a pod's client makes: it trusts only the CA file and checks the host name."""
    tmp = tmp / "handshake"
    tmp.mkdir(exist_ok=True)
    (tmp / "ca.crt").write_bytes(pair.ca_cert)
    (tmp / "tls.crt").write_bytes(pair.cert)
    (tmp / "tls.key").write_bytes(pair.key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    client_ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    a, b = socket.socketpair()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                s.recv(1)
        except (OSError, ssl.SSLError) as exc:
            errors.append(exc)

    t = threading.Thread(target=serve)
    t.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname=host) as c:
            c.send(b"x")
    finally:
        t.join(10)
    assert not errors


def test_made_once_then_read(tmp_path: Path) -> None:
    d = tmp_path / "tls"
    first = tls.status_pair(d, NAMES, NOW)
    f = d / tls.FILE
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert tls.status_pair(d, NAMES, NOW + dt.timedelta(days=100)) == first
    _handshake(first, tmp_path)


def test_the_ca_signs_the_serving_certificate_for_both_names(tmp_path: Path) -> None:
    pair = tls.status_pair(tmp_path, NAMES, dt.datetime.now(dt.UTC))
    ca, cert = x509.load_pem_x509_certificate(pair.ca_cert), x509.load_pem_x509_certificate(pair.cert)
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["kubetrain-status"]
    assert [str(a) for a in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    _handshake(pair, tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(pair, tmp_path, host="some-other-host")


@pytest.mark.parametrize(
    ("later", "names"),
    [
        (tls.VALIDITY - tls.RENEW_BEFORE, NAMES),  # within a month of expiring
        (tls.VALIDITY + dt.timedelta(days=1), NAMES),  # expired
        (dt.timedelta(0), ["kubetrain-status", "127.0.0.2"]),  # other names (a newer kubetrain)
    ],
    ids=["renewed-before-expiry", "expired", "other-names"],
)
def test_replaced(tmp_path: Path, later: dt.timedelta, names: list[str]) -> None:
    first = tls.status_pair(tmp_path, NAMES, NOW)
    second = tls.status_pair(tmp_path, names, NOW + later)
    assert second.ca_cert != first.ca_cert and second.key != first.key
    assert tls.status_pair(tmp_path, names, NOW + later) == second  # and saved


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: "",
        lambda t: t.replace("not-after=", "not-after=soon"),
        lambda t: t.split("-----BEGIN PRIVATE KEY-----")[0],
        lambda t: t.replace("-----BEGIN CERTIFICATE-----", "", 1),
        lambda t: "\xff",
    ],
    ids=["empty", "bad-date", "no-key", "one-certificate", "not-text"],
)
def test_unusable_file_is_replaced(tmp_path: Path, damage: object) -> None:
    tls.status_pair(tmp_path, NAMES, NOW)
    f = tmp_path / tls.FILE
    assert callable(damage)
    f.write_text(damage(f.read_text()), errors="surrogateescape")
    pair = tls.status_pair(tmp_path, NAMES, NOW)
    _handshake(pair, tmp_path)
    assert tls.status_pair(tmp_path, NAMES, NOW) == pair


def test_unwritable_directory_still_gives_certificates(tmp_path: Path) -> None:
    blocker = tmp_path / "tls"
    blocker.write_text("a file where the directory should be")
    pair = tls.status_pair(blocker, NAMES, NOW)
    _handshake(pair, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handshake", "tls"]


def test_made_at_once_by_many_never_mismatched(tmp_path: Path) -> None:
    got: list[tls.ServingPair] = []
    threads = [threading.Thread(target=lambda: got.append(tls.status_pair(tmp_path, NAMES, NOW))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8
    for pair in [*got, tls.status_pair(tmp_path, NAMES, NOW)]:
        _handshake(pair, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handshake", tls.FILE]  # no temporary file left
