"""The CLI verbs (``apply``, ``get``, ``describe``, ``logs``, ``delete``, ``wait``, ``runtimes list``) on a cluster.

Implements ``kubetrain.api.views.Backend`` structurally. The CLI is synchronous and the client is async, so
the backend owns one private event loop and runs each call to completion on it; streams (logs, watches) are
async generators driven one item at a time, so Ctrl-C between two items leaves nothing running. While the loop runs,
Ctrl-C cancels what it runs through the loop instead of raising inside whatever callback was running (a
``KeyboardInterrupt`` there can leave a stream half-read and the clean-up waiting on it for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

from kubetrain.api import AnyRuntime, ClusterTrainingRuntime, KubetrainError, TrainingRuntime, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.loader import parse_manifest
from kubetrain.api.logtext import lines_of
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.api.selectors import parse_fields
from kubetrain.api.suggest import not_found_hint
from kubetrain.api.trainjob_state import expected_trainer_pods, trainjob_state
from kubetrain.api.views import LogItem, LogOptions, ProgressPoint, StateView, TrainJobDetails, WatchItem
from kubetrain.k8s.backend.describe import describe
from kubetrain.k8s.backend.follow import Follower
from kubetrain.k8s.backend.multikueue import (
    Placement,
    list_workloads,
    managed_by_multikueue,
    multikueue_state,
    placement_of,
)
from kubetrain.k8s.backend.watch import jobset_name_of, key_of, watch_trainjobs
from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import ConfigError, load
from kubetrain.k8s.pods.failures import with_failures
from kubetrain.k8s.pods.steps import newest_per_step, step_name, step_view

T = TypeVar("T")

RUNTIME_RESOURCES = {
    c.KIND_CLUSTER_TRAINING_RUNTIME: r.CLUSTER_TRAINING_RUNTIME,
    c.KIND_TRAINING_RUNTIME: r.TRAINING_RUNTIME,
}


CORE_RESOURCES = {
    "ConfigMap": r.CONFIGMAP,
    "Secret": r.SECRET,
    "PersistentVolumeClaim": r.PERSISTENT_VOLUME_CLAIM,
    "Pod": r.POD,  # `get pods|events`: read as listed, with the API server's label and field selectors
    "Event": r.EVENT,
}


def _explain(exc: ApiError, what: str) -> KubetrainError:
    """API errors as one readable line; admission denials keep the webhook's own message."""
    if isinstance(exc, NotFound):
        return KubetrainError(f"{what} not found")
    if exc.status == 0:
        return KubetrainError(f"cannot reach the API server: {exc.message}")
    return KubetrainError(f"{what}: {exc.message or exc.reason} ({exc.status} {exc.reason})".rstrip())


class ClusterBackend:
    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        try:
            self.config = load(kubeconfig, context)
        except ConfigError as exc:
            raise KubetrainError(str(exc)) from exc
        self._loop = asyncio.new_event_loop()
        self._client: Client | None = None
        self._streams: weakref.WeakSet[Iterator[Any]] = weakref.WeakSet()

    def close(self) -> None:
        """Close the HTTP session and the private loop (also done when the backend is garbage-collected)."""
        if self._loop.is_closed():
            return
        for it in list(self._streams):
            with contextlib.suppress(Exception):
                it.close()  # type: ignore[attr-defined]
        if self._client is not None and not self._loop.is_running():
            closing = self._client.close()
            try:
                self._loop.run_until_complete(closing)
            except RuntimeError:
                closing.close()
        self._client = None
        self._loop.close()

    def __del__(self) -> None:
        # At interpreter shutdown nothing can be cleaned up reliably; never raise from a finaliser.
        with contextlib.suppress(Exception):
            self.close()

    # What the clean-up of an interrupted stream may take before the command leaves anyway.
    CLEANUP_TIMEOUT = 5.0

    def _run(self, coro: Awaitable[T]) -> T:
        return self._until_done(asyncio.ensure_future(coro, loop=self._loop))

    def _until_done(self, fut: asyncio.Future[T]) -> T:
        """Run the loop until ``fut`` is done; Ctrl-C cancels ``fut`` and raises ``KeyboardInterrupt`` here."""
        interrupted = False
        give_up: asyncio.TimerHandle | None = None

        def on_interrupt() -> None:
            nonlocal interrupted, give_up
            interrupted = True
            fut.cancel()
            if give_up is None:
                # A task that ignores its cancellation must not keep the command waiting.
                give_up = self._loop.call_later(self.CLEANUP_TIMEOUT, self._loop.stop)

        installed = False
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                self._loop.add_signal_handler(signal.SIGINT, on_interrupt)
                installed = True
        try:
            result = self._loop.run_until_complete(fut)
        except (asyncio.CancelledError, RuntimeError):
            # RuntimeError: the loop was stopped by ``give_up`` before ``fut`` finished.
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        finally:
            if give_up is not None:
                give_up.cancel()
            if installed:
                # Puts Python's own SIGINT handler back, so Ctrl-C between two loop runs raises as usual.
                self._loop.remove_signal_handler(signal.SIGINT)
        if interrupted:
            raise KeyboardInterrupt
        return result

    def _settle(self, aw: Awaitable[Any]) -> None:
        """Clean-up after an interrupt or an early stop: bounded, and never raising."""
        with contextlib.suppress(BaseException):
            task = asyncio.ensure_future(aw, loop=self._loop)
            # asyncio.wait, not wait_for: wait_for would wait on for a task that ignores its cancellation.
            self._loop.run_until_complete(asyncio.wait({task}, timeout=self.CLEANUP_TIMEOUT))
            if not task.done():
                task.cancel()

    def _iterate(self, agen: AsyncIterator[T], what: str) -> Iterator[T]:
        it = self._drive(agen, what)
        self._streams.add(it)
        return it

    def _drive(self, agen: AsyncIterator[T], what: str) -> Iterator[T]:
        """Drive an async generator from synchronous code; an interrupt (Ctrl-C) or an early ``break`` cancels
        what it was waiting on and closes it, so no stream or watch outlives the command (or the backend)."""
        try:
            while True:
                step = asyncio.ensure_future(agen.__anext__(), loop=self._loop)
                try:
                    item = self._until_done(step)
                except StopAsyncIteration:
                    return
                except ApiError as exc:
                    raise _explain(exc, what) from exc
                except BaseException:
                    if not step.done():
                        step.cancel()
                        self._settle(step)
                    raise
                yield item
        finally:
            self._settle(agen.aclose())  # type: ignore[attr-defined]

    @property
    def client(self) -> Client:
        if self._client is None:

            async def make() -> Client:
                return Client(self.config, qps=20, burst=40)

            self._client = self._run(make())
        return self._client

    def _flush_warnings(self) -> None:
        # Admission warnings (e.g. a deprecated runtime) are shown the way kubectl shows them.
        for w in self.client.session.warnings:
            print(f"Warning: {w}", file=sys.stderr)
        self.client.session.warnings.clear()

    # -- Backend protocol ---------------------------------------------------------------------------------
    def apply(self, manifests: list[dict[str, Any]], *, namespace: str) -> list[str]:
        """Server-side apply, runtimes before TrainJobs, so one file can hold both."""
        order = {c.KIND_CLUSTER_TRAINING_RUNTIME: 0, c.KIND_TRAINING_RUNTIME: 1, c.KIND_TRAINJOB: 3,
                 c.KIND_OPTIMIZATIONJOB: 3}
        applied: list[str] = []
        for m in sorted(manifests, key=lambda m: order.get(m.get("kind", ""), 2)):
            obj = dict(m)
            meta = dict(obj.get("metadata") or {})
            try:
                res = r.for_object(obj)
            except ValueError as exc:
                raise KubetrainError(str(exc)) from exc
            if res.namespaced:
                meta.setdefault("namespace", namespace)
            obj["metadata"] = meta
            obj.pop("status", None)
            what = f"{obj['kind']} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
            try:
                self._run(self.client.apply(obj))
            except ApiError as exc:
                self._flush_warnings()
                raise _explain(exc, f"apply {what}") from exc
            self._flush_warnings()
            applied.append(f"{obj['kind'].lower()}/{meta.get('name')}")
        return applied

    def _trainjob(self, obj: dict[str, Any]) -> TrainJob:
        tj, result = parse_manifest(obj, source=f"TrainJob {obj.get('metadata', {}).get('name')}")
        if not isinstance(tj, TrainJob):
            raise KubetrainError("; ".join(f.render() for f in result.errors) or "not a TrainJob")
        return tj

    def list_trainjobs(self, namespace: str | None, selector: str | None = None) -> list[TrainJob]:
        label_selector = parse_selector(selector).text if selector else None
        try:
            items, _ = self._run(self.client.list(r.TRAINJOB, namespace, label_selector=label_selector))
        except ApiError as exc:
            raise _explain(exc, "list trainjobs") from exc
        return [self._trainjob(i) for i in items]

    def _not_found(self, name: str, namespace: str, resource: r.Resource = r.TRAINJOB) -> KubetrainError:
        try:
            items, _ = self._run(self.client.list(resource, namespace))
            names = [(i.get("metadata") or {}).get("name", "") for i in items]
        except ApiError:
            names = []
        plural = resource.plural
        hint = not_found_hint(name, names, f"`kubetrain get {plural} -n {namespace}` lists them")
        return KubetrainError(f'{plural}.{c.GROUP} "{name}" not found in namespace {namespace}{hint}')

    def get_trainjob(self, name: str, namespace: str) -> TrainJob:
        try:
            return self._trainjob(self._run(self.client.get(r.TRAINJOB, name, namespace)))
        except NotFound:
            raise self._not_found(name, namespace) from None
        except ApiError as exc:
            raise _explain(exc, f'trainjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

    def _pods(self, name: str, namespace: str) -> list[dict[str, Any]]:
        pods, _ = self._run(self.client.list(r.POD, namespace, label_selector=f"{c.LABEL_JOBSET_NAME}={name}"))
        return sorted(pods, key=step_name)

    def states(self, jobs: list[TrainJob]) -> list[StateView]:
        """One pod list and one JobSet list per namespace, however many jobs."""
        namespaces = sorted({j.namespace for j in jobs})
        scope: list[str | None] = list(namespaces) if len(namespaces) <= 3 else [None]
        pods: dict[tuple[str, str], list[dict[str, Any]]] = {}
        jobsets: dict[tuple[str, str], dict[str, Any]] = {}
        known = True
        for ns in scope:
            try:
                items, _ = self._run(self.client.list(r.POD, ns, label_selector=c.LABEL_JOBSET_NAME))
                sets, _ = self._run(self.client.list(r.JOBSET, ns))
            except ApiError:
                known = False  # e.g. no permission to list pods: state from the conditions only
                continue
            for p in items:
                pods.setdefault((key_of(p)[0], jobset_name_of(p)), []).append(p)
            for js in sets:
                jobsets[key_of(js)] = js
        # MultiKueue runs these on a worker cluster: their state comes from the manager's Kueue Workloads.
        placements = self._placements([j for j in jobs if managed_by_multikueue(j)], scope)
        out = []
        for j in jobs:
            k = (j.namespace, j.name)
            if managed_by_multikueue(j):
                out.append(with_failures(multikueue_state(j, placements.get(k)), j.to_wire().get("status")))
                continue
            jobset = jobsets.get(k)
            views = [step_view(p) for p in newest_per_step(pods.get(k, []))] if known else None
            state = trainjob_state(
                j,
                views,
                expected_trainer_pods=expected_trainer_pods(jobset),
                no_pods_reason="" if jobset is not None else "no JobSet yet",
            )
            out.append(with_failures(state, j.to_wire().get("status")))
        return out

    def _placements(self, jobs: list[TrainJob], scope: list[str | None]) -> dict[tuple[str, str], Placement]:
        if not jobs:
            return {}
        workloads: list[dict[str, Any]] = []
        for ns in scope:
            found = self._run(list_workloads(self.client, ns))
            workloads += found or []
        out = {}
        for j in jobs:
            p = placement_of(workloads, j)
            if p is not None:
                out[(j.namespace, j.name)] = p
        return out

    def progress_history(self, name: str, namespace: str) -> list[ProgressPoint]:
        """The API server keeps only the latest report (KEP-2779 stores no history)."""
        from kubetrain.api.logtext import parse_rfc3339

        ts = (self.get_trainjob(name, namespace).to_wire().get("status") or {}).get("trainerStatus")
        if not isinstance(ts, dict):
            return []
        try:
            when = parse_rfc3339(str(ts.get("lastUpdatedTime")))
        except KubetrainError:
            when = 0.0
        return [ProgressPoint(when, ts)]

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails:
        tj = self.get_trainjob(name, namespace)
        try:
            pods = self._pods(name, namespace)
            return self._run(describe(self.client, tj, pods))
        except ApiError as exc:
            raise _explain(exc, f"describe trainjob {name}") from exc

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        yield from lines_of(self.log_stream(name, namespace, LogOptions(step=step, follow=follow)))

    def log_stream(self, name: str, namespace: str, options: LogOptions) -> Iterator[LogItem]:
        self.get_trainjob(name, namespace)  # a missing job fails now, with close names suggested
        follower = Follower(
            self.client,
            name,
            namespace,
            options,
            parse=self._trainjob,
            not_found=lambda: self._not_found_async_safe(name, namespace),
        )
        yield from self._iterate(follower.items(), f"logs of {name}")

    def _not_found_async_safe(self, name: str, namespace: str) -> KubetrainError:
        # Called from inside the loop, where ``_run`` cannot be used: no suggestions there, the plain message.
        return KubetrainError(
            f'trainjobs.{c.GROUP} "{name}" not found in namespace {namespace} '
            f"(`kubetrain get trainjobs -n {namespace}` lists them)"
        )

    def watch_trainjobs(
        self, namespace: str | None, *, names: list[str] | None = None, selector: str | None = None
    ) -> Iterator[WatchItem | None]:
        sel = parse_selector(selector) if selector else None

        async def placed(tj: TrainJob) -> StateView:
            # MultiKueue runs it on a worker cluster: the manager's Workload says which (one read per change).
            workloads = await list_workloads(self.client, tj.namespace)
            placement = placement_of(workloads, tj) if workloads is not None else None
            return with_failures(multikueue_state(tj, placement), tj.to_wire().get("status"))

        def state_of(tj: TrainJob, pods: list[dict[str, Any]]) -> StateView | Awaitable[StateView]:
            if managed_by_multikueue(tj):
                return placed(tj)
            state = trainjob_state(tj, [step_view(p) for p in newest_per_step(pods)])
            return with_failures(state, tj.to_wire().get("status"))

        agen = watch_trainjobs(
            self.client, namespace, names=names, selector=sel, parse=self._trainjob, state_of=state_of
        )
        yield from self._iterate(agen, "watch trainjobs")

    def compiled_objects(self, name: str, namespace: str) -> list[dict[str, Any]]:
        """The TrainJob's JobSet and runtime snapshot ConfigMap as the API serves them (those that exist yet)."""
        from kubetrain.compiler.plugins.snapshot import snapshot_name

        self.get_trainjob(name, namespace)  # a missing job fails with close names suggested
        out: list[dict[str, Any]] = []
        for res, obj_name in ((r.JOBSET, name), (r.CONFIGMAP, snapshot_name(name))):
            try:
                obj = self._run(self.client.get(res, obj_name, namespace))
            except NotFound:
                continue
            except ApiError as exc:
                raise _explain(exc, f'{res.plural} "{obj_name}" in namespace {namespace}') from exc
            (obj.get("metadata") or {}).pop("managedFields", None)
            out.append({"apiVersion": res.api_version, "kind": res.kind, **obj})
        return out

    def delete_trainjob(self, name: str, namespace: str) -> None:
        try:
            self._run(self.client.delete(r.TRAINJOB, name, namespace))
        except NotFound:
            raise self._not_found(name, namespace) from None
        except ApiError as exc:
            raise _explain(exc, f'trainjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

    # OptimizationJobs: the operator runs them; these are reads and a delete (trials go by garbage collection).
    def list_optimizationjobs(self, namespace: str | None) -> list[OptimizationJob]:
        try:
            items, _ = self._run(self.client.list(r.OPTIMIZATIONJOB, namespace))
        except ApiError as exc:
            raise _explain(exc, "list optimizationjobs") from exc
        return [self._optimizationjob(i) for i in items]

    def get_optimizationjob(self, name: str, namespace: str) -> OptimizationJob:
        try:
            return self._optimizationjob(self._run(self.client.get(r.OPTIMIZATIONJOB, name, namespace)))
        except NotFound:
            raise self._not_found(name, namespace, r.OPTIMIZATIONJOB) from None
        except ApiError as exc:
            raise _explain(exc, f'optimizationjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

    def delete_optimizationjob(self, name: str, namespace: str) -> None:
        """Deletes it with background propagation: the garbage collector deletes its trials."""
        try:
            self._run(self.client.delete(r.OPTIMIZATIONJOB, name, namespace))
        except NotFound:
            raise self._not_found(name, namespace, r.OPTIMIZATIONJOB) from None
        except ApiError as exc:
            raise _explain(exc, f'optimizationjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

    def _optimizationjob(self, obj: dict[str, Any]) -> OptimizationJob:
        oj, result = parse_manifest(obj, source=f"OptimizationJob {obj.get('metadata', {}).get('name')}")
        if not isinstance(oj, OptimizationJob):
            raise KubetrainError("; ".join(f.render() for f in result.errors) or "not an OptimizationJob")
        return oj

    def scale_trainjob(self, name: str, namespace: str, replicas: int) -> str:
        """``kubectl scale``: a merge patch of the scale subresource, which the webhook judges (elastic runtime,
        minNodes..maxNodes)."""
        try:
            self._run(self.client.scale(r.TRAINJOB, name, namespace, replicas))
        except NotFound:
            raise self._not_found(name, namespace) from None
        except ApiError as exc:
            raise _explain(exc, f'trainjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc
        return "configured"

    def delete_runtime(self, kind: str, name: str, namespace: str | None) -> None:
        res = RUNTIME_RESOURCES.get(kind)
        if res is None:
            raise KubetrainError(
                f"cannot delete kind {kind!r} (expected TrainJob, TrainingRuntime or ClusterTrainingRuntime)"
            )
        ns = namespace if res.namespaced else None
        what = f'{res.plural}.{c.GROUP} "{name}"' + (f" in namespace {ns}" if ns else "")
        try:
            self._run(self.client.delete(res, name, ns))
        except ApiError as exc:
            raise _explain(exc, what) from exc

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        out: list[AnyRuntime] = []
        for res, ns in ((r.CLUSTER_TRAINING_RUNTIME, None), (r.TRAINING_RUNTIME, namespace)):
            try:
                items, _ = self._run(self.client.list(res, ns))
            except NotFound:
                continue  # CRD not installed
            except ApiError as exc:
                raise _explain(exc, f"list {res.plural}") from exc
            for item in items:
                obj, _ = parse_manifest(item, source=f"{res.kind} {item.get('metadata', {}).get('name')}")
                if isinstance(obj, TrainingRuntime | ClusterTrainingRuntime):
                    out.append(obj)
        return out

    # ConfigMaps, Secrets and PersistentVolumeClaims (applied with server-side apply like every object).
    def list_core(
        self, kind: str, namespace: str | None, selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        res = CORE_RESOURCES[kind]
        label_selector = parse_selector(selector).text if selector else None
        # Checked here too, so a bad field selector reads the same as locally; the server then applies it.
        fields = parse_fields(field_selector, kind, res.plural).text if field_selector else None
        try:
            items, _ = self._run(
                self.client.list(res, namespace, label_selector=label_selector, field_selector=fields)
            )
        except ApiError as exc:
            raise _explain(exc, f"list {res.plural}") from exc
        # A list's items carry no apiVersion/kind; -o yaml shows whole objects, as kubectl does.
        return [{"apiVersion": res.api_version, "kind": res.kind, **i} for i in items]

    def get_core(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        res = CORE_RESOURCES[kind]
        try:
            obj = self._run(self.client.get(res, name, namespace))
        except NotFound:
            names = [(i.get("metadata") or {}).get("name", "") for i in self.list_core(kind, namespace)]
            hint = not_found_hint(name, names, f"`kubetrain get {res.plural} -n {namespace}` lists them")
            raise KubetrainError(f'{res.plural} "{name}" not found in namespace "{namespace}"{hint}') from None
        except ApiError as exc:
            raise _explain(exc, f"get {res.plural} {name}") from exc
        return {"apiVersion": res.api_version, "kind": res.kind, **obj}

    def delete_core(self, kind: str, name: str, namespace: str) -> str:
        res = CORE_RESOURCES[kind]
        try:
            self._run(self.client.delete(res, name, namespace))
        except ApiError as exc:
            raise _explain(exc, f'{res.plural} "{name}" in namespace {namespace}') from exc
        return f'{kind.lower()} "{name}" deleted'

    def core_users(self, kind: str, name: str, namespace: str) -> list[str]:
        return []  # the cluster's pods say who uses what (kubectl describe pod); not looked up here
