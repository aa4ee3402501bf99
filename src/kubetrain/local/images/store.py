"""The image store under ``$KUBETRAIN_HOME/images``: layers unpacked once, by their content digest, and shared by
every image and every pod that uses them.

```
images/refs.json          name -> image id, manifest digest -> image id (replaced atomically)
images/images/<id>.json   the image: its config, its layers (diff_ids, bottom first), size, where it came from
images/images/<id>.lock   held (shared) by every supervisor whose pods run the image: prune leaves it alone
images/layers/<diff_id>/  one unpacked layer, overlayfs-ready (``layers``)
images/tmp/               layers being unpacked; renamed into layers/ only once complete and verified
images/.lock              held while the store changes (load, rm, prune), so changes never interleave
```

An image's id is its config's digest, as Docker and Podman show it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths
from kubetrain.local.images import layers as L
from kubetrain.local.images import reference
from kubetrain.local.images.archive import Found

Progress = Callable[[str], None]


class StoreError(KubetrainError):
    pass


def _hex(digest: str) -> str:
    algo, _, value = digest.partition(":")
    if algo != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise StoreError(f"unsupported digest {digest!r} (expected sha256:<64 hex digits>)")
    return value


@dataclass
class StoredImage:
    id: str
    config: dict[str, Any]
    layers: list[str]  # diff_ids, bottom first
    size: int
    loaded: float
    source: str
    names: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    root: Path = field(default_factory=Path)

    @property
    def short_id(self) -> str:
        return _hex(self.id)[:12]

    def layer_dirs(self) -> list[Path]:
        """The unpacked layers, bottom first."""
        return [self.root / "layers" / _hex(d) for d in self.layers]

    @property
    def platform(self) -> str:
        return f"{self.config.get('os', '?')}/{self.config.get('architecture', '?')}"

    @property
    def run_config(self) -> dict[str, Any]:
        """The ``config`` section of the image config (Env, Entrypoint, Cmd, WorkingDir, User)."""
        return dict(self.config.get("config") or {})


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)


class ImageStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.images_dir()

    # Reading (no lock: every file is replaced atomically).
    def _refs(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads((self.root / "refs.json").read_text())
        except (OSError, ValueError):
            return {"names": {}, "digests": {}}
        return {"names": dict(data.get("names") or {}), "digests": dict(data.get("digests") or {})}

    def _load(self, image_id: str, refs: dict[str, dict[str, str]]) -> StoredImage | None:
        try:
            data = json.loads((self.root / "images" / f"{_hex(image_id)}.json").read_text())
        except (OSError, ValueError):
            return None
        names = sorted(n for n, i in refs["names"].items() if i == image_id)
        digests = sorted(d for d, i in refs["digests"].items() if i == image_id)
        return StoredImage(
            id=image_id, config=data["config"], layers=list(data["layers"]), size=int(data.get("size", 0)),
            loaded=float(data.get("loaded", 0)), source=str(data.get("source", "")), names=names,
            digests=digests, root=self.root,
        )

    def images(self) -> list[StoredImage]:
        refs = self._refs()
        out = []
        for p in sorted((self.root / "images").glob("*.json")):
            image = self._load(f"sha256:{p.stem}", refs)
            if image is not None:
                out.append(image)
        return sorted(out, key=lambda i: (-i.loaded, i.id))

    def find(self, ref: str) -> StoredImage | None:
        """The image a pod's ``image`` names: by name (``x:1``, ``localhost/x:dev``), by repository and manifest
        digest (``x@sha256:...``), or, for the CLI, by image id or its first characters."""
        refs = self._refs()
        text = ref.strip()
        if text.startswith("sha256:") or (len(text) >= 4 and all(c in "0123456789abcdef" for c in text)):
            want = text.removeprefix("sha256:")
            ids = {i for i in refs["names"].values()} | {
                f"sha256:{p.stem}" for p in (self.root / "images").glob("*.json")
            }
            hits = [i for i in ids if _hex(i).startswith(want)]
            if len(hits) == 1:
                return self._load(hits[0], refs)
        parsed = reference.parse(text)
        if parsed.digest:
            image_id = refs["digests"].get(f"{parsed.repository}@{parsed.digest}") or refs["digests"].get(
                parsed.digest
            )
            if image_id is None and parsed.digest.startswith("sha256:"):
                image_id = parsed.digest if (self.root / "images" / f"{_hex(parsed.digest)}.json").exists() else None
        else:
            image_id = refs["names"].get(str(parsed))
        return self._load(image_id, refs) if image_id else None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def hold(self, image: StoredImage) -> int:
        """A shared lock on ``image`` for as long as the returned fd is open: ``prune`` and ``rm`` keep it."""
        path = self.root / "images" / f"{_hex(image.id)}.lock"
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    def _in_use(self, image_id: str) -> bool:
        path = self.root / "images" / f"{_hex(image_id)}.lock"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)

    # Changing.
    def add(self, found: Found, *, names: list[str], source: str, progress: Progress | None = None,
            remote_digest: str | None = None) -> StoredImage:
        """Store ``found`` under ``names`` (normalized): its missing layers are unpacked and verified first; a name
        that named another image moves to this one. Raises ``LayerError``/``StoreError``; the store is as before
        then, apart from layers already verified."""
        say = progress or (lambda _m: None)
        with self._locked():
            for d in ("images", "layers", "tmp"):
                (self.root / d).mkdir(parents=True, exist_ok=True)
            self._clear_tmp()
            size = 0
            for n, layer in enumerate(found.layers, 1):
                final = self.root / "layers" / _hex(layer.diff_id)
                size += self._layer_size(final) if final.exists() else self._unpack(layer, final, n, found, say)
            image_hex = _hex(found.config_digest)
            record = {
                "config": found.config, "layers": [x.diff_id for x in found.layers], "size": size,
                "loaded": time.time(), "source": source,
            }
            _write_json(self.root / "images" / f"{image_hex}.json", record)
            refs = self._refs()
            for name in names:
                refs["names"][reference.normalize(name)] = found.config_digest
            for digest in filter(None, (found.manifest_digest, remote_digest)):
                refs["digests"][digest] = found.config_digest
                for name in names:
                    refs["digests"][f"{reference.parse(name).repository}@{digest}"] = found.config_digest
            _write_json(self.root / "refs.json", refs)
        image = self._load(found.config_digest, self._refs())
        assert image is not None
        return image

    def _layer_size(self, final: Path) -> int:
        try:
            return int((final.parent / f"{final.name}.size").read_text())
        except (OSError, ValueError):
            return 0

    def _unpack(self, layer: Any, final: Path, n: int, found: Found, say: Progress) -> int:
        what = f"layer {n}/{len(found.layers)} ({layer.diff_id[:19]}) of image {found.config_digest[:19]}"
        tmp = self.root / "tmp" / f"{final.name}.{os.getpid()}"
        tmp.mkdir()
        started = time.monotonic()
        try:
            total = f" of {layer.size / 1e6:.0f}" if layer.size else ""
            with layer.open() as raw:
                blob, diff_id, count = L.unpack(
                    raw, tmp, what=what, tick=lambda n: say(f"unpacking {what}: {n / 1e6:.0f}{total} MB read")
                )
            if layer.digest and blob != layer.digest and diff_id != layer.digest:
                raise L.LayerError(f"{what}: its bytes do not match its digest {layer.digest} (got {blob}): corrupt")
            if diff_id != layer.diff_id:
                raise L.LayerError(
                    f"{what}: its content does not match the digest the image config gives it ({layer.diff_id}; "
                    f"got {diff_id}): the archive is corrupt. Fix: export the image again"
                )
            (final.parent / f"{final.name}.size").write_text(str(count))
            tmp.rename(final)
        except BaseException:
            paths.remove_tree(tmp)
            raise
        say(f"unpacked {what}: {count / 1e6:.1f} MB in {time.monotonic() - started:.1f}s")
        return count

    def _clear_tmp(self) -> None:
        # Under the store's lock no unpack is under way: whatever is here was left by a killed process.
        for p in (self.root / "tmp").iterdir():
            paths.remove_tree(p)

    def remove(self, refs_: list[str]) -> list[str]:
        """Untag each name (or remove the image an id names, with all its names); an image without names left is
        removed unless a TrainJob runs it. Returns what was done, one line each. Raises ``StoreError`` for a
        reference that names no image (nothing is changed then)."""
        with self._locked():
            refs = self._refs()
            plan: list[tuple[str, StoredImage]] = []
            for ref in refs_:
                image = self.find(ref)
                if image is None:
                    raise StoreError(f"image {ref!r} is not in the local store (see `kubetrain images list`)")
                plan.append((ref, image))
            out = []
            for ref, image in plan:
                by_name = reference.normalize(ref) if not ref.startswith("sha256:") else None
                gone = [by_name] if by_name in image.names else list(image.names)
                for name in gone:
                    refs["names"].pop(name, None)
                    out.append(f"Untagged: {reference.familiar(name)}")
                if not any(i == image.id for i in refs["names"].values()):
                    refs["digests"] = {d: i for d, i in refs["digests"].items() if i != image.id}
                    if self._in_use(image.id):
                        out.append(f"Kept: {image.id} (a running TrainJob uses it; `kubetrain images prune` later)")
                    else:
                        (self.root / "images" / f"{_hex(image.id)}.json").unlink(missing_ok=True)
                        out.append(f"Deleted: {image.id}")
            _write_json(self.root / "refs.json", refs)
            out += [f"Deleted layer: {x}" for x, _ in self._unused_layers(delete=True)]
        return out

    def _unused_layers(self, *, delete: bool) -> list[tuple[str, int]]:
        used: set[str] = set()
        for image in self.images():
            used.update(_hex(d) for d in image.layers)
        out = []
        for p in sorted((self.root / "layers").glob("*")):
            if p.is_dir() and p.name not in used:
                size = self._layer_size(p)
                if delete:
                    paths.remove_tree(p)
                    (p.parent / f"{p.name}.size").unlink(missing_ok=True)
                out.append((f"sha256:{p.name}", size))
        return out

    def prune(self, *, dry_run: bool = False) -> list[tuple[str, int]]:
        """Remove images without a name that no TrainJob runs, the layers no image uses, and what an interrupted
        load left. Returns (what, bytes) for each."""
        if not self.root.exists():
            return []
        with self._locked():
            refs = self._refs()
            named = set(refs["names"].values())
            out: list[tuple[str, int]] = []
            for image in self.images():
                if image.id not in named and not self._in_use(image.id):
                    out.append((f"image {image.id}", 0))
                    if not dry_run:
                        (self.root / "images" / f"{_hex(image.id)}.json").unlink(missing_ok=True)
                        (self.root / "images" / f"{_hex(image.id)}.lock").unlink(missing_ok=True)
            if not dry_run:
                refs["digests"] = {d: i for d, i in refs["digests"].items() if i in named}
                _write_json(self.root / "refs.json", refs)
            if dry_run:
                gone = {w.split()[1] for w, _ in out}
                used = {_hex(d) for i in self.images() if i.id not in gone for d in i.layers}
                out += [
                    (f"layer sha256:{p.name}", self._layer_size(p))
                    for p in sorted((self.root / "layers").glob("*")) if p.is_dir() and p.name not in used
                ]
            else:
                out += [(f"layer {x}", n) for x, n in self._unused_layers(delete=True)]
            tmp = self.root / "tmp"
            for p in sorted(tmp.iterdir()) if tmp.exists() else []:
                out.append((f"unfinished unpack {p.name}", 0))
                if not dry_run:
                    paths.remove_tree(p)
        return out
