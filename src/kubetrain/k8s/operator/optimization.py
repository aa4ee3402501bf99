"""The OptimizationJob controller of the operator (upstream has the API and no controller yet).

Level-triggered like the TrainJob reconciler: each reconcile reads the OptimizationJob and its trials from the
informers' caches, asks the compiler's rules (``kubetrain.compiler.optimization.plan``) what to do, applies the
trial TrainJobs it says to create (server-side apply, field manager ``kubetrain``; each trial carries a controller
ownerReference with ``blockOwnerDeletion``, so deleting the OptimizationJob deletes its trials through the garbage
collector), and writes the status with a merge patch on the status subresource. A trial's events (its status
changing, say) queue its OptimizationJob, found through an index of trials by their owner's uid. The TrainJob
reconciler runs the trials like any TrainJob.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.loader import parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.compiler.optimization import build_trial, check_optimizationjob, plan
from kubetrain.compiler.optimization.stopping import ANNOTATION_STOPPED, History, points, policy_of
from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.operator.informer import Informer
from kubetrain.k8s.operator.metrics import Metrics
from kubetrain.k8s.operator.reconciler import ReconcileError
from kubetrain.k8s.operator.settings import OperatorSettings
from kubetrain.k8s.operator.workqueue import HIGH, LOW, WorkQueue

log = logging.getLogger("kubetrain.operator.optimization")
CONTROLLER = "optimizationjob"
MAX_REPORTS = 500
Key = tuple[str, str]


def optimization_owner(obj: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(namespace, name, uid)`` of the OptimizationJob that controls a TrainJob, if any."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == c.KIND_OPTIMIZATIONJOB and str(
            ref.get("apiVersion", "")
        ).startswith(c.GROUP + "/"):
            return meta.get("namespace") or "", ref.get("name") or "", ref.get("uid") or ""
    return None


class OptimizationController:
    def __init__(
        self,
        client: Client,
        trainjobs: Informer,
        settings: OperatorSettings,
        metrics: Metrics,
        *,
        clock: Callable[[], dt.datetime],
    ) -> None:
        self.client, self.trainjobs, self.metrics, self.clock = client, trainjobs, metrics, clock
        self.informer = Informer(client, r.OPTIMIZATIONJOB, namespace=settings.namespace,
                                 watch_timeout=settings.watch_timeout)
        self.queue = WorkQueue(base_delay=settings.backoff_base, max_delay=settings.backoff_max)
        self.trials: dict[str, set[Key]] = {}
        """Owner uid -> keys of the TrainJobs it controls (its trials)."""
        self.reports: dict[str, list[dict[str, Any]]] = {}
        """Trial uid -> the trainerStatus reports seen (the API keeps only the latest; early stopping needs the
        history). Kept in memory: after a restart a trial's history starts again with its next report."""
        self.creation_errors: dict[Key, str] = {}
        """The last failed attempt to create a trial, per OptimizationJob (Created=False until one succeeds)."""
        self.informer.handlers.append(self._on_optimizationjob)
        trainjobs.handlers.append(self._on_trainjob)

    # -- events ------------------------------------------------------------------------------------------
    def _on_optimizationjob(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if type_ == "DELETED":
            self.creation_errors.pop(key, None)
            self.trials.pop(meta.get("uid") or "", None)
            return
        self.queue.add(key, LOW if initial else HIGH)

    def _on_trainjob(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        owner = optimization_owner(obj)
        if owner is None:
            return
        namespace, name, uid = owner
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        trial_uid = meta.get("uid") or ""
        if type_ == "DELETED":
            self.trials.get(uid, set()).discard(key)
            self.reports.pop(trial_uid, None)
        else:
            self.trials.setdefault(uid, set()).add(key)
            report = (obj.get("status") or {}).get("trainerStatus")
            seen = self.reports.setdefault(trial_uid, [])
            if isinstance(report, dict) and (not seen or seen[-1] != report):
                seen.append(report)
                del seen[:-MAX_REPORTS]
        if not initial:
            self.queue.add((namespace, name), HIGH)

    # -- reconcile ---------------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> float | None:
        """One pass (run by the operator's work loop, ``Operator._worker``); never asks for a timed requeue."""
        await self._reconcile(key)
        return None

    async def _reconcile(self, key: Key) -> None:
        namespace, name = key
        obj = self.informer.get(namespace, name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return  # its trials go with the garbage collector
        oj, parsed = parse_manifest(obj)
        invalid: str | None = None
        if not isinstance(oj, OptimizationJob):
            log.warning("cannot read: %s", "; ".join(f.render() for f in parsed.errors), extra={"object": _ref(key)})
            return
        found, _ = check_optimizationjob(oj)
        if not found.ok:
            first = found.errors[0]
            more = f" (and {len(found.errors) - 1} more)" if len(found.errors) > 1 else ""
            invalid = f"{first.path}: {first.message}{more}" if first.path else f"{first.message}{more}"
        trials = self._trials(oj)
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        histories: dict[str, History] | None = None
        if policy_of(oj.metadata.annotations) is not None:
            metric = oj.spec.objective.metric
            histories = {t["metadata"]["name"]: points(self.reports.get(t["metadata"].get("uid") or "", []), metric)
                         for t in trials}
        decided = plan(oj, trials, now=now, creation_error=self.creation_errors.get(key), invalid=invalid,
                       histories=histories)
        for name_, why in decided.stop.items():
            await self._stop(namespace, name_, why)
        if decided.create:
            self.creation_errors.pop(key, None)
            for index in decided.create:
                manifest = build_trial(oj, index)
                try:
                    created = await self.client.apply(manifest)
                except ApiError as exc:
                    if exc.status == 403 and "being terminated" in (exc.message or ""):
                        return  # the namespace is going away, and the OptimizationJob with it
                    self.creation_errors[key] = (f"trial {index} ({manifest['metadata']['name']}) could not be "
                                                 f"created: {exc.message or exc.reason} ({exc.status})")
                    log.warning("%s", self.creation_errors[key], extra={"object": _ref(key)})
                    break
                self.trainjobs.remember(created)
                self.trials.setdefault(oj.metadata.uid or "", set()).add((namespace, manifest["metadata"]["name"]))
            decided = plan(oj, self._trials(oj), now=now, creation_error=self.creation_errors.get(key),
                           invalid=invalid)
        await self._write_status(obj, decided.status)
        if key in self.creation_errors:
            raise TrialCreationFailed(self.creation_errors[key])  # retried with backoff

    async def _stop(self, namespace: str, name: str, why: str) -> None:
        """Stop a trial early: suspended (the TrainJob reconciler stops its pods) and annotated with why."""
        patch = {"metadata": {"annotations": {ANNOTATION_STOPPED: why}}, "spec": {"suspend": True}}
        patched = await self.client.merge_patch(r.TRAINJOB, name, namespace, patch)
        self.trainjobs.remember(patched)
        log.info("stopped trial %s early: %s", name, why, extra={"object": f"TrainJob {namespace}/{name}"})

    def _trials(self, oj: OptimizationJob) -> list[dict[str, Any]]:
        keys = self.trials.get(oj.metadata.uid or "", set())
        return [t for k in sorted(keys) if (t := self.trainjobs.get(*k)) is not None]

    async def _write_status(self, obj: dict[str, Any], new: dict[str, Any]) -> None:
        old = obj.get("status") or {}
        if {k: old.get(k) for k in ("conditions", "result")} == {k: new.get(k) for k in ("conditions", "result")}:
            return
        meta = obj["metadata"]
        patch: dict[str, Any] = {k: None for k in ("conditions", "result") if k in old and k not in new}
        patch.update(new)
        patched = await self.client.patch_status(r.OPTIMIZATIONJOB, meta["name"], meta.get("namespace"), patch)
        self.informer.remember(patched)
        changed = sorted(f"{x['type']}={x['status']}({x.get('reason', '')})" for x in new.get("conditions") or []
                         if x not in (old.get("conditions") or []))
        if changed:
            log.info("conditions: %s", ", ".join(changed), extra={"object": f"OptimizationJob {meta.get('namespace')}/"
                                                                             f"{meta['name']}"})

    def resync(self) -> None:
        for key in list(self.informer.store):
            self.queue.add(key, LOW)


class TrialCreationFailed(ReconcileError):
    """A trial could not be applied; the Created condition says why, and the reconcile is retried with backoff."""


def _ref(key: Key) -> str:
    return f"OptimizationJob {key[0]}/{key[1]}"
