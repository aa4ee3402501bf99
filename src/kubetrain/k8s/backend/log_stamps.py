"""The kubelet's per-line timestamps on a followed log: stripped (or kept) and used to resume a dropped stream.

While following, kubetrain always asks for ``timestamps=true``: if the connection drops while the container still
runs, the stream is re-opened with ``sinceTime`` (whole seconds) and the lines already shown, including the shown
part of a line that was unfinished, are skipped, so nothing is repeated or lost.
"""

from __future__ import annotations


def _ts_key(ts: str) -> tuple[str, int]:
    """``2024-05-01T12:00:00.25Z`` -> (``2024-05-01T12:00:00``, 250000000): comparable kubelet timestamps."""
    base, _, frac = ts.rstrip("Z").partition(".")
    return base, int((frac + "000000000")[:9]) if frac else 0


class Stamps:
    """Strips (or keeps) the kubelet's per-line timestamps and remembers the last one, so a re-opened stream
    can skip what was already shown, including the shown part of a line that was unfinished at the drop."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.at_start = True
        self._buf = ""
        self.last: tuple[str, int] | None = None
        self.same = 0  # lines shown with exactly ``last``
        self._col = 0  # characters of the current line shown so far
        self._drop = 0  # characters still to drop from the current line (-1: the whole line)
        self._resume: tuple[tuple[str, int], int, int] | None = None

    def resume(self) -> str | None:
        """Prepare for a re-opened stream; returns the ``sinceTime`` to ask for."""
        if self.last is None:
            return None
        self._resume = (self.last, self.same, 0 if self.at_start else self._col)
        self.at_start, self._buf = True, ""
        return self.last[0] + "Z"

    def _skip(self, key: tuple[str, int]) -> int:
        """Characters of this line to drop: -1 for all of it (already shown), else how many were shown."""
        if self._resume is None:
            return 0
        last, same, partial = self._resume
        if key < last:
            return -1
        if key == last and same > 1:
            self._resume = (last, same - 1, partial)
            return -1
        self._resume = None
        if key == last and same == 1:
            return partial if partial else -1
        return 0

    def feed(self, text: str) -> str:
        buf, self._buf = self._buf + text, ""
        out: list[str] = []
        i, n = 0, len(buf)
        while i < n:
            if self.at_start:
                sp = buf.find(" ", i)
                if sp < 0:
                    self._buf = buf[i:]
                    break
                key = _ts_key(buf[i:sp])
                self._drop = self._skip(key)
                if self._drop == 0:
                    if key == self.last:
                        self.same += 1
                    else:
                        self.last, self.same = key, 1
                    self._col = 0
                    if self.keep:
                        out.append(buf[i : sp + 1])
                self.at_start = False
                i = sp + 1
            nl = buf.find("\n", i)
            end = n if nl < 0 else nl + 1
            piece = buf[i:end]
            if self._drop > 0:
                cut = min(self._drop, len(piece))
                piece, self._drop = piece[cut:], self._drop - cut
                self._col += cut
            if self._drop >= 0:
                out.append(piece)
                self._col += len(piece)
            if nl >= 0:
                self.at_start = True
            i = end
        return "".join(out)
