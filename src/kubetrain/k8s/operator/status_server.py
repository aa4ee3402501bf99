"""The operator's status endpoint (upstream KEP-2779): pods report ``status.trainerStatus`` of their TrainJob.

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status`` over TLS, body
``{"trainerStatus": {...}}``, ``Authorization: Bearer <projected service-account token>``. A report is written
only when all of this holds, in this order:

1. the token is valid for audience ``trainer.kubeflow.org`` (a TokenReview, cached: ``TokenReviewer``), else 401;
2. the token's subject (its service account) is under its rate limit, else 429 with ``Retry-After``;
3. the token is bound to a pod (``authentication.kubernetes.io/pod-name`` in the review's ``user.extra``) in
   ``{ns}`` that belongs to that TrainJob (label ``jobset.sigs.k8s.io/jobset-name: {name}``, same uid; the
   TrainJob's pods are listed once and cached: ``PodMembership``), else 403;
4. the body is a valid trainerStatus (``kubetrain.api.progress``), else 422/413.

Then ``status.trainerStatus`` is merge-patched on the status subresource (404 when the TrainJob is gone) and the
report is echoed with 200. Errors are ``metav1.Status`` bodies, as upstream's server answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import logging
import ssl
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from kubetrain.api import constants as c
from kubetrain.api import progress as P
from kubetrain.k8s.client import ApiError, Client, NotFound
from kubetrain.k8s.client import resources as r

log = logging.getLogger("kubetrain.operator.status")

POD_NAME_CLAIM = "authentication.kubernetes.io/pod-name"
POD_UID_CLAIM = "authentication.kubernetes.io/pod-uid"


@dataclass(frozen=True)
class Identity:
    """Who a valid token speaks for."""

    subject: str  # system:serviceaccount:<ns>:<sa>
    namespace: str
    pod: str | None
    pod_uid: str | None


class TokenReviewer:
    """TokenReviews with a cache: a valid token is trusted for ``ttl`` seconds, an invalid one refused for
    ``negative_ttl`` without asking again, and concurrent reviews of one token share one request."""

    def __init__(self, client: Client, *, ttl: float = 60.0, negative_ttl: float = 10.0, size: int = 10_000) -> None:
        self.client = client
        self.ttl, self.negative_ttl, self.size = ttl, negative_ttl, size
        self._cache: OrderedDict[str, tuple[float, Identity | None]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[Identity | None]] = {}
        self.requests = 0

    async def review(self, token: str) -> Identity | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep the token itself
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            self._cache.move_to_end(key)
            return hit[1]
        if key in self._pending:
            return await asyncio.shield(self._pending[key])
        fut: asyncio.Future[Identity | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        try:
            identity = await self._ask(token)
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it, nobody logs it as unhandled
            raise
        finally:
            self._pending.pop(key, None)
        fut.set_result(identity)
        self._cache[key] = (now + (self.ttl if identity else self.negative_ttl), identity)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return identity

    async def _ask(self, token: str) -> Identity | None:
        self.requests += 1
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [P.TOKEN_AUDIENCE]},
        }
        answer = await self.client.create(review, resource=r.TOKEN_REVIEW)
        status = answer.get("status") or {}
        if not status.get("authenticated") or P.TOKEN_AUDIENCE not in (status.get("audiences") or [P.TOKEN_AUDIENCE]):
            return None
        user = status.get("user") or {}
        subject = str(user.get("username") or "")
        parts = subject.split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return None  # not a service account: no pod, no namespace to speak for
        extra = user.get("extra") or {}
        pod = (extra.get(POD_NAME_CLAIM) or [None])[0]
        uid = (extra.get(POD_UID_CLAIM) or [None])[0]
        return Identity(subject, parts[2], pod, uid)


class PodMembership:
    """Which pods belong to a TrainJob: its pods are listed by label once and cached for ``ttl``; a pod the
    cache does not know triggers a new list, at most every ``relist`` seconds per TrainJob."""

    def __init__(self, client: Client, *, ttl: float = 30.0, relist: float = 2.0, size: int = 10_000) -> None:
        self.client = client
        self.ttl, self.relist, self.size = ttl, relist, size
        self._pods: OrderedDict[tuple[str, str], tuple[float, dict[str, str]]] = OrderedDict()

    async def _list(self, namespace: str, trainjob: str) -> dict[str, str]:
        items, _ = await self.client.list(r.POD, namespace, label_selector=f"{c.LABEL_JOBSET_NAME}={trainjob}")
        pods = {
            str(p["metadata"]["name"]): str(p["metadata"].get("uid") or "")
            for p in items
            if (p.get("metadata") or {}).get("labels", {}).get(c.LABEL_JOBSET_NAME) == trainjob
        }
        self._pods[(namespace, trainjob)] = (time.monotonic(), pods)
        self._pods.move_to_end((namespace, trainjob))
        while len(self._pods) > self.size:
            self._pods.popitem(last=False)
        return pods

    async def contains(self, namespace: str, trainjob: str, pod: str, uid: str | None) -> bool:
        now = time.monotonic()
        cached = self._pods.get((namespace, trainjob))
        pods = cached[1] if cached is not None and now - cached[0] < self.ttl else None
        if pods is None or (pod not in pods and now - (cached or (0.0, {}))[0] >= self.relist):
            pods = await self._list(namespace, trainjob)
        return pod in pods and (not uid or not pods[pod] or pods[pod] == uid)


class SubjectLimiter:
    """A token bucket per token subject (upstream keys its limit on the service account)."""

    def __init__(self, rate: float, burst: int, size: int = 10_000) -> None:
        self.rate, self.burst, self.size = rate, burst, size
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, subject: str) -> float:
        """0 when allowed, else the seconds until the next report would be."""
        now = time.monotonic()
        tokens, stamp = self._buckets.get(subject, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) * self.rate)
        if tokens < 1.0:
            self._buckets[subject] = (tokens, now)
            return (1.0 - tokens) / self.rate
        self._buckets[subject] = (tokens - 1.0, now)
        self._buckets.move_to_end(subject)
        while len(self._buckets) > self.size:
            self._buckets.popitem(last=False)
        return 0.0


class Certificates:
    """The endpoint's serving certificate and the CA pods must trust: files in a directory (the webhook's,
    reloaded when they change), or a self-signed pair made at start-up for ``names``."""

    def __init__(self, cert_dir: str | None, names: list[str]) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if cert_dir is None:
            from kubetrain import pki
            from kubetrain.k8s import certs

            self._tmp = tempfile.TemporaryDirectory(prefix="kubetrain-status-")
            now = dt.datetime.now(dt.UTC)
            ca = pki.generate_ca(now, common_name="kubetrain-status-ca")
            cert, key = pki.generate_serving_cert(ca[0], ca[1], names, now)
            certs.write_cert_dir(certs.CertBundle(ca[0], ca[1], cert, key), self._tmp.name)
            cert_dir = self._tmp.name
        self.dir = Path(cert_dir)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, ...] = ()
        self.ca_pem = ""
        self.reload()

    def _files(self) -> tuple[Path, Path, Path]:
        return self.dir / "tls.crt", self.dir / "tls.key", self.dir / P.CA_FILE

    def reload(self) -> bool:
        """Load the files if they changed; True when they did. The CA is ``ca.crt``, else the certificate itself
        (a self-signed one)."""
        cert, key, ca = self._files()
        stamp = tuple(p.stat().st_mtime if p.exists() else 0.0 for p in (cert, key, ca))
        if stamp == self._stamp:
            return False
        self.context.load_cert_chain(str(cert), str(key))
        self.ca_pem = (ca if ca.exists() else cert).read_text()
        self._stamp = stamp
        return True

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def cert_names(service: str, namespace: str, url: str | None) -> list[str]:
    names = [f"{service}.{namespace}.svc", f"{service}.{namespace}", service,
             f"{service}.{namespace}.svc.cluster.local", "localhost", "127.0.0.1"]  # fmt: skip
    host = urlsplit(url).hostname if url else None
    if host and host not in names:
        names.append(host)
    return names


class StatusEndpoint:
    def __init__(
        self,
        client: Client,
        certificates: Certificates,
        *,
        rate: float = 5.0,
        burst: int = 20,
        metrics: Any = None,
    ) -> None:
        self.client = client
        self.certs = certificates
        self.reviewer = TokenReviewer(client)
        self.members = PodMembership(client)
        self.limiter = SubjectLimiter(rate, burst)
        self.metrics = metrics
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None

    def _answer(self, code: int, message: str, namespace: str = "", name: str = "", **headers: str) -> web.Response:
        if self.metrics is not None:
            self.metrics.status_reports.labels(str(code)).inc()
        if code >= 400:
            log.info("status report refused: %d %s", code, message, extra={"object": f"TrainJob {namespace}/{name}"})
        return web.Response(status=code, body=P.error_body(code, message), content_type="application/json",
                            headers=headers)  # fmt: skip

    async def handle(self, request: web.Request) -> web.Response:
        target = P.parse_path(request.path)
        if target is None:
            return self._answer(404, f"not found: {request.path}")
        ns, name = target
        scheme, _, token = (request.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return self._answer(401, "missing bearer token (send the pod's projected service-account token, "
                                f"audience {P.TOKEN_AUDIENCE})", ns, name)  # fmt: skip
        try:
            identity = await self.reviewer.review(token.strip())
        except ApiError as exc:
            return self._answer(503, f"could not verify the token (TokenReview: {exc.status} {exc.reason})", ns, name)
        if identity is None:
            return self._answer(401, f"invalid token: not a service-account token for audience {P.TOKEN_AUDIENCE}",
                                ns, name)  # fmt: skip
        wait = self.limiter.take(identity.subject)
        if wait > 0:
            return self._answer(429, f"too many reports from {identity.subject}; retry in {wait:.1f}s", ns, name,
                                **{"Retry-After": str(max(1, round(wait)))})  # fmt: skip
        if identity.pod is None:
            return self._answer(403, f"{identity.subject}: the token is not bound to a pod", ns, name)
        try:
            member = identity.namespace == ns and await self.members.contains(ns, name, identity.pod,
                                                                              identity.pod_uid)  # fmt: skip
        except ApiError as exc:
            return self._answer(503, f"could not list the pods of TrainJob {ns}/{name}: {exc.status} {exc.reason}",
                                ns, name)  # fmt: skip
        if not member:
            return self._answer(403, f"pod {identity.namespace}/{identity.pod} does not belong to TrainJob {ns}/{name}",
                                ns, name)  # fmt: skip
        try:
            report = P.parse_report(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return self._answer(413, f"request body larger than {P.MAX_BODY} bytes", ns, name)
        except P.ReportError as exc:
            return self._answer(exc.code, exc.message, ns, name)
        if report is not None:
            try:
                await self.client.patch_status(r.TRAINJOB, name, ns, {"trainerStatus": report})
            except NotFound:
                return self._answer(404, f"TrainJob {ns}/{name} not found", ns, name)
            except ApiError as exc:
                code = exc.status if exc.status in (409, 422) else 503
                return self._answer(code, f"status update failed: {exc.message}", ns, name)
        if self.metrics is not None:
            self.metrics.status_reports.labels("200").inc()
        return web.json_response({"trainerStatus": report})

    async def _not_found(self, request: web.Request) -> web.Response:
        return self._answer(404, f"not found: {request.method} {request.path}")

    async def start(self, host: str, port: int) -> None:
        app = web.Application(client_max_size=P.MAX_BODY)
        app.router.add_post("/{tail:.*}", self.handle)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=self.certs.context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._watch = asyncio.create_task(self._reload_certs())
        log.info("status endpoint listening on https://%s:%d", host, self.port)

    async def _reload_certs(self, interval: float = 10.0) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                if self.certs.reload():
                    log.info("status endpoint certificate reloaded")
            except (OSError, ssl.SSLError) as exc:  # a half-written pair: next round
                log.warning("status endpoint certificate reload skipped: %s", exc)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._runner is not None:
            await self._runner.cleanup()
        self.certs.close()
