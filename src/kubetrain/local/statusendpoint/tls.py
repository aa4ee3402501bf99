"""The certificates of the local status endpoints: one CA and serving certificate per ``$KUBETRAIN_HOME``.

Made once (P-256; the CA key is thrown away as soon as it has signed the serving certificate, so nothing else can
ever be signed with it) and kept in ``$KUBETRAIN_HOME/tls/status.pem`` (mode 0600); every supervisor reads it
and gives its pods only the CA certificate. Making them per TrainJob would cost every run some 60 ms of loading
``cryptography`` and would protect nothing more: an endpoint listens inside its own TrainJob's network namespace,
which no other TrainJob's pods can enter, and the pods of a job run as the user who owns this file anyway.

The file is renewed a month before it expires, and replaced whenever it cannot be read back as expected.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

VALIDITY = dt.timedelta(days=3650)
RENEW_BEFORE = dt.timedelta(days=30)
FILE = "status.pem"
_HEADER = "# kubetrain status endpoint certificates:"
_TIME = "%Y-%m-%dT%H:%M:%SZ"
_PEM = re.compile(r"-----BEGIN ([A-Z ]+)-----\n.*?\n-----END \1-----\n", re.DOTALL)


@dataclass(frozen=True)
class ServingPair:
    ca_cert: bytes
    cert: bytes
    key: bytes


def make_serving_pair(names: list[str], now: dt.datetime, *, label: str) -> ServingPair:
    """A new CA (``kubetrain <label> CA``) and a certificate for ``names`` (host names or IP addresses)."""
    from kubetrain.pki import generate_ca, generate_serving_cert  # cryptography: only when something is made

    ca_cert, ca_key = generate_ca(now, common_name=f"kubetrain {label} CA", valid_for=VALIDITY)
    cert, key = generate_serving_cert(ca_cert, ca_key, names, now, valid_for=VALIDITY)
    return ServingPair(ca_cert, cert, key)


def status_pair(directory: Path, names: list[str], now: dt.datetime) -> ServingPair:
    """The endpoints' certificates from ``directory``, made (and saved there, when it can be written) if they are
    missing, unreadable, for other ``names``, or expire within ``RENEW_BEFORE``."""
    path = directory / FILE
    pair = _read(path, names, now)
    if pair is not None:
        return pair
    pair = make_serving_pair(names, now, label="local status")
    try:
        _write(path, pair, names, now + VALIDITY)
    except OSError:
        pass  # an unwritable home: this run uses them anyway, the next one makes its own
    return pair


def _read(path: Path, names: list[str], now: dt.datetime) -> ServingPair | None:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    header, _, body = text.partition("\n")
    fields = dict(f.split("=", 1) for f in header.removeprefix(_HEADER).split() if "=" in f)
    try:
        not_after = dt.datetime.strptime(fields.get("not-after", ""), _TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    if not header.startswith(_HEADER) or fields.get("names") != ",".join(names) or now + RENEW_BEFORE >= not_after:
        return None
    blocks = [(m.group(1), m.group(0).encode()) for m in _PEM.finditer(body)]
    certs = [b for label, b in blocks if label == "CERTIFICATE"]
    keys = [b for label, b in blocks if label == "PRIVATE KEY"]
    if len(certs) != 2 or len(keys) != 1:
        return None
    return ServingPair(certs[0], certs[1], keys[0])


def _write(path: Path, pair: ServingPair, names: list[str], not_after: dt.datetime) -> None:
    # One file, replaced in one rename: two runs that make it at once never leave a CA and a key that do not match.
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    header = f"{_HEADER} names={','.join(names)} not-after={not_after.strftime(_TIME)}\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".status-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header.encode() + pair.ca_cert + pair.cert + pair.key)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
