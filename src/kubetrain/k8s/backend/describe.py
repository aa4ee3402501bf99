"""``kubetrain describe trainjob`` on a cluster: steps, state with its reason, the events of every object the
TrainJob owns (TrainJob, JobSet, Jobs, PodGroup, pods), the last log lines and exit code of failed steps, and the
failures the operator recorded (``status.podFailures``), which outlive the pods."""

from __future__ import annotations

import codecs
from typing import Any

from kubetrain.api import TrainJob
from kubetrain.api import constants as c
from kubetrain.api.trainjob_state import expected_trainer_pods, trainjob_state
from kubetrain.api.views import StepView, TrainJobDetails
from kubetrain.k8s.backend.multikueue import describe_extra, managed_by_multikueue, multikueue_state
from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.pods.failures import failure_views, recorded_logs, with_failures
from kubetrain.k8s.pods.steps import (
    events_for,
    jobset_reason,
    log_container,
    newest_per_step,
    podgroup_reason,
    step_view,
)

FAILURE_LINES = 20
EVENT_KINDS = {"TrainJob", "JobSet", "Job", "PodGroup", "Pod"}


def node_problem(name: str, node: dict[str, Any] | None) -> str | None:
    """Why pods on node ``name`` cannot be trusted to run (its kubelet stopped reporting, it was deleted), from the
    Node object; None while it is Ready. A pod on such a node keeps the phase its kubelet last reported."""
    if node is None:
        return f"node {name} is gone (deleted from the cluster)"
    conds = (node.get("status") or {}).get("conditions") or []
    ready = next((x for x in conds if x.get("type") == "Ready"), None)
    if ready is not None and ready.get("status") == "True":
        return None
    if ready is None:
        return f"node {name} has not reported Ready"
    why = ready.get("message") or ready.get("reason") or ""
    since = f" since {ready['lastTransitionTime']}" if ready.get("lastTransitionTime") else ""
    return f"node {name} Ready={ready.get('status')}{since}" + (f": {why}" if why else "")


async def _nodes(client: Client, pods: list[dict[str, Any]]) -> dict[str, str | None] | None:
    """node name -> its problem (None: Ready) for the nodes ``pods`` are bound to; None when Nodes may not be read
    (a user's RBAC often allows only namespaced objects): describe then says nothing about nodes."""
    out: dict[str, str | None] = {}
    for name in sorted({str((p.get("spec") or {}).get("nodeName") or "") for p in pods} - {""}):
        try:
            node: dict[str, Any] | None = await client.get(r.NODE, name)
        except NotFound:
            node = None
        except ApiError:
            return None
        out[name] = node_problem(name, node)
    return out


def _failed(view: StepView) -> bool:
    return view.state == "Failed" or bool(view.exit_code) or view.reason in ("CrashLoopBackOff", "Error")


async def _last_lines(client: Client, pod: dict[str, Any], namespace: str, previous: bool) -> list[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    async for chunk in client.pod_log_chunks(
        pod["metadata"]["name"],
        namespace,
        container=log_container(pod),
        tail_lines=FAILURE_LINES,
        previous=previous,
        limit_bytes=64 * 1024,  # twenty lines, not twenty megabytes of one runaway line
    ):
        parts.append(decoder.decode(chunk))
    text = "".join(parts) + decoder.decode(b"", final=True)
    return text.splitlines()[-FAILURE_LINES:]


async def describe(client: Client, tj: TrainJob, raw_pods: list[dict[str, Any]]) -> TrainJobDetails:
    name, namespace = tj.name, tj.namespace
    pods = newest_per_step(raw_pods)
    views = [step_view(p) for p in pods]
    nodes = await _nodes(client, pods)
    for pod, view in zip(pods, views, strict=True):
        problem = (nodes or {}).get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if problem and view.state not in ("Succeeded", "Failed"):
            # What the pod shows is its kubelet's last word: the node is why it will not change.
            view.reason, view.message = "NodeNotReady", problem
    extra: dict[str, Any] = {}
    jobset: dict[str, Any] | None = None
    try:
        jobset = await client.get(r.JOBSET, name, namespace)
        status = jobset.get("status") or {}
        conds = [f"{x.get('type')}={x.get('status')}" for x in status.get("conditions") or []]
        suspended = "true" if (jobset.get("spec") or {}).get("suspend") else "false"
        extra["JobSet"] = f"{name} (suspend={suspended}; conditions: {', '.join(conds) or 'none'})"
        restarts = status.get("restarts")
        if restarts:
            extra["JobSet restarts"] = restarts
    except ApiError:
        extra["JobSet"] = "(none)"
    podgroup_names: set[str] = set()
    for res in (r.COSCHEDULING_PODGROUP, r.VOLCANO_PODGROUP):
        try:
            pg = await client.get(res, name, namespace)
        except ApiError:
            continue
        podgroup_names.add(name)
        phase = (pg.get("status") or {}).get("phase") or "Pending"
        extra["PodGroup"] = f"{res.group}/{name} phase={phase} minMember={(pg.get('spec') or {}).get('minMember')}"
        why = podgroup_reason(pg)
        if why:
            extra["PodGroup"] += f" ({why})"
    no_pods = (jobset_reason(jobset) if jobset else "no JobSet yet") or ""
    status = tj.to_wire().get("status")
    placement = None
    if managed_by_multikueue(tj):
        # It runs on a worker cluster: no JobSet or pods here, its state is the status Kueue copies back.
        mk, placement = await describe_extra(client, tj)
        if jobset is None:
            extra["JobSet"] = "(none here: the worker cluster's operator builds it there)"
        extra = {**mk, **extra}
        state = with_failures(multikueue_state(tj, placement), status)
    else:
        if tj.spec.managed_by not in (None, "", c.MANAGED_BY_DEFAULT):
            extra = {"Managed by": tj.spec.managed_by, **extra}
        state = with_failures(
            trainjob_state(tj, views, expected_trainer_pods=expected_trainer_pods(jobset), no_pods_reason=no_pods),
            status,
        )
    try:
        events, _ = await client.list(r.EVENT, namespace)
    except ApiError:
        events = []
    jobs = {
        ref.get("name", "")
        for p in raw_pods
        for ref in (p.get("metadata") or {}).get("ownerReferences") or []
        if ref.get("kind") == "Job"
    }
    names = {name, *podgroup_names, *jobs, *((p.get("metadata") or {}).get("name", "") for p in raw_pods)}
    kinds = EVENT_KINDS
    if placement is not None:
        # Kueue's events (quota reserved, admitted, the MultiKueue check) are on the Workload.
        names.add(placement.workload)
        kinds = EVENT_KINDS | {"Workload"}
    failure_logs: dict[str, list[str]] = {}
    for pod, view in zip(pods, views, strict=True):
        if not _failed(view):
            continue
        previous = view.state == "Running" and view.restarts > 0
        try:
            failure_logs[view.name] = await _last_lines(client, pod, namespace, previous)
        except NotFound:
            failure_logs[view.name] = ["(log gone with the pod)"]
        except ApiError as exc:
            failure_logs[view.name] = [f"(log not available: {exc.message or exc.reason})"]
    # Steps whose pods are gone (the Job controller deletes them) keep the lines the operator read.
    failed = tj.condition("Failed")
    for step, lines in recorded_logs(status, failed.message if failed and failed.status == "True" else None).items():
        live = failure_logs.get(step)
        if live is None or (len(live) == 1 and live[0].startswith("(log ")):
            failure_logs[step] = lines
    extra["Pods"] = ", ".join(sorted(p["metadata"]["name"] for p in raw_pods)) or (
        "(none here: they run on the worker cluster)" if managed_by_multikueue(tj) else "(none)"
    )
    if nodes:
        on: dict[str, list[str]] = {}
        for pod, view in zip(pods, views, strict=True):
            on.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(view.name)
        extra["Nodes"] = "; ".join(
            f"{n} ({', '.join(steps)}{', NotReady' if nodes.get(n) else ''})" for n, steps in sorted(on.items()) if n
        )
    labels = {c.LABEL_JOBSET_NAME: name}
    extra["Pod selector"] = ",".join(f"{k}={v}" for k, v in labels.items())
    return TrainJobDetails(
        trainjob=tj,
        steps=views,
        events=events_for(events, names, kinds),
        extra=extra,
        state=state,
        failure_logs=failure_logs,
        failures=failure_views(status),
    )
