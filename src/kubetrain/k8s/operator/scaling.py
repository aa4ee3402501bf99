"""A new node count of an elastic TrainJob (``kubectl scale``, its HPA) reaching the running JobSet.

JobSet freezes ``spec.replicatedJobs`` of a JobSet once created (its webhook), except that with its
``ElasticJobSet`` feature gate (alpha, off by default) an Indexed Job's ``parallelism`` and ``completions`` may
change together while the JobSet is not finished; the JobSet controller then resizes the Job, and Kubernetes'
elastic Indexed Jobs add or remove the pods at the top indexes. So:

1. **in place**: PUT the live JobSet with the trainer job's parallelism = completions = the new count;
2. **re-create** when JobSet refuses that (400/403/422 from its webhook): the trainer pods' failures and the
   JobSet's restarts so far are added to ``status.scaling`` first (so an operator restart cannot lose them), then
   the JobSet is deleted (foreground: its Jobs and pods go first) and the next reconcile creates it with the new
   count and what is left of the restart budget (``with_budget``): the trainer Job's ``backoffLimit`` (from
   ``elasticPolicy.maxRestarts``) and the JobSet's ``failurePolicy.maxRestarts`` minus what was used.

A JobSet's use of the budget is counted exactly once, and only what it used before the scale:

- pods that fail *because* of the deletion (the kubelet marks a deleted pod ``Failed`` when its container exits
  non-zero, and torchrun exits 1 on SIGTERM) are not failures (``pod_failures.failed_by_deletion``);
- a JobSet already being deleted is not scaled again (the cache may not show the ``deletionTimestamp`` yet when
  the status write wakes the next reconcile);
- each JobSet is annotated with the number of re-creations it was created at (``ANNOTATION_RECREATION``): once
  ``status.scaling.recreations`` has moved past it, its use is already in the status, so a re-creation retried
  after a failed delete, or after an operator restart between the status write and the delete, deletes it
  without counting it again.

The TrainJob's status (conditions, jobsStatus) is kept throughout; only its pods restart on a re-creation (torch
elastic agents rejoin the rendezvous, training resumes from the job's checkpoints).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from kubetrain.api import elastic
from kubetrain.k8s.client import ApiError, Client, Conflict
from kubetrain.k8s.client.resources import JOBSET, POD, TRAINJOB
from kubetrain.k8s.operator.events import EventRecorder
from kubetrain.k8s.operator.informer import Informer
from kubetrain.k8s.operator.status import jobset_finished
from kubetrain.k8s.pods import failures as pod_failures

log = logging.getLogger("kubetrain.operator.scaling")
Obj = dict[str, Any]
REFUSED = (400, 403, 422)  # what a validating webhook's denial (or an Invalid) comes back as
KUBERNETES_BACKOFF_LIMIT = 6  # a Job's default backoffLimit
ANNOTATION_RECREATION = "kubetrain.dev/recreation"
"""On a re-created JobSet: ``status.scaling.recreations`` when it was created (none: the first JobSet, 0)."""


class RequeueNow(Exception):
    """The cache was stale (409): reconcile again with fresh objects."""


def scaling_status(trainjob: Obj) -> Obj:
    return dict(((trainjob.get("status") or {}).get("scaling")) or {})


def recreation_of(jobset: Obj) -> int:
    """The re-creation a JobSet was created at (0: the TrainJob's first JobSet)."""
    value = ((jobset.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RECREATION)
    try:
        return int(value or 0)
    except ValueError:
        return 0


def with_budget(jobset: Obj, scaling: Obj) -> Obj:
    """The compiled JobSet with the restart budget already used by the TrainJob's earlier JobSets taken off, and
    the re-creation it is created at."""
    failures, restarts = int(scaling.get("nodeFailures") or 0), int(scaling.get("jobSetRestarts") or 0)
    recreations = int(scaling.get("recreations") or 0)
    if not failures and not restarts and not recreations:
        return jobset
    out = copy.deepcopy(jobset)
    if recreations:
        out.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_RECREATION] = str(recreations)
    rj = elastic.trainer_replicated_job(out)
    if rj is not None and failures:
        for item in (out.get("spec") or {}).get("replicatedJobs") or []:
            if item.get("name") == rj["name"]:
                job = item.setdefault("template", {}).setdefault("spec", {})
                job["backoffLimit"] = max(0, int(job.get("backoffLimit", KUBERNETES_BACKOFF_LIMIT)) - failures)
    policy = (out.get("spec") or {}).get("failurePolicy")
    if isinstance(policy, dict) and policy.get("maxRestarts") is not None and restarts:
        policy["maxRestarts"] = max(0, int(policy["maxRestarts"]) - restarts)
    return out


def _resized(live: Obj, desired: Obj) -> Obj | None:
    """``live`` with the trainer job's parallelism/completions of ``desired``; None if there is no trainer job."""
    want = elastic.trainer_replicated_job(desired)
    if want is None:
        return None
    spec = (want.get("template") or {}).get("spec") or {}
    out = copy.deepcopy(live)
    for item in (out.get("spec") or {}).get("replicatedJobs") or []:
        if item.get("name") == want["name"]:
            job = item.setdefault("template", {}).setdefault("spec", {})
            job["parallelism"], job["completions"] = spec.get("parallelism"), spec.get("completions")
            return out
    return None


class JobSetScaler:
    def __init__(self, client: Client, trainjobs: Informer, jobsets: Informer, events: EventRecorder) -> None:
        self.client = client
        self.trainjobs = trainjobs
        self.jobsets = jobsets
        self.events = events

    async def rescale(self, trainjob: Obj, live: Obj, desired: Obj) -> None:
        """Bring the live JobSet to the desired node count: in place, or by deleting it for re-creation."""
        before, after = elastic.node_count(live), elastic.node_count(desired)
        meta = live.get("metadata") or {}
        try:
            # The cache keeps a JobSet without its pod templates; a PUT must carry all of it.
            live = await self.client.get(JOBSET, meta["name"], meta.get("namespace"))
        except ApiError as exc:
            if exc.status == 404:
                raise RequeueNow() from exc
            raise
        if (live.get("metadata") or {}).get("deletionTimestamp"):
            # Already going (our re-creation, whose watch event the cache has not shown yet): its watch events
            # bring the reconcile that creates it again. Scaling it once more would count its budget twice.
            return
        ended = jobset_finished(live)
        if ended is not None:
            # It ended after the cache last saw it: its watch event brings the reconcile that finishes the
            # TrainJob. A finished JobSet is never resized or re-created (upstream #3891: a Failed TrainJob stays
            # terminal, its restart budget spent).
            log.info("JobSet %s: not scaled %s -> %s", ended, before, after,
                     extra={"object": f"TrainJob {meta.get('namespace')}/{meta.get('name')}"})
            return
        resized = _resized(live, desired)
        if resized is not None:
            try:
                updated = await self.client.replace(resized, resource=JOBSET)
            except Conflict as exc:
                raise RequeueNow() from exc
            except ApiError as exc:
                if exc.status not in REFUSED:
                    raise
                refusal = exc.message or exc.reason
            else:
                self.jobsets.remember(updated)
                await self.events.emit(trainjob, "Normal", "Scaled", f"trainer nodes {before} -> {after}: JobSet "
                                       "resized in place", "Scaling")
                return
        else:
            refusal = "the JobSet has no trainer replicated job to resize"
        await self._recreate(trainjob, live, before, after, refusal)

    async def _recreate(self, trainjob: Obj, live: Obj, before: int | None, after: int | None, why: str) -> None:
        meta = trainjob["metadata"]
        ns, name = meta.get("namespace"), meta["name"]
        scaling = scaling_status(trainjob)
        recreations = int(scaling.get("recreations") or 0)
        if recreation_of(live) >= recreations:
            failures = await self._node_failures(live)
            restarts = int((live.get("status") or {}).get("restarts") or 0)
            scaling.update(
                recreations=recreations + 1,
                nodeFailures=int(scaling.get("nodeFailures") or 0) + failures,
                jobSetRestarts=int(scaling.get("jobSetRestarts") or 0) + restarts,
            )
            # The budget first: if this process dies between the two calls, nothing is lost (the JobSet still
            # runs, and its annotation says it is counted).
            patched = await self.client.patch_status(TRAINJOB, name, ns, {"scaling": scaling})
            self.trainjobs.remember(patched)
        # else: an earlier try counted this JobSet and did not get to delete it (an error, an operator restart).
        await self.client.delete(JOBSET, name, ns, missing_ok=True, propagation="Foreground")
        log.info("JobSet deleted to change its node count %s -> %s (%s)", before, after, why,
                 extra={"object": f"TrainJob {ns}/{name}"})
        await self.events.emit(
            trainjob,
            "Normal",
            "Scaled",
            f"trainer nodes {before} -> {after}: re-creating the JobSet, which refused to resize in place ({why}); "
            f"restart budget used so far: {scaling.get('nodeFailures') or 0} node failures, "
            f"{scaling.get('jobSetRestarts') or 0} JobSet restarts",
            "Scaling",
        )

    async def _node_failures(self, live: Obj) -> int:
        """Trainer pod failures of this JobSet: failed pods plus container restarts (restartPolicy OnFailure),
        what the Job controller counts against ``backoffLimit``. A pod that failed because it was deleted is not
        one (a JobSet restart, or this re-creation retried while the old pods go down)."""
        selector = elastic.pod_selector(live)
        meta = live.get("metadata") or {}
        if selector is None:
            return 0
        pods, _ = await self.client.list(POD, meta.get("namespace"), label_selector=selector)
        total = 0
        for pod in pods:
            st = pod.get("status") or {}
            failed = st.get("phase") == "Failed" and not pod_failures.failed_by_deletion(pod)
            total += 1 if failed else 0
            # A container restart is a run that failed while its pod lived on: never a deletion's doing.
            total += sum(int(c.get("restartCount") or 0) for c in st.get("containerStatuses") or [])
        return total
