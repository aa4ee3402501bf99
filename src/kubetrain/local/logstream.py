"""``kubetrain logs`` / ``run`` on this machine: every step's log as it is written, plus step and state changes.

The counterpart of the cluster's follower over the local store: pods appear as the supervisor records them, each
pod's log is one file that restarts append to (so following a file follows the pod across restarts), and the
stream ends once the TrainJob finished and its supervisor is gone, after the last bytes are read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kubetrain.api.errors import KubetrainError
from kubetrain.api.logtext import parse_rfc3339
from kubetrain.api.trainjob_state import expected_trainer_pods, trainjob_state
from kubetrain.api.views import (
    LogChunk,
    LogItem,
    LogOptions,
    ProgressChange,
    StateChange,
    StateView,
    StepChange,
    StepView,
)
from kubetrain.local import reaper, status
from kubetrain.local.logread import LogReader
from kubetrain.local.store import PodRow, Store, TrainJobRow

if TYPE_CHECKING:
    from kubetrain.api import TrainJob

POLL = 0.05
"""Pause when no log grew (the supervisor's own tick); short enough to feel live."""
HEARTBEAT = 0.5
REFRESH = 0.25
"""How often the pod list and the TrainJob's state are read from the store."""
SUPERVISOR_GRACE = 1.0
"""How long a TrainJob may be unfinished with no live supervisor (it may be recording its outcome) before the
stream records it as lost."""
FAIR_SHARE = 4
"""Chunks read from one log before the next log gets a turn, so a chatty pod cannot starve a quiet one."""


# Why a container waits, in the kubelet's words, recorded as ``<reason>: <message>`` in the pod's message.
WAITING_REASONS = ("CreateContainerConfigError",)


def step_view(p: PodRow) -> StepView:
    reason = "Error" if p.state == "Failed" and p.exit_code else None
    message = p.message
    if p.state == "Pending" and message:
        head, _, rest = message.partition(": ")
        if head in WAITING_REASONS:
            reason, message = head, rest
    return StepView(
        name=p.name,
        replicated_job=p.rjob,
        state=p.state,
        restarts=p.restarts,
        exit_code=p.exit_code,
        pid=p.pid if p.state == "Running" else None,
        message=message,
        reason=reason,
    )


def jobset_of(row: TrainJobRow) -> dict[str, Any] | None:
    return next((o for o in row.objects if o.get("kind") == "JobSet"), None)


def pod_containers(row: TrainJobRow, rjob: str) -> list[str]:
    """Init and main container names of a replicated job's pods, from the compiled JobSet."""
    js = jobset_of(row) or {}
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        if rj.get("name") == rjob:
            spec = ((rj.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            return [c.get("name", "") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    return []


def failure_logs(pods: list[PodRow], lines: int = 20) -> dict[str, list[str]]:
    """The last ``lines`` lines of each failed step, for ``describe``."""
    out: dict[str, list[str]] = {}
    for p in pods:
        if p.state != "Failed" and not p.exit_code:
            continue
        reader = LogReader(Path(p.log), tail=lines)
        parts: list[str] = []
        try:
            for _ in range(4):  # at most 256 KiB: twenty lines, not one runaway line of a gigabyte
                if not (text := reader.read()):
                    break
                parts.append(text)
        finally:
            reader.close()
        text = "".join(parts)
        out[p.name] = text.splitlines()[-lines:]
    return out


def matches_step(step: str, wanted: str | None) -> bool:
    return wanted is None or step == wanted or step.startswith(wanted + "-")


@dataclass(frozen=True)
class _Condition:
    status: str
    reason: str | None
    message: str | None


class _Conditions:
    """What ``trainjob_state`` asks of a TrainJob, read from the stored dict: the state is computed several times
    a second while following, and building the TrainJob model each time (and importing pydantic for a cached
    ``run``) would cost more than the rest of the stream."""

    def __init__(self, trainjob: dict[str, Any]) -> None:
        self._by_type = {c.get("type"): c for c in (trainjob.get("status") or {}).get("conditions") or []}

    def condition(self, type_: str) -> _Condition | None:
        c = self._by_type.get(type_)
        return None if c is None else _Condition(str(c.get("status")), c.get("reason"), c.get("message"))


def state_of(row: TrainJobRow, pods: list[PodRow]) -> StateView:
    conds = _Conditions(row.trainjob)
    queued = conds.condition(status.COND_QUEUED)
    finished = any(
        (c := conds.condition(t)) is not None and c.status == "True" for t in ("Complete", "Failed", "Suspended")
    )
    if queued is not None and queued.status == "True" and not finished:
        # Waiting for the local scheduler: what it waits for is the reason (``Insufficient cpu``).
        return StateView("Queued", queued.reason or "", queued.message or "")
    reason = "the local supervisor has not started the pods yet"
    return trainjob_state(
        cast("TrainJob", conds),
        [step_view(p) for p in pods],
        expected_trainer_pods=expected_trainer_pods(jobset_of(row)),
        no_pods_reason=reason,
    )


class LocalLogStream:
    def __init__(
        self,
        store: Store,
        name: str,
        namespace: str,
        options: LogOptions,
        *,
        row: Callable[[], TrainJobRow],
        ended: Callable[[], bool] | None = None,
    ) -> None:
        self.store, self.name, self.namespace, self.opts = store, name, namespace, options
        self._row = row
        # ``kubetrain run`` knows when its own supervisor ends: the stream then looks at once instead of at the
        # next refresh (a quarter of a second on every run).
        self._ended = ended
        self._ended_seen = False
        self.readers: dict[str, LogReader] = {}
        self.order: list[str] = []
        self.since: float | None = None
        if options.since_seconds is not None:
            self.since = time.time() - options.since_seconds
        elif options.since_time:
            self.since = parse_rfc3339(options.since_time)
        self.initial: set[str] | None = None
        self.steps_shown: dict[str, tuple[str, str, int | None]] = {}
        self.state_shown: StateView | None = None
        self.progress_shown: dict[str, Any] | None = None

    def _check_container(self, row: TrainJobRow, pod: PodRow) -> None:
        wanted = self.opts.container
        if wanted is None:
            return
        names = pod_containers(row, pod.rjob)
        if wanted not in names:
            raise KubetrainError(
                f"container {wanted!r} is not in step {pod.name} (containers: {', '.join(names) or 'none'})"
            )
        if len(names) > 1:
            raise KubetrainError(
                f"step {pod.name} has several containers ({', '.join(names)}); the local backend keeps one log "
                "per pod with their lines interleaved, so -c cannot pick one here (fix: drop -c)"
            )

    def _pods(self, row: TrainJobRow) -> list[PodRow]:
        pods = [p for p in self.store.list_pods(self.namespace, self.name) if matches_step(p.name, self.opts.step)]
        if self.opts.step is not None and not pods:
            rjobs = [
                rj.get("name", "") for rj in ((jobset_of(row) or {}).get("spec") or {}).get("replicatedJobs") or []
            ]
            if not any(self.opts.step == rj or self.opts.step.startswith(rj + "-") for rj in rjobs):
                started = ", ".join(p.name for p in self.store.list_pods(self.namespace, self.name))
                raise KubetrainError(
                    f"no step {self.opts.step!r} in TrainJob {self.name} "
                    f"(replicated jobs: {', '.join(rjobs)}; steps: {started or 'none started yet'})"
                )
        return pods

    def _add_readers(self, row: TrainJobRow, pods: list[PodRow]) -> Iterator[LogChunk]:
        """Open readers for new pods; each is announced (an empty chunk) before any log text."""
        if self.initial is None:
            self.initial = {p.name for p in pods}
        for p in pods:
            if p.name in self.readers:
                continue
            self._check_container(row, p)
            old = p.name in self.initial  # --tail/--since cut what existed; later pods are shown whole
            self.readers[p.name] = LogReader(
                Path(p.log),
                tail=self.opts.tail if old else None,
                since=self.since if old else None,
                timestamps=self.opts.timestamps,
            )
            self.order.append(p.name)
            yield LogChunk(p.name, "")

    def _progress(self, row: TrainJobRow, pods: list[PodRow]) -> Iterator[LogItem]:
        if not self.opts.progress:
            return
        for p in pods:
            seen = (p.state, p.message or "", p.exit_code)
            if self.steps_shown.get(p.name) != seen:
                self.steps_shown[p.name] = seen
                v = step_view(p)
                yield StepChange(p.name, p.state, v.reason or "", v.message or "", p.exit_code)
        st = state_of(row, self.store.list_pods(self.namespace, self.name))
        if st != self.state_shown:
            self.state_shown = st
            yield StateChange(st)
        ts = (row.trainjob.get("status") or {}).get("trainerStatus")
        if isinstance(ts, dict) and ts != self.progress_shown:
            self.progress_shown = ts
            yield ProgressChange(ts, self.store.last_progress_source(self.namespace, self.name))

    def _read_round(self) -> Iterator[LogChunk]:
        for step in self.order:
            reader = self.readers[step]
            for _ in range(FAIR_SHARE):
                text = reader.read()
                if not text:
                    break
                yield LogChunk(step, text)

    def items(self) -> Iterator[LogItem]:
        try:
            yield from self._follow() if self.opts.follow else self._once()
        finally:
            for r in self.readers.values():
                r.close()

    def _once(self) -> Iterator[LogItem]:
        row = self._row()
        pods = self._pods(row)
        yield from self._add_readers(row, pods)
        yield from self._progress(row, pods)
        for step in self.order:
            reader = self.readers[step]
            while text := reader.read():
                yield LogChunk(step, text)
            if rest := reader.flush():
                yield LogChunk(step, rest)

    def _follow(self) -> Iterator[LogItem]:
        last_refresh = 0.0
        last_yield = time.monotonic()
        ending = False
        dead_since: float | None = None
        while True:
            now = time.monotonic()
            just_ended = self._ended is not None and not self._ended_seen and self._ended()
            if just_ended:
                self._ended_seen = True
            if now - last_refresh >= REFRESH or ending or just_ended:
                last_refresh = now
                row = self.store.get_trainjob(self.namespace, self.name)
                if row is None:
                    raise KubetrainError(f"TrainJob {self.namespace}/{self.name} was deleted")
                pods = self._pods(row)
                yield from self._add_readers(row, pods)
                yield from self._progress(row, pods)
                finished = status.finished(row.trainjob.get("status") or {})
                alive = reaper.supervisor_alive(row)
                done = finished and not alive
                if finished or alive:
                    dead_since = None
                elif dead_since is None:
                    dead_since = now
                elif now - dead_since >= SUPERVISOR_GRACE:
                    # The supervisor died without an outcome (kill -9, OOM): record it now, so this stream ends
                    # with the reason instead of waiting for the next kubetrain command to notice.
                    reaper.check(self.store, row)
                if ending:
                    # Read to the end once more after the end was seen: nothing written before it is lost.
                    more = True
                    while more:
                        more = False
                        for chunk in self._read_round():
                            more = True
                            yield chunk
                    for step in self.order:
                        if rest := self.readers[step].flush():
                            yield LogChunk(step, rest)
                    return
                ending = done
            got = False
            for chunk in self._read_round():
                got = True
                yield chunk
            if got:
                last_yield = time.monotonic()
                continue
            if time.monotonic() - last_yield >= HEARTBEAT:
                last_yield = time.monotonic()
                yield None
            time.sleep(POLL)
