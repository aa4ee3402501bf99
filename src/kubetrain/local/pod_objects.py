"""The TrainJobs' pods and events on this machine as the API server would list them (``kubetrain get pods|events``).

Nothing new is recorded for them: a pod is its plan (the name, hostname, labels and annotations the JobSet and Job
controllers give it, its address on the TrainJob's pod network: what the pod itself sees through the downward API)
plus the supervisor's row for it (state, restarts, exit code, readiness, why it waits); an event is one the
supervisor recorded on the TrainJob (``describe`` shows the same ones), so its object is the TrainJob.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from kubetrain.api import constants as C
from kubetrain.api.errors import KubetrainError
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.api.selectors import parse_fields
from kubetrain.local import paths
from kubetrain.local.logs.stream import step_view
from kubetrain.local.plan import GATEWAY, PlanError, PodPlan, build_plan, find_jobset
from kubetrain.local.scheduling.scheduler import INSUFFICIENT
from kubetrain.local.store import reaper
from kubetrain.local.store.db import PodRow, Store, TrainJobRow

KIND_POD, KIND_EVENT = "Pod", "Event"
KINDS = (KIND_POD, KIND_EVENT)
NODE_NAME = "localhost"
"""``spec.nodeName`` of every pod here: what a pod's ``fieldRef: spec.nodeName`` reads (sandbox.env)."""
COMPONENT = "kubetrain-local"
"""The ``source.component`` of the events the local supervisor records."""
_PLURALS = {KIND_POD: "pods", KIND_EVENT: "events"}


def list_objects(
    store: Store, kind: str, namespace: str | None, selector: str | None = None, field_selector: str | None = None
) -> list[dict[str, Any]]:
    """Every pod (or event) of the TrainJobs in ``namespace`` (``None``: all), filtered as the API server does."""
    sel = parse_selector(selector) if selector else None
    fields = parse_fields(field_selector, kind, _PLURALS[kind]) if field_selector else None
    rows = reaper.check_all(store, store.list_trainjobs(namespace))
    objs = [o for row in rows for o in (_pods(store, row) if kind == KIND_POD else _events(store, row))]
    if kind == KIND_EVENT:
        objs.sort(key=lambda e: e["lastTimestamp"])  # one namespace's events in the order they happened
    return [
        o
        for o in objs
        if (sel is None or sel.matches(o["metadata"].get("labels")))
        and (fields is None or fields.matches(o))
    ]


def get(store: Store, kind: str, name: str, namespace: str) -> dict[str, Any]:
    objs = list_objects(store, kind, namespace)
    for o in objs:
        if o["metadata"]["name"] == name:
            return o
    from kubetrain.api.suggest import not_found_hint

    plural = _PLURALS[kind]
    hint = not_found_hint(
        name, [o["metadata"]["name"] for o in objs], f"`kubetrain get {plural} -n {namespace}` lists them"
    )
    raise KubetrainError(f'{plural} "{name}" not found in namespace "{namespace}"{hint}')


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _addresses(row: TrainJobRow) -> dict[str, str]:
    """Each pod's address as the supervisor wrote it into the pods' /etc/hosts (an elastic job's pods keep theirs
    across a resize, so the plan alone may differ); empty before the TrainJob has started."""
    out = {}
    try:
        text = (paths.trainjob_dir(row.namespace, row.name, row.uid) / "hosts").read_text()
    except OSError:
        return {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("10."):
            out[parts[-1]] = parts[0]
    return out


def _pods(store: Store, row: TrainJobRow) -> list[dict[str, Any]]:
    pod_rows = store.list_pods(row.namespace, row.name)
    if not pod_rows:
        return []
    try:
        plans = {p.short: p for p in build_plan(find_jobset(row.objects), _addresses(row) or None).pods()}
    except PlanError:
        return []  # a TrainJob whose objects hold no runnable JobSet never had pods
    return [_pod(row, p, plans[p.name]) for p in pod_rows if p.name in plans]


def _pod(row: TrainJobRow, p: PodRow, plan: PodPlan) -> dict[str, Any]:
    meta = plan.meta(row.namespace, row.uid, row.restarts)
    created = _rfc3339(p.created) if p.created else row.trainjob.get("metadata", {}).get("creationTimestamp")
    meta["creationTimestamp"] = created
    job = f"{find_jobset(row.objects)['metadata']['name']}-{plan.rjob}-{plan.replica}"
    # The Job the pod belongs to, by name (locally a Job is the supervisor's bookkeeping, with no uid of its own).
    meta["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job, "controller": True, "blockOwnerDeletion": True}
    ]
    if p.state == "Terminating":
        meta["deletionTimestamp"] = created  # when the deletion was asked is not recorded; the pod is going
    spec = {**plan.spec, "hostname": plan.name, "subdomain": plan.subdomain, "nodeName": NODE_NAME}
    spec.setdefault("restartPolicy", "OnFailure")  # JobSet's default for a Job's pods, as the plan runs them
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    return {
        "apiVersion": "v1",
        "kind": KIND_POD,
        "metadata": meta,
        "spec": spec,
        "status": _status(p, plan, created),
    }


def pod_status_column(p: PodRow) -> str:
    """kubectl's STATUS: the reason a container waits or ended when there is one, else the phase."""
    if p.state == "Terminating":
        return "Terminating"
    view = step_view(p)
    if p.state == "Pending" and p.restarts and "back-off" in (p.message or ""):
        return "CrashLoopBackOff"
    if view.reason:
        return view.reason
    if p.state == "Succeeded":
        return "Completed"
    if p.state == "Failed" and p.exit_code:
        return "Error"
    return p.state


def _status(p: PodRow, plan: PodPlan, created: str | None) -> dict[str, Any]:
    phase = "Running" if p.state == "Terminating" else p.state
    why = pod_status_column(p)
    state: dict[str, Any] | None = None
    if p.state in ("Running", "Terminating"):
        state = {"running": {"startedAt": created}}
    elif p.state in ("Succeeded", "Failed") and p.exit_code is not None:
        state = {"terminated": {"exitCode": p.exit_code, "reason": "Completed" if p.exit_code == 0 else "Error"}}
    elif why not in ("Pending", "Failed"):
        state = {"waiting": {"reason": why}}  # CrashLoopBackOff, ContainerCreating, CreateContainerConfigError
        message = step_view(p).message
        if message:
            state["waiting"]["message"] = message
    ready = bool(p.ready and p.state == "Running")
    statuses = []
    if state is not None:  # a pod not started yet has no container statuses, as an unscheduled one
        for n, c in enumerate(plan.spec.get("containers") or []):
            statuses.append(
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "ready": ready,
                    # Locally a restart restarts the pod: counted once (kubectl adds up its containers' counts).
                    "restartCount": p.restarts if n == 0 else 0,
                    "started": "running" in state,
                    "state": state,
                }
            )
    conditions: list[dict[str, Any]] = [{"type": "PodScheduled", "status": "True"}]
    if p.state == "Pending" and (p.message or "").startswith(INSUFFICIENT):
        # Waiting for the local scheduler: what kube-scheduler says of a pod no node can take now.
        reason = p.message.split(":", 1)[0] if p.message else ""
        conditions = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": f"0/1 nodes are available: 1 {reason}. ({p.message})"}
        ]
    conditions += [{"type": t, "status": "True" if ready else "False"} for t in ("Ready", "ContainersReady")]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": GATEWAY,
        "podIP": plan.address,
        "podIPs": [{"ip": plan.address}],
        "startTime": created,
        "containerStatuses": statuses,
    }
    if p.message:
        status["message"] = p.message
    return status


def _events(store: Store, row: TrainJobRow) -> list[dict[str, Any]]:
    out = []
    for i, e in enumerate(store.list_events(row.namespace, row.name)):
        # Events are only ever appended: the n-th one of a TrainJob keeps its name.
        digest = hashlib.sha256(f"{row.uid}/{i}".encode()).hexdigest()[:16]
        out.append(
            {
                "apiVersion": "v1",
                "kind": KIND_EVENT,
                "metadata": {
                    "name": f"{row.name}.{digest}",
                    "namespace": row.namespace,
                    "creationTimestamp": e.time,
                },
                "involvedObject": {
                    "apiVersion": C.API_VERSION,
                    "kind": C.KIND_TRAINJOB,
                    "name": row.name,
                    "namespace": row.namespace,
                    "uid": row.uid,
                },
                "reason": e.reason,
                "message": e.message,
                "type": e.type,
                "count": 1,
                "firstTimestamp": e.time,
                "lastTimestamp": e.time,
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
            }
        )
    return out
