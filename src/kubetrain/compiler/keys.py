"""SSH key material for MPI: injected into the compiler so compiling stays deterministic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SSHKeyPair:
    """``private_pem``: SEC1 ``EC PRIVATE KEY`` PEM; ``public_openssh``: an authorized_keys line with newline."""

    private_pem: str
    public_openssh: str


KeyGen = Callable[[], SSHKeyPair]


def ecdsa_keygen() -> SSHKeyPair:
    """A fresh ECDSA P-521 key pair, as upstream puts into ``<trainjob>-mpi-ssh-auth``."""
    # Imported here: only MPI TrainJobs need a key, and cryptography is a noticeable share of CLI start-up.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return SSHKeyPair(private_pem=private, public_openssh=public.decode() + "\n")


def fixed_keygen(pair: SSHKeyPair | None = None) -> KeyGen:
    """A keygen that always returns the same pair (tests, golden files)."""
    fixed = pair or SSHKeyPair(
        private_pem="-----BEGIN EC PRIVATE KEY-----\nFIXED\n-----END EC PRIVATE KEY-----\n",
        public_openssh="ecdsa-sha2-nistp521 AAAAFIXED\n",
    )
    return lambda: fixed
