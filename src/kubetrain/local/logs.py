"""Reading pod logs: files under ``$KUBETRAIN_HOME/trainjobs/<ns>/<name>-<uid>/logs/``, tailed incrementally."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def step_prefix(short: str) -> str:
    """``node-0-1`` -> ``node-0/1``: the ``[step/rank]`` log prefix."""
    head, _, index = short.rpartition("-")
    return f"{head}/{index}"


class LogTailer:
    """Incremental reader of several pod logs; lines get a ``[step/rank]`` prefix when there is more than one
    step (``prefix=None``), always (``True``) or never (``False``)."""

    def __init__(self, files: Callable[[], list[tuple[str, Path]]], prefix: bool | None = None) -> None:
        self._files = files
        self._prefix = prefix
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._known: list[tuple[str, Path]] = []

    def _fmt(self, prefix: str, line: bytes) -> str:
        text = line.decode(errors="replace")
        many = self._prefix if self._prefix is not None else len(self._known) > 1
        return f"[{prefix}] {text}" if many else text

    def poll(self) -> list[str]:
        self._known = self._files()
        out: list[str] = []
        for prefix, path in self._known:
            try:
                with open(path, "rb") as f:
                    f.seek(self._offsets.get(path, 0))
                    data = f.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            self._offsets[path] = self._offsets.get(path, 0) + len(data)
            *lines, rest = (self._partial.pop(path, b"") + data).split(b"\n")
            if rest:
                self._partial[path] = rest
            out += [self._fmt(prefix, line) for line in lines]
        return out

    def flush(self) -> list[str]:
        """Unterminated last lines, once the writers are gone."""
        out = self.poll()
        names = dict((path, prefix) for prefix, path in self._known)
        for path, rest in self._partial.items():
            out.append(self._fmt(names.get(path, "?"), rest))
        self._partial.clear()
        return out

