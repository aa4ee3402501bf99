"""The OptimizationJob's control rules, pure: given it and its trial TrainJobs, which trials to create next, what
each trial scored, and the status to write. Both controllers (this machine's and the operator) call :func:`plan`
and do what it says, so they cannot disagree; the clock is a parameter.

- **Objective.** A trial's score is the objective metric in its ``status.trainerStatus.metrics`` (where the
  official SDK's ``update_trainjob_status(metrics=...)`` puts it) when the trial finished: its final report. A value
  that is not a finite number counts as not reported.
- **Best.** Only trials that ended ``Complete`` with the metric can be best; failed trials and trials without the
  metric are listed with why, never best. Ties go to the earlier trial. ``status.result`` follows the best trial
  as trials finish.
- **Conditions** (the TrainJob conventions: ``metav1.Condition``, ``lastTransitionTime`` moves only when the status
  flips): ``Created`` (False with ``TrainJobsCreationFailed`` while a trial cannot be created, retried), ``Running``
  (True while trials run, False once the search ended), then ``Complete`` (``MaxTrialsReached``, or
  ``SearchSpaceExhausted`` when a grid had fewer combinations than numTrials) or ``Failed``:
  ``AllTrialsFailed`` (every trial failed), ``ObjectiveNotReported`` (trials completed but none reported the metric;
  decided after the first three completed trials, so no more trials are started for a metric nobody reports), or
  ``InvalidSpec``. A finished OptimizationJob never starts another trial.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from kubetrain.api.optimization import MAXIMIZE, OptimizationJob
from kubetrain.compiler.optimization.stopping import ANNOTATION_STOPPED, History, median_stop, policy_of
from kubetrain.compiler.optimization.suggest import trial_count
from kubetrain.compiler.optimization.trials import owned_by, trial_index, trial_name, trial_parameters

CREATED: Final = "Created"
EARLY_STOPPED: Final = "EarlyStopped"
RUNNING: Final = "Running"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
REASON_CREATED: Final = "OptimizationJobCreated"
REASON_CREATION_FAILED: Final = "TrainJobsCreationFailed"
REASON_RUNNING: Final = "TrialsRunning"
REASON_FINISHED: Final = "TrialsFinished"
REASON_MAX_TRIALS: Final = "MaxTrialsReached"
REASON_EXHAUSTED: Final = "SearchSpaceExhausted"
REASON_ALL_FAILED: Final = "AllTrialsFailed"
REASON_NO_OBJECTIVE: Final = "ObjectiveNotReported"
REASON_INVALID: Final = "InvalidSpec"
NO_OBJECTIVE_AFTER: Final = 3
"""Completed trials without the objective (and none with it) after which the search stops as Failed."""


@dataclass(frozen=True)
class Trial:
    """One trial as ``describe``, the UI and the status rules see it."""

    index: int
    name: str
    parameters: dict[str, str]
    state: str  # Pending (not created yet) | Running | Suspended | Complete | Failed | EarlyStopped
    objective: float | None = None
    """The objective metric's value in the trial's last report (for a running trial: so far)."""
    note: str = ""
    """Why the trial has no objective, or why it failed (its Failed condition's message)."""
    metrics: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state in (COMPLETE, FAILED, EARLY_STOPPED)

    @property
    def scored(self) -> bool:
        """Whether it can be best: it completed and reported the objective."""
        return self.state == COMPLETE and self.objective is not None


@dataclass
class Plan:
    create: list[int]
    """Trial indexes to create now, in order (never more than parallelTrials running at once)."""
    stop: dict[str, str]
    """Trials to stop early (name -> why): the OptimizationJob opted in (``stopping``) and they fell behind."""
    trials: list[Trial]
    """Every trial, created or not, in index order."""
    best: Trial | None
    status: dict[str, Any]
    """The OptimizationJob's whole status as it should be (conditions and result)."""
    finished: bool


def trial_of(tj: dict[str, Any], metric: str) -> Trial:
    """A trial TrainJob (as stored or listed) read as a :class:`Trial`."""
    meta = tj.get("metadata") or {}
    status = tj.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    state, note = RUNNING, ""
    for kind in (COMPLETE, FAILED):
        cond = conditions.get(kind)
        if cond is not None and cond.get("status") == "True":
            state = kind
            if kind == FAILED:
                note = ": ".join(p for p in (cond.get("reason"), (cond.get("message") or "").split("\n")[0]) if p)
    if state == RUNNING and (conditions.get("Suspended") or {}).get("status") == "True":
        state = "Suspended"
    stopped = (meta.get("annotations") or {}).get(ANNOTATION_STOPPED)
    if stopped is not None and state != FAILED:
        state, note = EARLY_STOPPED, stopped
    reported = {
        str(m.get("name")): str(m.get("value"))
        for m in ((status.get("trainerStatus") or {}).get("metrics") or [])
        if isinstance(m, dict)
    }
    objective = _number(reported.get(metric))
    if objective is None and state == COMPLETE:
        if metric in reported:
            note = f"reported {metric}={reported[metric]!r}, not a number"
        elif reported:
            note = f"did not report {metric} (reported: {', '.join(sorted(reported))})"
        else:
            note = f"did not report {metric} (no metrics in status.trainerStatus)"
    index = trial_index(tj)
    return Trial(index if index is not None else -1, meta.get("name", ""), trial_parameters(tj), state, objective,
                 note, reported)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def better(a: Trial, b: Trial, maximize: bool) -> bool:
    """Whether scored trial ``a`` beats ``b`` (ties: the earlier trial)."""
    assert a.objective is not None and b.objective is not None
    if a.objective != b.objective:
        return a.objective > b.objective if maximize else a.objective < b.objective
    return a.index < b.index


def ranked(trials: list[Trial], maximize: bool) -> list[Trial]:
    """Best first: scored trials by objective, then the rest (running, then failed or unscored) by index."""
    scored = [t for t in trials if t.scored]
    order = sorted(scored, key=lambda t: ((-t.objective if maximize else t.objective), t.index))  # type: ignore[operator]
    rest = sorted((t for t in trials if not t.scored), key=lambda t: (t.finished, t.state == "Pending", t.index))
    return order + rest


def plan(
    oj: OptimizationJob,
    trainjobs: list[dict[str, Any]],
    *,
    now: str,
    creation_error: str | None = None,
    invalid: str | None = None,
    histories: dict[str, History] | None = None,
) -> Plan:
    """What to do for ``oj`` given the TrainJobs of its namespace that may be its trials (others are ignored).

    ``now``: RFC 3339, for conditions that flip. ``creation_error``: the last attempt to create a trial failed
    (Created=False, retried). ``invalid``: the spec fails validation (the search fails, nothing is created).
    ``histories``: trial name -> its reports of the objective (``stopping.points``), for early stopping.
    """
    spec = oj.spec
    metric = spec.objective.metric
    maximize = spec.objective.direction == MAXIMIZE
    count = trial_count(spec)
    existing: dict[int, Trial] = {}
    for tj in trainjobs:
        if not owned_by(tj, oj):
            continue
        trial = trial_of(tj, metric)
        if 0 <= trial.index < count:
            existing[trial.index] = trial
    trials = [existing.get(i) or Trial(i, trial_name(oj.name, i), {}, "Pending") for i in range(count)]
    best: Trial | None = None
    for t in trials:
        if t.scored and (best is None or better(t, best, maximize)):
            best = t
    done = [t for t in trials if t.finished]
    completed = [t for t in done if t.state == COMPLETE]
    already = oj.finished
    old = {c.type: c for c in (oj.status.conditions if oj.status else None) or []}

    terminal: tuple[str, str, str] | None = None
    if invalid is not None:
        terminal = (FAILED, REASON_INVALID, invalid)
    elif len(done) == count:
        terminal = _ending(spec.trials, count, trials, best, metric)
    elif best is None and len(completed) >= min(NO_OBJECTIVE_AFTER, count):
        terminal = (FAILED, REASON_NO_OBJECTIVE, _no_objective(completed, metric, stopped=True))
    running = [t for t in trials if not t.finished and t.state != "Pending"]
    stop: dict[str, str] = {}
    policy = policy_of(oj.metadata.annotations)
    if policy is not None and histories is not None and terminal is None:
        finished_ones = [histories.get(t.name, []) for t in completed if t.scored]
        for t in running:
            why = median_stop(histories.get(t.name, []), finished_ones, maximize=maximize, policy=policy,
                              metric=metric)
            if why is not None:
                stop[t.name] = why
    create: list[int] = []
    if terminal is None and not already:
        slots = spec.parallel - len(running)
        create = [t.index for t in trials if t.state == "Pending"][: max(slots, 0)]

    conditions: list[dict[str, Any]] = []

    def put(type_: str, status: str, reason: str, message: str) -> None:
        prev = old.get(type_)
        kept = prev is not None and prev.status == status and prev.last_transition_time
        since = prev.last_transition_time if kept and prev is not None else now
        cond: dict[str, Any] = {
            "type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since
        }
        if oj.metadata.generation is not None:
            cond["observedGeneration"] = oj.metadata.generation
        conditions.append(cond)

    algorithm = spec.algorithm + (f" search, seed {spec.search_algorithm.random.seed}"
                                  if spec.search_algorithm is not None and spec.search_algorithm.random is not None
                                  and spec.search_algorithm.random.seed is not None else " search")
    if creation_error is not None:
        put(CREATED, "False", REASON_CREATION_FAILED, creation_error)
    else:
        put(CREATED, "True", REASON_CREATED, f"{count} trial{'s' if count != 1 else ''} of {algorithm}, at most "
            f"{spec.parallel} at once")
    summary = _summary(trials, best, metric)
    if already and old.get(COMPLETE, old.get(FAILED)) is not None:
        # Finished: conditions stay as they were (the result still follows trials that end late).
        kept = [c for c in (oj.status.conditions if oj.status else None) or [] if c.type != CREATED]
        conditions += [c.to_wire() for c in kept]
    elif terminal is not None:
        put(RUNNING, "False", REASON_FINISHED, _summary(trials, best, metric, final=True))
        put(terminal[0], "True", terminal[1], terminal[2])
    elif any(t.state != "Pending" for t in trials) or create:
        put(RUNNING, "True", REASON_RUNNING, summary)
    status: dict[str, Any] = {"conditions": conditions}
    if best is not None:
        status["result"] = {
            "trainJobName": best.name,
            "parameters": [{"name": n, "value": v} for n, v in best.parameters.items()],
        }
    return Plan(create, stop, trials, best, status, already or terminal is not None)


def _ending(num_trials: int, count: int, trials: list[Trial], best: Trial | None, metric: str) -> tuple[str, str, str]:
    failed = [t for t in trials if t.state == FAILED]
    if best is not None:
        reason = REASON_MAX_TRIALS if count == num_trials else REASON_EXHAUSTED
        head = (f"{count} trials finished" if count == num_trials else
                f"the grid's {count} combinations finished (numTrials {num_trials})")
        extra = f", {len(failed)} failed" if failed else ""
        return COMPLETE, reason, (f"{head}{extra}; best: {best.name} with {metric}={_fmt(best.objective)} "
                                  f"({_params(best.parameters)})")
    if len(failed) == len(trials):
        first = failed[0]
        return FAILED, REASON_ALL_FAILED, (f"all {len(trials)} trials failed; no result. First failure: {first.name}"
                                           + (f": {first.note}" if first.note else ""))
    return FAILED, REASON_NO_OBJECTIVE, _no_objective([t for t in trials if t.state == COMPLETE], metric, stopped=False)


def _no_objective(completed: list[Trial], metric: str, *, stopped: bool) -> str:
    seen = sorted({m for t in completed for m in t.metrics})
    what = f"they reported {', '.join(seen)}" if seen else "they reported no metrics in status.trainerStatus"
    tail = "; no more trials are started" if stopped else "; no result"
    return (f"no trial reported the objective metric {metric!r}: {len(completed)} completed without it ({what})"
            f"{tail}. Report it with update_trainjob_status(metrics={{{metric!r}: value}}), or set "
            f"spec.objectives[0].metric to one of the reported names")


def _summary(trials: list[Trial], best: Trial | None, metric: str, *, final: bool = False) -> str:
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state] = counts.get(t.state, 0) + 1
    order = (("Running", "running"), ("Created", "starting"), ("Suspended", "suspended"), (COMPLETE, "complete"),
             (EARLY_STOPPED, "stopped early"), (FAILED, "failed"), ("Pending", "to start"))
    text = ", ".join(f"{counts[s]} {label}" for s, label in order if counts.get(s))
    if best is not None:
        text += f"; best{'' if final else ' so far'}: {best.name} with {metric}={_fmt(best.objective)}"
    unscored = [t for t in trials if t.state == COMPLETE and t.objective is None]
    if unscored:
        text += f"; {unscored[0].name} {unscored[0].note}"
    return text


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _params(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def state_of(status: dict[str, Any] | None) -> tuple[str, str, str]:
    """``(state, reason, message)`` of an OptimizationJob for ``get`` and the UI: Complete or Failed when one is
    True, else Running, else Created (with the reason a trial cannot be created, if so)."""
    conditions = {c.get("type"): c for c in (status or {}).get("conditions") or []}
    for kind in (FAILED, COMPLETE, RUNNING):
        cond = conditions.get(kind)
        if cond is not None and cond.get("status") == "True":
            return kind, cond.get("reason") or "", cond.get("message") or ""
    created = conditions.get(CREATED)
    if created is not None:
        return CREATED, created.get("reason") or "", created.get("message") or ""
    return "", "", ""
