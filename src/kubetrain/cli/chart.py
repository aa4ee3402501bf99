"""Metric history as data (numeric series) and as a terminal chart; ``kubetrain metrics`` prints them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kubetrain.api.progress import duration_text
from kubetrain.api.views import ProgressPoint


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]  # (time, value), time ascending


def number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def metric_names(history: Sequence[ProgressPoint]) -> list[str]:
    """Every metric name in the order first reported."""
    seen: dict[str, None] = {}
    for p in history:
        for m in p.trainer_status.get("metrics") or []:
            if isinstance(m, dict) and isinstance(m.get("name"), str):
                seen.setdefault(m["name"], None)
    return list(seen)


def series(history: Sequence[ProgressPoint], name: str) -> Series:
    """A metric's numeric values over time (``progress`` is the progress percentage); non-numbers are skipped."""
    out: list[tuple[float, float]] = []
    for p in history:
        if name == "progress":
            v = p.trainer_status.get("progressPercentage")
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.append((p.time, float(v)))
            continue
        for m in p.trainer_status.get("metrics") or []:
            if isinstance(m, dict) and m.get("name") == name and (x := number(str(m.get("value")))) is not None:
                out.append((p.time, x))
    return Series(name, out)


def _label(v: float) -> str:
    return f"{v:.4g}"


def render(s: Series, width: int = 60, height: int = 8) -> list[str]:
    """An ASCII chart: the value axis on the left, time left to right (each column the last value in its
    stretch of time), ``*`` for the values."""
    if not s.points:
        return [f"{s.name}: no numeric values"]
    values = [v for _, v in s.points]
    lo, hi = min(values), max(values)
    t0, t1 = s.points[0][0], s.points[-1][0]
    width = max(10, width)
    cols: list[float | None] = [None] * width
    for t, v in s.points:
        x = 0 if t1 <= t0 else min(width - 1, int((t - t0) / (t1 - t0) * (width - 1)))
        cols[x] = v
    grid = [[" "] * width for _ in range(height)]
    for x, col in enumerate(cols):
        if col is None:
            continue
        y = 0 if hi == lo else round((col - lo) / (hi - lo) * (height - 1))
        grid[height - 1 - y][x] = "*"
    labels = [_label(hi)] + [""] * (height - 2) + [_label(lo)] if height > 1 else [_label(hi)]
    pad = max(len(x) for x in labels)
    head = f"{s.name}  (last {_label(values[-1])}, min {_label(lo)}, max {_label(hi)}, {len(values)} points)"
    lines = [head]
    lines += [f"{lab:>{pad}} |{''.join(row)}".rstrip() for lab, row in zip(labels, grid, strict=True)]
    span = duration_text(int(t1 - t0))
    lines.append(" " * pad + " +" + "-" * width)
    lines.append(" " * (pad + 2) + "0" + f"+{span}".rjust(width - 1))
    return lines


def write_png(history: Sequence[ProgressPoint], names: list[str], path: str, title: str) -> None:
    """A plot of progress and each metric over time (matplotlib, the ``plot`` extra). Raises ImportError
    without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never a window, works without a display
    import matplotlib.pyplot as plt

    panels = [series(history, n) for n in ["progress", *names]]
    panels = [p for p in panels if p.points]
    fig, axes = plt.subplots(max(1, len(panels)), 1, figsize=(8, 2.2 * max(1, len(panels))), sharex=True,
                             squeeze=False)  # fmt: skip
    start = min((p.points[0][0] for p in panels), default=0.0)
    for ax, s in zip(axes[:, 0], panels, strict=False):
        ax.plot([(t - start) / 60 for t, _ in s.points], [v for _, v in s.points], marker=".", linewidth=1)
        ax.set_ylabel("progress %" if s.name == "progress" else s.name)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("minutes since the first report")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
