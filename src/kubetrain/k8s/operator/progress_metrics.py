"""Per-TrainJob progress and metric gauges for Prometheus, with a bounded number of series.

Fed from the TrainJob informer (every ``status.trainerStatus`` the leader sees, whoever wrote it), so the
numbers survive an operator restart and need no status endpoint on this replica:

- ``kubetrain_trainjob_progress_percent{namespace,trainjob}``
- ``kubetrain_trainjob_estimated_remaining_seconds{namespace,trainjob}``
- ``kubetrain_trainjob_metric{namespace,trainjob,metric}`` for each *numeric* metric value
- ``kubetrain_trainjob_progress_last_update_timestamp_seconds{namespace,trainjob}``
- ``kubetrain_trainjob_metric_series_dropped_total``: updates refused by the caps below

Cardinality is capped: at most ``max_trainjobs`` TrainJobs are tracked (others are counted as dropped until
one is deleted) and ``max_metrics`` metric names per TrainJob (the first names it reported). A TrainJob's series
disappear when it is deleted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

Key = tuple[str, str]


@dataclass
class _Job:
    percent: float | None = None
    eta: float | None = None
    updated: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def _number(value: object) -> float | None:
    try:
        x = float(str(value))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


class ProgressMetrics(Collector):
    def __init__(self, *, max_trainjobs: int = 1000, max_metrics: int = 16) -> None:
        self.max_trainjobs, self.max_metrics = max_trainjobs, max_metrics
        self._jobs: dict[Key, _Job] = {}
        self.dropped = 0

    def update(self, key: Key, trainer_status: dict[str, Any] | None) -> None:
        if not isinstance(trainer_status, dict):
            return
        job = self._jobs.get(key)
        if job is None:
            if len(self._jobs) >= self.max_trainjobs:
                self.dropped += 1
                return
            job = self._jobs[key] = _Job()
        pct, eta = trainer_status.get("progressPercentage"), trainer_status.get("estimatedRemainingSeconds")
        job.percent = float(pct) if isinstance(pct, int | float) and not isinstance(pct, bool) else None
        job.eta = float(eta) if isinstance(eta, int | float) and not isinstance(eta, bool) else None
        try:
            stamp = str(trainer_status.get("lastUpdatedTime") or "").replace("Z", "+00:00")
            job.updated = dt.datetime.fromisoformat(stamp).timestamp() if stamp else None
        except ValueError:
            job.updated = None
        for m in trainer_status.get("metrics") or []:
            if not isinstance(m, dict):
                continue
            name, value = str(m.get("name") or ""), _number(m.get("value"))
            if not name or value is None:
                continue
            if name not in job.metrics and len(job.metrics) >= self.max_metrics:
                self.dropped += 1
                continue
            job.metrics[name] = value

    def forget(self, key: Key) -> None:
        self._jobs.pop(key, None)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        labels = ["namespace", "trainjob"]
        pct = GaugeMetricFamily(
            "kubetrain_trainjob_progress_percent", "Last reported progressPercentage of a TrainJob.", labels=labels
        )
        eta = GaugeMetricFamily(
            "kubetrain_trainjob_estimated_remaining_seconds",
            "Last reported estimatedRemainingSeconds of a TrainJob.",
            labels=labels,
        )
        upd = GaugeMetricFamily(
            "kubetrain_trainjob_progress_last_update_timestamp_seconds",
            "lastUpdatedTime of a TrainJob's last progress report.",
            labels=labels,
        )
        met = GaugeMetricFamily(
            "kubetrain_trainjob_metric",
            "Last reported numeric value of a TrainJob metric (status.trainerStatus.metrics).",
            labels=[*labels, "metric"],
        )
        for (ns, name), job in list(self._jobs.items()):
            if job.percent is not None:
                pct.add_metric([ns, name], job.percent)
            if job.eta is not None:
                eta.add_metric([ns, name], job.eta)
            if job.updated is not None:
                upd.add_metric([ns, name], job.updated)
            for metric, value in job.metrics.items():
                met.add_metric([ns, name, metric], value)
        dropped = CounterMetricFamily(
            "kubetrain_trainjob_metric_series_dropped",
            "Progress updates of TrainJobs or metric names not exported because a cardinality cap was reached.",
        )
        dropped.add_metric([], float(self.dropped))
        yield from (pct, eta, upd, met, dropped)
