"""Early stopping of trials that fall behind (kubetrain's own, opt-in; upstream's API has no field for it, so it is
an annotation on the OptimizationJob and changes none of upstream's fields).

``kubetrain.dev/early-stopping: median`` turns on the **median stopping rule** (Golovin et al., "Google Vizier",
2017, as Katib's medianstop implements it): a running trial is stopped when its best objective value so far is
worse than the median of the completed trials' running averages of the objective up to the same point. "Point" is a
report's ``progressPercentage`` when the trial reports one, else the report's ordinal (1, 2, ...). Options:

- ``kubetrain.dev/early-stopping-min-trials`` (default 3): completed trials with reports up to that point before
  any trial is judged;
- ``kubetrain.dev/early-stopping-start`` (default 10): a trial is not judged before that point.

A stopped trial is suspended (its pods stop) and annotated ``kubetrain.dev/early-stopped`` with why; it counts as
finished and is never best.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubetrain.api.errors import Result

ANNOTATION: Final = "kubetrain.dev/early-stopping"
ANNOTATION_MIN_TRIALS: Final = "kubetrain.dev/early-stopping-min-trials"
ANNOTATION_START: Final = "kubetrain.dev/early-stopping-start"
ANNOTATION_STOPPED: Final = "kubetrain.dev/early-stopped"
RULES: Final = ("median",)

History = Sequence[tuple[float, float]]
"""A trial's reports of the objective: ``(point, value)`` in the order they came."""


@dataclass(frozen=True)
class Policy:
    min_trials: int = 3
    start: float = 10.0


def policy_of(annotations: Mapping[str, str] | None) -> Policy | None:
    """The early-stopping policy an OptimizationJob asked for, or None (off, or an annotation ``check`` refuses)."""
    notes = annotations or {}
    if notes.get(ANNOTATION) not in RULES:
        return None
    try:
        return Policy(int(notes.get(ANNOTATION_MIN_TRIALS, "3")), float(notes.get(ANNOTATION_START, "10")))
    except ValueError:
        return None


def check(annotations: Mapping[str, str] | None) -> Result:
    """The annotations' values, with the metadata paths and fixes every entry point reports."""
    result = Result()
    notes = annotations or {}
    rule = notes.get(ANNOTATION)
    where = f"metadata.annotations[{ANNOTATION}]"
    if rule is not None and rule not in RULES:
        result.error(where, f"unknown early-stopping rule {rule!r}", f"use {' or '.join(RULES)}, or remove it")
    for key, kind in ((ANNOTATION_MIN_TRIALS, int), (ANNOTATION_START, float)):
        text = notes.get(key)
        if text is None:
            continue
        try:
            value = kind(text)
        except ValueError:
            value = -1
        if value < 1 if kind is int else not 0 <= value <= 100:
            result.error(f"metadata.annotations[{key}]", f"{text!r} is not a valid value",
                         "a whole number of trials >= 1" if kind is int else "a progress percentage, 0 to 100")
        elif rule is None:
            result.warn(f"metadata.annotations[{key}]", f"{key} has no effect without {ANNOTATION}",
                        f"add {ANNOTATION}: median")
    return result


def points(reports: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[float, float]]:
    """A trial's history of ``trainerStatus`` reports as ``(point, objective)`` pairs (reports without a finite
    objective are skipped)."""
    out = []
    for ordinal, report in enumerate(reports, start=1):
        values = {str(m.get("name")): str(m.get("value")) for m in report.get("metrics") or [] if isinstance(m, dict)}
        try:
            value = float(values[metric])
        except (KeyError, ValueError):
            continue
        if value != value or value in (float("inf"), float("-inf")):
            continue
        progress = report.get("progressPercentage")
        out.append((float(progress) if isinstance(progress, int | float) else float(ordinal), value))
    return out


def median_stop(trial: History, completed: Sequence[History], *, maximize: bool, policy: Policy,
                metric: str) -> str | None:
    """Why ``trial`` should stop now, or None. ``completed``: the histories of completed trials."""
    if not trial:
        return None
    point = trial[-1][0]
    if point < policy.start:
        return None
    best = (max if maximize else min)(v for p, v in trial if p <= point)
    averages = []
    for history in completed:
        upto = [v for p, v in history if p <= point]
        if upto:
            averages.append(sum(upto) / len(upto))
    if len(averages) < policy.min_trials:
        return None
    median = statistics.median(averages)
    behind = best < median if maximize else best > median
    if not behind:
        return None
    return (f"median stopping: best {metric} {best:.6g} by {point:g} is worse than the median {median:.6g} of "
            f"{len(averages)} completed trials' running averages there")
