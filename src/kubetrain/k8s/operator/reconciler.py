"""Reconcile one TrainJob: objects through the shared compiler with upstream's skip rules, then status.

Level-triggered and idempotent: everything is recomputed from the TrainJob, the caches and the snapshot on
every call, so running it twice (or after a restart) converges to the same objects.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import KubetrainError, TrainJob, elastic
from kubetrain.api import constants as c
from kubetrain.api.loader import parse_manifest
from kubetrain.compiler import KeyGen, StatusServer, Subject, compile_trainjob, ecdsa_keygen, validate_objects
from kubetrain.compiler.plugins.torch import elastic_policy_of
from kubetrain.k8s.client import ApiError, Client, Conflict
from kubetrain.k8s.client.resources import JOBSET, TRAINJOB, for_object
from kubetrain.k8s.operator import status as st
from kubetrain.k8s.operator.events import EventRecorder
from kubetrain.k8s.operator.failures import FailureRecorder, Record
from kubetrain.k8s.operator.informer import Informer
from kubetrain.k8s.operator.metrics import Metrics
from kubetrain.k8s.operator.queueing import (
    held_elsewhere,
    mark_applied,
    queue_name,
    queued_as_trainjob,
    set_workloads_active,
)
from kubetrain.k8s.operator.runtimes import RuntimeLoadError, RuntimeSource, UnsupportedRuntime, snapshot_name
from kubetrain.k8s.operator.scaling import JobSetScaler, RequeueNow, scaling_status, with_budget
from kubetrain.k8s.pods.failures import failed_message

log = logging.getLogger("kubetrain.operator.reconciler")
Key = tuple[str, str]
MAX_FAILED_MESSAGE = 4096
"""Bound of the composed ``Failed`` message (metav1.Condition allows 32768): summary, Job and JobSet messages
and at most ``pod_failures.LOG_BYTES`` of log lines."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Requeue(Exception):
    """Reconcile again right away (e.g. lost a create race for the snapshot): not a failure, no backoff."""


class ReconcileError(Exception):
    """The objects could not be built or applied; the condition is already on the TrainJob, so back off."""


def contains(live: Any, desired: Any) -> bool:
    """Whether ``live`` already has every field of ``desired`` with the same value (a no-op apply)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(contains(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired)


@dataclass
class Caches:
    """The informers the reconciler reads; owned kinds are keyed by ``(apiVersion, kind)``."""

    trainjobs: Informer
    runtimes: Informer
    cluster_runtimes: Informer
    owned: dict[tuple[str, str], Informer] = field(default_factory=dict)

    def owned_cache(self, obj: dict[str, Any]) -> Informer | None:
        return self.owned.get((obj.get("apiVersion", ""), obj.get("kind", "")))


class TrainJobReconciler:
    def __init__(
        self,
        client: Client,
        caches: Caches,
        metrics: Metrics,
        *,
        keygen: KeyGen = ecdsa_keygen,
        clock: Callable[[], dt.datetime] = utcnow,
        status_server: Callable[[], StatusServer | None] = lambda: None,
    ) -> None:
        self.client = client
        self.status_server = status_server
        """The progress endpoint new objects are wired to (None: the feature is off)."""
        self.caches = caches
        self.metrics = metrics
        self.keygen = keygen
        self.clock = clock
        self.events = EventRecorder(client, clock)
        self.runtime_source = RuntimeSource(caches.owned[("v1", "ConfigMap")], caches.runtimes, caches.cluster_runtimes)
        self.scaler = JobSetScaler(
            client, caches.trainjobs, caches.owned[(c.JOBSET_API_VERSION, "JobSet")], self.events
        )
        self.first_seen: dict[Key, float] = {}
        """Monotonic time a watch event first showed a TrainJob: where the JobSet latency metric starts."""
        self.failures: FailureRecorder | None = None
        """The pods' failures (``failures.FailureRecorder``), when the operator watches pods."""

    async def reconcile(self, key: Key) -> float | None:
        """Returns seconds after which to reconcile again (the deadline timer), or None."""
        namespace, name = key
        tj = self.caches.trainjobs.get(namespace, name)
        if tj is None or (tj.get("metadata") or {}).get("deletionTimestamp"):
            self.first_seen.pop(key, None)
            return None  # children go with the garbage collector; there are no finalizers
        spec = tj.get("spec") or {}
        if spec.get("managedBy") not in (None, "", c.MANAGED_BY_DEFAULT):
            return None  # another controller (e.g. MultiKueue) owns this TrainJob: no objects, no status
        conditions = (tj.get("status") or {}).get("conditions") or []
        resources_error: tuple[str, str] | None = None
        unsupported: str | None = None
        elastic_job = False
        if not st.finished(conditions):
            try:
                elastic_job = await self._reconcile_objects(tj)
            except UnsupportedRuntime as exc:
                unsupported = str(exc)
            except (RuntimeLoadError, KubetrainError) as exc:
                resources_error = (st.REASON_BUILD_FAILED, str(exc))
            except (Requeue, RequeueNow) as exc:
                raise Requeue() from exc
            except ApiError as exc:
                resources_error = (st.REASON_APPLY_FAILED, f"{exc.status} {exc.reason}: {exc.message}")
            tj = self.caches.trainjobs.get(namespace, name) or tj  # a re-creation recorded its restart budget
        jobset = self.caches.owned[(c.JOBSET_API_VERSION, "JobSet")].get(namespace, name)
        now = self.clock()
        nodes = None
        if elastic_job and jobset is not None and not (jobset.get("metadata") or {}).get("deletionTimestamp"):
            count, selector = elastic.node_count(jobset), elastic.pod_selector(jobset)
            nodes = (count, selector) if count is not None and selector is not None else None
        rec, entries, version, failed_message = None, None, 0, None
        if self.failures is not None:
            rec = self.failures.record(key, tj)
            if rec is not None:
                entries, version = rec.entries, rec.version
            failed_message = await self._failed_message(key, tj, jobset, rec)
        update = st.compute(
            tj,
            jobset,
            now,
            resources_error=resources_error,
            nodes=nodes,
            pod_failures=entries,
            failed_message=failed_message,
        )
        if unsupported is not None:
            conds = update.status.setdefault("conditions", [])
            st.set_condition(conds, c.COND_FAILED, "True", c.REASON_RUNTIME_NOT_SUPPORTED, unsupported, now)
            update.changed = update.status != (tj.get("status") or {})
        if update.deadline.exceeded:
            await self._delete_jobset(namespace, name)
        if update.changed:
            await self._write_status(tj, update.status)
        if self.failures is not None:
            finished = st.finished(update.status.get("conditions") or [])
            self.failures.written(key, rec, version, finished=finished)
        if resources_error is not None:
            note = f"TrainJob resources reconciliation failed: {resources_error[1]}"
            await self.events.warn(tj, st.EVENT_REASON_RESOURCES_FAILED, note)
            raise ReconcileError(note)
        return update.deadline.requeue_after

    async def _failed_message(
        self, key: Key, tj: dict[str, Any], jobset: dict[str, Any] | None, rec: Record | None
    ) -> str | None:
        """The ``Failed`` message naming the pod failure behind a failed JobSet (beyond upstream), composed when
        the TrainJob fails and again while its record changes; None keeps the message it has."""
        failed = st.jobset_failed(jobset)
        if failed is None or self.failures is None:
            return None
        existing = st.find((tj.get("status") or {}).get("conditions") or [], c.COND_FAILED)
        already = existing is not None and existing.get("status") == "True"
        if already and (rec is None or not rec.dirty):
            return None
        jobset_message = str(failed.get("message") or "")
        job = await self.failures.job_failure(key, rec, jobset_message)
        previous = str(existing.get("message") or "") if already and existing is not None else None
        message = failed_message(
            jobset_message, rec.entries if rec else [], key[1], job, previous_message=previous
        )
        return message if len(message) <= MAX_FAILED_MESSAGE else message[: MAX_FAILED_MESSAGE - 4] + " ..."

    async def _reconcile_objects(self, tj: dict[str, Any]) -> bool:
        """Returns whether the TrainJob is elastic (its runtime has a torch elasticPolicy)."""
        model, result = parse_manifest(tj, source="TrainJob")
        if not isinstance(model, TrainJob) or not result.ok:
            raise RuntimeLoadError("; ".join(f.render() for f in result.errors) or "not a TrainJob")
        runtime, from_snapshot = self.runtime_source.load(model)
        first = not scaling_status(tj).get("recreations")
        if first and self.caches.owned[(c.JOBSET_API_VERSION, "JobSet")].get(model.namespace, model.name) is None:
            # Before the first objects exist, the same checks as the webhook and `kubetrain validate` (a TrainJob
            # admitted without the webhook must not half-build); a running job is never re-judged by newer rules.
            checked = validate_objects([Subject(model)], installed=[runtime])[0]
            if not checked.ok:
                raise KubetrainError("; ".join(f.render() for f in checked.errors))
        is_elastic = elastic_policy_of(runtime) is not None
        objects = compile_trainjob(model, runtime, keygen=self.keygen, status_server=self.status_server())
        snapshot = snapshot_name(model.name)
        beside = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == snapshot]
        in_order = [o for o in objects if not any(o is b for b in beside)]

        async def sync_in_order() -> None:
            # What the pods mount (MPI hostfile, SSH Secret) exists before the JobSet that starts them.
            for obj in in_order:
                await self._sync(model, obj, from_snapshot, tj, is_elastic)

        # Nothing on the way to the pods reads the runtime snapshot, so it is written beside them instead of before
        # them: one API round trip less from create to pods (bench/bed.py). A snapshot a previous incarnation left
        # is in the cache this compile read (informers list before the first reconcile), so the JobSet applied
        # here is never built from a runtime other than the snapshot's.
        outcomes = await asyncio.gather(
            sync_in_order(),
            *(self._sync(model, obj, from_snapshot, tj, is_elastic) for obj in beside),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return is_elastic

    async def _sync(
        self, tj: TrainJob, obj: dict[str, Any], from_snapshot: bool, wire: dict[str, Any], is_elastic: bool
    ) -> None:
        """Apply one compiled object unless upstream's rules say to leave the live one alone (§3.4, §4.12)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        cache = self.caches.owned_cache(obj)
        live = cache.get(tj.namespace, name) if cache else None
        suspended = bool(tj.spec.suspend)
        if kind == "JobSet" and live is not None and (live.get("metadata") or {}).get("deletionTimestamp"):
            return  # being deleted to change its node count: created again once it is gone
        if kind == "JobSet" and live is not None and is_elastic and elastic.node_count(live) != elastic.node_count(obj):
            if st.jobset_finished(live) is not None:
                # A JobSet that ended is what its TrainJob ended with (this pass's status says so): resizing or
                # re-creating it would run the job again with a fresh restart budget (upstream #3891).
                return
            await self.scaler.rescale(wire, live, obj)  # the next reconcile (its watch event) does the rest
            return
        if kind == "JobSet" and live is None:
            obj = with_budget(obj, scaling_status(wire))
        if kind == "ConfigMap" and name == snapshot_name(tj.name):
            if not from_snapshot:
                await self._create_once(obj, cache, snapshot=True)
            return
        if kind == "Secret":
            # Created once (new SSH keys every reconcile would break a running MPI job); POST, not SSA, so a
            # stale cache can never overwrite an existing key.
            if live is None:
                await self._create_once(obj, cache, snapshot=False)
            return
        if kind == "JobSet":
            if live is not None and not suspended and not (live.get("spec") or {}).get("suspend"):
                return  # a running JobSet is never re-applied
            if live is not None and not suspended and held_elsewhere(live):
                return  # Kueue (or another queue) owns its suspend: resuming it is theirs (queueing.py)
            hand_over = False
            if live is not None and queue_name(live) and not queued_as_trainjob(wire):
                # A JobSet Kueue queues itself: suspend through its Workload, and on resume let Kueue admit it again.
                # (Not with Kueue's TrainJob integration: the JobSet has no Workload, and looking for one would put
                # a list call between Kueue's admission and the pods.)
                has_workload = await set_workloads_active(self.client, live, not suspended)
                hand_over = has_workload and not suspended
            applied = await self.client.apply(mark_applied(obj, hand_over=hand_over))
            if cache:
                cache.remember(applied)
            ref = {"object": f"TrainJob {tj.namespace}/{tj.name}"}
            if live is None:
                log.info("JobSet created", extra=ref)
            else:  # every reconcile of a suspended job re-applies: not worth an info line each time
                log.debug("JobSet re-applied (suspend=%s)", suspended, extra=ref)
            if live is None:
                self.metrics.trainjobs_created.inc()
                seen = self.first_seen.pop((tj.namespace, tj.name), None)
                if seen is not None:
                    self.metrics.jobset_latency.observe(time.monotonic() - seen)
            return
        if kind == "PodGroup" and live is not None and not suspended and not (is_elastic and not contains(live, obj)):
            return  # created once; an elastic job's gang follows its node count
        if live is not None and contains(live, obj):
            return  # e.g. the MPI hostfile, re-applied upstream every time: skip the no-op request
        applied = await self.client.apply(obj)
        if cache:
            cache.remember(applied)

    async def _create_once(self, obj: dict[str, Any], cache: Informer | None, *, snapshot: bool) -> None:
        try:
            created = await self.client.create(obj)
        except Conflict as exc:
            if not exc.already_exists:
                raise
            if snapshot:
                # Someone (our previous incarnation) already snapshotted: compile from that snapshot instead.
                existing = await self.client.get(for_object(obj), obj["metadata"]["name"], obj["metadata"]["namespace"])
                if cache:
                    cache.remember(existing)
                raise Requeue() from exc
            return
        if cache:
            cache.remember(created)

    async def _delete_jobset(self, namespace: str, name: str) -> None:
        try:
            await self.client.delete(JOBSET, name, namespace, missing_ok=True)
        except ApiError as exc:  # upstream only logs this; the next reconcile retries
            log.warning("could not delete JobSet after deadline: %s", exc, extra={"object": f"{namespace}/{name}"})
        self.caches.owned[(c.JOBSET_API_VERSION, "JobSet")].forget(namespace, name)

    async def _write_status(self, tj: dict[str, Any], new: dict[str, Any]) -> None:
        meta = tj["metadata"]
        old_conds = (tj.get("status") or {}).get("conditions") or []
        # A merge patch leaves absent keys alone, so fields we dropped (e.g. the last condition) are nulled.
        patch: dict[str, Any] = {k: None for k in (tj.get("status") or {}) if k not in new}
        patch.update(new)
        patched = await self.client.patch_status(TRAINJOB, meta["name"], meta.get("namespace"), patch)
        self.caches.trainjobs.remember(patched)
        new_conds = new.get("conditions") or []
        changed = sorted(
            f"{c_['type']}={c_['status']}({c_.get('reason', '')})" for c_ in new_conds if c_ not in old_conds
        )
        if changed:
            log.info(
                "conditions: %s",
                ", ".join(changed),
                extra={"object": f"TrainJob {meta.get('namespace')}/{meta['name']}"},
            )
        if st.is_true(new_conds, c.COND_COMPLETE) and not st.is_true(old_conds, c.COND_COMPLETE):
            self.metrics.trainjobs_completed.inc()
        if st.is_true(new_conds, c.COND_FAILED) and not st.is_true(old_conds, c.COND_FAILED):
            failed = st.find(new_conds, c.COND_FAILED) or {}
            self.metrics.trainjobs_failed.labels(reason=failed.get("reason") or "").inc()
