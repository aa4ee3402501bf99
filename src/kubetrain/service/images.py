"""Images on this machine, for ``kubetrain images``: load archives, pull, list, remove and prune the local image
store that local pods run in (``kubetrain.local.images``). Local only: a cluster's nodes pull from registries."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api.errors import KubetrainError
from kubetrain.local.images import archive, reference, sources
from kubetrain.local.images.store import ImageStore, StoredImage

Progress = Callable[[str], None]


@dataclass
class Loaded:
    image: StoredImage
    seconds: float
    note: str = ""


def load(path: Path, *, tags: list[str], progress: Progress | None = None) -> list[Loaded]:
    """Load every image of an archive or OCI layout (for this machine's platform) into the store, under ``tags``
    when given (then the source must hold one image). Raises ``KubetrainError`` with the fix."""
    names = [reference.normalize(t) for t in tags]
    started = time.monotonic()
    found, files = archive.read(path)
    try:
        if names and len(found) > 1:
            raise KubetrainError(
                f"{path} holds {len(found)} images, and --tag names one: load it without --tag (each image keeps "
                "its own names), or export one image per archive"
            )
        out = []
        for f in found:
            image = ImageStore().add(f, names=names or f.names, source=str(path.resolve()), progress=progress)
            note = "" if image.names else (
                "the archive gives it no name, so pods cannot name it: load it again with --tag REF"
            )
            out.append(Loaded(image, time.monotonic() - started, note))
            started = time.monotonic()
        return out
    finally:
        files.close()


def pull(ref: str, progress: Progress | None = None) -> Loaded:
    started = time.monotonic()
    image = sources.pull(ImageStore(), ref, progress)
    return Loaded(image, time.monotonic() - started)


def images() -> list[StoredImage]:
    return ImageStore().images()


def remove(refs: list[str]) -> list[str]:
    return ImageStore().remove(refs)


def prune(*, dry_run: bool) -> list[tuple[str, int]]:
    return ImageStore().prune(dry_run=dry_run)


def familiar(name: str) -> str:
    return reference.familiar(name)
