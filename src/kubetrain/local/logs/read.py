"""Reading one local pod log the way kubectl reads a container's: ``--tail``, ``--since``, ``--timestamps``, follow.

Memory stays constant whatever the log's size: the file is read forward in 64 KiB chunks, ``--tail`` scans
backwards from the end in chunks, and ``--since`` and timestamps come from the log's time index
(:mod:`kubetrain.local.logs.index`) by binary search. The bytes are never rewritten: carriage returns, invalid
UTF-8 (shown as U+FFFD) and an unterminated last line reach the caller as written.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import BinaryIO

from kubetrain.api.logtext import rfc3339nano
from kubetrain.local.logs.index import TimeIndex

CHUNK = 64 * 1024


def tail_offset(f: BinaryIO, size: int, lines: int) -> int:
    """Offset where the last ``lines`` lines start (an unterminated last line counts as one)."""
    if lines <= 0:
        return size
    pos = size
    # A final newline ends the last line; it does not start an empty one after it.
    f.seek(max(0, size - 1))
    need = lines + 1 if size and f.read(1) == b"\n" else lines
    while pos > 0:
        start = max(0, pos - CHUNK)
        f.seek(start)
        block = f.read(pos - start)
        end = len(block)
        while True:
            i = block.rfind(b"\n", 0, end)
            if i < 0:
                break
            need -= 1
            if need == 0:
                return start + i + 1
            end = i
        pos = start
    return 0


def line_start(f: BinaryIO, offset: int) -> int:
    """Start of the line that contains byte ``offset``."""
    pos = offset
    while pos > 0:
        start = max(0, pos - CHUNK)
        f.seek(start)
        block = f.read(pos - start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


class LogReader:
    """A pod log read forward from where the options place it; :meth:`read` returns what is new."""

    def __init__(
        self,
        path: Path,
        *,
        tail: int | None = None,
        since: float | None = None,
        timestamps: bool = False,
    ) -> None:
        self.path = path
        self.tail, self.since, self.timestamps = tail, since, timestamps
        self._f: BinaryIO | None = None
        self._pos = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._index: TimeIndex | None = None
        self._at_line_start = True

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        if self._index is not None:
            self._index.close()

    def _open(self) -> bool:
        if self._f is not None:
            return True
        try:
            f = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return False
        self._f = f
        size = os.fstat(f.fileno()).st_size
        start = 0
        if self.tail is not None and self.tail >= 0:
            start = tail_offset(f, size, self.tail)
        if self.since is not None:
            index = TimeIndex(self.path)
            try:
                since = index.offset_before(self.since)
                start = max(start, size if since >= size else line_start(f, since))
            finally:
                index.close()
        self._pos = start
        if self.timestamps:
            self._index = TimeIndex(self.path)
            self._index.seek_offset(start + 1)
        return True

    def read(self, limit: int = CHUNK) -> str:
        """New text since the last call (at most ``limit`` bytes of the file), ``""`` when there is none."""
        if not self._open():
            return ""
        assert self._f is not None
        size = os.fstat(self._f.fileno()).st_size
        if size < self._pos:  # truncated under us: start over, as tail -F does
            self._pos, self._at_line_start = 0, True
            if self._index is not None:
                self._index.seek_offset(1)
        if size == self._pos:
            return ""
        self._f.seek(self._pos)
        data = self._f.read(min(limit, size - self._pos))
        start = self._pos
        self._pos += len(data)
        if not self.timestamps:
            return self._decoder.decode(data)
        return self._stamp(data, start)

    def flush(self) -> str:
        """Bytes of an unfinished UTF-8 sequence at the very end, once the writer is gone."""
        return self._decoder.decode(b"", final=True)

    def _stamp(self, data: bytes, start: int) -> str:
        assert self._index is not None
        out: list[str] = []
        pos, n = 0, len(data)
        while pos < n:
            nl = data.find(b"\n", pos)
            stop = n if nl < 0 else nl + 1
            if self._at_line_start:
                out.append(rfc3339nano(self._index.time_for(start + stop)) + " ")
            out.append(self._decoder.decode(data[pos:stop]))
            self._at_line_start = nl >= 0
            pos = stop
        return "".join(out)
