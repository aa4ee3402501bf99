"""A certificate authority per TrainJob for its local status endpoint.

Each supervisor makes a fresh CA and a serving certificate for the endpoint's name and address, and gives the
pods only the CA certificate: a report is encrypted, and no other TrainJob's CA can vouch for this endpoint. The
CA key never leaves the supervisor's memory (the serving key is written, mode 0600, for ``ssl`` to load).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from kubetrain.pki import generate_ca, generate_serving_cert

VALIDITY = dt.timedelta(days=3650)
"""A TrainJob may run for months; the certificates die with its supervisor anyway."""


@dataclass(frozen=True)
class ServingPair:
    ca_cert: bytes
    cert: bytes
    key: bytes


def make_serving_pair(names: list[str], now: dt.datetime, *, label: str) -> ServingPair:
    """A new CA (``kubetrain <label> CA``) and a certificate for ``names`` (host names or IP addresses)."""
    ca_cert, ca_key = generate_ca(now, common_name=f"kubetrain {label} CA", valid_for=VALIDITY)
    cert, key = generate_serving_cert(ca_cert, ca_key, names, now, valid_for=VALIDITY)
    return ServingPair(ca_cert, cert, key)
