"""Reading images out of what ``docker save``, ``podman save`` and ``skopeo copy`` write: a docker-archive (a tar
with ``manifest.json``), an OCI archive (a tar of an OCI image layout) or an OCI image layout directory. Only the
variant for this machine's platform is taken from a multi-platform index."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.images import reference

INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x",
         "riscv64": "riscv64", "i686": "386"}


class ArchiveError(KubetrainError):
    pass


def machine_platform() -> str:
    return f"linux/{_ARCH.get(platform.machine(), platform.machine())}"


@dataclass
class Layer:
    diff_id: str  # the uncompressed tar's digest, from the image config
    open: Callable[[], IO[bytes]]
    digest: str | None = None  # the blob's digest, when the source names it
    size: int | None = None


@dataclass
class Found:
    """One image in a source: its names (normalized), config and layers, bottom first."""

    config: dict[str, Any]
    config_digest: str
    layers: list[Layer]
    names: list[str] = field(default_factory=list)
    manifest_digest: str | None = None

    @property
    def platform(self) -> str:
        arch = self.config.get("architecture") or "?"
        variant = self.config.get("variant")
        return f"{self.config.get('os') or '?'}/{arch}" + (f"/{variant}" if variant else "")


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class _Files:
    """The files of the source, by path: a directory, or the members of a tar (read in place)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tar: tarfile.TarFile | None = None
        self.members: dict[str, tarfile.TarInfo] = {}
        if path.is_file():
            try:
                self.tar = tarfile.open(path, "r:*")  # noqa: SIM115  (closed by close())
                self.members = {m.name.removeprefix("./"): m for m in self.tar.getmembers() if m.isfile()}
            except (tarfile.TarError, EOFError, OSError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is not a complete tar file"
                raise ArchiveError(
                    f"{path}: not a readable image archive ({why}). Expected a docker-archive or OCI archive (`docker "
                    "save`, `podman save`, `skopeo copy ... docker-archive:FILE`) or an OCI layout directory"
                ) from None

    def exists(self, name: str) -> bool:
        return name in self.members if self.tar is not None else (self.path / name).is_file()

    def open(self, name: str) -> IO[bytes]:
        if self.tar is not None:
            member = self.members.get(name)
            f = self.tar.extractfile(member) if member is not None else None
            if f is None:
                raise ArchiveError(f"{self.path}: {name} is missing from the archive (is it complete?)")
            return f
        try:
            return open(self.path / name, "rb")
        except OSError as exc:
            raise ArchiveError(f"{self.path}: {name} cannot be read: {exc.strerror}") from None

    def size(self, name: str) -> int | None:
        if self.tar is not None:
            member = self.members.get(name)
            return member.size if member is not None else None
        try:
            return (self.path / name).stat().st_size
        except OSError:
            return None

    def read(self, name: str) -> bytes:
        with self.open(name) as f:
            return f.read()

    def json(self, name: str) -> Any:
        try:
            return json.loads(self.read(name))
        except ValueError as exc:
            raise ArchiveError(f"{self.path}: {name} is not valid JSON ({exc}); the archive is corrupt") from None

    def close(self) -> None:
        if self.tar is not None:
            self.tar.close()


def _config(files: _Files, name: str, expected: str | None) -> tuple[dict[str, Any], str]:
    data = files.read(name)
    digest = _digest(data)
    if expected and digest != expected:
        raise ArchiveError(f"{files.path}: the image config {name} does not match its digest {expected}: corrupt")
    try:
        return json.loads(data), digest
    except ValueError:
        raise ArchiveError(f"{files.path}: the image config {name} is not valid JSON: corrupt") from None


def _diff_ids(files: _Files, config: dict[str, Any], count: int) -> list[str]:
    ids = list((config.get("rootfs") or {}).get("diff_ids") or [])
    if len(ids) != count:
        raise ArchiveError(
            f"{files.path}: the image config lists {len(ids)} layers and the manifest {count}: the archive is corrupt"
        )
    return [str(i) for i in ids]


def _opener(files: _Files, name: str) -> Callable[[], IO[bytes]]:
    if not files.exists(name):
        raise ArchiveError(f"{files.path}: layer {name} is missing from the archive (an incomplete export?)")
    return lambda: files.open(name)


def _docker_archive(files: _Files) -> list[Found]:
    out = []
    entries = files.json("manifest.json")
    if not isinstance(entries, list):
        raise ArchiveError(f"{files.path}: manifest.json is not a list of images: not a docker-archive")
    for entry in entries:
        config, digest = _config(files, str(entry.get("Config")), None)
        names = [str(n) for n in entry.get("RepoTags") or []]
        layer_files = [str(x) for x in entry.get("Layers") or []]
        ids = _diff_ids(files, config, len(layer_files))
        layers = []
        for name, diff_id in zip(layer_files, ids, strict=True):
            blob = name.split("/")[-1] if name.startswith("blobs/sha256/") else None
            layers.append(Layer(diff_id, _opener(files, name), f"sha256:{blob}" if blob else None, files.size(name)))
        out.append(Found(config, digest, layers, names))
    return out


def _blob(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    return f"blobs/{algo}/{hexpart}"


def _oci_names(descriptor: dict[str, Any]) -> list[str]:
    ann = descriptor.get("annotations") or {}
    full = ann.get("io.containerd.image.name")
    if full:
        return [str(full)]
    ref = str(ann.get("org.opencontainers.image.ref.name") or "")
    # A bare tag (``latest``) names no repository: such an image needs --tag to get a name.
    return [ref] if ref and (":" in ref or "/" in ref) else []


def _oci(files: _Files, want: str) -> tuple[list[Found], list[str]]:
    """Images of the layout for platform ``want``, and the platforms of those skipped."""
    index = files.json("index.json")
    found: list[Found] = []
    skipped: list[str] = []

    def visit(desc: dict[str, Any], names: list[str], plat: str | None) -> None:
        media = desc.get("mediaType", "")
        digest = str(desc.get("digest", ""))
        doc = files.json(_blob(digest))
        if media in INDEX_TYPES or doc.get("manifests") is not None:
            for sub in doc.get("manifests") or []:
                p = sub.get("platform") or {}
                sub_plat = f"{p.get('os')}/{p.get('architecture')}" if p else None
                if sub_plat and sub_plat != want:
                    skipped.append(sub_plat + (f"/{p['variant']}" if p.get("variant") else ""))
                    continue
                visit(sub, names or _oci_names(sub), sub_plat)
            return
        cdesc = doc.get("config") or {}
        config, cdigest = _config(files, _blob(str(cdesc.get("digest", ""))), str(cdesc.get("digest", "")))
        layer_descs = doc.get("layers") or []
        ids = _diff_ids(files, config, len(layer_descs))
        layers = [
            Layer(diff_id, _opener(files, _blob(str(ld.get("digest", "")))), str(ld.get("digest")), ld.get("size"))
            for ld, diff_id in zip(layer_descs, ids, strict=True)
        ]
        found.append(Found(config, cdigest, layers, names, digest))

    for desc in index.get("manifests") or []:
        visit(desc, _oci_names(desc), None)
    return found, skipped


def read(path: Path) -> tuple[list[Found], _Files]:
    """Every image of the source for this machine's platform (the caller closes the second value when done with
    the layers). Raises ``ArchiveError`` for what is not an image source, is corrupt, or holds only images for
    other platforms."""
    if not path.exists():
        raise ArchiveError(f"{path}: no such file or directory")
    files = _Files(path)
    want = machine_platform()
    try:
        if files.exists("manifest.json"):
            images, skipped = _docker_archive(files), list[str]()
        elif files.exists("index.json"):
            images, skipped = _oci(files, want)
        else:
            raise ArchiveError(
                f"{path}: neither manifest.json (docker-archive) nor index.json (OCI layout) is in it: not an image "
                "archive. Fix: export the image with `docker save -o FILE IMAGE`, `podman save -o FILE IMAGE` or "
                "`skopeo copy ... docker-archive:FILE`"
            )
        other = [f for f in images if f.platform.split("/")[:2] != want.split("/")]
        for f in other:
            skipped.append(f.platform)
        images = [f for f in images if f not in other]
        if not images:
            what = ", ".join(dict.fromkeys(skipped)) or "none"
            raise ArchiveError(
                f"{path}: no image for this machine's platform {want} in it (it holds: {what}). A pod cannot run an "
                f"image built for another CPU architecture here. Fix: export the {want} variant (`docker save "
                f"--platform {want}`, `skopeo copy --override-arch {want.split('/')[1]} ...`) or build the image "
                "for it"
            )
        for f in images:
            f.names = list(dict.fromkeys(reference.normalize(n) for n in f.names))
    except BaseException:
        files.close()
        raise
    return images, files


def is_layout(path: Path) -> bool:
    return path.is_dir() and os.path.isfile(path / "index.json")
