"""Writing log chunks to the user: fast, faithful when piped, live on a terminal.

- **Piped or redirected**: bytes as the pods wrote them (carriage returns included), so a saved copy equals the
  stored log; with several steps each complete line gets its ``[step/rank]`` prefix.
- **Terminal**: complete lines as the terminal would leave them (a line rewritten with ``\\r`` shows its last
  state, once), and below them a live area: each step's unfinished line (a progress bar's current state) and
  status lines (``kubetrain run``), redrawn in place a few times a second and cut to the terminal's width so
  redrawing never scrolls.

Output is batched and written straight to the file descriptor in pieces of at most 64 KiB: tens of thousands of
lines a second reach the terminal (see ``bench/log_render.py``), and Ctrl-C interrupts between two pieces.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from typing import BinaryIO, TextIO

from kubetrain.api.logtext import LineSplitter, collapse_cr, step_prefix

FLUSH_BYTES = 64 * 1024
FLUSH_EVERY = 0.03
REDRAW_EVERY = 0.1
MAX_LIVE = 8
DIM, RESET, ERASE_LINE = "\x1b[2m", "\x1b[0m", "\r\x1b[K"


def is_terminal(fd: int) -> bool:
    return os.isatty(fd) and os.environ.get("TERM", "") != "dumb"


Target = int | BinaryIO
"""A file descriptor (written with ``os.write``: no buffer of Python's to drain after Ctrl-C) or a binary stream."""


def target(stream: TextIO) -> Target:
    """The descriptor behind ``sys.stdout``/``sys.stderr``, or its binary buffer when it has none (tests)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return stream.buffer
    stream.flush()
    return fd


def write_to(out: Target, data: bytes) -> None:
    if isinstance(out, int):
        view = memoryview(data)
        while view:
            n = os.write(out, view[:FLUSH_BYTES])
            view = view[n:]
    else:
        out.write(data)
        out.flush()


class LogView:
    def __init__(self, out: Target, *, tty: bool | None = None, prefix: bool | None = None) -> None:
        self.out = out
        self.fd = out if isinstance(out, int) else -1
        self.tty = (self.fd >= 0 and is_terminal(self.fd)) if tty is None else tty
        self.prefix = prefix
        """Prefix lines with ``[step/rank]``: always, never, or (``None``) once a second step has written."""
        self._splitters: dict[str, LineSplitter] = {}
        self._tags: dict[str, str] = {}
        self._buf: list[str] = []
        self._buf_len = 0
        self._last_flush = time.monotonic()
        self._live: dict[str, str] = {}  # step -> visible state of its unfinished line
        self._footer: list[str] = []
        self._drawn = 0
        self._dirty = False
        self._last_draw = 0.0
        self._width = 80
        self._width_at = 0.0
        self.lines = 0
        """Complete lines written so far (the benchmark reads it)."""

    # -- input --------------------------------------------------------------------------------------------
    def _many(self) -> bool:
        return self.prefix if self.prefix is not None else len(self._splitters) > 1

    def write(self, step: str, text: str) -> None:
        sp = self._splitters.get(step)
        if sp is None:
            sp = self._splitters[step] = LineSplitter()
            self._tags[step] = f"[{step_prefix(step)}] "
        if not self.tty and not self._many():
            # One step, piped: the bytes exactly as written, unfinished line and all.
            sp.partial = ""
            self._push(text)
            self.lines += text.count("\n")
            self._maybe_flush()
            return
        lines = sp.feed(text)
        if lines:
            self.lines += len(lines)
            self._emit_lines(step, lines)
        if self.tty:
            visible = collapse_cr(sp.partial)
            if visible or step in self._live:
                if visible:
                    self._live[step] = visible
                else:
                    self._live.pop(step, None)
                self._dirty = True
        self._maybe_flush()

    def _emit_lines(self, step: str, lines: list[str]) -> None:
        if self.tty:
            self._live.pop(step, None)
            self._dirty = True
            if any("\r" in line for line in lines):
                lines = [collapse_cr(line) for line in lines]
        if self._many():
            tag = self._tags[step]
            self._push(tag + ("\n" + tag).join(lines) + "\n")
        else:
            self._push("\n".join(lines) + "\n")

    def set_footer(self, lines: list[str]) -> None:
        """Status lines under the logs (terminal only); ``kubetrain run`` shows the job's state here."""
        if lines != self._footer:
            self._footer = list(lines)
            self._dirty = True

    # -- output -------------------------------------------------------------------------------------------
    def _push(self, s: str) -> None:
        self._buf.append(s)
        self._buf_len += len(s)

    def _maybe_flush(self) -> None:
        now = time.monotonic()
        if self._buf_len >= FLUSH_BYTES or now - self._last_flush >= FLUSH_EVERY:
            self.flush(now)

    def tick(self) -> None:
        """Call when nothing arrived for a while: writes what is buffered and redraws the live area."""
        self.flush()

    def flush(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._last_flush = now
        redraw = bool(
            self.tty
            and (self._drawn or self._live or self._footer)
            and (self._buf or (self._dirty and now - self._last_draw >= REDRAW_EVERY))
        )
        if not self._buf and not redraw:
            return
        out = self._erase() if redraw else ""
        out += "".join(self._buf)
        self._buf.clear()
        self._buf_len = 0
        if redraw:
            out += self._draw(now)
        self._write(out)

    def _erase(self) -> str:
        if not self._drawn:
            return ""
        up = f"\x1b[{self._drawn - 1}A" if self._drawn > 1 else ""
        self._drawn = 0
        return up + "\r\x1b[J"

    def _term_width(self, now: float) -> int:
        if now - self._width_at > 1.0:
            self._width_at = now
            try:
                self._width = os.get_terminal_size(self.fd).columns
            except OSError:
                self._width = 0
            if self._width <= 0:  # a terminal that does not know its size (a bare pty): $COLUMNS, else 80
                self._width = shutil.get_terminal_size().columns
        return max(20, self._width)

    def _draw(self, now: float) -> str:
        self._dirty, self._last_draw = False, now
        width = self._term_width(now) - 1
        rows: list[str] = []
        live = list(self._live.items())[-MAX_LIVE:]
        for step, text in live:
            tag = self._tags[step] if self._many() else ""
            rows.append(_cut(tag + text, width))
        rows += [DIM + _cut(line, width) + RESET for line in self._footer]
        self._drawn = len(rows)
        return "\n".join(rows)

    def _write(self, s: str) -> None:
        write_to(self.out, s.encode(errors="replace"))

    def close(self) -> None:
        """End of the stream: unfinished lines become lines; the live area is replaced by the final output."""
        for step, sp in self._splitters.items():
            rest = sp.flush()
            if rest:
                self.lines += 1
                self._emit_lines(step, rest)
        self._live.clear()
        self._footer = []
        self._dirty = True
        if self.tty:
            self._push("")
            out = self._erase() + "".join(self._buf)
            self._buf.clear()
            self._buf_len = 0
            self._write(out)
        else:
            self.flush()

    def abort(self) -> None:
        """Ctrl-C: drop what is buffered (the user wants out, not the backlog) and clear the live area."""
        self._buf.clear()
        self._buf_len = 0
        if self.tty and self._drawn:
            try:
                self._write(self._erase())
            except OSError:
                pass


def _cut(text: str, width: int) -> str:
    """Fit one terminal row; control characters (a colour code) are kept, which may cut a little early."""
    text = text.replace("\t", "    ")
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
