"""Shared by the benchmarks: write one section of BENCHMARKS.md, leaving the others as they are."""

from __future__ import annotations

import platform
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\n"
    "Written by `make bench` (each section by its own `bench/*.py`). Every number is measured in the same run as "
    "its baseline; compare ratios, not absolute times, across machines.\n"
)


def write_section(name: str, markdown: str, *, after: str | None = None) -> None:
    """Replace section ``name`` (or add it: right after section ``after`` when that exists, else at the end)."""
    text = REPORT.read_text() if REPORT.exists() else HEADER
    stamp = f"_{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, " \
            f"Python {platform.python_version()}_\n\n"
    block = f"<!-- bench:{name} -->\n{stamp}{markdown.rstrip()}\n<!-- /bench:{name} -->"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    end = f"<!-- /bench:{after} -->" if after else None
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    elif end and end in text:
        text = text.replace(end, end + "\n\n" + block, 1)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    REPORT.write_text(text)


def per_call(fn: Callable[[], object], *, min_time: float = 0.3, repeats: int = 5) -> float:
    """Median seconds per call over ``repeats`` timed batches of at least ``min_time`` each."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_time / 5:
            break
        n *= 2
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)
