"""Where a TrainJob that MultiKueue manages runs, as ``kubetrain get`` and ``describe`` tell it on the manager cluster.

A TrainJob with ``spec.managedBy: kueue.x-k8s.io/multikueue`` is not run by the cluster it was created on: Kueue's
MultiKueue admission check copies it to a worker cluster, whose own operator builds the JobSet and pods there, and
Kueue copies the worker's TrainJob status back (conditions, jobsStatus). So the manager has no JobSet and no pods
for it, and the pod-based state (``kubetrain.api.trainjob_state``) would call a job that trains on the worker
"Created, no JobSet yet". What the manager does have is Kueue's Workload for the TrainJob: ``status.clusterName``
names the worker it was admitted on, ``status.nominatedClusterNames`` the workers it is offered to meanwhile, and
the MultiKueue admission check's state and message say how the dispatch goes.

Workloads are read as ``kueue.x-k8s.io/v1beta2`` (the storage version since Kueue v0.15) and, where that version is
not served, ``v1beta1``; the fields used here are the same in both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.api import constants as c
from kubetrain.api.trainjob_state import TRAINER_JOBS, conditions_state
from kubetrain.api.views import StateView
from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r

if TYPE_CHECKING:
    from kubetrain.api import TrainJob

WORKLOAD_VERSIONS = (Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"), r.KUEUE_WORKLOAD)
LABEL_JOB_UID = "kueue.x-k8s.io/job-uid"


def managed_by_multikueue(tj: TrainJob) -> bool:
    return tj.spec.managed_by == c.MANAGED_BY_MULTIKUEUE


@dataclass(frozen=True)
class Placement:
    """What the manager's Kueue Workload says about a TrainJob's dispatch."""

    workload: str
    queue: str = ""
    cluster: str = ""
    """The worker it was admitted on (``status.clusterName``); empty until then."""
    nominated: tuple[str, ...] = ()
    """Workers it is offered to while none has admitted it (``status.nominatedClusterNames``)."""
    checks: tuple[tuple[str, str, str], ...] = ()
    """``(name, state, message)`` of each admission check."""
    conditions: dict[str, str] = field(default_factory=dict)
    """Workload condition type -> status (``QuotaReserved``, ``Admitted``, ``Finished``, ``Evicted``)."""

    def checks_text(self) -> str:
        return "; ".join(f"{n}: {s}" + (f" ({m})" if m else "") for n, s, m in self.checks) or "(none)"

    def workload_text(self) -> str:
        conds = ", ".join(f"{t}={s}" for t, s in sorted(self.conditions.items()))
        queue = f"queue {self.queue}; " if self.queue else ""
        return f"{self.workload} ({queue}{conds or 'no conditions yet'})"

    def where(self) -> str:
        if self.cluster:
            return f'worker cluster "{self.cluster}"'
        if self.nominated:
            return "not admitted yet (offered to " + ", ".join(f'"{n}"' for n in self.nominated) + ")"
        return "not dispatched yet"


def _owned_by(wl: dict[str, Any], uid: str) -> bool:
    meta = wl.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_JOB_UID) == uid:
        return True
    # Kueue leaves the label off a UID that is no valid label value; the controller reference is always there.
    refs = meta.get("ownerReferences") or []
    return any(ref.get("uid") == uid and ref.get("kind") == c.KIND_TRAINJOB for ref in refs)


def placement_of(workloads: list[dict[str, Any]], tj: TrainJob) -> Placement | None:
    """The placement from the TrainJob's Workload among ``workloads`` (the newest one, should there be two)."""
    uid = tj.metadata.uid
    mine = [w for w in workloads if uid and _owned_by(w, uid)]
    if not mine:
        return None
    wl = max(mine, key=lambda w: str((w.get("metadata") or {}).get("creationTimestamp") or ""))
    status = wl.get("status") or {}
    return Placement(
        workload=wl["metadata"]["name"],
        queue=str((wl.get("spec") or {}).get("queueName") or ""),
        cluster=str(status.get("clusterName") or ""),
        nominated=tuple(str(n) for n in status.get("nominatedClusterNames") or []),
        checks=tuple(
            (str(a.get("name", "")), str(a.get("state", "")), str(a.get("message") or ""))
            for a in status.get("admissionChecks") or []
        ),
        conditions={str(x.get("type")): str(x.get("status")) for x in status.get("conditions") or []},
    )


async def list_workloads(client: Client, namespace: str | None) -> list[dict[str, Any]] | None:
    """Kueue Workloads in ``namespace`` (``None``: all); ``None`` when the cluster has no Kueue or we may not
    read them (the state then says less, it does not fail)."""
    for res in WORKLOAD_VERSIONS:
        try:
            items, _ = await client.list(res, namespace)
            return items
        except NotFound:
            continue  # this version is not served (or no Kueue at all): try the next one
        except ApiError:
            return None
    return None


def multikueue_state(tj: TrainJob, placement: Placement | None) -> StateView:
    """The state of a TrainJob that runs on a worker cluster, from the status Kueue copies back and its Workload
    (``placement``, ``None`` when there is none or it could not be read)."""
    decided = conditions_state(tj)
    if decided is not None:
        # Finished (or suspended) where it ran: the worker still says where that was.
        return dataclasses.replace(decided, cluster=placement.cluster) if placement is not None else decided
    where = placement.where() if placement is not None else "no Kueue Workload yet"
    jobs = (tj.status.jobs_status if tj.status else None) or []
    trainer = [j for j in jobs if j.name in TRAINER_JOBS]
    cluster = placement.cluster if placement is not None else ""
    if trainer:
        # jobsStatus counts the worker JobSet's Jobs, not pods; a Job is ready once all its pods are.
        counts = ", ".join(f"{j.name}: {j.ready}/{j.active + j.succeeded} Jobs ready" for j in trainer)
        if all(j.active + j.succeeded > 0 and j.ready >= j.active for j in trainer):
            return StateView("Running", "", f"on {where} ({counts})", cluster)
        return StateView("Pending", "WaitingForPods", f"on {where} ({counts})", cluster)
    if cluster:
        return StateView("Created", "Dispatched", f"on {where}, no status from it yet", cluster)
    if tj.spec.suspend:
        # Kueue's webhook suspends it at create; it stays so until the manager's ClusterQueue admits it.
        queue = (tj.metadata.labels or {}).get(c.LABEL_KUEUE_QUEUE_NAME, "")
        checks = f"; admission checks: {placement.checks_text()}" if placement is not None and placement.checks else ""
        return StateView("Suspended", "Queued", f'LocalQueue "{queue}", MultiKueue: {where}{checks}')
    return StateView("Created", "Dispatching", f"MultiKueue: {where}")


async def describe_extra(client: Client, tj: TrainJob) -> tuple[dict[str, Any], Placement | None]:
    """``describe``'s lines for a MultiKueue TrainJob: who manages it, the worker, the Workload, the checks."""
    workloads = await list_workloads(client, tj.namespace)
    placement = placement_of(workloads, tj) if workloads is not None else None
    extra: dict[str, Any] = {"Managed by": f"{c.MANAGED_BY_MULTIKUEUE} (Kueue runs it on a worker cluster)"}
    if workloads is None:
        extra["Worker cluster"] = "(unknown: no Kueue Workloads readable here)"
        return extra, None
    extra["Worker cluster"] = placement.cluster if placement and placement.cluster else (
        placement.where() if placement else "(not dispatched yet: no Kueue Workload)"
    )
    if placement is not None:
        extra["Kueue workload"] = placement.workload_text()
        extra["Admission checks"] = placement.checks_text()
    return extra, placement
