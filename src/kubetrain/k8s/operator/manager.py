"""The operator process: informers feed a work queue, workers reconcile, one replica leads.

Start-up order: health endpoint (so liveness works while waiting) -> optional webhook server -> leader
election -> informers -> wait for caches -> workers. Shutdown reverses it: stop handing out keys, let
in-flight reconciles finish (``shutdown_grace``), stop informers, release the lease.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import importlib
import inspect
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from kubetrain.api import constants as c
from kubetrain.compiler import KeyGen, StatusServer, ecdsa_keygen
from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.operator import queueing
from kubetrain.k8s.operator.failures import FailureRecorder
from kubetrain.k8s.operator.health import HealthServer
from kubetrain.k8s.operator.informer import Informer, strip_managed_fields
from kubetrain.k8s.operator.leader import LeaderElector
from kubetrain.k8s.operator.metrics import Metrics
from kubetrain.k8s.operator.optimization import CONTROLLER as OPTIMIZATION
from kubetrain.k8s.operator.optimization import OptimizationController
from kubetrain.k8s.operator.reconciler import Caches, Key, ReconcileError, Requeue, TrainJobReconciler, utcnow
from kubetrain.k8s.operator.settings import OperatorSettings
from kubetrain.k8s.operator.status_server import StatusEndpoint
from kubetrain.k8s.operator.workqueue import HIGH, LOW, WorkQueue

log = logging.getLogger("kubetrain.operator")
Reconcile = Callable[[Key], Awaitable[float | None]]
CONTROLLER = "trainjob"
OPTIMIZATION_WORKERS = 2
"""An OptimizationJob reconcile is a few cache reads and at most parallelTrials applies."""
LEGACY_FINALIZER = "trainer.kubeflow.org/resource-in-use"


def controller_owner(obj: dict[str, Any]) -> Key | None:
    """The TrainJob that controls ``obj``, if any."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == c.KIND_TRAINJOB
            and ref.get("apiVersion", "").startswith(c.GROUP + "/")
        ):
            return (meta.get("namespace") or "", ref.get("name") or "")
    return None


def owned_only(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Cache only objects a TrainJob controls: the operator never needs the cluster's other ConfigMaps."""
    return strip_managed_fields(obj) if controller_owner(obj) else None


# Metadata of owned objects the operator reads: identity, owner, version (relists compare it), deletion.
_OWNED_META = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "deletionTimestamp")


def _slim_meta(obj: dict[str, Any], *keep: str) -> None:
    meta = obj.get("metadata") or {}
    obj["metadata"] = {k: meta[k] for k in (*_OWNED_META, *keep) if k in meta}


def owned_jobset(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A TrainJob's JobSet, reduced to what the reconciler reads: identity, owner, ``spec.suspend``, status, and
    each replicated job's name, replicas, labels and pod counts (an elastic TrainJob's node count).

    The pod templates are most of a JobSet, and the operator never reads them back: a running JobSet is never
    re-applied, a suspended one is re-applied from the compiler's output, and resizing one in place fetches it
    whole first (``scaling.JobSetScaler``).
    """
    kept = owned_only(obj)
    if kept is None:
        return None
    meta = kept.get("metadata") or {}
    _slim_meta(kept)
    for key, wanted in (("labels", queueing.CACHED_LABELS), ("annotations", queueing.CACHED_ANNOTATIONS)):
        few = {k: v for k, v in (meta.get(key) or {}).items() if k in wanted}
        if few:
            kept["metadata"][key] = few
    spec = kept.get("spec") or {}
    slim: dict[str, Any] = {"suspend": spec["suspend"]} if "suspend" in spec else {}
    rjobs = []
    for rj in spec.get("replicatedJobs") or []:
        template = rj.get("template") or {}
        job = template.get("spec") or {}
        item: dict[str, Any] = {k: rj[k] for k in ("name", "replicas") if k in rj}
        labels = (template.get("metadata") or {}).get("labels")
        item["template"] = {
            **({"metadata": {"labels": labels}} if labels else {}),
            "spec": {k: job[k] for k in ("parallelism", "completions") if k in job},
        }
        rjobs.append(item)
    if rjobs:
        slim["replicatedJobs"] = rjobs
    kept["spec"] = slim
    return kept


def owned_configmap(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A TrainJob's ConfigMap. Snapshots of one runtime are the same text for every TrainJob: kept once."""
    kept = owned_only(obj)
    if kept is not None:
        # Labels and annotations stay: an MPI hostfile is re-applied only when the cached one lacks a desired
        # field (``reconciler.contains``), and its labels are desired fields.
        _slim_meta(kept, "labels", "annotations")
        if isinstance(kept.get("data"), dict):
            kept["data"] = {sys.intern(k): sys.intern(v) if isinstance(v, str) else v for k, v in kept["data"].items()}
    return kept


def owned_secret(obj: dict[str, Any]) -> dict[str, Any] | None:
    # The operator only needs to know an SSH Secret exists; keeping key material in memory is pointless.
    kept = owned_only(obj)
    if kept is not None:
        kept.pop("data", None)
        kept.pop("stringData", None)
    return kept


_OWNED_TRANSFORMS = {"secrets": owned_secret, "jobsets": owned_jobset, "configmaps": owned_configmap}


class Operator:
    def __init__(
        self,
        client: Client,
        settings: OperatorSettings | None = None,
        *,
        keygen: KeyGen = ecdsa_keygen,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.client = client
        self.settings = s = settings or OperatorSettings()
        self.metrics = Metrics()
        self.queue = WorkQueue(base_delay=s.backoff_base, max_delay=s.backoff_max)
        ns, wt = s.namespace, s.watch_timeout
        self.trainjobs = Informer(client, r.TRAINJOB, namespace=ns, watch_timeout=wt)
        self.runtimes = Informer(client, r.TRAINING_RUNTIME, namespace=ns, watch_timeout=wt)
        self.cluster_runtimes = Informer(client, r.CLUSTER_TRAINING_RUNTIME, watch_timeout=wt)
        owned = {
            (res.api_version, res.kind): Informer(
                client,
                res,
                namespace=ns,
                transform=_OWNED_TRANSFORMS.get(res.plural, owned_only),
                watch_timeout=wt,
            )
            for res in (r.JOBSET, r.CONFIGMAP, r.SECRET, r.COSCHEDULING_PODGROUP, r.VOLCANO_PODGROUP, r.HPA)
        }
        self.caches = Caches(self.trainjobs, self.runtimes, self.cluster_runtimes, owned)
        self.reconciler = TrainJobReconciler(
            client, self.caches, self.metrics, keygen=keygen, clock=clock, status_server=self.status_options
        )
        self.optimization = OptimizationController(client, self.trainjobs, s, self.metrics, clock=clock)
        """OptimizationJobs: their trials are TrainJobs this operator then runs (``optimization``)."""
        self.informers = [self.trainjobs, self.runtimes, self.cluster_runtimes, *owned.values(),
                          self.optimization.informer]
        self.pods: Informer | None = None
        self.failures: FailureRecorder | None = None
        """The pods' failures recorded on their TrainJobs (``failures``), when ``settings.pod_failures``."""
        if s.pod_failures:
            self.failures = FailureRecorder(
                client,
                self.trainjobs,
                owned[(c.JOBSET_API_VERSION, "JobSet")],
                self.reconciler.events,
                s,
                changed=lambda key: self.queue.add(key, HIGH),
            )
            self.reconciler.failures = self.failures
            self.metrics.count_pod_failures(self.failures.counts)
            # Last: pods are matched against the cached TrainJobs and JobSets. The transform keeps no pod.
            self.pods = Informer(
                client,
                r.POD,
                namespace=ns,
                transform=self.failures.observe,
                watch_timeout=wt,
                label_selector=c.LABEL_JOBSET_NAME,
            )
            self.informers.append(self.pods)
        self.elector: LeaderElector | None = None
        self._lease_client: Client | None = None
        if s.leader_election:
            self._lease_client = Client(client.config, qps=s.lease_qps, burst=s.lease_burst)
            self.elector = LeaderElector(
                self._lease_client,
                name=s.lease_name,
                namespace=s.lease_namespace,
                identity=s.identity,
                lease_duration=s.lease_duration,
                renew_deadline=s.renew_deadline,
                retry_period=s.retry_period,
            )
        self.health: HealthServer | None = None
        self.started = asyncio.Event()
        """Set once caches are synced and workers run (tests and the bench wait on it)."""
        self.stopping = False
        """Shutdown began (SIGTERM): not ready any more, while the webhook keeps answering until it stops."""
        self._webhook_stop: Callable[[], Awaitable[None]] | None = None
        self._webhook_client: Client | None = None
        self.webhook: Any = None
        """The running webhook server (``kubetrain.k8s.webhook.server.WebhookServer``), when configured."""
        self._tasks: list[asyncio.Task[None]] = []
        self.status_endpoint: StatusEndpoint | None = None
        """The running status endpoint (progress reports, KEP-2779), when ``status_port`` is set."""
        self._status_client: Client | None = None
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.metrics.queue_processing.set_function(lambda: self.queue.processing)
        self.metrics.api_requests.set_function(lambda: client.session.requests_total)
        self.metrics.count_writes(self._writes)
        self.trainjobs.handlers.append(self._on_trainjob)
        for inf in owned.values():
            inf.handlers.append(self._on_owned)
        self.runtimes.handlers.append(self._on_runtime)
        self.cluster_runtimes.handlers.append(self._on_runtime)

    def _writes(self) -> dict[str, int]:
        """Writes of every client of this process (reconcilers, leader election, webhook) by resource."""
        total: collections.Counter[str] = collections.Counter(self.client.session.writes)
        for extra in (self._lease_client, self._webhook_client):
            if extra is not None:
                total.update(extra.session.writes)
        return dict(total)

    # -- event handlers: map every event to the TrainJob key(s) to reconcile ------------------------------
    def _on_trainjob(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if type_ == "ADDED" and not initial:
            self.reconciler.first_seen.setdefault(key, time.monotonic())
        if type_ == "DELETED":
            self.reconciler.first_seen.pop(key, None)
            self.metrics.progress.forget(key)
            if self.failures is not None:
                self.failures.forget(key)
            return
        self.metrics.progress.update(key, (obj.get("status") or {}).get("trainerStatus"))
        self.queue.add(key, LOW if initial else HIGH)

    def _on_owned(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        key = controller_owner(obj)
        if key is not None and not initial:
            # Initial lists of owned objects add nothing: the TrainJob initial list already queues every job.
            self.queue.add(key, HIGH)

    def _on_runtime(self, type_: str, obj: dict[str, Any], initial: bool) -> None:
        if LEGACY_FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or []):
            self._spawn(self._strip_finalizer(obj))
        if initial or type_ == "DELETED":
            return
        # A runtime that appears late unblocks TrainJobs that referenced it before it existed. Jobs that
        # already have a snapshot are unaffected by runtime edits, so they are not queued.
        meta = obj.get("metadata") or {}
        snapshots = self.caches.owned[("v1", "ConfigMap")]
        for (ns, name), tj in list(self.trainjobs.store.items()):
            ref = (tj.get("spec") or {}).get("runtimeRef") or {}
            if ref.get("name") != meta.get("name") or (ref.get("kind") or c.KIND_CLUSTER_TRAINING_RUNTIME) != obj.get(
                "kind"
            ):
                continue
            if obj.get("kind") == c.KIND_TRAINING_RUNTIME and ns != meta.get("namespace"):
                continue
            if snapshots.get(ns, f"{name}-runtime-snapshot") is None:
                self.queue.add((ns, name), HIGH)

    async def _strip_finalizer(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != LEGACY_FINALIZER]
        res = r.TRAINING_RUNTIME if obj.get("kind") == c.KIND_TRAINING_RUNTIME else r.CLUSTER_TRAINING_RUNTIME
        patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta.get("resourceVersion")}}
        try:
            await self.client.merge_patch(res, meta["name"], meta.get("namespace"), patch)
        except ApiError as exc:
            log.info("could not remove legacy finalizer: %s", exc, extra={"object": r.ref(obj)})

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    # -- workers -----------------------------------------------------------------------------------------
    async def _worker(self, queue: WorkQueue | None = None, reconcile: Reconcile | None = None,
                      controller: str = CONTROLLER, kind: str = "TrainJob") -> None:
        """Take keys off ``queue`` and ``reconcile`` them (the TrainJob reconciler's by default; the
        OptimizationJob controller's runs the same loop on its own queue)."""
        queue = self.queue if queue is None else queue  # an empty queue is falsy (it has a length)
        reconcile = self.reconciler.reconcile if reconcile is None else reconcile
        while True:
            try:
                key = cast(Key, await queue.get())
            except asyncio.CancelledError:
                return
            start = time.perf_counter()
            ref = f"{kind} {key[0]}/{key[1]}"
            try:
                requeue = await reconcile(key)
                queue.forget(key)
                self.metrics.reconcile_total.labels(controller, "success").inc()
                if requeue is not None:
                    queue.add_after(key, requeue)
            except Requeue:
                self.metrics.reconcile_total.labels(controller, "requeue").inc()
                queue.done(key)
                queue.add(key, HIGH)
                continue
            except asyncio.CancelledError:
                queue.done(key)
                raise
            except Exception as exc:
                self.metrics.reconcile_total.labels(controller, "error").inc()
                self.metrics.reconcile_errors.labels(controller).inc()
                delay = queue.add_rate_limited(key)
                level = logging.WARNING if isinstance(exc, (ReconcileError, ApiError)) else logging.ERROR
                log.log(
                    level,
                    "reconcile failed, retrying in %.2fs: %s",
                    delay,
                    exc,
                    exc_info=level == logging.ERROR,
                    extra={"object": ref, "controller": controller},
                )
            finally:
                self.metrics.reconcile_duration.labels(controller).observe(time.perf_counter() - start)
            queue.done(key)

    # -- lifecycle ---------------------------------------------------------------------------------------
    def ready(self) -> bool:
        # A standby replica is ready (it serves the webhook); the leader once its caches are synced. Neither is
        # ready before the API server can call its webhook, when one is configured: listening, with a
        # certificate the webhook configurations trust (the server's own end-to-end check), and not stopping.
        # A Service routes admission only to ready pods, and admission fails closed.
        if self.stopping:
            return False
        if self.settings.webhook_port is not None:
            if self.webhook is None:
                return False
            webhook_ready = getattr(self.webhook, "ready", None)
            if callable(webhook_ready) and not webhook_ready():
                return False
        if self.settings.status_port is not None and self.status_endpoint is None:
            return False
        return (self.elector is not None and not self.elector.is_leader) or self.started.is_set()

    async def _start_webhook(self) -> None:
        """Start the admission webhook (``kubetrain.k8s.webhook.server.start``) in this process, if configured.

        It gets its own client, so its lookups never queue behind the reconcilers' rate limit: during a burst
        the operator's token bucket can be seconds deep, while the API server times admission out at 10 s.
        """
        s = self.settings
        if s.webhook_port is None:
            return
        server = importlib.import_module("kubetrain.k8s.webhook.server")
        self._webhook_client = Client(self.client.config, qps=s.webhook_qps, burst=s.webhook_burst)
        started = server.start(port=s.webhook_port, cert_dir=s.webhook_cert_dir, client=self._webhook_client)
        self.webhook = await started if inspect.isawaitable(started) else started
        self._webhook_stop = self.webhook if callable(self.webhook) else None

    async def _start_status(self) -> None:
        """The status endpoint, with its own client: reports never wait behind the reconcilers' burst."""
        s = self.settings
        if s.status_port is None:
            return
        from kubetrain.k8s.operator.settings import operator_namespace
        from kubetrain.k8s.operator.status_server import Certificates, StatusEndpoint, cert_names

        cert_dir = s.status_cert_dir
        if cert_dir is None and s.webhook_port is not None:
            from kubetrain.k8s.webhook import names

            cert_dir = s.webhook_cert_dir or names.DEFAULT_CERT_DIR  # written by the webhook's start-up
        certs = Certificates(cert_dir, cert_names(s.status_service, operator_namespace(), s.status_url))
        self._status_client = Client(self.client.config, qps=s.status_qps, burst=s.status_burst)
        endpoint = StatusEndpoint(
            self._status_client, certs, rate=s.status_rate, burst=s.status_rate_burst, metrics=self.metrics
        )
        await endpoint.start(s.status_host, s.status_port)
        self.status_endpoint = endpoint

    def status_options(self) -> StatusServer | None:
        """What the compiler wires new TrainJobs' pods to (None while no endpoint runs)."""
        endpoint = self.status_endpoint
        if endpoint is None:
            return None
        from kubetrain.k8s.operator.settings import operator_namespace

        s = self.settings
        url = s.status_url or f"https://{s.status_service}.{operator_namespace()}.svc:{endpoint.port}"
        return StatusServer(url=url, ca_cert=endpoint.certs.ca_pem)

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (0) or leadership is lost (1, so the process restarts cleanly)."""
        s = self.settings
        if s.health_port is not None:
            self.health = HealthServer(self.metrics.registry, ready=self.ready)
            await self.health.start(s.health_host, s.health_port)
        await self._start_webhook()
        await self._start_status()
        code = 0
        try:
            if self.elector is not None:
                if not await self.elector.acquire(stop):
                    return 0
                self.metrics.leader.set(1)
                self._spawn(self.elector.keep())
            # First lists one resource at a time: each page arrives parsed in full before the transform slims it,
            # so lists side by side would hold several pages of full objects at once (the memory peak of a
            # restart over 10,000 TrainJobs). The parsing runs on this one thread anyway, so little time is lost.
            informer_tasks = []
            for inf in self.informers:
                informer_tasks.append(asyncio.create_task(inf.run()))
                await inf.synced.wait()
            workers = [asyncio.create_task(self._worker()) for _ in range(s.concurrency)]
            opt, kind = self.optimization, c.KIND_OPTIMIZATIONJOB
            workers += [asyncio.create_task(self._worker(opt.queue, opt.reconcile, OPTIMIZATION, kind))
                        for _ in range(OPTIMIZATION_WORKERS)]
            if self.failures is not None:
                self._spawn(self.failures.run())
            if s.resync_period > 0:
                self._spawn(self._resync())
            self.started.set()
            log.info("operator started", extra={"controller": CONTROLLER})
            waits = [asyncio.ensure_future(stop.wait())]
            if self.elector is not None:
                waits.append(asyncio.ensure_future(self.elector.lost.wait()))
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            self.stopping = True
            for w in waits:
                w.cancel()
            if self.elector is not None and self.elector.lost.is_set():
                code = 1
            self.queue.close()
            self.optimization.queue.close()
            _, pending = await asyncio.wait(workers, timeout=s.shutdown_grace)
            for task in [*pending, *informer_tasks, *self._tasks]:
                task.cancel()
            await asyncio.gather(*pending, *informer_tasks, *self._tasks, return_exceptions=True)
        finally:
            if self.elector is not None:
                await self.elector.release()
                self.metrics.leader.set(0)
            if self._lease_client is not None:
                await self._lease_client.close()
            if self._webhook_stop is not None:
                await self._webhook_stop()
            if self._webhook_client is not None:
                await self._webhook_client.close()
            if self.status_endpoint is not None:
                await self.status_endpoint.stop()
            if self._status_client is not None:
                await self._status_client.close()
            if self.health is not None:
                await self.health.stop()
        log.info("operator stopped", extra={"controller": CONTROLLER})
        return code

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_period)
            for key in list(self.trainjobs.store):
                self.queue.add(key, LOW)
            self.optimization.resync()


async def run_operator(client: Client, settings: OperatorSettings, stop: asyncio.Event) -> int:
    operator = Operator(client, settings)
    with contextlib.suppress(asyncio.CancelledError):
        return await operator.run(stop)
    return 0
