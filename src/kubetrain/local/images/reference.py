"""Image references as the kubelet and containerd read them: ``train:1.4`` is ``docker.io/library/train:1.4``,
``myorg/train`` is ``docker.io/myorg/train:latest``, and ``localhost/x:dev`` (Podman's name for an image built on
this machine) names the registry ``localhost``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubetrain.api.errors import KubetrainError

DEFAULT_DOMAIN = "docker.io"
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_PATH = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")


class ReferenceError(KubetrainError):
    pass


@dataclass(frozen=True)
class Reference:
    domain: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.domain}/{self.path}"

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def parse(ref: str) -> Reference:
    """The normalized reference (tag ``latest`` when neither a tag nor a digest is given). Raises
    ``ReferenceError`` naming what is wrong."""
    text = ref.strip()
    if not text:
        raise ReferenceError("an empty image reference")
    name, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ReferenceError(f"image {ref!r}: {digest!r} is not a digest (expected sha256:<64 hex digits>)")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.match(tag):
            raise ReferenceError(f"image {ref!r}: {tag!r} is not a valid tag")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        domain, path = first, rest
    else:
        domain, path = DEFAULT_DOMAIN, name
    if domain == "index.docker.io":
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = f"library/{path}"
    if not _PATH.match(path):
        raise ReferenceError(
            f"image {ref!r}: {path!r} is not a valid repository name (lowercase letters, digits and separators)"
        )
    if tag is None and not digest:
        tag = "latest"
    return Reference(domain, path, tag, digest or None)


def normalize(ref: str) -> str:
    return str(parse(ref))


def familiar(ref: str) -> str:
    """The short form ``docker images`` shows: ``docker.io/library/x:1`` is ``x:1``, ``docker.io/a/b:1`` ``a/b:1``."""
    for prefix in (f"{DEFAULT_DOMAIN}/library/", f"{DEFAULT_DOMAIN}/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def default_pull_policy(ref: str) -> str:
    """The API server's default for a container's ``imagePullPolicy``: ``Always`` for ``:latest`` or no tag (and no
    digest), ``IfNotPresent`` otherwise."""
    try:
        r = parse(ref)
    except ReferenceError:
        return "IfNotPresent"
    return "Always" if r.tag == "latest" else "IfNotPresent"
