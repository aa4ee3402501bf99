"""An in-memory Kubernetes API server over real HTTP (aiohttp on 127.0.0.1, random port).

It implements the REST subset kubetrain and the Kubeflow SDK use: get/list (label and field selectors,
pagination), create, replace, JSON merge patch, server-side apply, delete with finalizers and ownerReference
garbage collection (background and foreground), the status subresource, watches with resourceVersion resume,
bookmarks and ``410 Gone``, and pod logs. Tests inject faults (429 with ``Retry-After``, 5xx), drop or compact
watches to exercise the client's recovery paths, and hold a kind's watch events back (a lagging cache).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from kubetrain.api import KubetrainError
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.k8s.client.resources import KNOWN, Resource
from kubetrain.testing.fakeapi.podlogs import PodLogs
from kubetrain.testing.fakeapi.store import Store, StoreError
from kubetrain.testing.fakeapi.tokens import Tokens

_STATUS_SUBRESOURCE = {
    "trainjobs", "optimizationjobs", "jobsets", "podgroups", "pods", "jobs", "customresourcedefinitions",
}


def default_resources(*, podgroups: bool = True) -> list[tuple[Resource, bool]]:
    """Every resource kubetrain knows; ``podgroups=False`` mimics a cluster without the PodGroup CRDs."""
    return [(r, r.plural in _STATUS_SUBRESOURCE) for r in KNOWN if podgroups or r.plural != "podgroups"]


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    retry_after: str | None = None
    reason: str | None = None
    message: str = "injected"
    details: dict[str, Any] | None = None


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body.update(message=message, reason=reason, code=code)
    if details is not None:
        body["details"] = details
    return web.json_response(body, status=code)


class FakeApiServer:
    """``async with FakeApiServer() as api:`` then point a client at ``api.url`` (see :meth:`kubeconfig`)."""

    def __init__(
        self,
        *,
        resources: list[tuple[Resource, bool]] | None = None,
        token: str | None = None,
        bookmark_interval: float = 5.0,
        history: int = 50_000,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = Store(resources or default_resources(), history=history)
        self.pod_logs = PodLogs(self.store)
        self.tokens = Tokens(self.store)
        """Service-account tokens: the TokenRequest API and TokenReview (``fakeapi.tokens``)."""
        """Containers' logs: tests write them (``pod_logs.write``) as a container runtime would."""
        self.ssl_context = ssl_context
        """Serve HTTPS with this context (e.g. one requiring client certificates, as a kube-apiserver can)."""
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        """``(method, path?query)`` of every request, for tests that assert what went over the wire."""
        self.record = True
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._streams: set[web.StreamResponse] = set()

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    def kubeconfig(self, namespace: str = "default") -> str:
        """A kubeconfig document (YAML text) pointing at this server."""
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
            "current-context": "fake",
        }
        return yaml.safe_dump(doc)

    def inject(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        times: int = 1,
        retry_after: str | None = None,
        reason: str | None = None,
        message: str = "injected",
        details: dict[str, Any] | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests with ``status`` (and the given Status fields) instead of
        serving them."""
        self.faults.append(
            Fault(method.upper(), re.compile(path_regex), status, times, retry_after, reason, message, details)
        )

    async def start(self, port: int = 0) -> FakeApiServer:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A follow whose client went away is noticed only at its next write; on stop, such handlers get 2 s
        # (not aiohttp's 60) before they are cancelled, so a test that left a log follow open still ends quickly.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=self.ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        self.store.drop_watches()
        if self._runner:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeApiServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- routing -------------------------------------------------------------------------------------------
    @staticmethod
    def _route(path: str) -> tuple[str, str | None, str, str | None, str | None]:
        """``(group, namespace, plural, name, subresource)`` from a REST path."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, rest = parts[1], parts[3:]
        else:
            raise StoreError(404, "NotFound", f"no route for {path}")
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise StoreError(404, "NotFound", f"no route for {path}")
        return (
            group,
            namespace,
            rest[0],
            rest[1] if len(rest) > 1 else None,
            rest[2] if len(rest) > 2 else None,
        )

    def _fault(self, request: web.Request) -> web.Response | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method in (request.method, "*") and fault.pattern.search(request.path_qs):
                fault.times -= 1
                reason = fault.reason or ("TooManyRequests" if fault.status == 429 else "InternalError")
                resp = _status(fault.status, reason, fault.message, fault.details)
                if fault.retry_after is not None:
                    resp.headers["Retry-After"] = fault.retry_after
                return resp
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.record:
            self.requests.append((request.method, request.path_qs))
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return _status(401, "Unauthorized", "Unauthorized")
        if (injected := self._fault(request)) is not None:
            return injected
        try:
            group, ns, plural, name, sub = self._route(request.path)
            q = request.query
            manager = q.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]
            s = self.store
            if request.method == "GET":
                if sub == "log":
                    return await self.pod_logs.serve(request, ns or "", name or "")
                if name is not None:
                    return web.json_response(s.get(group, plural, ns, name))
                if q.get("watch") in ("1", "true"):
                    return await self._watch(request, group, plural, ns)
                return web.json_response(self._list(group, plural, ns, q))
            body = await request.read()
            if request.method == "POST" and plural == "serviceaccounts" and sub == "token":
                return web.json_response(self.tokens.request(ns or "", name or "", json.loads(body)), status=201)
            if request.method == "POST" and (group, plural) == ("authentication.k8s.io", "tokenreviews"):
                return web.json_response(self.tokens.review(json.loads(body)), status=201)
            if request.method == "POST" and name is None:
                return web.json_response(s.create(group, plural, ns, json.loads(body), manager), status=201)
            if request.method == "PUT" and name is not None:
                return web.json_response(s.replace(group, plural, ns, name, json.loads(body), manager, sub))
            if request.method == "PATCH" and name is not None:
                ctype = request.content_type
                if ctype == "application/apply-patch+yaml":
                    applied = yaml.safe_load(body) or {}
                    force = q.get("force") == "true"
                    if "fieldManager" not in q:
                        raise StoreError(422, "Invalid", "fieldManager is required for apply requests")
                    return web.json_response(s.apply(group, plural, ns, name, applied, manager, force, sub))
                if ctype == "application/merge-patch+json":
                    return web.json_response(s.merge_patch(group, plural, ns, name, json.loads(body), manager, sub))
                return _status(415, "UnsupportedMediaType", f"the fake does not support {ctype}")
            if request.method == "DELETE" and name is not None:
                options = json.loads(body) if body else {}
                policy = q.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
                return web.json_response(s.delete(group, plural, ns, name, policy))
            return _status(405, "MethodNotAllowed", f"{request.method} not allowed on {request.path}")
        except StoreError as exc:
            return _status(exc.code, exc.reason, exc.message)

    def _list(self, group: str, plural: str, ns: str | None, q: Any) -> dict[str, Any]:
        items, rv = self.store.list(group, plural, ns, q.get("labelSelector"), q.get("fieldSelector"))
        start = int(q.get("continue") or 0)
        limit = int(q.get("limit") or 0) or len(items) or 1
        page, more = items[start : start + limit], start + limit < len(items)
        res = self.store.table(group, plural).resource
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = str(start + limit)
        return {"apiVersion": res.api_version, "kind": f"{res.kind}List", "metadata": meta, "items": page}

    async def _watch(self, request: web.Request, group: str, plural: str, ns: str | None) -> web.StreamResponse:
        raw_rv = request.query.get("resourceVersion")
        since = int(raw_rv) if raw_rv not in (None, "", "0") else None
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        # The real server filters watch events by labelSelector too (objects leaving the selection, which it
        # reports as DELETED, are simply not sent here).
        try:
            selector = parse_selector(request.query.get("labelSelector") or "")
        except KubetrainError as exc:
            return _status(400, "BadRequest", f"unable to parse requirement: {exc}")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            backlog, queue = self.store.subscribe(group, plural, ns, since)
        except StoreError as exc:
            # The real server reports an expired version as an ERROR event on a 200 stream.
            status: dict[str, Any] = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": exc.message,
            }
            status.update(reason=exc.reason, code=exc.code)
            await resp.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
            return resp
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for _, type_, obj in backlog:
                if not selector.matches(obj["metadata"].get("labels")):
                    continue
                await resp.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")
            while (left := deadline - loop.time()) > 0:
                try:
                    item = await asyncio.wait_for(queue.get(), min(left, self.bookmark_interval))
                except TimeoutError:
                    if bookmarks:
                        held = self.store.held_from(group, plural)  # a lagging watch has not got that far
                        rv = self.store.rv if held is None else held - 1
                        bm = {"kind": "", "apiVersion": "", "metadata": {"resourceVersion": str(rv)}}
                        await resp.write(json.dumps({"type": "BOOKMARK", "object": bm}).encode() + b"\n")
                    continue
                if item is None:
                    break
                if not selector.matches(item[2]["metadata"].get("labels")):
                    continue
                await resp.write(json.dumps({"type": item[1], "object": item[2]}).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unsubscribe(group, plural, queue)
        return resp
