"""Failures a user can read, even after the pods are gone: the operator watches the TrainJobs' pods and records
each failed run on its TrainJob as it happens.

- The pod watch (an informer with JobSet's ``jobset.sigs.k8s.io/jobset-name`` selector) keeps **no pods**: its
  transform hands each pod to :meth:`FailureRecorder.observe` and returns nothing to cache.
- Per TrainJob, a :class:`Record` of at most ``MAX_ENTRIES`` steps (first failure, then updated: exit code or
  signal, reason, restarts, failures, the last log lines read), which the reconciler writes to
  ``status.podFailures`` and names in the ``Failed`` condition. It is dropped when the TrainJob is deleted, and
  once the TrainJob has finished and its status holds everything.
- Each new failure becomes a report: its last log lines are read (all TrainJobs share one token bucket, a read
  that would wait too long is skipped), then a ``PodFailed`` Warning event goes to the TrainJob (a few at once
  per TrainJob, then one per interval). Reports wait in a bounded queue; when it is full a failure is recorded
  without lines or event.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import constants as c
from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client.ratelimit import TokenBucket
from kubetrain.k8s.client.resources import JOB
from kubetrain.k8s.operator import status as st
from kubetrain.k8s.operator.events import EventRecorder
from kubetrain.k8s.operator.informer import Informer
from kubetrain.k8s.operator.settings import OperatorSettings
from kubetrain.k8s.pods import failures as pf
from kubetrain.k8s.pods.steps import step_name

log = logging.getLogger("kubetrain.operator.failures")
Key = tuple[str, str]
EVENT_REASON = "PodFailed"
FINGERPRINTS = 64
"""Runs remembered per TrainJob so a status update showing the same termination again is not a new failure."""
LOG_READ_BYTES = 64 * 1024
"""What one log read may transfer: ``LOG_LINES`` lines, not megabytes of one runaway line."""
LOG_READ_TIMEOUT = 10.0


class Record:
    """One TrainJob's failures, bounded: ``MAX_ENTRIES`` steps, ``FINGERPRINTS`` runs, one log tail per step."""

    def __init__(self, entries: list[dict[str, Any]], event_burst: int, event_interval: float) -> None:
        self.entries = [copy.deepcopy(e) for e in entries[: pf.MAX_ENTRIES]]
        self.fingerprints: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.version = 0
        """Bumped on every change; the reconciler notes which version it wrote (``written``)."""
        self.written = 0
        self.pending = 0
        """Reports (log read, event) not done yet."""
        self.job: pf.JobFailure | None = None
        self.job_known = False
        self.events = TokenBucket(1.0 / event_interval if event_interval > 0 else 0, event_burst)
        self.suppressed = 0

    @property
    def dirty(self) -> bool:
        return self.version != self.written

    def find(self, step: str, container: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e.get("step") == step and e.get("container") == container), None)

    def seen(self, failure: pf.Failure) -> bool:
        if failure.fingerprint in self.fingerprints:
            return True
        entry = self.find(*failure.key)
        # After a restart of the operator the record comes from the status: a run recorded there is not new.
        return (
            entry is not None
            and entry.get("pod") == failure.pod
            and entry.get("lastFailureTime", "") == failure.time
            and entry.get("reason", "") == failure.reason
            and entry.get("exitCode") == failure.exit_code
        )

    def remember(self, fingerprint: str) -> None:
        self.fingerprints[fingerprint] = None
        while len(self.fingerprints) > FINGERPRINTS:
            self.fingerprints.popitem(last=False)

    def add(self, failure: pf.Failure) -> dict[str, Any] | None:
        """Record ``failure`` on its step's entry (a new entry while there is room); returns the entry."""
        entry = self.find(*failure.key)
        if entry is None:
            if len(self.entries) >= pf.MAX_ENTRIES:
                return None
            entry = failure.entry()
            self.entries.append(entry)
            return entry
        logs = entry.get("logTail")
        failures = int(entry.get("failures") or 1) + 1
        entry.clear()
        entry.update(failure.entry(failures))
        if logs:
            # Kept until this run's lines are read: if the pod is deleted first (the Job controller does so at
            # its backoffLimit), the run before says more than nothing.
            entry["logTail"] = logs
        return entry


@dataclass
class FailureRecorder:
    client: Client
    trainjobs: Informer
    jobsets: Informer
    events: EventRecorder
    settings: OperatorSettings
    changed: Callable[[Key], None]
    """Called with a TrainJob's key when its record changed (the operator queues a reconcile)."""
    records: dict[Key, Record] = field(default_factory=dict)
    recorded: int = 0
    log_reads: int = 0
    log_reads_skipped: int = 0
    reports_dropped: int = 0

    def __post_init__(self) -> None:
        self.reports: asyncio.Queue[tuple[Key, Record, pf.Failure]] = asyncio.Queue(
            maxsize=self.settings.failure_reports
        )
        self.log_bucket = TokenBucket(self.settings.failure_log_qps, self.settings.failure_log_burst)

    def counts(self) -> dict[str, int]:
        """For /metrics (``kubetrain_pod_failures_total``, ``..._log_reads_total{result}``, ...)."""
        return {
            "recorded": self.recorded,
            "log_reads": self.log_reads,
            "log_reads_skipped": self.log_reads_skipped,
            "reports_dropped": self.reports_dropped,
        }

    # -- the pod watch's transform (synchronous, never raises, caches nothing) -----------------------------
    def observe(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        try:
            self._observe(pod)
        except Exception:  # a bad pod must not break the watch
            meta = pod.get("metadata") or {}
            log.exception("could not read a pod's failures", extra={"object": f"Pod {meta.get('namespace')}/"
                                                                              f"{meta.get('name')}"})  # fmt: skip
        return None

    def _owner(self, pod: dict[str, Any]) -> tuple[Key, dict[str, Any]] | None:
        """The TrainJob whose JobSet made this pod (and that this operator manages), with its cached object."""
        meta = pod.get("metadata") or {}
        name = (meta.get("labels") or {}).get(c.LABEL_JOBSET_NAME)
        if not name:
            return None
        key = (meta.get("namespace") or "", name)
        tj = self.trainjobs.get(*key)
        if tj is None or (tj.get("spec") or {}).get("managedBy") not in (None, "", c.MANAGED_BY_DEFAULT):
            return None
        jobset = self.jobsets.get(*key)
        uid = (tj.get("metadata") or {}).get("uid")
        refs = ((jobset or {}).get("metadata") or {}).get("ownerReferences") or []
        if not any(ref.get("controller") and ref.get("uid") == uid for ref in refs):
            return None  # a JobSet of the same name that this TrainJob does not own
        return key, tj

    def _observe(self, pod: dict[str, Any]) -> None:
        owner = self._owner(pod)
        if owner is None:
            return
        key, tj = owner
        failures = pf.pod_failures(pod)
        rec = self.records.get(key)
        status = tj.get("status") or {}
        if rec is None and not failures:
            return  # the common case: a healthy pod of a job with nothing recorded
        conditions = status.get("conditions") or []
        if st.finished(conditions):
            ended = max(
                (str(x.get("lastTransitionTime") or "") for x in conditions
                 if x.get("type") in (c.COND_COMPLETE, c.COND_FAILED) and x.get("status") == "True"),
                default="",
            )  # fmt: skip
            # What ends after the TrainJob did is a consequence (its pods being torn down), not a cause.
            failures = [f for f in failures if f.time and f.time <= ended]
            if rec is None and not failures:
                return
        if rec is None:
            rec = self.records[key] = self._new_record(status)
        changed = False
        step = step_name(pod)
        name = (pod.get("metadata") or {}).get("name")
        for container, restarts in pf.container_restarts(pod).items():
            entry = rec.find(step, container)
            if entry is not None and entry.get("pod") == name and entry.get("restarts") != restarts:
                entry["restarts"] = restarts  # a crash loop's restarts, as they happen
                changed = True
        for failure in failures:
            if rec.seen(failure):
                continue
            rec.remember(failure.fingerprint)
            self.recorded += 1
            entry = rec.add(failure)
            changed = changed or entry is not None
            log.info(
                "pod failed: %s",
                pf.summary(entry or failure.entry()),
                extra={"object": f"TrainJob {key[0]}/{key[1]}", "pod": failure.pod},
            )
            self._enqueue(key, rec, failure)
        if changed:
            rec.version += 1
            self.changed(key)

    def _new_record(self, status: dict[str, Any]) -> Record:
        s = self.settings
        return Record(pf.recorded(status), s.failure_event_burst, s.failure_event_interval)

    def _enqueue(self, key: Key, rec: Record, failure: pf.Failure) -> None:
        try:
            self.reports.put_nowait((key, rec, failure))
        except asyncio.QueueFull:
            self.reports_dropped += 1
            return
        rec.pending += 1

    # -- what the reconciler asks ---------------------------------------------------------------------------
    def record(self, key: Key, tj: dict[str, Any]) -> Record | None:
        """The TrainJob's record: in memory, else (a restarted operator, a running job) from its status."""
        rec = self.records.get(key)
        if rec is not None:
            return rec
        status = tj.get("status") or {}
        if not pf.recorded(status) or st.finished(status.get("conditions") or []):
            return None
        rec = self.records[key] = self._new_record(status)
        return rec

    def written(self, key: Key, rec: Record | None, version: int, *, finished: bool) -> None:
        """The TrainJob's status now holds ``version`` of ``rec``. A finished TrainJob's record goes once nothing
        is pending: the status keeps what there is to read."""
        if rec is None or self.records.get(key) is not rec:
            return
        rec.written = max(rec.written, version)
        if finished and not rec.dirty and not rec.pending:
            del self.records[key]

    def forget(self, key: Key) -> None:
        self.records.pop(key, None)

    async def job_failure(self, key: Key, rec: Record | None, jobset_message: str) -> pf.JobFailure | None:
        """The failed Job's reason (BackoffLimitExceeded, DeadlineExceeded, ...), looked up once per record."""
        if rec is not None and rec.job_known:
            return rec.job
        namespace, name = key
        try:
            jobs, _ = await self.client.list(JOB, namespace, label_selector=f"{c.LABEL_JOBSET_NAME}={name}")
        except ApiError as exc:
            log.info("could not list the JobSet's Jobs: %s", exc, extra={"object": f"TrainJob {namespace}/{name}"})
            return None
        job = pf.failed_job(jobs, jobset_message)
        if rec is not None:
            rec.job, rec.job_known = job, True
        return job

    # -- reports: log lines, then the event ------------------------------------------------------------------
    async def run(self, workers: int = 2) -> None:
        """Work through the reports until cancelled."""
        tasks = [asyncio.create_task(self._work()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            key, rec, failure = await self.reports.get()
            try:
                await self._report(key, rec, failure)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not report a pod failure", extra={"object": f"TrainJob {key[0]}/{key[1]}"})
            finally:
                rec.pending -= 1
                if self.records.get(key) is rec:
                    self.changed(key)

    async def _report(self, key: Key, rec: Record, failure: pf.Failure) -> None:
        if self.records.get(key) is not rec:
            return  # the TrainJob was deleted meanwhile
        lines = await self._read_log(key[0], failure)
        entry = rec.find(*failure.key)
        current = entry is not None and entry.get("pod") == failure.pod and entry.get("lastFailureTime", "") == (
            failure.time
        )
        if lines and current and entry is not None:
            entry["logTail"] = lines
            rec.version += 1
        tj = self.trainjobs.get(*key)
        if tj is None:
            return
        if rec.events.try_reserve(0) is None:
            rec.suppressed += 1
            return
        shown = dict(entry) if current and entry is not None else failure.entry()
        if lines:
            shown["logTail"] = lines
        else:
            shown.pop("logTail", None)  # an earlier run's lines belong to that run's event
        message = pf.event_message(shown, rec.suppressed)
        rec.suppressed = 0
        await self.events.warn(tj, EVENT_REASON, message, action="Watching")

    async def _read_log(self, namespace: str, failure: pf.Failure) -> str | None:
        """The failed run's last lines, or None (no container, rate limit, pod gone, the kubelet refused)."""
        if not failure.container:
            return None
        wait = self.log_bucket.try_reserve(self.settings.failure_log_wait)
        if wait is None:
            self.log_reads_skipped += 1
            log.info("log of a failed pod not read: rate limit", extra={"pod": f"{namespace}/{failure.pod}"})
            return None
        if wait:
            await asyncio.sleep(wait)
        self.log_reads += 1
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        parts: list[str] = []
        try:
            async with asyncio.timeout(LOG_READ_TIMEOUT):
                async for chunk in self.client.pod_log_chunks(
                    failure.pod,
                    namespace,
                    container=failure.container,
                    previous=failure.previous,
                    tail_lines=pf.LOG_LINES,
                    limit_bytes=LOG_READ_BYTES,
                ):
                    parts.append(decoder.decode(chunk))
        except Exception as exc:  # best effort: ApiError (pod gone, kubelet refused), timeout, a broken stream
            log.info("log of a failed pod not read: %s", exc, extra={"pod": f"{namespace}/{failure.pod}"})
            return None
        text = pf.log_tail("".join(parts) + decoder.decode(b"", final=True))
        return text or None
