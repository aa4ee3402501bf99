"""Log text as both backends hand it to the CLI: splitting chunks into lines, ``[step/rank]`` prefixes, carriage
returns, and the time formats of kubectl's ``--since``/``--since-time``/``--timestamps``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator

from kubetrain.api.errors import KubetrainError
from kubetrain.api.views import LogChunk, LogItem


def step_prefix(step: str) -> str:
    """``node-0-1`` -> ``node-0/1``: the ``[step/rank]`` prefix of a pod's lines."""
    head, _, index = step.rpartition("-")
    return f"{head}/{index}" if head else step


def collapse_cr(line: str) -> str:
    """What a terminal shows of a line rewritten with carriage returns (a progress bar): its last state.

    A trailing ``\\r`` (CRLF endings) is not a rewrite; an empty last segment means the writer moved back to the
    start without writing, so the segment before it is what stays visible.
    """
    if "\r" not in line:
        return line
    for segment in reversed(line.split("\r")):
        if segment:
            return segment
    return ""


class LineSplitter:
    """Cuts one stream's chunks into complete lines, holding back an unterminated last line."""

    __slots__ = ("partial",)

    def __init__(self) -> None:
        self.partial = ""

    def feed(self, text: str) -> list[str]:
        if "\n" not in text:
            self.partial += text
            return []
        *lines, self.partial = (self.partial + text).split("\n")
        return lines

    def flush(self) -> list[str]:
        rest, self.partial = self.partial, ""
        return [rest] if rest else []


def lines_of(items: Iterable[LogItem], prefix: bool | None = None) -> Iterator[str]:
    """Complete lines from ``log_stream`` items, prefixed ``[step/rank] `` when ``prefix`` is true (or, with
    ``None``, once a second step has spoken). Non-log items are skipped."""
    splitters: dict[str, LineSplitter] = {}
    for item in items:
        if not isinstance(item, LogChunk):
            continue
        sp = splitters.get(item.step)
        if sp is None:
            sp = splitters[item.step] = LineSplitter()
        lines = sp.feed(item.text)
        many = prefix if prefix is not None else len(splitters) > 1
        if many:
            tag = f"[{step_prefix(item.step)}] "
            yield from (tag + line for line in lines)
        else:
            yield from lines
    many = prefix if prefix is not None else len(splitters) > 1
    for step, sp in splitters.items():
        for line in sp.flush():
            yield f"[{step_prefix(step)}] {line}" if many else line


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str = "--since") -> float:
    """Go/kubectl durations (``30s``, ``5m``, ``1h30m``, ``250ms``) in seconds; a bare number means seconds."""
    t = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(t) or not t:
        raise KubetrainError(
            f"{flag}: invalid duration {text!r} (fix: a number with a unit such as 30s, 5m, 2h or 1h30m)"
        )
    return total


def parse_rfc3339(text: str, flag: str = "--since-time") -> float:
    """RFC 3339 (``2024-05-01T12:00:00Z``, fractions and offsets allowed) as a Unix time."""
    t = text.strip()
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", t)
    if not m:
        raise KubetrainError(f"{flag}: {text!r} is not an RFC 3339 time (fix: e.g. 2024-05-01T12:00:00Z)")
    base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.timestamp() + (float("0" + m.group(2)) if m.group(2) else 0.0)


def rfc3339nano(ts: float) -> str:
    """Go's ``time.RFC3339Nano`` in UTC, as the kubelet prefixes lines: trailing zeros of the fraction dropped."""
    secs = int(ts // 1)
    nanos = round((ts - secs) * 1e9)
    if nanos >= 1_000_000_000:
        secs, nanos = secs + 1, nanos - 1_000_000_000
    base = dt.datetime.fromtimestamp(secs, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{nanos:09d}".rstrip("0")
    return f"{base}.{frac}Z" if frac else f"{base}Z"
