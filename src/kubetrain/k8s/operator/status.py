"""TrainJob status rules (reference §5, §8.2) as pure functions over wire dicts: no I/O, explicit clock.

The status is worked on as a plain dict, not a model, so fields this operator does not own (for example
``trainerStatus`` written by a progress server) pass through untouched.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import constants as c
from kubetrain.k8s.operator.queueing import held_elsewhere, hold_reason

# Beyond upstream (issue #3671): object build/apply failures also show as a condition, removed on success.
COND_RESOURCES_FAILED = "ResourcesCreationFailed"
REASON_BUILD_FAILED = "BuildFailed"
REASON_APPLY_FAILED = "ApplyFailed"
EVENT_REASON_RESOURCES_FAILED = "TrainJobResourcesCreationFailed"
MAX_MESSAGE = 950  # the length upstream truncates its Event note to


def format_time(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s: str | None) -> dt.datetime | None:
    if not s:
        return None
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def find(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((cond for cond in conditions if cond.get("type") == type_), None)


def is_true(conditions: list[dict[str, Any]], type_: str) -> bool:
    cond = find(conditions, type_)
    return cond is not None and cond.get("status") == "True"


def finished(conditions: list[dict[str, Any]]) -> bool:
    return is_true(conditions, c.COND_COMPLETE) or is_true(conditions, c.COND_FAILED)


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: dt.datetime,
    *,
    transition_time: str | None = None,
    observed_generation: int | None = None,
) -> None:
    """``meta.SetStatusCondition``: lastTransitionTime moves only on a status flip."""
    cond = find(conditions, type_)
    if cond is None:
        cond = {"type": type_, "status": status, "lastTransitionTime": transition_time or format_time(now)}
        conditions.append(cond)
    elif cond.get("status") != status:
        cond["status"] = status
        cond["lastTransitionTime"] = transition_time or format_time(now)
    cond["reason"] = reason
    cond["message"] = message
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation


def remove_condition(conditions: list[dict[str, Any]], type_: str) -> None:
    conditions[:] = [cond for cond in conditions if cond.get("type") != type_]


def apply_suspended(
    conditions: list[dict[str, Any]], suspend: bool, now: dt.datetime, *, held: tuple[str, str] | None = None
) -> None:
    """Suspended=True while suspended, then False/Resumed; absent for a never-suspended job.

    ``held``: ``(reason, message)`` when the TrainJob is not suspended but another controller (Kueue) holds its
    JobSet suspended; the TrainJob then shows as suspended with that reason, as it would if Kueue had suspended it.
    """
    if suspend:
        set_condition(conditions, c.COND_SUSPENDED, "True", c.REASON_SUSPENDED, c.MSG_SUSPENDED, now)
    elif held is not None:
        set_condition(conditions, c.COND_SUSPENDED, "True", held[0], held[1], now)
    elif is_true(conditions, c.COND_SUSPENDED):
        set_condition(conditions, c.COND_SUSPENDED, "False", c.REASON_RESUMED, c.MSG_RESUMED, now)


_JOBSET_TERMINAL = {"Completed": c.COND_COMPLETE, "Failed": c.COND_FAILED}
_COUNTS = ("ready", "succeeded", "failed", "active", "suspended")


def jobset_failed(jobset: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JobSet's ``Failed`` condition when it is True."""
    for js_cond in ((jobset or {}).get("status") or {}).get("conditions") or []:
        if js_cond.get("type") == "Failed" and js_cond.get("status") == "True":
            return dict(js_cond)
    return None


def jobset_finished(jobset: dict[str, Any] | None) -> str | None:
    """``Completed`` or ``Failed`` when the JobSet has ended (that condition True), else None. JobSet never runs a
    finished JobSet again, so its TrainJob is about to finish too, whether or not its status says so yet."""
    for js_cond in ((jobset or {}).get("status") or {}).get("conditions") or []:
        if js_cond.get("type") in _JOBSET_TERMINAL and js_cond.get("status") == "True":
            return str(js_cond["type"])
    return None


def apply_jobset(
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    jobset: dict[str, Any],
    now: dt.datetime,
    failed_message: str | None = None,
) -> None:
    """Copy JobSet Completed/Failed (True only) as Complete/Failed and replicatedJobsStatus as jobsStatus.

    ``failed_message`` (beyond upstream) replaces JobSet's message on ``Failed``: the pod failure behind it
    (``pod_failures.failed_message``). Without one, a ``Failed`` already on the TrainJob keeps its message."""
    js_status = jobset.get("status") or {}
    for js_cond in js_status.get("conditions") or []:
        ours = _JOBSET_TERMINAL.get(js_cond.get("type", ""))
        if ours is None or js_cond.get("status") != "True":
            continue
        message = js_cond.get("message") or ""
        if ours == c.COND_FAILED:
            existing = find(conditions, c.COND_FAILED)
            if failed_message is not None:
                message = failed_message
            elif existing is not None and existing.get("status") == "True" and existing.get("message"):
                message = existing["message"]
        set_condition(
            conditions,
            ours,
            "True",
            # metav1.Condition requires a non-empty reason; JobSet always sets one, but never send an invalid status.
            js_cond.get("reason") or js_cond.get("type", ""),
            message,
            now,
            transition_time=js_cond.get("lastTransitionTime"),
            observed_generation=js_cond.get("observedGeneration"),
        )
    rjobs = js_status.get("replicatedJobsStatus")
    if rjobs is not None:
        status["jobsStatus"] = [{"name": r.get("name", ""), **{k: int(r.get(k) or 0) for k in _COUNTS}} for r in rjobs]


@dataclass
class Deadline:
    exceeded: bool = False
    requeue_after: float | None = None


def check_deadline(
    trainjob: dict[str, Any], conditions: list[dict[str, Any]], now: dt.datetime, *, held: bool = False
) -> Deadline:
    """§8.2: the clock starts at creation or the last resume; no timer while suspended (also while its JobSet is
    held by a queue, as if the queue had suspended the TrainJob) or finished."""
    spec = trainjob.get("spec") or {}
    seconds = spec.get("activeDeadlineSeconds") or 0
    if not seconds or finished(conditions) or spec.get("suspend") or held:
        return Deadline()
    start = parse_time((trainjob.get("metadata") or {}).get("creationTimestamp")) or now
    suspended = find(conditions, c.COND_SUSPENDED)
    if suspended is not None and suspended.get("status") == "False":
        start = parse_time(suspended.get("lastTransitionTime")) or start
    remaining = (start + dt.timedelta(seconds=seconds) - now).total_seconds()
    if remaining < 0:
        set_condition(conditions, c.COND_FAILED, "True", c.REASON_DEADLINE, c.MSG_DEADLINE, now)
        return Deadline(exceeded=True)
    return Deadline(requeue_after=max(1.0, remaining))


@dataclass
class StatusUpdate:
    status: dict[str, Any]
    changed: bool
    deadline: Deadline = field(default_factory=Deadline)


def compute(
    trainjob: dict[str, Any],
    jobset: dict[str, Any] | None,
    now: dt.datetime,
    *,
    resources_error: tuple[str, str] | None = None,
    nodes: tuple[int, str] | None = None,
    pod_failures: list[dict[str, Any]] | None = None,
    failed_message: str | None = None,
) -> StatusUpdate:
    """The TrainJob's next status. ``resources_error`` is ``(reason, message)`` of a failed build/apply;
    ``nodes``: an elastic TrainJob's running trainer node count and their pods' selector (the scale subresource's
    status side); ``pod_failures``: the operator's record of failed pods (``status.podFailures``, beyond
    upstream), ``None`` to leave the field as it is; ``failed_message``: the ``Failed`` message naming them."""
    old = trainjob.get("status") or {}
    status = copy.deepcopy(old)
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    deadline_failed = find(conditions, c.COND_FAILED)
    keep_deadline = deadline_failed is not None and deadline_failed.get("reason") == c.REASON_DEADLINE
    held = hold_reason(jobset) if jobset is not None and held_elsewhere(jobset) else None
    apply_suspended(conditions, bool((trainjob.get("spec") or {}).get("suspend")), now, held=held)
    if jobset is not None:
        apply_jobset(status, conditions, jobset, now, failed_message)
    if keep_deadline and deadline_failed is not None:
        # A DeadlineExceeded failure survives later status syncs (§8.2).
        set_condition(conditions, c.COND_FAILED, "True", c.REASON_DEADLINE, c.MSG_DEADLINE, now)
    if resources_error is not None:
        message = resources_error[1]
        if len(message) > MAX_MESSAGE:  # an API error can embed a whole object; keep the condition readable
            message = message[:MAX_MESSAGE] + " ..."
        set_condition(conditions, COND_RESOURCES_FAILED, "True", resources_error[0], message, now)
    else:
        remove_condition(conditions, COND_RESOURCES_FAILED)
    if nodes is not None:
        status["numNodes"], status["selector"] = nodes
    deadline = check_deadline(trainjob, conditions, now, held=held is not None)
    if pod_failures is not None:
        status["podFailures"] = copy.deepcopy(pod_failures)
    if finished(conditions) and isinstance(status.get("podFailures"), list):
        # A finished TrainJob keeps its log lines in the Failed message only: the informer caches every
        # TrainJob, and thousands of finished ones must not each carry several steps' lines.
        status["podFailures"] = [
            {k: v for k, v in e.items() if k != "logTail"} if isinstance(e, dict) else e for e in status["podFailures"]
        ]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)
    return StatusUpdate(status=status, changed=status != old, deadline=deadline)
