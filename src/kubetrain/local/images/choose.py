"""Which root filesystem a pod's image stands for here: the real image, or a Python environment on this machine.

``$KUBETRAIN_HOME/images.yaml`` maps image globs to what stands in for them, first match wins:

```yaml
"ghcr.io/kubeflow/trainer/*": /opt/venvs/trainer   # a Python environment: this machine's files, its bin/ first
"myorg/train:*": image                             # the real image: loaded, in a Podman store, or pulled
```

An image no pattern matches runs in the real image when it is available locally (in kubetrain's store or a
Podman/Buildah store), and in the current Python environment otherwise. An environment is the fast path: no image
to load; the image is what a cluster runs.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass
from pathlib import Path

from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths
from kubetrain.local.images import reference, sources
from kubetrain.local.images.store import ImageStore, StoredImage

FORCE = "image"


class MappingError(KubetrainError):
    pass


def mapping(image: str | None) -> str | None:
    """What ``images.yaml`` maps ``image`` to (``image``, or an environment directory), or None."""
    mapping_file = paths.home() / "images.yaml"
    if not image or not mapping_file.exists():
        return None
    import yaml

    try:
        data = yaml.safe_load(mapping_file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise MappingError(f"{mapping_file}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise MappingError(f"{mapping_file}: expected a mapping of image pattern to environment directory or 'image'")
    for pattern, value in data.items():
        if fnmatch.fnmatchcase(image, str(pattern)):
            return FORCE if str(value) == FORCE else str(Path(str(value)).expanduser())
    return None


def env_prefix(image: str | None) -> str:
    """The Python environment standing in for ``image`` when it does not run in the real image."""
    mapped = mapping(image)
    return mapped if mapped is not None and mapped != FORCE else sys.prefix


@dataclass
class Choice:
    image: str | None
    stored: StoredImage | None = None  # in kubetrain's store now
    env: str | None = None  # runs in this Python environment instead
    forced: bool = False  # images.yaml says `image`: run in the real image, pulling it if need be
    in_podman: bool = False  # in a Podman/Buildah store (copied into kubetrain's when a pod first needs it)
    note: str = ""  # why an available image is not used

    @property
    def in_image(self) -> bool:
        return self.env is None

    def says(self) -> str:
        name = self.image or "(no image)"
        if self.stored is not None:
            size = f", {self.stored.size / 1e6:.0f} MB" if self.stored.size else ""
            return f"{name}: the image ({self.stored.short_id}{size})"
        if self.in_podman:
            return f"{name}: the image (from the Podman/Buildah store)"
        if self.forced:
            return f"{name}: the image (not on this machine yet: pulled per imagePullPolicy)"
        why = self.note or ("images.yaml" if mapping(self.image) else "not loaded here")
        return f"{name}: the Python environment {self.env} ({why})"


def choose(image: str | None, store: ImageStore | None = None, *, mpi: bool = False) -> Choice:
    """The rule of this module for one image. ``mpi``: the pod is part of an MPI TrainJob, whose local transport
    (``kubetrain-rsh``) runs only in a Python environment so far."""
    mapped = mapping(image)
    if mapped is not None and mapped != FORCE:
        return Choice(image, env=mapped)
    if not image:
        return Choice(image, env=sys.prefix)
    if mapped == FORCE:
        if mpi:
            raise MappingError(
                f"images.yaml says image {image} runs in its image, and its TrainJob uses MPI, whose local transport "
                "(kubetrain-rsh instead of sshd) does not run inside images yet. Fix: map the image to a Python "
                "environment with MPI in images.yaml, or run the TrainJob on a cluster"
            )
        store = store or ImageStore()
        return Choice(image, stored=_find(store, image), forced=True)
    store = store or ImageStore()
    stored = _find(store, image)
    in_podman = stored is None and _in_podman(image)
    if stored is None and not in_podman:
        return Choice(image, env=sys.prefix)
    if mpi:
        return Choice(image, env=sys.prefix, note="MPI pods run in a Python environment locally")
    return Choice(image, stored=stored, in_podman=in_podman)


def _find(store: ImageStore, image: str) -> StoredImage | None:
    try:
        return store.find(image)
    except reference.ReferenceError:
        return None


def _in_podman(image: str) -> bool:
    try:
        return sources.in_containers_storage(image)
    except (KubetrainError, OSError):
        return False


def summary(choices: list[Choice]) -> str:
    """What pods run in, said the way the run banner and the LocalImages event say it."""
    envs = {c.env for c in choices}
    plain = not any(c.in_image or c.note or mapping(c.image) for c in choices)
    if plain and len(envs) <= 1:
        return f"images are not loaded here; pods run in the Python environment {next(iter(envs), sys.prefix)}"
    return "pods run in " + "; ".join(dict.fromkeys(c.says() for c in choices))
