"""Who owns a JobSet's ``spec.suspend``: the TrainJob, or a queueing controller such as Kueue.

Upstream re-applies a suspended JobSet with ``suspend: false`` whenever its TrainJob is not suspended. A Kueue
without a TrainJob integration queues the JobSet itself (its JobSet integration): its webhook suspends the JobSet
at create, it unsuspends it on admission and suspends it again on preemption. Re-applying would start a job Kueue
has not admitted, and the two controllers would flip ``suspend`` forever.

So the operator writes on every JobSet it applies the ``suspend`` value it asked for. A JobSet that is suspended
although the operator last asked for ``suspend: false`` is held by someone else: the operator leaves its
``suspend`` alone and reports the TrainJob as suspended (queued) until the holder lets it run. A JobSet the
operator itself suspended (its TrainJob was suspended, e.g. by Kueue's TrainJob integration) is re-applied on
resume, as upstream does.

Suspending such a queued TrainJob by hand cannot just suspend its JobSet: Kueue resumes an admitted JobSet. The
operator deactivates the JobSet's Kueue Workload instead (``spec.active: false``, Kueue's own way to stop a
workload: it is evicted and its JobSet suspended) and reactivates it on resume, handing ``suspend`` back to Kueue.
With Kueue's TrainJob integration the Workload belongs to the TrainJob, the JobSet has none, and nothing of this
applies.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from kubetrain.api import constants as c
from kubetrain.k8s.client import Client, NotFound
from kubetrain.k8s.client.resources import KUEUE_WORKLOAD

log = logging.getLogger("kubetrain.operator.queueing")
LABEL_KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"

ANNOTATION_SUSPEND_APPLIED: Final = "kubetrain.dev/suspend-applied"
"""On a JobSet: the ``spec.suspend`` the operator last applied (``"true"``/``"false"``)."""

REASON_QUEUED: Final = "Queued"
REASON_HELD: Final = "JobSetSuspended"

# What the operator's JobSet cache keeps of labels and annotations (everything else is dropped to save memory).
CACHED_LABELS: Final = c.KUEUE_JOB_LABELS
CACHED_ANNOTATIONS: Final = (ANNOTATION_SUSPEND_APPLIED,)


def mark_applied(jobset: dict[str, Any], *, hand_over: bool = False) -> dict[str, Any]:
    """``jobset`` with the annotation recording the ``spec.suspend`` the operator asks for (a copy).

    ``hand_over``: apply it suspended but record ``false``, so whoever queues it (Kueue) decides when it runs.
    """
    meta = dict(jobset.get("metadata") or {})
    spec = dict(jobset.get("spec") or {})
    asked = bool(spec.get("suspend"))
    if hand_over:
        spec["suspend"], asked = True, False
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_SUSPEND_APPLIED: str(asked).lower()}
    return {**jobset, "metadata": meta, "spec": spec}


async def set_workloads_active(client: Client, jobset: dict[str, Any], active: bool) -> bool:
    """Set ``spec.active`` on the Kueue Workloads of ``jobset`` (Kueue's JobSet integration made them).

    Returns whether the JobSet has any, i.e. whether Kueue queues the JobSet itself. A cluster without Kueue's
    Workload CRD has none.
    """
    meta = jobset.get("metadata") or {}
    uid, namespace = meta.get("uid"), meta.get("namespace")
    if not uid:
        return False
    try:
        workloads, _ = await client.list(KUEUE_WORKLOAD, namespace, label_selector=f"{LABEL_KUEUE_JOB_UID}={uid}")
    except NotFound:
        return False  # no Kueue here
    for wl in workloads:
        if (wl.get("spec") or {}).get("active", True) == active:
            continue
        name = wl["metadata"]["name"]
        try:
            await client.merge_patch(KUEUE_WORKLOAD, name, namespace, {"spec": {"active": active}})
        except NotFound:
            continue  # Kueue replaced it meanwhile; the next reconcile sees the new one
        log.info(
            "Kueue Workload %s %s",
            name,
            "reactivated" if active else "deactivated",
            extra={"object": f"JobSet {namespace}/{meta.get('name')}"},
        )
    return bool(workloads)


def held_elsewhere(jobset: dict[str, Any] | None) -> bool:
    """Whether ``jobset`` is suspended although the operator last applied ``suspend: false``.

    A JobSet without the annotation (applied by an older operator) counts as the operator's own, as upstream.
    """
    if jobset is None or not (jobset.get("spec") or {}).get("suspend"):
        return False
    applied = ((jobset.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SUSPEND_APPLIED)
    return applied == "false"


KUEUE_PATCH_MANAGER: Final = "kueue.x-k8s.io/manager"
"""The ``runtimePatches`` manager of Kueue's TrainJob integration (its webhook adds the entry at create)."""


def queued_as_trainjob(trainjob: dict[str, Any]) -> bool:
    """Whether Kueue's TrainJob integration queues this TrainJob: its Workload belongs to the TrainJob, so its
    JobSet has none to look up (Kueue's JobSet integration leaves the JobSets of such TrainJobs alone)."""
    patches = (trainjob.get("spec") or {}).get("runtimePatches") or []
    return any(isinstance(p, dict) and p.get("manager") == KUEUE_PATCH_MANAGER for p in patches)


def queue_name(jobset: dict[str, Any] | None) -> str | None:
    if jobset is None:
        return None
    return ((jobset.get("metadata") or {}).get("labels") or {}).get(c.LABEL_KUEUE_QUEUE_NAME)


def hold_reason(jobset: dict[str, Any]) -> tuple[str, str]:
    """The Suspended condition's ``(reason, message)`` for a TrainJob whose JobSet is held elsewhere."""
    queue = queue_name(jobset)
    if queue:
        return (
            REASON_QUEUED,
            f'TrainJob is queued: Kueue holds its JobSet suspended until LocalQueue "{queue}" admits it',
        )
    return REASON_HELD, "TrainJob is suspended: another controller suspended its JobSet"
