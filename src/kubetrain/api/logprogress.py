"""Progress without instrumentation (beyond upstream): a ``trainerStatus`` derived from a job's log lines.

When a TrainJob reports nothing through the status endpoint, the local supervisor feeds its pods' output here.
Recognised:

- tqdm bars (``45%|####5     | 450/1000 [01:23<01:40,  5.41it/s, loss=0.23]``), which is also what Hugging
  Face ``Trainer`` and PyTorch Lightning's default progress bar print; the postfix ``k=v`` pairs become metrics;
- Lightning's ``Epoch 3:`` bar description (the epoch becomes a metric) and its rich bar (``Epoch 1/9 ━━━ 450/1000
  0:01:23 • 0:01:40 5.41it/s train_loss: 0.234``), which also tells the number of epochs;
- Hugging Face ``Trainer``'s logged dicts (``{'loss': 0.2347, 'learning_rate': 5e-05, 'epoch': 0.45}``);
- plain ``Epoch 3/10`` and ``step 450/1000`` lines (Keras, hand-written loops).

Bars that are not training (downloads, ``datasets`` ``Map``, validation and sanity-check bars) are ignored; of the
rest, the one with the largest total is the run's. Pure: the caller passes text and the time.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Final

from kubetrain.api.progress import INT32_MAX, MAX_METRIC_TEXT

MAX_METRICS: Final = 32
"""Metric names kept from logs (the first ones seen win): a chatty postfix must not grow the status forever."""
MAX_LINE: Final = 4096
"""Longer lines are not progress lines; skipping them bounds the work per byte of log."""

_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TQDM = re.compile(
    r"(?:(?P<desc>[^|\r\n]*?):\s*)?(?P<pct>\d{1,3})%\|[^|]*\|\s*"
    r"(?P<n>\d+(?:\.\d+)?)(?P<nu>[kMGTP]?)/(?P<total>\d+(?:\.\d+)?)(?P<tu>[kMGTP]?)\s*"
    r"\[(?P<elapsed>[^<\]]*)<(?P<remaining>[^,\]]*)(?:,\s*(?P<rate>[^,\]]*))?(?P<postfix>[^\]]*)\]"
)
_RICH = re.compile(
    r"Epoch\s+(?P<epoch>\d+)/(?P<last>\d+)\s+[━╸╺╾─\s]*?(?P<n>\d+)/(?P<total>\d+)\s+"
    r"(?P<elapsed>[\d:]+)\s+•\s+(?P<remaining>[\d:]+|-:--:--)(?P<rest>.*)$"
)
_EPOCH_LINE = re.compile(r"^\s*Epoch\s+(?P<epoch>\d+)\s*/\s*(?P<total>\d+)\s*$")
_STEP = re.compile(r"\b(?:global[_ ])?(?:step|iter(?:ation)?)s?\s*[:\[]?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)", re.I)
_DESC_EPOCH = re.compile(r"\bEpoch\s+(?P<epoch>\d+)\b")
_PAIR = re.compile(r"(?P<k>[A-Za-z_][\w./-]{0,63})\s*[=:]\s*(?P<v>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_NOT_TRAINING = re.compile(
    r"download|fetch|map|filter|load|sav|generat|token|shard|upload|extract|valid|test|sanity|predict|eval|"
    r"resolv|build|prepar|process|convert|cache|checkpoint|writ",
    re.I,
)
_BYTES = re.compile(r"[kMGT]?i?B/s")
_SKIP_METRICS = {"v_num"}


def _last_state(line: str) -> str:
    """What a terminal shows of a line redrawn with carriage returns (``collapse_cr`` without splitting it all)."""
    end = len(line.rstrip("\r"))
    start = line.rfind("\r", 0, end) + 1
    return line[start:end]


def _seconds(text: str) -> int | None:
    """``01:40``, ``1:02:03``, ``2d 3:04:05`` (tqdm) or ``0:01:40`` (rich); None for ``?`` and the like."""
    text = text.strip()
    days = 0
    if "d " in text:
        head, _, text = text.partition("d ")
        if not head.strip().isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    total = 0
    for p in parts:
        total = total * 60 + int(p)
    return days * 86400 + total


def _number(value: str, unit: str) -> float:
    return float(value) * _SCALE.get(unit, 1.0)


@dataclass
class _Bar:
    fraction: float
    remaining: int | None
    total: float
    seen: float
    elapsed: int | None = None


class LogProgress:
    """Feeds on log text; ``trainer_status`` says what it makes of it so far (None: nothing recognised)."""

    def __init__(self) -> None:
        self._bars: dict[str, _Bar] = {}
        self._metrics: dict[str, str] = {}
        self._epoch: tuple[int, int] | None = None  # (epochs done, epochs in total)
        self._step: tuple[float, float] | None = None  # (fraction, time seen)
        self._first: tuple[float, float] | None = None  # (fraction, time) of the first progress seen
        self._last: tuple[float, float] | None = None
        self._changed = False

    # -- input -------------------------------------------------------------------------------------------------
    def feed(self, text: str, now: float) -> bool:
        """Take complete lines of log text (carriage-return rewrites included); True when something new was
        recognised."""
        self._changed = False
        for raw in text.split("\n"):
            # A bar redrawn with \r: only its last state counts (found from the end: redraws cost nothing).
            line = _last_state(raw) if "\r" in raw else raw
            if len(line) <= MAX_LINE and (line := line.strip()):
                self._line(line, now)
        return self._changed

    def _line(self, line: str, now: float) -> None:
        if line.startswith("{") and line.endswith("}"):
            self._dict_line(line)
            return
        if "Epoch" in line and "•" in line and (m := _RICH.search(line)) is not None:
            epoch, last = int(m["epoch"]), int(m["last"])
            total = float(m["total"])
            if total > 0:
                self._epoch = (epoch, last + 1)
                self._bar(
                    f"rich epoch {last}", float(m["n"]) / total, _seconds(m["remaining"]), total, now,
                    _seconds(m["elapsed"]),
                )
                self._metric("epoch", str(epoch))
                self._pairs(m["rest"].replace(": ", "="))
            return
        if "%|" in line and (m := _TQDM.search(line)) is not None:
            self._tqdm(m, now)
            return
        if (m := _EPOCH_LINE.match(line)) is not None:
            epoch, total = int(m["epoch"]), int(m["total"])
            if 0 < epoch <= total:
                self._epoch = (epoch - 1, total)  # Keras prints the epoch it starts, counting from 1
                self._bars.clear()  # a new epoch: the previous epoch's bar is done
                self._metric("epoch", str(epoch))
                self._progress(now)
            return
        if (m := _STEP.search(line)) is not None:
            n, total = int(m["n"]), int(m["total"])
            if 0 <= n <= total and total > 0:
                self._step = (n / total, now)
                self._pairs(line[m.end() :])
                self._progress(now)

    def _tqdm(self, m: re.Match[str], now: float) -> None:
        desc = (m["desc"] or "").strip()
        if _BYTES.search(m["rate"] or "") or (desc and _NOT_TRAINING.search(desc) and not _DESC_EPOCH.search(desc)):
            return
        total = _number(m["total"], m["tu"])
        if total <= 0:
            return
        fraction = min(1.0, _number(m["n"], m["nu"]) / total)
        if (e := _DESC_EPOCH.search(desc)) is not None:
            self._metric("epoch", e["epoch"])
        self._bar(re.sub(r"\d+", "#", desc), fraction, _seconds(m["remaining"]), total, now, _seconds(m["elapsed"]))
        postfix = (m["postfix"] or "").lstrip(", ")
        self._pairs(postfix)

    def _dict_line(self, line: str) -> None:
        try:
            value: Any = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return
        if not isinstance(value, dict):
            return
        for k, v in value.items():
            if isinstance(k, str) and isinstance(v, int | float | str) and not isinstance(v, bool):
                self._metric(k, v if isinstance(v, str) else f"{v:g}" if isinstance(v, float) else str(v))

    def _pairs(self, text: str) -> None:
        for p in _PAIR.finditer(text):
            self._metric(p["k"], p["v"])

    def _metric(self, name: str, value: str) -> None:
        if name in _SKIP_METRICS or not value or len(name) > MAX_METRIC_TEXT:
            return
        value = value[:MAX_METRIC_TEXT]
        if name not in self._metrics and len(self._metrics) >= MAX_METRICS:
            return
        if self._metrics.get(name) != value:
            self._metrics[name] = value
            self._changed = True

    def _bar(
        self, key: str, fraction: float, remaining: int | None, total: float, now: float, elapsed: int | None
    ) -> None:
        old = self._bars.get(key)
        if old is not None and (old.fraction, old.remaining) == (fraction, remaining):
            return
        self._bars[key] = _Bar(fraction, remaining, total, now, elapsed)
        self._progress(now)

    def _progress(self, now: float) -> None:
        fraction = self._fraction()
        if fraction is None:
            return
        if self._first is None or fraction < self._first[0]:
            self._first = (fraction, now)  # a new run of the loop (a restart): the rate starts again
        self._last = (fraction, now)
        self._changed = True

    # -- output ------------------------------------------------------------------------------------------------
    def _main_bar(self) -> _Bar | None:
        # The largest total is the run's bar (HF's one bar over every step; Lightning's epoch bar).
        return max(self._bars.values(), key=lambda b: (b.total, b.seen), default=None)

    def _fraction(self) -> float | None:
        bar = self._main_bar()
        if self._epoch is not None:
            done, epochs = self._epoch
            within = bar.fraction if bar is not None else 0.0
            return min(1.0, (done + within) / epochs)
        if bar is not None:
            return bar.fraction
        if self._step is not None:
            return self._step[0]
        return None

    def _eta(self) -> int | None:
        bar = self._main_bar()
        if bar is not None and bar.remaining is not None:
            if self._epoch is None:
                return min(bar.remaining, INT32_MAX)
            if bar.elapsed is not None:
                # This epoch's rest, then every epoch still to come at this epoch's pace.
                done, epochs = self._epoch
                return min(INT32_MAX, bar.remaining + max(0, epochs - done - 1) * (bar.elapsed + bar.remaining))
        if self._first is None or self._last is None:
            return None
        (f0, t0), (f1, t1) = self._first, self._last
        if f1 >= 1.0:
            return 0
        if f1 <= f0 or t1 <= t0:
            return None
        return min(INT32_MAX, round((t1 - t0) / (f1 - f0) * (1.0 - f1)))

    def trainer_status(self, now: dt.datetime) -> dict[str, Any] | None:
        """A ``trainerStatus`` in the API's shape, or None when the logs showed nothing recognisable."""
        fraction = self._fraction()
        if fraction is None and not self._metrics:
            return None
        out: dict[str, Any] = {"lastUpdatedTime": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if fraction is not None:
            out["progressPercentage"] = max(0, min(100, int(fraction * 100)))
            eta = self._eta()
            if eta is not None:
                out["estimatedRemainingSeconds"] = eta
        if self._metrics:
            out["metrics"] = [{"name": k, "value": v} for k, v in self._metrics.items()]
        return out
