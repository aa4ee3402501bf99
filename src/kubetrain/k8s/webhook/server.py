"""The admission webhook HTTPS server (aiohttp).

``make_app`` builds the routes; ``start`` serves them over TLS and returns a handle whose ``reload_certs``
picks up rotated certificate files without dropping connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from kubetrain.k8s.webhook import names
from kubetrain.k8s.webhook.admission import BadReview, LookupFailed, Request, Response
from kubetrain.k8s.webhook.podsecurity import NamespaceLookup
from kubetrain.k8s.webhook.review import (
    Clock,
    JobSetLookup,
    RuntimeLookup,
    default_trainjob_with_runtime,
    review_optimizationjob,
    review_runtime,
    review_trainjob,
)
from kubetrain.k8s.webhook.scale import TrainJobLookup, is_scale, review_scale
from kubetrain.k8s.webhook.warnings import admission_warnings

WarningEvents = Callable[[Request, list[str]], Coroutine[Any, Any, None]]
"""``(request, complete warning texts) -> None``: records them as an Event on the object under review."""

log = logging.getLogger(__name__)

# Request bodies are one object plus its old version; 8 MiB leaves room for large pod templates.
MAX_BODY = 8 * 1024 * 1024


@dataclass
class Latencies:
    """Server-side handling time per path (seconds), the most recent ``keep`` requests."""

    keep: int = 10_000
    samples: dict[str, deque[float]] = field(default_factory=dict)

    def add(self, path: str, seconds: float) -> None:
        self.samples.setdefault(path, deque(maxlen=self.keep)).append(seconds)

    def percentile(self, path: str, p: float) -> float:
        data = sorted(self.samples.get(path, ()))
        if not data:
            return 0.0
        return data[min(len(data) - 1, round(p / 100 * (len(data) - 1)))]


LATENCIES = web.AppKey("latencies", Latencies)
READY = web.AppKey("ready", asyncio.Event)

Review = Callable[[Request], Awaitable[Response]]


def _handler(
    review: Review, latencies: Latencies, warning_events: WarningEvents | None = None
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    background: set[asyncio.Task[None]] = set()

    def record(req: Request, resp: Response) -> None:
        """Shortened warnings point at an Event with the complete text; written after the answer, so
        admission never waits for it. Dry runs have no side effects (sideEffects: NoneOnDryRun)."""
        if warning_events is None or req.dry_run or not resp.warning_findings or req.obj is None:
            return
        warnings = admission_warnings(resp.warning_findings, events=True)
        details = [w.detail for w in warnings if w.shortened]
        if not details:
            return
        # The findings' warnings come first; others (Pod Security) are already brief and stay as they are.
        plain = [w.text for w in admission_warnings(resp.warning_findings, events=False)]
        if resp.warnings[: len(plain)] == plain:
            resp.warnings = [w.text for w in warnings] + resp.warnings[len(plain) :]
        task: asyncio.Task[None] = asyncio.create_task(warning_events(req, details))
        background.add(task)
        task.add_done_callback(background.discard)

    async def handle(http: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            try:
                req = Request.parse(json.loads(await http.read()))
            except (ValueError, BadReview) as exc:  # json.JSONDecodeError is a ValueError
                return web.Response(status=400, text=f"bad AdmissionReview: {exc}\n")
            try:
                resp = await review(req)
            except LookupFailed as exc:
                log.warning("admission %s %s: %s", http.path, req.uid, exc)
                resp = Response(uid=req.uid, errors=[str(exc)], code=500)
            except Exception as exc:  # the API server turns a broken response into a denial anyway
                log.exception("admission %s %s failed", http.path, req.uid)
                resp = Response(uid=req.uid, errors=[f"internal error: {exc}"], code=500)
            record(req, resp)
            return web.json_response(resp.to_review(), dumps=_dumps)
        finally:
            latencies.add(http.path, time.perf_counter() - started)

    return handle


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def make_app(
    runtime_lookup: RuntimeLookup,
    *,
    jobset_lookup: JobSetLookup | None = None,
    clock: Clock = _utcnow,
    latencies: Latencies | None = None,
    warning_events: WarningEvents | None = None,
    namespace_lookup: NamespaceLookup | None = None,
    trainjob_lookup: TrainJobLookup | None = None,
) -> web.Application:
    """The webhook routes (upstream's paths) plus ``/healthz`` and ``/readyz``.

    ``runtime_lookup(kind, name, namespace)`` returns the live runtime (a model or its dict) or None;
    ``jobset_lookup(name, namespace)`` the live JobSet dict or None (used when runtime patches change);
    ``clock`` stamps ``runtimePatches[].time``; ``warning_events`` records the complete text of warnings that
    had to be shortened (without it, warnings are only shortened); ``namespace_lookup(name)`` returns a
    namespace's labels (or None), for its ``pod-security.kubernetes.io/*`` levels (without it: Pod Security
    warnings at baseline, no enforcement); ``trainjob_lookup(name, namespace)`` the live TrainJob, for reviews
    of its scale subresource (without it, scaling is admitted unchecked).
    """
    lat = latencies or Latencies()
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_one_request_per_connection])
    app[LATENCIES] = lat
    app[READY] = asyncio.Event()

    async def trainjob(req: Request) -> Response:
        if is_scale(req):
            return await review_scale(req, trainjob_lookup, trainjob)
        return await review_trainjob(req, runtime_lookup, jobset_lookup, namespace_lookup)

    async def runtime(req: Request) -> Response:
        return await review_runtime(req, namespace_lookup)

    async def optimizationjob(req: Request) -> Response:
        return await review_optimizationjob(req, runtime_lookup)

    async def defaulter(req: Request) -> Response:
        return await default_trainjob_with_runtime(req, clock, runtime_lookup)

    app.router.add_post(names.MUTATE_TRAINJOB, _handler(defaulter, lat))
    app.router.add_post(names.VALIDATE_TRAINJOB, _handler(trainjob, lat, warning_events))
    app.router.add_post(names.VALIDATE_TRAINING_RUNTIME, _handler(runtime, lat, warning_events))
    app.router.add_post(names.VALIDATE_CLUSTER_TRAINING_RUNTIME, _handler(runtime, lat, warning_events))
    app.router.add_post(names.VALIDATE_OPTIMIZATIONJOB, _handler(optimizationjob, lat, warning_events))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(http: web.Request) -> web.Response:
        ready = http.app[READY].is_set()
        return web.Response(status=200 if ready else 503, text="ok\n" if ready else "not serving yet\n")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@web.middleware
async def _one_request_per_connection(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Answer with ``Connection: close``. The API server pools keep-alive connections by the Service's name, not
    by pod, so it keeps sending reviews over connections to a pod whose endpoint is already gone; when that pod
    stops, a review written at the moment it closes such a connection fails (EOF), and the API server refuses
    the create (it does not resend a POST). A new connection per review is dialled to a Ready endpoint each time
    and leaves no idle connection to race with. The price, a TLS handshake per review, is in bench/webhook.py."""
    response = await handler(request)
    response.force_close()
    return response


def _self_signed(cert_dir: Path) -> bool:
    """Whether to manage certificates ourselves: ``KUBETRAIN_WEBHOOK_CERT_MODE`` (``self-signed`` or
    ``cert-manager``) when set; else yes for an empty directory or one we wrote (a restarted container),
    no for certificates someone else put there."""
    from kubetrain.k8s.certs import MANAGED_MARKER

    mode = os.environ.get("KUBETRAIN_WEBHOOK_CERT_MODE", "")
    if mode in ("self-signed", "cert-manager"):
        return mode == "self-signed"
    return not (cert_dir / "tls.crt").exists() or (cert_dir / MANAGED_MARKER).exists()


def server_ssl_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    """TLS 1.2+ server context (the API server speaks 1.2 and 1.3)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


@dataclass
class WebhookServer:
    """A running server. ``port`` is the bound port (useful when started with port 0).

    Awaiting ``stop()`` (or calling the handle itself: ``await server()``) stops serving and the background
    certificate tasks.
    """

    runner: web.AppRunner
    site: web.TCPSite
    ssl_context: ssl.SSLContext
    cert_file: Path
    key_file: Path
    port: int
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    trust: Callable[[], bytes | None] = lambda: None
    """The CA the API server is configured to trust for this server (self-signed mode: the CertManager's, once
    both webhook configurations carry it), or None when that is not ours to know (certificates from elsewhere)."""
    server_name: str | None = None
    """The DNS name the API server verifies (``<service>.<namespace>.svc``); None: the certificate's names are
    someone else's choice (e.g. 127.0.0.1 in the e2e set-up) and only the chain is checked."""
    serving: bool = False
    """The last self-check passed: a TLS client trusting :attr:`trust` got an answer from this server."""
    probe_host: str = "127.0.0.1"
    """Where the self-check connects (the bound address; loopback when bound to every address)."""

    @property
    def app(self) -> web.Application:
        return self.runner.app

    def ready(self) -> bool:
        """Whether the API server can call this server now: listening, not stopping, serving a certificate the
        webhook configurations trust (checked end to end by :meth:`self_check`)."""
        return self.serving and not self.stopping.is_set()

    def reload_certs(self) -> None:
        """Serve the current files from now on; connections already open keep their session."""
        self.ssl_context.load_cert_chain(str(self.cert_file), str(self.key_file))
        log.info("webhook serving certificate reloaded")
        with contextlib.suppress(RuntimeError):  # no running loop: the next self-check round covers it
            task = asyncio.get_running_loop().create_task(self.self_check())
            self.tasks.append(task)
            task.add_done_callback(lambda t: self.tasks.remove(t) if t in self.tasks else None)

    async def self_check(self, timeout: float = 5.0) -> bool:
        """Call this server the way the API server will (TLS verified against the CA the configurations trust,
        for the Service's DNS name) and set :attr:`serving` from the answer of its ``/readyz``."""
        ok = False
        try:
            ok = await asyncio.wait_for(self._probe(), timeout)
        except (OSError, ssl.SSLError, TimeoutError, ValueError) as exc:
            log.warning("webhook self-check failed: %s", exc)
        if ok != self.serving:
            log.info("webhook %s", "ready: the API server can call it" if ok else "not ready")
        self.serving = ok
        return ok

    async def _probe(self) -> bool:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ca = self.trust()
        if ca is not None:
            ctx.load_verify_locations(cadata=ca.decode())
            ctx.check_hostname = self.server_name is not None
        else:
            # Not ours to verify (the issuer's CA may be anywhere): the handshake and the answer still show
            # the server serves its certificate.
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        reader, writer = await asyncio.open_connection(
            self.probe_host, self.port, ssl=ctx, server_hostname=self.server_name or "localhost"
        )
        try:
            writer.write(b"GET /readyz HTTP/1.1\r\nHost: webhook\r\nConnection: close\r\n\r\n")
            await writer.drain()
            status = await reader.readline()
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
        return status.split(b" ")[1:2] == [b"200"]

    async def keep_checking(self, interval: float = 30.0) -> None:
        """Re-run the self-check: quickly until it first passes, then every ``interval`` (a caBundle someone
        wiped, a certificate that stopped loading)."""
        while not self.stopping.is_set():
            await self.self_check()
            delay = interval if self.serving else 0.5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=delay)

    async def watch_certs(self, interval: float = 10.0) -> None:
        """Reload when the files change (cert-manager or a kubelet-refreshed Secret volume)."""

        def stamp() -> tuple[float, float]:
            return (self.cert_file.stat().st_mtime, self.key_file.stat().st_mtime)

        last = stamp()
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=interval)
            try:
                now = stamp()
                if now != last:
                    self.reload_certs()
                    last = now
            except (OSError, ssl.SSLError) as exc:  # half-written pair: try again next round
                log.warning("webhook certificate reload skipped: %s", exc)

    async def stop(self) -> None:
        self.stopping.set()
        self.serving = False
        self.app[READY].clear()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.runner.cleanup()

    async def __call__(self) -> None:
        await self.stop()


async def start(
    runtime_lookup: RuntimeLookup | None = None,
    *,
    client: Any = None,
    cert_dir: str | Path | None = None,
    host: str = "0.0.0.0",
    port: int = names.DEFAULT_PORT,
    jobset_lookup: JobSetLookup | None = None,
    namespace_lookup: NamespaceLookup | None = None,
    trainjob_lookup: TrainJobLookup | None = None,
    clock: Clock = _utcnow,
    manage_certs: bool | None = None,
    service: str | None = None,
    namespace: str | None = None,
    secret_name: str | None = None,
    cert_watch_interval: float = 10.0,
    warning_events: WarningEvents | None = None,
    warm: bool = True,
) -> WebhookServer:
    """Serve the webhooks over HTTPS with ``<cert_dir>/tls.crt`` and ``tls.key``. Returns once listening.

    Give either ``runtime_lookup`` (and optionally ``jobset_lookup``) or the operator's API ``client``, from
    which both lookups are built. With a client, ``manage_certs=None`` follows ``KUBETRAIN_WEBHOOK_CERT_MODE``
    (``self-signed`` | ``cert-manager``), else: a ``cert_dir`` without a certificate (an emptyDir) or with
    one CertManager wrote selects self-signed mode (a CA and serving certificate kept in the Secret, the
    directory and the webhook configurations' caBundle: ``kubetrain.k8s.certs.CertManager``); certificates
    put there by someone else (a mounted cert-manager Secret) are only reloaded when they change.
    Service, namespace and Secret default to ``KUBETRAIN_WEBHOOK_SERVICE``, ``POD_NAMESPACE`` (else the
    service account's namespace) and ``KUBETRAIN_WEBHOOK_SECRET``, then to ``names.DEFAULT_*``.
    Warnings longer than 120 characters are shortened; with a client (or ``warning_events``) their complete
    text is recorded as a Warning Event on the object.

    Before returning it warms the review path (``warm``: see :func:`warm_up`) and checks itself the way the API
    server will call it (:meth:`WebhookServer.self_check`); :meth:`WebhookServer.ready` says whether it may
    take traffic, and is re-checked in the background.
    """
    adapter = None
    if client is not None:
        from kubetrain.k8s.webhook.wiring import ClientAdapter

        adapter = ClientAdapter(client)
        runtime_lookup = runtime_lookup or adapter.runtime
        jobset_lookup = jobset_lookup or adapter.jobset
        namespace_lookup = namespace_lookup or adapter.namespace_labels
        trainjob_lookup = trainjob_lookup or adapter.trainjob
    if runtime_lookup is None:
        raise TypeError("start() needs runtime_lookup or client")
    cert_path = Path(cert_dir or names.DEFAULT_CERT_DIR)
    cert_file, key_file = cert_path / "tls.crt", cert_path / "tls.key"
    if manage_certs is None:
        manage_certs = _self_signed(cert_path) if adapter is not None else False
    manager = None
    if manage_certs:
        if adapter is None:
            raise TypeError("manage_certs needs the API client")
        from kubetrain.k8s.certs import MUTATING, VALIDATING, CertManager
        from kubetrain.k8s.webhook.wiring import operator_namespace

        manager = CertManager(
            adapter,
            service=service or os.environ.get("KUBETRAIN_WEBHOOK_SERVICE") or names.DEFAULT_SERVICE,
            namespace=namespace or operator_namespace(names.DEFAULT_NAMESPACE),
            secret_name=secret_name or os.environ.get("KUBETRAIN_WEBHOOK_SECRET") or names.DEFAULT_SECRET,
            cert_dir=cert_path,
            configurations=[
                (VALIDATING, names.VALIDATING_CONFIGURATION),
                (MUTATING, names.MUTATING_CONFIGURATION),
            ],
        )
        await manager.reconcile()  # the first certificate must exist before the server can listen
    ctx = server_ssl_context(cert_file, key_file)
    app = make_app(
        runtime_lookup,
        jobset_lookup=jobset_lookup,
        clock=clock,
        namespace_lookup=namespace_lookup,
        trainjob_lookup=trainjob_lookup,
        warning_events=warning_events or (adapter.warning_event if adapter is not None else None),
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)  # no access log: one line per review
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ctx)
    await site.start()
    bound = port
    server_obj = getattr(site, "_server", None)
    if server_obj is not None and server_obj.sockets:
        bound = server_obj.sockets[0].getsockname()[1]
    server = WebhookServer(runner, site, ctx, cert_file, key_file, bound)
    if host not in ("0.0.0.0", "", "::"):
        server.probe_host = host
    if manager is not None:
        mgr = manager
        server.trust = lambda: mgr.trusted
        server.server_name = f"{mgr.service}.{mgr.namespace}.svc"
    elif (cert_path / "ca.crt").exists():
        ca_file = cert_path / "ca.crt"
        server.trust = lambda: ca_file.read_bytes() if ca_file.exists() else None
    server.tasks.append(asyncio.create_task(server.watch_certs(cert_watch_interval)))
    if manager is not None:
        manager.on_rotate = (*manager.on_rotate, server.reload_certs)
        server.tasks.append(asyncio.create_task(manager.run(server.stopping)))
    app[READY].set()
    log.info("admission webhook listening on https://%s:%d", host, bound)
    if warm:
        await warm_up(adapter, namespace or operator_namespace_or_default())
    await server.self_check()
    server.tasks.append(asyncio.create_task(server.keep_checking()))
    return server


def operator_namespace_or_default() -> str:
    from kubetrain.k8s.webhook.wiring import operator_namespace

    return operator_namespace(names.DEFAULT_NAMESPACE)


async def warm_up(adapter: Any, namespace: str) -> float:
    """Pay the first review's one-time costs before the first real one: a TrainJob of the built-in
    ``torch-distributed`` runtime through the defaulter and the validator (imports, the compiler's plugins, the
    Pod Security rules; in memory, nothing sent anywhere), and the API connection the lookups use (one GET of
    the operator's namespace, which RBAC allows). Returns the seconds it took; never raises."""
    started = time.perf_counter()
    try:
        from kubetrain.runtimes import builtin_runtime

        runtime = builtin_runtime("torch-distributed")

        async def lookup(kind: str, name: str, ns: str | None) -> Any:
            return runtime

        obj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "warm-up", "namespace": namespace},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
        }
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "warm-up",
                "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
                "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
                "operation": "CREATE",
                "namespace": namespace,
                "name": "warm-up",
                "object": obj,
                "dryRun": True,
            },
        }
        req = Request.parse(json.loads(json.dumps(review)))
        await default_trainjob_with_runtime(req, _utcnow, lookup)
        answer = await review_trainjob(req, lookup)
        _dumps(answer.to_review())
        if adapter is not None:
            await adapter.namespace_labels(namespace)
    except Exception as exc:  # a warm-up is an optimisation: the real review reports real problems
        log.info("webhook warm-up incomplete: %s", exc)
    took = time.perf_counter() - started
    log.info("webhook warm-up took %.2fs", took)
    return took
