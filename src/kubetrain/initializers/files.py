"""``file://`` sources: a directory or file visible to the initializer (on this machine locally; on a cluster, a
path inside the container, typically a mounted PersistentVolumeClaim), copied into the shared volume."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from kubetrain.initializers.errors import InitializerError
from kubetrain.initializers.patterns import ignored
from kubetrain.initializers.settings import Settings

log = logging.getLogger("kubetrain.initializers")


def source_path(uri: str) -> Path:
    """The absolute path a ``file://`` URI names: ``file:///data/alpaca`` (``file://localhost/...`` too)."""
    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
        where = f"/{parsed.netloc}{parsed.path}" if parsed.netloc else parsed.path
        raise InitializerError(
            f"STORAGE_URI {uri!r}: a file:// URI names an absolute path, with three slashes",
            f"write file://{where if where.startswith('/') else '/' + where}",
            permanent=True,
        )
    return Path(unquote(parsed.path))


def fetch(settings: Settings) -> tuple[int, int]:
    """Copy the source into ``settings.destination``; returns (files, bytes) copied."""
    src = source_path(settings.storage_uri)
    dest = Path(settings.destination)
    try:
        if not src.exists():
            raise InitializerError(
                f"STORAGE_URI {settings.storage_uri}: {src} does not exist",
                "check the path; locally the initializer sees this machine's files, on a cluster only the "
                "container's (mount a PersistentVolumeClaim into the initializer and name a path inside it)",
                permanent=True,
            )
        if src.is_file():
            pairs = [(src, dest / src.name)]
        else:
            pairs = [(src / rel, dest / rel) for rel in _walk(src, settings.ignore_patterns)]
        total = 0
        for s, d in pairs:
            total += _copy(s, d)
        return len(pairs), total
    except PermissionError as exc:
        raise InitializerError(
            f"STORAGE_URI {settings.storage_uri}: permission denied reading {exc.filename or src}",
            "make it readable by the user the initializer runs as",
            permanent=True,
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise InitializerError(
                f"no space left on the volume of {dest} while copying {settings.storage_uri}",
                "free disk space (kubetrain prune --volumes) or use a smaller source",
                permanent=False,
            ) from None
        raise InitializerError(
            f"copying {settings.storage_uri} into {dest}: {exc.strerror or exc}",
            "check the source and the initializer volume",
            permanent=False,
        ) from None


def _walk(root: Path, patterns: tuple[str, ...]) -> list[PurePosixPath]:
    out: list[PurePosixPath] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = PurePosixPath(Path(dirpath).relative_to(root).as_posix())
        for name in sorted(filenames):
            rel = base / name if str(base) != "." else PurePosixPath(name)
            if ignored(str(rel), patterns):
                log.info("skipped (IGNORE_PATTERNS) file=%s", rel)
                continue
            out.append(rel)
    return out


def _copy(src: Path, dest: Path) -> int:
    """Copy under a temporary name, then rename: a file under its final name is always complete, also after a
    restart in the middle of a copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial")
    shutil.copyfile(src, tmp)  # follows symlinks (a Hugging Face cache snapshot is made of them)
    os.replace(tmp, dest)
    return dest.stat().st_size
