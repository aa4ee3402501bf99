"""The OptimizationJob controller on this machine: one detached process per OptimizationJob
(``python -m kubetrain.local.optimizer NAMESPACE NAME``, started by ``kubetrain apply``, which runs the first pass
itself so the first trials start at once).

Each pass reads the OptimizationJob and its trial TrainJobs from the store and does what the compiler's rules
(``kubetrain.compiler.optimization.plan``) say: submit the next trials (through ``LocalBackend.submit``, the same
path as ``kubetrain apply`` of a TrainJob: validation, the local queue and gang scheduler, a supervisor per trial),
and write the status. It wakes when a trial's row or pods change (the store's change marks, looked at twenty times
a second), and exits once the search has ended and no trial is left running, or when its OptimizationJob is
deleted. It keeps no state of its own, so it can be killed and started again at any point.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import optimizationjobs
from kubetrain.local.store import optimization as rows
from kubetrain.local.store import reaper
from kubetrain.local.store.db import AlreadyExistsError, Store

log = logging.getLogger("kubetrain.local.trials")
POLL = 0.05
Submit = Callable[[dict[str, Any], str, str], object]
"""``submit(trial manifest, namespace, workdir)``: create a trial TrainJob and start it (``LocalBackend``'s)."""
Stop = Callable[[str, str, str], object]
"""``stop(trial name, namespace, why)``: suspend a trial and annotate it as stopped early (``LocalBackend``'s)."""
RETRY = 5.0
"""Seconds before a trial that could not be created is tried again (its error stays in the Created condition)."""


class Controller:
    def __init__(self, store: Store, namespace: str, name: str, submit: Submit, stop: Stop | None = None) -> None:
        self.store, self.namespace, self.name = store, namespace, name
        self.submit = submit
        self.stop_trial = stop
        self.stop = threading.Event()
        self.creation_error: str | None = None
        self.retry_at = 0.0
        self._model: tuple[str, Any] | None = None  # (the spec as stored, its model): parsed once

    def _job(self, row: rows.OptimizationJobRow) -> Any:
        """The OptimizationJob as a model, with the stored status (the spec is immutable: parsed once)."""
        import json

        from kubetrain.api.optimization import OptimizationJob, OptimizationJobStatus

        key = json.dumps({k: v for k, v in row.manifest.items() if k != "status"}, sort_keys=True)
        if self._model is None or self._model[0] != key:
            self._model = (key, OptimizationJob.model_validate({**row.manifest, "status": None}))
        oj = self._model[1].model_copy()
        status = row.manifest.get("status")
        oj.status = OptimizationJobStatus.model_validate(status) if status else None
        return oj

    def run(self) -> None:
        row = rows.get(self.store, self.namespace, self.name)
        if row is None:
            return
        uid = row.uid
        log.info("optimization controller start optimizationjob=%s/%s", self.namespace, self.name)
        marks: dict[Any, Any] | None = None
        while not self.stop.is_set():
            row = rows.get(self.store, self.namespace, self.name)
            if row is None or row.uid != uid:
                return  # deleted (or replaced): its trials go with it (LocalBackend.delete_optimizationjob)
            now_marks = self.store.change_marks(self.namespace)
            if now_marks != marks or time.monotonic() >= self.retry_at > 0:
                marks = now_marks
                if self.step(row):
                    log.info("optimization controller done optimizationjob=%s/%s", self.namespace, self.name)
                    return
            self.stop.wait(POLL)

    def _histories(self, oj: Any, trials: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Each trial's reports of the objective (the store keeps every report), when early stopping is on."""
        from kubetrain.compiler.optimization.stopping import points, policy_of

        if policy_of(oj.metadata.annotations) is None:
            return None
        metric = oj.spec.objective.metric
        out = {}
        for tj in trials:
            name = tj["metadata"]["name"]
            out[name] = points([p.report for p in self.store.list_progress(self.namespace, name)], metric)
        return out

    def step(self, row: rows.OptimizationJobRow) -> bool:
        """One pass; True once the search ended and no trial runs any more."""
        from kubetrain.compiler.optimization import build_trial, plan
        from kubetrain.local.store.status import now_rfc3339

        oj = self._job(row)
        trials = [reaper.check(self.store, t).trainjob for t in optimizationjobs.trial_rows(self.store, row)]
        histories = self._histories(oj, trials)
        decided = plan(oj, trials, now=now_rfc3339(), creation_error=self.creation_error, histories=histories)
        for name, why in decided.stop.items():
            if self.stop_trial is not None:
                log.info("optimizationjob=%s/%s stopping trial %s: %s", row.namespace, row.name, name, why)
                self.stop_trial(name, row.namespace, why)
        created = False
        if decided.create and time.monotonic() >= self.retry_at:
            self.creation_error, self.retry_at = None, 0.0
            for index in decided.create:
                try:
                    self.submit(build_trial(oj, index), row.namespace, row.workdir)
                    created = True
                except AlreadyExistsError:
                    continue  # created by an earlier incarnation of this controller: the next pass reads it
                except (KubetrainError, OSError) as exc:
                    self.creation_error = f"trial {index} ({oj.name}-{index}) could not be created: {exc}"
                    self.retry_at = time.monotonic() + RETRY
                    log.warning("optimizationjob=%s/%s %s", row.namespace, row.name, self.creation_error)
                    break
        if created or self.creation_error is not None:
            trials = [t.trainjob for t in optimizationjobs.trial_rows(self.store, row)]
            decided = plan(oj, trials, now=now_rfc3339(), creation_error=self.creation_error)
        if decided.status != (row.manifest.get("status") or {}):
            rows.set_status(self.store, row.namespace, row.name, row.uid, decided.status)
        return decided.finished and all(t.finished or t.state == "Pending" for t in decided.trials)

