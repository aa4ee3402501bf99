"""One image layer (a tar, plain or gzip-compressed) unpacked into a directory that overlayfs stacks as-is.

The layer's whiteouts become overlayfs's own: ``.wh.NAME`` a character device 0/0 named NAME (an unprivileged user
may make that one since Linux 5.8), ``.wh..wh..opq`` the ``user.overlay.opaque`` attribute on its directory (the
``userxattr`` convention, which root and ordinary users mount alike). Owners are kept as root; an ordinary user
owns everything, which its pods' user namespaces show as their own user. Times are kept, so Python's ``.pyc``
files stay valid. Every entry stays inside the directory (``..`` and links out of it are refused), and the digests
are checked as the bytes stream by: a corrupt or tampered layer is an error, never a partial tree (the caller
unpacks into a temporary directory and renames it into place).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, BinaryIO

from kubetrain.api.errors import KubetrainError

OPAQUE_XATTR = "user.overlay.opaque"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_CHUNK = 1 << 20
_TICK = 5.0  # seconds between progress reports of one layer


class LayerError(KubetrainError):
    """A layer that cannot be used: corrupt, truncated, not matching its digest, or escaping its directory."""


class Hashing(io.RawIOBase):
    """Reads through ``raw``, hashing (sha256) and counting the bytes."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        self.count += n
        return n

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha.hexdigest()}"


def decompressed(raw: BinaryIO) -> IO[bytes]:
    """The layer's tar stream: gzip is recognised by its magic bytes, anything else is read as a plain tar."""
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw, _CHUNK)  # type: ignore[type-var]
    head = buffered.peek(4)[:4]
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[return-value]
    if head == b"\x28\xb5\x2f\xfd":
        raise LayerError(
            "the layer is zstd-compressed, which kubetrain cannot unpack yet. Fix: re-export the image with gzip "
            "or uncompressed layers (e.g. `skopeo copy --dest-compress-format gzip ...` or `docker save`)"
        )
    return buffered


def _clean(name: str, what: str) -> str:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LayerError(f"{what}: the entry {name!r} points outside the layer (a corrupt or malicious archive)")
    return "/".join(parts)


class _Unpacker:
    def __init__(self, dest: Path, *, as_root: bool, what: str) -> None:
        self.dest = os.path.realpath(dest)
        self.as_root = as_root
        self.what = what
        self.safe_dirs: set[str] = {self.dest}
        self.dirs: list[tuple[str, tarfile.TarInfo]] = []

    def _parent(self, rel: str) -> str:
        """The entry's parent directory on disk, made if missing, never reached through a symlink."""
        parent = os.path.join(self.dest, os.path.dirname(rel)) if "/" in rel else self.dest
        if parent in self.safe_dirs:
            return parent
        os.makedirs(parent, exist_ok=True)
        if not os.path.realpath(parent).startswith(self.dest + "/"):
            raise LayerError(f"{self.what}: {rel!r} would be written through a symlink out of the layer")
        self.safe_dirs.add(parent)
        return parent

    def _clear(self, path: str, keep_dir: bool) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            if keep_dir:
                return
            shutil.rmtree(path)
        else:
            os.unlink(path)

    def entry(self, tf: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        rel = _clean(m.name, self.what)
        if not rel:
            return
        base = os.path.basename(rel)
        parent = self._parent(rel)
        if base == OPAQUE:
            os.setxattr(parent, OPAQUE_XATTR, b"y")
            return
        if base.startswith(WHITEOUT):
            target = os.path.join(parent, base[len(WHITEOUT) :])
            self._clear(target, keep_dir=False)
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))
            return
        path = os.path.join(parent, base)
        self._clear(path, keep_dir=m.isdir())
        if m.isdir():
            os.makedirs(path, exist_ok=True)
            self.safe_dirs.add(path)
            self.dirs.append((path, m))
            return
        if m.isreg():
            src = tf.extractfile(m)
            assert src is not None
            with open(path, "wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
        elif m.issym():
            os.symlink(m.linkname, path)
        elif m.islnk():
            target = os.path.join(self.dest, _clean(m.linkname, self.what))
            if not os.path.lexists(target):
                raise LayerError(f"{self.what}: hard link {rel!r} names {m.linkname!r}, which is not in the layer")
            os.link(target, path, follow_symlinks=False)
            return
        elif m.isfifo():
            os.mkfifo(path)
        elif m.ischr() or m.isblk():
            if not self.as_root:
                return  # device nodes need root; pods get their /dev from the sandbox anyway
            kind = stat.S_IFCHR if m.ischr() else stat.S_IFBLK
            os.mknod(path, kind | (m.mode & 0o7777), os.makedev(m.devmajor, m.devminor))
        else:
            return
        self._attributes(path, m)

    def _attributes(self, path: str, m: tarfile.TarInfo) -> None:
        if self.as_root:
            os.lchown(path, m.uid, m.gid)
        if not m.issym():
            os.chmod(path, m.mode & 0o7777)
        os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)

    def finish(self) -> None:
        # Directories last and deepest first: a read-only directory must not stop its own entries.
        for path, m in reversed(self.dirs):
            self._attributes(path, m)


def unpack(
    raw: BinaryIO, dest: Path, *, what: str, as_root: bool | None = None, tick: Callable[[int], None] | None = None
) -> tuple[str, str, int]:
    """Unpack the layer read from ``raw`` into ``dest`` (an empty directory). Returns (the digest of the bytes as
    read, the digest of the uncompressed tar, i.e. the image config's ``diff_id``, its size). ``what`` names the
    layer in errors; ``tick`` is called with the bytes read so far every few seconds (progress of a big layer).
    Raises ``LayerError``."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    blob = Hashing(raw)
    try:
        stream = decompressed(blob)  # type: ignore[arg-type]
        tar_stream = Hashing(stream)
        unpacker = _Unpacker(dest, as_root=as_root, what=what)
        with tarfile.open(fileobj=tar_stream, mode="r|") as tf:
            last = time.monotonic()
            for m in tf:
                unpacker.entry(tf, m)
                if tick is not None and time.monotonic() - last >= _TICK:
                    last = time.monotonic()
                    tick(blob.count)
        unpacker.finish()
        tar_stream.drain()
        blob.drain()
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise LayerError(f"{what}: the layer is corrupt or truncated ({exc}). Fix: export the image again") from None
    except OSError as exc:
        raise LayerError(f"{what}: could not unpack it into {dest}: {exc}") from None
    return blob.digest, tar_stream.digest, tar_stream.count
