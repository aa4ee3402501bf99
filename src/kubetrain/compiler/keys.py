"""Key material: the SSH key pair for MPI and the CURVE key pair for Flux, injected into the compiler so compiling
stays deterministic."""

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


@dataclass(frozen=True)
class CurveKeyPair:
    """A ZeroMQ CURVE key pair for a Flux broker, each key Z85-encoded (40 characters)."""

    public_z85: str
    secret_z85: str


CurveKeyGen = Callable[[str], CurveKeyPair]
"""Called with the TrainJob's uid: Kubeflow Trainer derives the Flux key pair from it, so that every reconcile of
one TrainJob writes the same Secret."""

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """ZeroMQ's Z85 text encoding (RFC 32/Z85); ``""`` for input that is not a multiple of 4 bytes long, which Z85
    cannot encode (what Kubeflow Trainer's encoder returns too)."""
    if len(data) % 4:
        return ""
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        out += [_Z85[value // 85**k % 85] for k in (4, 3, 2, 1, 0)]
    return "".join(out)


def uid_curve_keygen(uid: str) -> CurveKeyPair:
    """Kubeflow Trainer's Flux key pair: the secret key is SHA-256 of the uid, the public key its X25519 image."""
    import hashlib

    # Imported here, as for the MPI key: only Flux TrainJobs need it.
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    secret = hashlib.sha256(uid.encode()).digest()
    public = X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()
    return CurveKeyPair(public_z85=z85(public), secret_z85=z85(secret))


def fixed_curve_keygen(pair: CurveKeyPair | None = None) -> CurveKeyGen:
    """A curve keygen that always returns the same pair, whatever the uid (tests)."""
    fixed = pair or CurveKeyPair(public_z85="P" * 40, secret_z85="S" * 40)
    return lambda _uid: fixed
