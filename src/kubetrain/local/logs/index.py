"""When each byte of a local pod log was written: a small index beside the log, for ``--timestamps``/``--since``.

Pods write their log files directly (the kernel appends; no process of ours sits in between, so a log survives
the supervisor). To know when a line was written, the supervisor samples each log's size a few times a second and
appends ``(size, time)`` to ``<pod>.log.times`` whenever the size changed: fixed 16-byte records, so a reader finds
any time or offset with a binary search and never loads the index. A line's time is then the first sample that
covers its end (an upper bound, at most ``INTERVAL`` late); bytes past the last sample get the file's mtime.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from pathlib import Path
from typing import BinaryIO

RECORD = struct.Struct("<qd")  # file size in bytes, Unix time
SUFFIX = ".times"
INTERVAL = 0.25


def index_path(log: Path) -> Path:
    return log.with_name(log.name + SUFFIX)


class LogClock:
    """The writer (the supervisor's main loop): :meth:`sample` every tick, it rate-limits itself."""

    def __init__(self, logs_dir: Path, interval: float = INTERVAL) -> None:
        self.dir = logs_dir
        self.interval = interval
        self._last = 0.0
        self._sizes: dict[str, int] = {}
        self._files: dict[str, BinaryIO] = {}

    def sample(self, *, force: bool = False) -> None:
        now = time.time()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return
        for entry in entries:
            if not entry.name.endswith(".log"):
                continue
            try:
                size = entry.stat().st_size
            except FileNotFoundError:
                continue
            if self._sizes.get(entry.name) == size:
                continue
            self._sizes[entry.name] = size
            f = self._files.get(entry.name)
            if f is None:
                f = self._files[entry.name] = open(index_path(Path(entry.path)), "ab", buffering=0)  # noqa: SIM115
            try:
                f.write(RECORD.pack(size, now))
            except OSError:
                pass  # a full disk costs timestamps, never the job

    def close(self) -> None:
        self.sample(force=True)
        for f in self._files.values():
            f.close()
        self._files.clear()


class TimeIndex:
    """The reader: times of offsets and offsets of times, from ``<log>.times`` (absent: everything is mtime)."""

    BLOCK = 4096  # records read at once by the forward cursor

    def __init__(self, log: Path) -> None:
        self.log = log
        try:
            self._f: BinaryIO | None = open(index_path(log), "rb")  # noqa: SIM115
        except FileNotFoundError:
            self._f = None
        self._block: list[tuple[int, float]] = []
        self._block_start = 0
        self._pos = 0  # cursor: index of the next record to look at

    def close(self) -> None:
        if self._f is not None:
            self._f.close()

    def _count(self) -> int:
        if self._f is None:
            return 0
        return os.fstat(self._f.fileno()).st_size // RECORD.size

    def _record(self, i: int) -> tuple[int, float]:
        assert self._f is not None
        self._f.seek(i * RECORD.size)
        size, ts = RECORD.unpack(self._f.read(RECORD.size))
        return int(size), float(ts)

    def _mtime(self) -> float:
        try:
            return self.log.stat().st_mtime
        except FileNotFoundError:
            return time.time()

    def offset_before(self, when: float) -> int:
        """How many bytes had been written before ``when`` (as far as the samples tell): the last sample before
        it. Without samples before ``when``, 0; without any index, 0 or the whole file by its mtime."""
        n = self._count()
        lo = bisect.bisect_left(range(n), when, key=lambda i: self._record(i)[1])  # first record with time >= when
        if lo == n:  # no sample is as new: what came after the last one is older too if the file is
            whole = self._size_if_older(when)
            if whole is not None:
                return whole
        return self._record(lo - 1)[0] if lo > 0 else 0

    def _size_if_older(self, when: float) -> int | None:
        """The log's size if it was last written before ``when``; 0 without a log; None when it is newer."""
        try:
            st = self.log.stat()
        except FileNotFoundError:
            return 0
        return st.st_size if st.st_mtime < when else None

    def time_for(self, end: int) -> float:
        """When the byte before ``end`` had been written. Calls must come with non-decreasing ``end`` (a forward
        reader), so the cursor only moves ahead and reads the index in blocks."""
        while True:
            rel = self._pos - self._block_start
            if rel >= len(self._block):
                self._load(self._pos)
                rel = 0
                if not self._block:
                    return self._mtime()
            size, ts = self._block[rel]
            if size >= end:
                return ts
            self._pos += 1

    def seek_offset(self, offset: int) -> None:
        """Place the cursor for a reader starting at ``offset`` (binary search, not a scan)."""
        n = self._count()
        lo = bisect.bisect_left(range(n), offset, key=lambda i: self._record(i)[0])
        self._pos = lo
        self._block, self._block_start = [], lo

    def _load(self, start: int) -> None:
        self._block, self._block_start = [], start
        if self._f is None:
            return
        self._f.seek(start * RECORD.size)
        data = self._f.read(self.BLOCK * RECORD.size)
        usable = len(data) - len(data) % RECORD.size
        self._block = [(int(s), float(t)) for s, t in RECORD.iter_unpack(data[:usable])]
