"""A TrainJob's pods as steps (``node-0-1``), their states and why they wait, and Events, read from the cluster's
objects (pure functions over the API's dicts)."""

from __future__ import annotations

from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.logtext import default_container
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


def _terminated(s: dict[str, Any]) -> dict[str, Any] | None:
    term = (s.get("state") or {}).get("terminated") or (s.get("lastState") or {}).get("terminated")
    return dict(term) if term else None


def _waiting_reason(pod: dict[str, Any]) -> tuple[str | None, str | None]:
    """The first thing a pod waits on, in the words of the scheduler or the kubelet."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    if spec.get("schedulingGates"):
        gates = ", ".join(g.get("name", "") for g in spec["schedulingGates"])
        return "SchedulingGated", f"scheduling gates: {gates}"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond.get("reason") or "Unschedulable", cond.get("message")
    inits = status.get("initContainerStatuses") or []
    for i, s in enumerate(inits):
        state = s.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode") == 0:
            continue
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            return waiting.get("reason"), f"init container {s.get('name')}: {waiting.get('message') or ''}".rstrip(": ")
        return "PodInitializing", f"init container {s.get('name')} ({i + 1}/{len(inits)}) " + (
            "running" if "running" in state else "not started"
        )
    for s in status.get("containerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting:
            return waiting.get("reason") or "ContainerCreating", waiting.get("message")
    if status.get("reason"):
        return status.get("reason"), status.get("message")
    return None, None


def step_view(pod: dict[str, Any]) -> StepView:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    phase = status.get("phase") or "Pending"
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    for s in statuses:
        term = _terminated(s)
        if term is None:
            continue
        code = term.get("exitCode")
        if exit_code is None or (code and not exit_code):  # the first non-zero exit tells most
            exit_code = code
            if (s.get("state") or {}).get("terminated"):
                reason, message = term.get("reason"), term.get("message")
    if phase in ("Pending", "Running"):
        w_reason, w_message = _waiting_reason(pod)
        if w_reason:
            reason, message = w_reason, w_message
    if phase == "Failed" and status.get("reason"):
        reason, message = status.get("reason"), status.get("message")
    state = "Terminating" if meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed") else phase
    return StepView(
        name=step_name(pod),
        replicated_job=(meta.get("labels") or {}).get(LABEL_RJOB, ""),
        state=state,
        restarts=restarts,
        exit_code=exit_code,
        message=message,
        reason=reason,
    )


def log_container(pod: dict[str, Any]) -> str | None:
    """The container whose logs a step shows: the ``kubectl.kubernetes.io/default-container`` annotation's, else
    ``node``, else the one named like the replicated job, else the first (the same rule as locally)."""
    meta = pod.get("metadata") or {}
    return default_container(pod.get("spec") or {}, meta.get("annotations"), (meta.get("labels") or {}).get(LABEL_RJOB))


def container_names(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [ct.get("name", "") for ct in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


def container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    """The status of ``container`` (an init container or a container) in ``pod``; empty while it has none."""
    status = pod.get("status") or {}
    for s in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if s.get("name") == container:
            return dict(s)
    return {}


def container_started(pod: dict[str, Any], container: str) -> tuple[bool, int]:
    """Whether ``container`` has (or had) a process, so its log can be read, and its restart count."""
    s = container_status(pod, container)
    if state := s.get("state"):
        started = bool(state.get("running") or state.get("terminated") or (s.get("lastState") or {}).get("terminated"))
        return started, int(s.get("restartCount") or 0)
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"), 0


def pod_finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def podgroup_reason(pg: dict[str, Any]) -> str | None:
    """Why a PodGroup holds its pods back (scheduler-plugins or Volcano), or ``None`` once it is scheduled."""
    status = pg.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase in ("Scheduled", "Running", "Succeeded", "Finished", "Inqueue"):
        return None
    name = (pg.get("metadata") or {}).get("name")
    min_member = (pg.get("spec") or {}).get("minMember")
    conds = [x for x in status.get("conditions") or [] if x.get("message")]
    detail = f": {conds[-1]['message']}" if conds else ""
    return f"PodGroup {name} {phase} (minMember {min_member}){detail}"


def jobset_reason(js: dict[str, Any]) -> str | None:
    """Why a JobSet has no pods (suspended, a failure, no Jobs yet)."""
    spec = js.get("spec") or {}
    if spec.get("suspend"):
        return f"JobSet {js['metadata']['name']} is suspended"
    for cond in (js.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Failed", "Completed"):
            return f"JobSet {cond['type']}: {cond.get('message') or cond.get('reason') or ''}".rstrip(": ")
    return None


def events_for(events: list[dict[str, Any]], names: set[str], kinds: set[str] | None = None) -> list[Event]:
    """Events about the named objects (TrainJob, JobSet, Jobs, PodGroup, pods), oldest first."""
    out = []
    for e in events:
        obj = e.get("involvedObject") or {}
        if obj.get("name") not in names or (kinds is not None and obj.get("kind") not in kinds):
            continue
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""
        count = int(e.get("count") or 1)
        message = e.get("message") or ""
        out.append(
            Event(
                time=when,
                type=e.get("type") or "",
                reason=e.get("reason") or "",
                message=f"{message} (x{count})" if count > 1 else message,
                object=f"{obj.get('kind', '')}/{obj.get('name', '')}",
            )
        )
    return sorted(out, key=lambda ev: ev.time)


def newest_per_step(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One pod per step (a JobSet restart leaves the old pod terminating beside the new one)."""
    best: dict[str, dict[str, Any]] = {}
    for p in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        best[step_name(p)] = p
    return [best[k] for k in sorted(best)]


def matches_step(step: str, wanted: str | None) -> bool:
    return wanted is None or step == wanted or step.startswith(wanted + "-")
