"""The OptimizationJob controller on this machine: one detached process per OptimizationJob
(``python -m kubetrain.local.trials NAMESPACE NAME``, started by ``kubetrain apply``).

Each pass reads the OptimizationJob and its trial TrainJobs from the store and does what the compiler's rules
(``kubetrain.compiler.optimization.plan``) say: submit the next trials through ``LocalBackend.submit`` (the same
path as ``kubetrain apply`` of a TrainJob: validation, the local queue and gang scheduler, a supervisor per trial),
and write the status. It wakes when a trial's row or pods change (the store's change marks, looked at ten times a
second), and exits once the search has ended and no trial is left running, or when its OptimizationJob is
deleted. It keeps no state of its own, so it can be killed and started again at any point.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import optimizationjobs
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store import optimization as rows
from kubetrain.local.store import reaper
from kubetrain.local.store.db import AlreadyExistsError, Store, StoreError
from kubetrain.local.store.status import now_rfc3339
from kubetrain.local.supervisor.controller import configure_logging

log = logging.getLogger("kubetrain.local.trials")
POLL = 0.1
RETRY = 5.0
"""Seconds before a trial that could not be created is tried again (its error stays in the Created condition)."""


class Controller:
    def __init__(self, store: Store, namespace: str, name: str) -> None:
        self.store, self.namespace, self.name = store, namespace, name
        self.backend = LocalBackend(store)
        self.stop = threading.Event()
        self.creation_error: str | None = None
        self.retry_at = 0.0

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

    def step(self, row: rows.OptimizationJobRow) -> bool:
        """One pass; True once the search ended and no trial runs any more."""
        from kubetrain.api.optimization import OptimizationJob
        from kubetrain.compiler.optimization import build_trial, plan

        oj = OptimizationJob.model_validate(row.manifest)
        trials = [reaper.check(self.store, t).trainjob for t in optimizationjobs.trial_rows(self.store, row)]
        decided = plan(oj, trials, now=now_rfc3339(), creation_error=self.creation_error)
        created = False
        if decided.create and time.monotonic() >= self.retry_at:
            self.creation_error, self.retry_at = None, 0.0
            for index in decided.create:
                try:
                    self.backend.submit(build_trial(oj, index), namespace=row.namespace, workdir=row.workdir,
                                        detach=True, create_only=True)
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


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="kubetrain OptimizationJob controller (started by `kubetrain apply`)")
    parser.add_argument("namespace")
    parser.add_argument("name")
    args = parser.parse_args()
    if sys.stdin.buffer.read(len(optimizationjobs.GO)) != optimizationjobs.GO:
        return  # whoever started us died before recording our pid: a reader starts a controller instead
    configure_logging()
    controller = Controller(Store(), args.namespace, args.name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _s, _f: controller.stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        controller.run()
    except (KubetrainError, StoreError) as exc:
        log.error("optimization controller failed optimizationjob=%s/%s error=%r", args.namespace, args.name,
                  str(exc))
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
