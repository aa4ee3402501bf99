"""A TrainJob's pods as steps (``node-0-1``), their states, and Events, read from the cluster's objects."""

from __future__ import annotations

from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.views import Event, StepView

LABEL_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"


def step_name(pod: dict[str, Any]) -> str:
    """``<replicated job>-<job index>-<completion index>``: the pod name minus JobSet prefix and suffix."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    rjob = labels.get(LABEL_RJOB, "?")
    job_index = labels.get(LABEL_JOB_INDEX, "0")
    completion = labels.get(c.ANNOTATION_COMPLETION_INDEX) or annotations.get(c.ANNOTATION_COMPLETION_INDEX, "0")
    return f"{rjob}-{job_index}-{completion}"


def step_view(pod: dict[str, Any]) -> StepView:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    exit_code = None
    message = status.get("message")
    for s in statuses:
        term = (s.get("state") or {}).get("terminated") or (s.get("lastState") or {}).get("terminated")
        if term:
            exit_code = term.get("exitCode")
            message = message or term.get("reason")
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and not message:
            message = waiting.get("reason")
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return StepView(
        name=step_name(pod),
        replicated_job=labels.get(LABEL_RJOB, ""),
        state=status.get("phase") or "Pending",
        restarts=restarts,
        exit_code=exit_code,
        message=message,
    )


def log_container(pod: dict[str, Any]) -> str | None:
    """The container whose logs a step shows: ``node``, else the one named like the replicated job."""
    containers = [ct.get("name") for ct in ((pod.get("spec") or {}).get("containers") or [])]
    rjob = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_RJOB)
    for wanted in (c.NODE, rjob):
        if wanted in containers:
            return wanted
    return containers[0] if containers else None


def events_for(events: list[dict[str, Any]], names: set[str]) -> list[Event]:
    """Events about the TrainJob, its JobSet and pods, oldest first."""
    out = []
    for e in events:
        if (e.get("involvedObject") or {}).get("name") not in names:
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""
        out.append(
            Event(
                time=when,
                type=e.get("type") or "",
                reason=e.get("reason") or "",
                message=e.get("message") or "",
            )
        )
    return sorted(out, key=lambda ev: ev.time)
