"""The CLI verbs (``apply``, ``get``, ``describe``, ``logs``, ``delete``, ``runtimes list``) on a cluster.

Implements ``kubetrain.api.views.Backend`` structurally. The CLI is synchronous and the client is async, so
the backend owns one private event loop and runs each call to completion on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any, TypeVar

from kubetrain.api import AnyRuntime, KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.loader import parse_manifest
from kubetrain.api.views import TrainJobDetails
from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import ConfigError, load
from kubetrain.k8s.steps import events_for, log_container, step_name, step_view

T = TypeVar("T")


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

    def close(self) -> None:
        """Close the HTTP session and the private loop (also done when the backend is garbage-collected)."""
        if self._loop.is_closed():
            return
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

    def _run(self, coro: Awaitable[T]) -> T:
        return self._loop.run_until_complete(coro)

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
        order = {c.KIND_CLUSTER_TRAINING_RUNTIME: 0, c.KIND_TRAINING_RUNTIME: 1, c.KIND_TRAINJOB: 3}
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

    def list_trainjobs(self, namespace: str | None) -> list[TrainJob]:
        try:
            items, _ = self._run(self.client.list(r.TRAINJOB, namespace))
        except ApiError as exc:
            raise _explain(exc, "list trainjobs") from exc
        return [self._trainjob(i) for i in items]

    def get_trainjob(self, name: str, namespace: str) -> TrainJob:
        try:
            return self._trainjob(self._run(self.client.get(r.TRAINJOB, name, namespace)))
        except ApiError as exc:
            raise _explain(exc, f'trainjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

    def _pods(self, name: str, namespace: str) -> list[dict[str, Any]]:
        pods, _ = self._run(self.client.list(r.POD, namespace, label_selector=f"{c.LABEL_JOBSET_NAME}={name}"))
        return sorted(pods, key=step_name)

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails:
        tj = self.get_trainjob(name, namespace)
        try:
            pods = self._pods(name, namespace)
            events, _ = self._run(self.client.list(r.EVENT, namespace))
        except ApiError as exc:
            raise _explain(exc, f"describe trainjob {name}") from exc
        names = {name, *((p.get("metadata") or {}).get("name", "") for p in pods)}
        extra: dict[str, Any] = {}
        try:
            js = self._run(self.client.get(r.JOBSET, name, namespace))
            conds = [f"{x.get('type')}={x.get('status')}" for x in (js.get("status") or {}).get("conditions") or []]
            suspended = "true" if (js.get("spec") or {}).get("suspend") else "false"
            extra["JobSet"] = f"{name} (suspend={suspended}; conditions: {', '.join(conds) or 'none'})"
        except ApiError:
            extra["JobSet"] = "(none)"
        return TrainJobDetails(
            trainjob=tj, steps=[step_view(p) for p in pods], events=events_for(events, names), extra=extra
        )

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        self.get_trainjob(name, namespace)
        pods = [p for p in self._pods(name, namespace) if (p.get("status") or {}).get("phase") != "Pending"]
        if step is not None:
            pods = [p for p in pods if step_name(p) == step or step_name(p).startswith(step + "-")]
        if not pods:
            raise KubetrainError(
                f"no running or finished pods for TrainJob {namespace}/{name}" + (f" step {step}" if step else "")
            )
        prefix = len(pods) > 1
        agen = self._merged_logs(pods, namespace, follow, prefix)
        while True:
            try:
                line: str = self._run(agen.__anext__())
            except StopAsyncIteration:
                return
            except ApiError as exc:
                raise _explain(exc, f"logs of {name}") from exc
            yield line

    async def _merged_logs(
        self, pods: list[dict[str, Any]], namespace: str, follow: bool, prefix: bool
    ) -> AsyncIterator[str]:
        """One pod's lines in order; several pods interleaved as lines arrive, each prefixed ``[step]``."""
        queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()

        async def pump(pod: dict[str, Any]) -> None:
            tag = f"[{step_name(pod)}] " if prefix else ""
            try:
                async for line in self.client.pod_logs(
                    pod["metadata"]["name"], namespace, container=log_container(pod), follow=follow
                ):
                    await queue.put(tag + line)
            except BaseException as exc:  # surfaced to the consumer, not lost in a task
                await queue.put(exc)
            finally:
                await queue.put(None)

        if not prefix:
            async for line in self.client.pod_logs(
                pods[0]["metadata"]["name"], namespace, container=log_container(pods[0]), follow=follow
            ):
                yield line
            return
        tasks = [asyncio.ensure_future(pump(p)) for p in pods]
        remaining = len(tasks)
        try:
            while remaining:
                item = await queue.get()
                if item is None:
                    remaining -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            for t in tasks:
                t.cancel()

    def delete_trainjob(self, name: str, namespace: str) -> None:
        try:
            self._run(self.client.delete(r.TRAINJOB, name, namespace))
        except ApiError as exc:
            raise _explain(exc, f'trainjobs.{c.GROUP} "{name}" in namespace {namespace}') from exc

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
                if obj is not None and not isinstance(obj, TrainJob):
                    out.append(obj)
        return out
