"""What the pages show, made from what the backend returns: plain dicts (JSON for the browser, values for the
templates). Pure: no I/O; the time is passed in where it matters."""

from __future__ import annotations

import math
from typing import Any

import yaml

from kubetrain.api import AnyRuntime, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.logtext import default_container
from kubetrain.api.views import ProgressPoint, StateView, TrainJobDetails, secret_values_hidden
from kubetrain.compiler.plugins.snapshot import DATA_KEY, snapshot_name

Key = tuple[str, str]


def trainjob_row(tj: TrainJob, st: StateView) -> dict[str, Any]:
    """One row of the TrainJobs list (the columns of ``kubetrain get trainjobs -o wide``, as data)."""
    ts = tj.status.trainer_status if tj.status is not None else None
    return {
        "namespace": tj.namespace,
        "name": tj.name,
        "runtime": tj.spec.runtime_ref.name,
        "state": st.state,
        "reason": st.reason,
        "message": st.message,
        "progress": ts.progress_percentage if ts is not None else None,
        "eta": ts.estimated_remaining_seconds if ts is not None else None,
        "reported": ts.last_updated_time if ts is not None else None,
        "nodes": tj.spec.trainer.num_nodes if tj.spec.trainer is not None else None,
        "created": tj.metadata.creation_timestamp,
        "labels": dict(tj.metadata.labels or {}),
        "suspended": bool(tj.spec.suspend),
        "finished": st.finished,
    }


def conditions(tj: TrainJob) -> list[dict[str, Any]]:
    return [
        {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason or "",
            "message": cond.message or "",
            "time": cond.last_transition_time or "",
        }
        for cond in ((tj.status.conditions if tj.status is not None else None) or [])
    ]


def details(d: TrainJobDetails) -> dict[str, Any]:
    """The parts of a TrainJob's page that change while it runs: state, conditions, steps, events, progress."""
    tj = d.trainjob
    st = d.state or StateView("Unknown")
    wire_status = tj.to_wire().get("status") or {}
    return {
        "state": {"state": st.state, "reason": st.reason, "message": st.message, "finished": st.finished},
        "conditions": conditions(tj),
        "steps": [{**s.to_json(), "reason": s.reason or "", "message": s.message or ""} for s in d.steps],
        "events": [
            {"time": e.time, "type": e.type, "reason": e.reason, "message": e.message, "object": e.object}
            for e in d.events
        ],
        "trainerStatus": wire_status.get("trainerStatus"),
        "progressSource": d.progress_source,
        "suspended": bool(tj.spec.suspend),
        "numNodes": tj.spec.trainer.num_nodes if tj.spec.trainer is not None else None,
        "failureLogs": d.failure_logs,
    }


def point(p: ProgressPoint) -> dict[str, Any]:
    """One recorded ``trainerStatus`` for the charts: time in seconds since the epoch, progress, ETA and metrics as
    ``[name, value]`` pairs (numbers where the value is one; a chart draws only those)."""
    ts = p.trainer_status
    # Pairs, not a mapping: the charts come in the order the job reports its metrics (a JSON object would be
    # sorted on its way into the page).
    metrics = [[m["name"], _number(m.get("value"))] for m in ts.get("metrics") or []
               if isinstance(m, dict) and isinstance(m.get("name"), str)]
    pct, eta = ts.get("progressPercentage"), ts.get("estimatedRemainingSeconds")
    return {
        "time": p.time,
        "progress": pct if isinstance(pct, int) and not isinstance(pct, bool) else None,
        "eta": eta if isinstance(eta, int) and not isinstance(eta, bool) else None,
        "metrics": metrics,
        "source": p.source,
    }


def _number(value: object) -> float | str | None:
    if value is None:
        return None
    try:
        x = float(str(value))
    except ValueError:
        return str(value)
    return x if math.isfinite(x) else str(value)


def to_yaml(objs: list[dict[str, Any]]) -> str:
    from kubetrain.api.yamlio import dump_all

    return dump_all([secret_values_hidden(o) for o in objs])


def jobset_of(objs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((o for o in objs if o.get("kind") == "JobSet"), None)


def snapshot_of(name: str, objs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The runtime snapshot ConfigMap's runtime, as a dict (None when there is none or it does not parse)."""
    for o in objs:
        if o.get("kind") == "ConfigMap" and (o.get("metadata") or {}).get("name") == snapshot_name(name):
            try:
                runtime = yaml.safe_load((o.get("data") or {}).get(DATA_KEY) or "")
            except yaml.YAMLError:
                return None
            return runtime if isinstance(runtime, dict) else None
    return None


def elastic_bounds(runtime: dict[str, Any] | None, tj: TrainJob) -> tuple[int, int] | None:
    """``(minNodes, maxNodes)`` when the TrainJob's runtime is elastic (``scale`` is allowed), else None."""
    if runtime is None:
        return None
    policy = (((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") or {}).get("elasticPolicy")
    if not isinstance(policy, dict):
        return None
    low = policy.get("minNodes")
    high = policy.get("maxNodes")
    n = tj.spec.trainer.num_nodes if tj.spec.trainer is not None else None
    low = low if isinstance(low, int) else 1
    high = high if isinstance(high, int) else max(low, n or low)
    return low, high


def containers(jobset: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per replicated job: its containers (init containers first) and the one its log shows by default."""
    out: dict[str, dict[str, Any]] = {}
    for rj in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        template = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
        spec = template.get("spec") or {}
        names = [str(x.get("name")) for x in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        annotations = (template.get("metadata") or {}).get("annotations")
        default = default_container(spec, annotations, rj.get("name"))
        out[str(rj.get("name"))] = {"containers": names, "default": default}
    return out


def runtime_entry(r: AnyRuntime) -> dict[str, Any]:
    labels = r.metadata.labels or {}
    ml = r.spec.ml_policy
    wire = r.to_wire()
    return {
        "kind": r.kind,
        "namespace": r.metadata.namespace if r.kind != c.KIND_CLUSTER_TRAINING_RUNTIME else "",
        "name": r.name,
        "framework": labels.get(c.LABEL_FRAMEWORK, ""),
        "policy": ",".join(ml.frameworks()) if ml else "",
        "nodes": (ml.num_nodes or 1) if ml else None,
        "deprecated": labels.get(c.LABEL_SUPPORT) == c.SUPPORT_DEPRECATED,
        "support": labels.get(c.LABEL_SUPPORT, ""),
        "yaml": to_yaml([wire]),
    }
