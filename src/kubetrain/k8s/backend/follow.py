"""``kubetrain logs`` and ``kubetrain run`` on a cluster: wait for pods, explain the wait, stream every step's log.

One :class:`Follower` per command. It mirrors the TrainJob and its pods (list + watch), recomputes the state
(``kubetrain.api.trainjob_state``) on every change, and starts one log stream per container run as soon as the
container has a process: a pod that appears later, a restarted container and a JobSet restart's new pods are
all picked up. Streams are read in chunks (constant memory) with ``timestamps=true`` so a dropped connection
resumes where it stopped (``sinceTime`` + skipping what was already shown) instead of repeating the log.
"""

from __future__ import annotations

import asyncio
import codecs
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.trainjob_state import expected_trainer_pods, trainjob_state
from kubetrain.api.views import (
    LogChunk,
    LogItem,
    LogOptions,
    Notice,
    ProgressChange,
    StateChange,
    StateView,
    StepChange,
)
from kubetrain.k8s.backend.log_stamps import Stamps
from kubetrain.k8s.backend.watch import Mirror
from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.pods.failures import with_failures
from kubetrain.k8s.pods.steps import (
    container_names,
    container_started,
    container_status,
    jobset_reason,
    log_container,
    matches_step,
    newest_per_step,
    pod_finished,
    podgroup_reason,
    step_name,
    step_view,
)

HEARTBEAT = 0.5
REASON_REFRESH = 2.0
"""How often the reason of a job without pods is looked up again (JobSet, PodGroup)."""
DRAIN_GRACE = 5.0
"""After the TrainJob finished, how long streams of pods still being torn down may run."""
SLOW_START = 30.0
"""Without a JobSet after this long, the explanation points at the operator."""


class Follower:
    def __init__(
        self,
        client: Client,
        name: str,
        namespace: str,
        options: LogOptions,
        *,
        parse: Callable[[dict[str, Any]], TrainJob],
        not_found: Callable[[], KubetrainError],
    ) -> None:
        self.client, self.name, self.namespace, self.opts = client, name, namespace, options
        self.parse, self.not_found = parse, not_found
        self.out: asyncio.Queue[LogItem | BaseException] = asyncio.Queue(maxsize=256)
        self.wake = asyncio.Event()
        self.jobs = Mirror(
            client,
            r.TRAINJOB,
            namespace,
            field_selector=f"metadata.name={name}",
            keep=lambda o: (o.get("metadata") or {}).get("name") == name,
            on_change=lambda _t, _o: self.wake.set(),
        )
        self.pods = Mirror(
            client,
            r.POD,
            namespace,
            label_selector=f"{c.LABEL_JOBSET_NAME}={name}",
            keep=lambda o: ((o.get("metadata") or {}).get("labels") or {}).get(c.LABEL_JOBSET_NAME) == name,
            on_change=lambda _t, _o: self.wake.set(),
        )
        self.started = time.monotonic()
        self.pumped: dict[tuple[str, str, int], asyncio.Task[None]] = {}
        self.initial: set[str] = set()
        self.steps_shown: dict[str, tuple[str, str, str]] = {}
        self.state_shown: StateView | None = None
        self._reason_at = 0.0
        self._no_pods_reason = ""
        self._jobset: dict[str, Any] | None = None
        self._rjobs: list[str] | None = None
        self._progress_shown: dict[str, Any] | None = None

    # -- one look at the objects ----------------------------------------------------------------------------
    def trainjob(self) -> TrainJob | None:
        obj = self.jobs.objects.get((self.namespace, self.name))
        return self.parse(obj) if obj is not None else None

    async def _refresh_reason(self, tj: TrainJob) -> None:
        """Why a TrainJob has no pods yet: no JobSet, a suspended JobSet, an unscheduled PodGroup."""
        now = time.monotonic()
        if now - self._reason_at < REASON_REFRESH:
            return
        self._reason_at = now
        try:
            self._jobset = await self.client.get(r.JOBSET, self.name, self.namespace)
        except NotFound:
            self._jobset = None
        except ApiError:
            return
        if self._jobset is None:
            slow = now - self.started > SLOW_START
            self._no_pods_reason = "no JobSet yet" + (
                " (the operator has not created it: is the kubetrain or Kubeflow Trainer operator running?)"
                if slow
                else ""
            )
            return
        self._rjobs = [rj.get("name", "") for rj in (self._jobset.get("spec") or {}).get("replicatedJobs") or []]
        why = jobset_reason(self._jobset)
        for res in (r.COSCHEDULING_PODGROUP, r.VOLCANO_PODGROUP):
            if why:
                break
            try:
                why = podgroup_reason(await self.client.get(res, self.name, self.namespace))
            except ApiError:
                continue
        self._no_pods_reason = why or "JobSet created; waiting for its Jobs to create pods" + (
            " (no JobSet status yet: is the JobSet controller running?)"
            if not self._jobset.get("status") and now - self.started > SLOW_START
            else ""
        )

    def _check_step(self) -> None:
        """``--step`` names a pod, job or replicated job of the JobSet; a typo fails instead of waiting forever."""
        step = self.opts.step
        if step is None or self._rjobs is None:
            return
        if not any(step == rj or step.startswith(rj + "-") for rj in self._rjobs):
            steps = ", ".join(sorted(step_name(p) for p in self.pods.objects.values())) or "none started yet"
            raise KubetrainError(
                f"no step {step!r} in TrainJob {self.name} (replicated jobs: {', '.join(self._rjobs)}; steps: {steps})"
            )

    async def _emit(self, item: LogItem) -> None:
        await self.out.put(item)

    async def _observe(self, tj: TrainJob) -> StateView:
        pods = newest_per_step(list(self.pods.objects.values()))
        if not pods or (self._jobset is None and time.monotonic() - self._reason_at > REASON_REFRESH):
            await self._refresh_reason(tj)
        views = [step_view(p) for p in pods]
        state = with_failures(
            trainjob_state(
                tj,
                views,
                expected_trainer_pods=expected_trainer_pods(self._jobset),
                no_pods_reason=self._no_pods_reason,
            ),
            tj.to_wire().get("status"),
        )
        if self.opts.progress:
            for v in views:
                seen = (v.state, v.reason or "", v.message or "")
                if self.steps_shown.get(v.name) != seen:
                    self.steps_shown[v.name] = seen
                    await self._emit(StepChange(v.name, v.state, v.reason or "", v.message or "", v.exit_code))
            if state != self.state_shown:
                self.state_shown = state
                await self._emit(StateChange(state))
            raw = self.jobs.objects.get((self.namespace, self.name)) or {}
            ts = (raw.get("status") or {}).get("trainerStatus")
            if isinstance(ts, dict) and ts != self._progress_shown:
                self._progress_shown = ts
                await self._emit(ProgressChange(ts))
        return state

    # -- log streams ----------------------------------------------------------------------------------------
    def _container(self, pod: dict[str, Any]) -> str | None:
        wanted = self.opts.container
        if wanted is None:
            return log_container(pod)
        names = container_names(pod)
        if wanted not in names:
            raise KubetrainError(
                f"container {wanted!r} is not in step {step_name(pod)} (containers: {', '.join(names)})"
            )
        return wanted

    async def _start_streams(self, follow: bool) -> None:
        new: list[tuple[tuple[str, str, int], str, bool]] = []
        for pod in self.pods.objects.values():
            step = step_name(pod)
            if not matches_step(step, self.opts.step):
                continue
            container = self._container(pod)
            if container is None:
                continue
            started, restarts = container_started(pod, container)
            pod_name = pod["metadata"]["name"]
            key = (pod_name, container, restarts)
            if not started or key in self.pumped:
                continue
            # --tail/--since apply to the pods that existed when the command started; later ones are shown whole.
            first = pod_name in self.initial and not any(k[:2] == (pod_name, container) for k in self.pumped)
            new.append((key, step, first))
        # Every step that starts now is announced (an empty chunk) before any of them speaks, so the view
        # knows from the first line whether to prefix.
        for _key, step, _first in new:
            await self._emit(LogChunk(step, ""))
        for key, step, first in new:
            self.pumped[key] = asyncio.ensure_future(self._pump(key[0], step, key[1], follow, first, key[2]))

    async def _pump(
        self, pod: str, step: str, container: str, follow: bool, first: bool, restarts: int = 0
    ) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # Following: the server's timestamps let a re-opened stream skip what was shown (stripped unless asked).
        stamps = Stamps(keep=self.opts.timestamps) if (follow or self.opts.timestamps) else None
        since_time = self.opts.since_time
        tail = self.opts.tail if first else None
        since_seconds = int(self.opts.since_seconds) if first and self.opts.since_seconds is not None else None
        if not first:
            since_time = None
        errors = quiet = 0  # consecutive failed connections / connections that brought nothing
        container_id = self._status_of(pod, container).get("containerID")
        while True:
            dropped = got = False
            try:
                async for chunk in self.client.pod_log_chunks(
                    pod,
                    self.namespace,
                    container=container,
                    follow=follow,
                    tail_lines=tail,
                    since_seconds=since_seconds,
                    since_time=since_time if since_seconds is None else None,
                    timestamps=stamps is not None,
                ):
                    text = decoder.decode(chunk)
                    if stamps is not None:
                        text = stamps.feed(text)
                    got = True
                    if text:
                        await self._emit(LogChunk(step, text))
                rest = decoder.decode(b"", final=True)
                if rest:
                    await self._emit(LogChunk(step, stamps.feed(rest) if stamps is not None else rest))
            except ApiError as exc:
                if exc.status == 400 and "waiting to start" in exc.message:
                    self.pumped.pop((pod, container, self._restarts(pod, container)), None)
                    return  # not started after all; the next pod change starts a new stream
                if exc.status == 404 and not self.pods.objects.get((self.namespace, pod)):
                    return  # the pod is gone
                if not follow:
                    raise
                if exc.status not in (0, 429, 500, 502, 503, 504) or errors >= 5:
                    # No kubelet to ask, a node gone, no permission: say so and keep following the job.
                    await self._emit(Notice(f"log of step {step} ({pod}) unavailable: {exc.message or exc.reason}"))
                    return
                dropped = True
            if not follow:
                return
            # A stream ends when its container does; the pod's status says so a moment later. Only if the same
            # run of the container is still going did the connection drop (or idle out): resume where it stopped.
            errors = errors + 1 if dropped else 0
            quiet = 0 if got else quiet + 1
            # A server that answers a running container with nothing (no kubelet behind it) is asked less and
            # less often: 1 s, 2 s, 4 s ... up to a minute.
            await asyncio.sleep(min(0.2 * errors, 2.0) if dropped else min(60.0, 2.0 ** max(0, quiet - 1)))
            if not self._still_running(pod, container) or self._restarts(pod, container) != restarts:
                if stamps is not None and self._ended_as_followed(pod, container, restarts, container_id):
                    await self._catch_up(pod, step, container, stamps)
                return
            resumed = stamps.resume() if stamps is not None else None
            tail, since_seconds, since_time = None, None, resumed

    async def _catch_up(self, pod: str, step: str, container: str, stamps: Stamps) -> None:
        """The container has ended: read its log once more from the last line shown. A followed stream can end
        before the last lines reach it (a busy kubelet closes it when the container exits), and they would be lost."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        since = stamps.resume()
        try:
            async for chunk in self.client.pod_log_chunks(
                pod, self.namespace, container=container, follow=False, since_time=since, timestamps=True
            ):
                if text := stamps.feed(decoder.decode(chunk)):
                    await self._emit(LogChunk(step, text))
            if rest := decoder.decode(b"", final=True):
                await self._emit(LogChunk(step, stamps.feed(rest)))
        except ApiError:
            pass  # the pod is gone (or its node): what was shown is all there is

    def _status_of(self, pod: str, container: str) -> dict[str, Any]:
        obj = self.pods.objects.get((self.namespace, pod))
        return container_status(obj, container) if obj is not None else {}

    def _ended_as_followed(self, pod: str, container: str, restarts: int, container_id: str | None) -> bool:
        """The container run whose log was followed has terminated and none has started since: only then is a
        read without ``previous`` still that run's log."""
        st = self._status_of(pod, container)
        terminated = (st.get("state") or {}).get("terminated")
        if not terminated or int(st.get("restartCount") or 0) != restarts:
            return False
        return container_id is None or terminated.get("containerID") in (None, container_id)

    def _restarts(self, pod: str, container: str) -> int:
        obj = self.pods.objects.get((self.namespace, pod))
        return container_started(obj, container)[1] if obj is not None else 0

    def _still_running(self, pod: str, container: str) -> bool:
        obj = self.pods.objects.get((self.namespace, pod))
        if obj is None or pod_finished(obj):
            return False
        tj = self.trainjob()
        if tj is None or tj.finished:
            return False
        return "running" in (container_status(obj, container).get("state") or {})

    # -- the two modes --------------------------------------------------------------------------------------
    async def once(self) -> None:
        """Without ``-f``: each started step's log, one step after the other."""
        await self.jobs.sync()
        tj = self.trainjob()
        if tj is None:
            raise self.not_found()
        await self.pods.sync()
        pods = [
            p for p in newest_per_step(list(self.pods.objects.values())) if matches_step(step_name(p), self.opts.step)
        ]
        if self.opts.step is not None and not pods:
            await self._refresh_reason(tj)
            self._check_step()
        ready = []
        for pod in pods:
            container = self._container(pod)
            if container is not None and container_started(pod, container)[0]:
                ready.append((pod, container))
        for pod, _ in ready:
            await self._emit(LogChunk(step_name(pod), ""))  # announced first: the view prefixes from line one
        for pod, container in ready:
            await self._pump(pod["metadata"]["name"], step_name(pod), container, False, True)
        if not ready:
            state = await self._observe(tj)
            which = f" step {self.opts.step}" if self.opts.step else ""
            raise KubetrainError(
                f"no log yet: no pod of TrainJob {self.namespace}/{self.name}{which} has started "
                f"({state.explain()}); use -f to wait for it"
            )

    async def follow(self) -> None:
        await self.jobs.sync()
        await self.pods.sync()
        if self.trainjob() is None:
            raise self.not_found()
        self.initial = {k[1] for k in self.pods.objects}
        watchers = [asyncio.ensure_future(self.jobs.run()), asyncio.ensure_future(self.pods.run())]
        try:
            finished_at: float | None = None
            while True:
                for w in watchers:
                    if w.done() and not w.cancelled() and w.exception() is not None:
                        raise w.exception()  # type: ignore[misc]
                tj = self.trainjob()
                if tj is None:
                    raise KubetrainError(f"TrainJob {self.namespace}/{self.name} was deleted")
                state = await self._observe(tj)
                self._check_step()
                if finished_at is None:
                    await self._start_streams(follow=True)
                for task in list(self.pumped.values()):
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                if state.finished:
                    finished_at = finished_at or time.monotonic()
                    live = [t for t in self.pumped.values() if not t.done()]
                    if not live or time.monotonic() - finished_at > DRAIN_GRACE:
                        return
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), REASON_REFRESH if finished_at is None else 0.2)
                except TimeoutError:
                    pass
        finally:
            for t in [*watchers, *self.pumped.values()]:
                t.cancel()
            await asyncio.gather(*watchers, *self.pumped.values(), return_exceptions=True)

    async def items(self) -> AsyncIterator[LogItem]:
        """Everything the command shows, with a ``None`` heartbeat every half second of quiet."""
        main = asyncio.ensure_future(self.follow() if self.opts.follow else self.once())
        # One pending get at a time, kept across heartbeats: cancelling a get that just completed would lose
        # its item.
        getter: asyncio.Future[LogItem | BaseException] | None = None
        try:
            while True:
                if getter is None:
                    getter = asyncio.ensure_future(self.out.get())
                waiting: set[asyncio.Future[Any]] = {getter, main}
                await asyncio.wait(waiting, timeout=HEARTBEAT, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    item = getter.result()
                    getter = None
                    if isinstance(item, BaseException):
                        raise item
                    yield item
                    continue
                if main.done():
                    getter.cancel()
                    getter = None
                    while not self.out.empty():
                        left = self.out.get_nowait()
                        if not isinstance(left, BaseException):
                            yield left
                    main.result()  # raises what the follower raised
                    return
                yield None
        finally:
            pending = [f for f in (getter, main) if f is not None and not f.done()]
            for f in pending:
                f.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
