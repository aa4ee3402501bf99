"""The HorizontalPodAutoscaler's replica calculation (autoscaling/v2), for the local autoscaler. Pure: measurements
and the clock come in as arguments.

What a cluster's HPA controller does, per sync period (15 s):

1. one proposal per metric: ``ceil(currentReplicas * current / target)``, or the current count when the ratio is
   within the tolerance (``|ratio - 1| <= 0.1``). Resource ``Utilization`` compares the pods' summed usage to their
   summed requests; ``AverageValue`` the mean usage to the target; an Object/External ``AverageValue`` target
   divides the metric by the target directly;
2. the largest proposal wins (a metric that could not be measured is skipped; none measured means no change);
3. stabilization: a scale-down takes the highest recommendation of the last ``scaleDown`` window (300 s by
   default), a scale-up the lowest of the ``scaleUp`` window (0 s), so a dip does not shed nodes at once;
4. rate limits (the default behavior): up by at most ``max(100 %, 4 pods)`` and down by at most 100 % per 15 s;
5. clamped to ``[minReplicas, maxReplicas]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.local.scheduling.resources import parse_quantity

TOLERANCE = 0.1
SYNC_PERIOD = 15.0
SCALE_DOWN_WINDOW = 300.0
SCALE_UP_WINDOW = 0.0
POLICY_PERIOD = 15.0


@dataclass(frozen=True)
class Behavior:
    """The parts of ``spec.behavior`` the local autoscaler honours, with the HPA's defaults."""

    tolerance: float = TOLERANCE
    scale_up_window: float = SCALE_UP_WINDOW
    scale_down_window: float = SCALE_DOWN_WINDOW
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    scale_down_percent: float = 100.0
    policy_period: float = POLICY_PERIOD


@dataclass(frozen=True)
class Measured:
    """What a metric measured: ``value`` (a mean per pod for Resource and Pods metrics, the metric itself for
    Object/External), or why it could not be measured."""

    value: float | None = None
    requests: float | None = None  # summed requests of the measured pods (Resource Utilization only)
    pods: int = 0
    error: str | None = None


def quantity(value: Any) -> float:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1.5``) as a float."""
    return parse_quantity(value if isinstance(value, int | float) else str(value), "metric target")


def proposal(metric: Mapping[str, Any], measured: Measured, current: int, tolerance: float) -> int | None:
    """The replica count one metric asks for; None when it has no usable measurement."""
    if measured.error is not None or measured.value is None:
        return None
    kind = metric.get("type")
    spec = metric.get(_SPEC_KEY.get(str(kind), ""), {}) or {}
    target = spec.get("target") or {}
    ttype = target.get("type")
    if kind in ("Resource", "ContainerResource") and ttype == "Utilization":
        if not measured.requests or not measured.pods:
            return None
        utilization = 100.0 * measured.value * measured.pods / measured.requests
        ratio = utilization / float(target["averageUtilization"])
        return _scaled(ratio, measured.pods, current, tolerance)
    if ttype == "AverageValue" and kind in ("Resource", "ContainerResource", "Pods"):
        ratio = measured.value / quantity(target["averageValue"])
        return _scaled(ratio, measured.pods or current, current, tolerance)
    if ttype == "AverageValue":  # Object / External: the metric spread over the replicas
        want = quantity(target["averageValue"])
        if abs(measured.value / (want * max(current, 1)) - 1.0) <= tolerance:
            return current
        return math.ceil(measured.value / want)
    if ttype == "Value":
        ratio = measured.value / quantity(target["value"])
        return _scaled(ratio, current, current, tolerance)
    return None


_SPEC_KEY = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def _scaled(ratio: float, measured_pods: int, current: int, tolerance: float) -> int:
    if abs(ratio - 1.0) <= tolerance:
        return current
    return math.ceil(ratio * measured_pods)


@dataclass
class Autoscaler:
    """One TrainJob's recommendations over time (the HPA keeps the same per HPA object)."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior = field(default_factory=Behavior)
    _recommendations: list[tuple[float, int]] = field(default_factory=list)
    _events: list[tuple[float, int]] = field(default_factory=list)  # (time, replica change) of applied scalings

    def desired(self, now: float, current: int, proposals: list[int | None]) -> int:
        """The replica count to set now, given each metric's proposal."""
        usable = [p for p in proposals if p is not None]
        if not usable:
            return current  # nothing measured: the HPA keeps the count
        raw = max(usable)
        b = self.behavior
        self._recommendations = [
            (t, r) for t, r in self._recommendations if t > now - max(b.scale_down_window, b.scale_up_window)
        ]
        up = down = raw
        for t, r in self._recommendations:
            if t > now - b.scale_up_window:
                up = min(up, r)
            if t > now - b.scale_down_window:
                down = max(down, r)
        self._recommendations.append((now, raw))
        stabilized = current
        if stabilized < up:
            stabilized = up
        if stabilized > down:
            stabilized = down
        limited = self._rate_limited(now, current, stabilized)
        return max(self.min_replicas, min(self.max_replicas, limited))

    def _rate_limited(self, now: float, current: int, want: int) -> int:
        b = self.behavior
        self._events = [(t, d) for t, d in self._events if t > now - b.policy_period]
        if want > current:
            start = current - sum(d for _, d in self._events if d > 0)
            limit = max(math.ceil(start * (1 + b.scale_up_percent / 100.0)), start + b.scale_up_pods)
            return min(want, limit)
        if want < current:
            start = current - sum(d for _, d in self._events if d < 0)
            limit = math.floor(start * (1 - b.scale_down_percent / 100.0))
            return max(want, limit)
        return want

    def applied(self, now: float, before: int, after: int) -> None:
        """Record a scaling that took place, for the rate limits."""
        if after != before:
            self._events.append((now, after - before))
