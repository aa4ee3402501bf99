"""Images whose behaviour the local backend knows without pulling them.

Locally an image is a Python environment (``$KUBETRAIN_HOME/images.yaml``), so a container that gives no
``command`` has no image ENTRYPOINT to fall back to. For upstream's initializer images (any tag or digest) the
entrypoint is kubetrain's own implementation of their contract, ``python -m kubetrain.initializers dataset|model``,
run in the environment standing in for the image. That program exits with ``EXIT_PERMANENT`` when retrying cannot
help (a bad ``STORAGE_URI``, a repository that does not exist, refused credentials): its Job then fails at once,
with the program's last log line as the step's message, instead of retrying through its backoffLimit (the same
local rule as for a command that cannot be executed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.initializers import ENTRYPOINTS, EXIT_PERMANENT, EXIT_USAGE

_LAST_LINE_BYTES = 4096


@dataclass(frozen=True)
class KnownImage:
    repository: str
    entrypoint: tuple[str, ...]
    futile_exit_codes: frozenset[int]
    """Exit statuses after which another try with the same spec cannot succeed."""


KNOWN_IMAGES: tuple[KnownImage, ...] = (
    KnownImage("ghcr.io/kubeflow/trainer/dataset-initializer", ENTRYPOINTS["dataset"],
               frozenset({EXIT_PERMANENT, EXIT_USAGE})),
    KnownImage("ghcr.io/kubeflow/trainer/model-initializer", ENTRYPOINTS["model"],
               frozenset({EXIT_PERMANENT, EXIT_USAGE})),
)


def lookup(image: str | None) -> KnownImage | None:
    """The known image ``image`` names, with any tag (``:v2.1.0``) or digest (``@sha256:...``)."""
    if not image:
        return None
    for known in KNOWN_IMAGES:
        if image == known.repository or image.startswith((known.repository + ":", known.repository + "@")):
            return known
    return None


def with_entrypoint(container: dict[str, Any]) -> dict[str, Any]:
    """``container`` with the known image's entrypoint as its command when it sets none (its ``args`` follow the
    entrypoint, as on a node); otherwise ``container`` itself."""
    if container.get("command"):
        return container
    known = lookup(container.get("image"))
    if known is None:
        return container
    return {**container, "command": list(known.entrypoint)}


def retry_is_futile(container: dict[str, Any], code: int) -> bool:
    """The container ran a known image's program (its entrypoint) and exited saying retrying cannot help."""
    known = lookup(container.get("image"))
    return known is not None and not container.get("command") and code in known.futile_exit_codes


def last_line(log: Path) -> str | None:
    """The last line the container wrote (what ``terminationMessagePolicy: FallbackToLogsOnError`` would report),
    without the ``error: `` its programs put first."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _LAST_LINE_BYTES))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    lines = [x.strip() for x in tail.splitlines() if x.strip() and not x.startswith("--- kubetrain:")]
    if not lines:
        return None
    return lines[-1].removeprefix("error: ")
