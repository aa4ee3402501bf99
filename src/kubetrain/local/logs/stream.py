"""``kubetrain logs`` / ``run`` on this machine: every step's log as it is written, plus step and state changes.

The counterpart of the cluster's follower over the local store: pods appear as the supervisor records them, each
container of a pod writes its own file that restarts append to (so following a file follows the container across
restarts; ``PodRow.log`` is the default container's), and the stream ends once the TrainJob finished and its
supervisor is gone, after the last bytes are read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kubetrain.api.errors import KubetrainError
from kubetrain.api.logtext import default_container, parse_rfc3339
from kubetrain.api.trainjob_state import conditions_state, expected_trainer_pods, trainjob_state
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
from kubetrain.local import paths
from kubetrain.local.images import pulls
from kubetrain.local.logs.read import LogReader
from kubetrain.local.store import reaper, status
from kubetrain.local.store.db import PodRow, Store, TrainJobRow

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
WAITING_REASONS = ("CreateContainerConfigError", "ContainerCreating", pulls.ERR_PULL, pulls.BACKOFF, pulls.NEVER_PULL)


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


def _pod_template(row: TrainJobRow, rjob: str) -> dict[str, Any]:
    js = jobset_of(row) or {}
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        if rj.get("name") == rjob:
            return dict(((rj.get("template") or {}).get("spec") or {}).get("template") or {})
    return {}


def pod_containers(row: TrainJobRow, rjob: str) -> list[str]:
    """Init and main container names of a replicated job's pods, from the compiled JobSet."""
    spec = _pod_template(row, rjob).get("spec") or {}
    return [c.get("name", "") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


def pod_default_container(row: TrainJobRow, rjob: str) -> str | None:
    """The container whose log ``PodRow.log`` is (see ``default_container``)."""
    template = _pod_template(row, rjob)
    return default_container(template.get("spec") or {}, (template.get("metadata") or {}).get("annotations"), rjob)


def container_logs(row: TrainJobRow, pod: PodRow) -> list[tuple[str, Path]]:
    """Every container of the pod (init containers first) and its log file."""
    default = pod_default_container(row, pod.rjob)
    return [(c, paths.container_log(Path(pod.log), c, default)) for c in pod_containers(row, pod.rjob)]


def _last_written(pod: PodRow) -> Path:
    """The log a failed pod wrote last: its default container's, or an init container's that failed before."""
    logs = [Path(pod.log), *Path(pod.log).parent.glob(f"{Path(pod.log).name[: -len('.log')]}.*.log")]
    written = []
    for log in logs:
        try:
            written.append((log.stat().st_mtime, log == Path(pod.log), log))
        except OSError:
            continue
    return max(written)[2] if written else Path(pod.log)


def failure_logs(pods: list[PodRow], lines: int = 20) -> dict[str, list[str]]:
    """The last ``lines`` lines of each failed step, for ``describe``."""
    out: dict[str, list[str]] = {}
    for p in pods:
        if p.state != "Failed" and not p.exit_code:
            continue
        reader = LogReader(_last_written(p), tail=lines)
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


def status_state(st: dict[str, Any]) -> StateView | None:
    """The state a status's conditions alone decide (finished, suspended), read from the dict, else ``None``."""
    return conditions_state(cast("TrainJob", _Conditions({"status": st})))


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
        ended: threading.Event | None = None,
    ) -> None:
        self.store, self.name, self.namespace, self.opts = store, name, namespace, options
        self._row = row
        # ``kubetrain run`` knows when its own supervisor ends: the stream wakes and looks at once instead of at the
        # next poll and refresh (up to a third of a second on every run).
        self._ended = ended
        self._ended_seen = False
        self.readers: dict[str, LogReader] = {}  # per pod, or per pod/container with --all-containers
        self.order: list[str] = []
        self.pods_seen: set[str] = set()
        self.since: float | None = None
        if options.since_seconds is not None:
            self.since = time.time() - options.since_seconds
        elif options.since_time:
            self.since = parse_rfc3339(options.since_time)
        self.initial: set[str] | None = None
        self.steps_shown: dict[str, tuple[str, str, int | None]] = {}
        self.state_shown: StateView | None = None
        self.progress_shown: dict[str, Any] | None = None

    def _logs_of(self, row: TrainJobRow, pod: PodRow) -> list[tuple[str, Path]]:
        """``(reader key, log file)`` of what the options ask of this pod: its default container's log, the
        ``-c`` container's, or (``--all-containers``) each container's, keyed ``pod/container``."""
        if self.opts.all_containers:
            return [(f"{pod.name}/{c}", log) for c, log in container_logs(row, pod)]
        wanted = self.opts.container
        if wanted is None:
            return [(pod.name, Path(pod.log))]
        logs = dict(container_logs(row, pod))
        if wanted not in logs:
            raise KubetrainError(
                f"container {wanted!r} is not in step {pod.name} (containers: {', '.join(logs) or 'none'})"
            )
        return [(pod.name, logs[wanted])]

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
            if p.name in self.pods_seen:
                continue
            self.pods_seen.add(p.name)
            old = p.name in self.initial  # --tail/--since cut what existed; later pods are shown whole
            for key, log in self._logs_of(row, p):
                self.readers[key] = LogReader(
                    log,
                    tail=self.opts.tail if old else None,
                    since=self.since if old else None,
                    timestamps=self.opts.timestamps,
                )
                self.order.append(key)
                yield LogChunk(key, "")

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
            just_ended = self._ended is not None and not self._ended_seen and self._ended.is_set()
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
                # Once `run`'s own supervisor has ended nothing more will be written, whatever the store says (a
                # full disk can keep it from recording the end; the caller reports that).
                done = (finished and not alive) or self._ended_seen
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
                if ending:
                    continue  # the final read follows at once
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
            if self._ended is not None:
                self._ended.wait(POLL)  # once it is set, the stream ends before it gets here again
            else:
                time.sleep(POLL)
