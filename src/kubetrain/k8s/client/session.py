"""One HTTP session to the API server: auth, rate limit, retries on 429/5xx, JSON in and out.

Every verb module (getting, applying, patching, ...) goes through :meth:`ApiSession.request` or
:meth:`ApiSession.stream`, so throttling and retry behaviour live in exactly one place.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from multidict import CIMultiDict

from kubetrain.k8s.client.config import ClusterConfig
from kubetrain.k8s.client.errors import ApiError, CredentialError, error_for
from kubetrain.k8s.client.exec_auth import Credential, ExecPluginError
from kubetrain.k8s.client.ratelimit import TokenBucket

log = logging.getLogger("kubetrain.k8s.client")

RETRYABLE = frozenset({429, 500, 502, 503, 504})


def resource_of(path: str) -> str:
    """``jobsets`` for ``/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/name/status``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    start = 2 if parts[:1] == ["api"] else 3  # /api/v1/... or /apis/<group>/<version>/...
    rest = parts[start:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        rest = rest[2:]  # namespaced: skip "namespaces/<ns>" unless the object is the namespace itself
    return rest[0] if rest else "?"


def parse_warning_header(value: str) -> list[str]:
    """The texts of an RFC 7234 ``Warning`` header (``299 - "text"``, several may be comma-joined).

    The API server quotes each text and escapes ``"`` and ``\\`` inside it; kubectl prints the unescaped text,
    and so must we (``Referenced ClusterTrainingRuntime "x"``, not ``\\"x\\"``). A value that does not parse is
    kept whole rather than lost.
    """
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " ,":
            i += 1
        start = i
        parts = []
        for _ in range(2):  # warn-code, warn-agent
            j = value.find(" ", i)
            if j < 0:
                return [*out, value[start:].strip()] if value[start:].strip() else out
            parts.append(value[i:j])
            i = j + 1
        if i >= n or value[i] != '"':
            return [*out, value[start:].strip()]
        i += 1
        text = []
        while i < n and value[i] != '"':
            if value[i] == "\\" and i + 1 < n:
                i += 1
            text.append(value[i])
            i += 1
        i += 1  # closing quote
        if i < n and value[i] == " " and i + 1 < n and value[i + 1] == '"':  # an optional quoted warn-date
            end = value.find('"', i + 2)
            i = n if end < 0 else end + 1
        out.append("".join(text) if parts[0] == "299" else value[start:i].strip())
    return out


class ApiSession:
    """Owns the aiohttp session. Create it inside a running event loop; close it with :meth:`close`."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = 50.0,
        burst: int = 100,
        max_retries: int = 5,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        user_agent: str = "kubetrain",
        request_timeout: float = 60.0,
    ) -> None:
        self.config = config
        self.limiter = TokenBucket(qps, burst)
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.requests_total = 0
        """Requests sent, retries included (the bench reads it)."""
        self.writes: collections.Counter[str] = collections.Counter()
        """Writes sent (POST, PUT, PATCH, DELETE) by resource plural, retries included."""
        self.warnings: list[str] = []
        """``Warning`` headers from the server (admission warnings, deprecations), oldest first."""
        self._timeout = request_timeout
        self._user_agent = user_agent
        self._cert: tuple[bytes | None, bytes | None] = (None, None)
        """The exec plugin's client certificate the current HTTP session presents."""
        self._retired: list[aiohttp.ClientSession] = []
        # Without an exec plugin the TLS settings never change; with one, the session is made on first use,
        # once the plugin said whether it authenticates with a certificate.
        self._session: aiohttp.ClientSession | None = None if config.exec else self._new_session(None)

    def _new_session(self, credential: Credential | None) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(ssl=self.config.ssl_context(credential), limit=100)
        # A hung request must not pin a reconcile worker for aiohttp's default five minutes; the API server
        # itself gives up on most requests after 60 s. Streams (watches, logs) override this.
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._timeout),
            base_url=None,
            connector=connector,
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
        )

    async def close(self) -> None:
        for session in (*self._retired, self._session):
            if session is not None:
                await session.close()
        self._retired.clear()

    async def _prepare(self, extra: Mapping[str, str] | None) -> tuple[aiohttp.ClientSession, CIMultiDict[str]]:
        """The HTTP session to use and the request headers with the current credential."""
        headers: CIMultiDict[str] = CIMultiDict(extra or {})
        for name, values in self.config.impersonate.items():
            for value in values:
                headers.add(name, value)  # Impersonate-Group repeats, one header per group
        credential = None
        if self.config.exec is not None:
            credential = self.config.exec.cached()
            if credential is None:
                try:
                    # The plugin may take seconds (a browser login, a cloud CLI): never block the event loop.
                    credential = await asyncio.to_thread(self.config.exec.credential)
                except ExecPluginError as exc:
                    raise CredentialError(str(exc)) from exc
            cert = (credential.cert_pem, credential.key_pem)
            if self._session is None or cert != self._cert:
                # A rotated client certificate needs a new TLS context. Open streams (watches) keep the old
                # session until they end; it is closed with this one.
                if self._session is not None:
                    self._retired.append(self._session)
                self._session, self._cert = self._new_session(credential), cert
        token = credential.token if credential is not None else self.config.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        assert self._session is not None
        return self._session, headers

    def _unauthorized(self, headers: Mapping[str, str]) -> bool:
        """After a 401: drop the exec plugin's credential that was refused; True when a retry may help."""
        if self.config.exec is None:
            return False
        token = headers.get("Authorization", "").removeprefix("Bearer ") or None
        self.config.exec.invalidate(token)
        return True

    def _collect_warnings(self, headers: list[str]) -> None:
        for h in headers:
            self.warnings.extend(parse_warning_header(h))

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                # The server knows its own load better than our backoff curve does.
                return max(0.0, float(retry_after))
            except ValueError:
                pass
        base = min(self.backoff_max, self.backoff_base * (2.0**attempt))
        return base * (0.5 + random.random() / 2)  # jitter so a crowd of clients does not retry in lockstep

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """Send one request (retrying throttled and transient failures); returns the decoded JSON body."""
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        attempt = 0
        reauthenticated = False
        while True:
            await self.limiter.acquire()
            self.requests_total += 1
            if method != "GET":
                self.writes[resource_of(path)] += 1
            session, sent = await self._prepare(headers)
            try:
                async with session.request(
                    method,
                    self.config.server + path,
                    params=params,
                    data=data,
                    headers=sent,
                ) as resp:
                    text = await resp.text()
                    self._collect_warnings(resp.headers.getall("Warning", []))
                    if resp.status < 300:
                        return json.loads(text) if text else {}
                    retry_after = resp.headers.get("Retry-After")
                    status = resp.status
            except (TimeoutError, aiohttp.ClientConnectionError) as exc:
                if attempt >= self.max_retries:
                    raise ApiError(0, "ConnectionError", str(exc)) from exc
                await asyncio.sleep(self._delay(attempt, None))
                attempt += 1
                continue
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if status == 401 and not reauthenticated and self._unauthorized(sent):
                reauthenticated = True  # an expired or revoked plugin credential: ask the plugin once more
                continue
            if status in RETRYABLE and attempt < self.max_retries:
                delay = self._delay(attempt, retry_after if status == 429 else None)
                log.debug("retrying %s %s after %s in %.2fs", method, path, status, delay)
                await asyncio.sleep(delay)
                attempt += 1
                continue
            raise error_for(status, decoded if isinstance(decoded, dict) else None, text)

    @asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET whose body is read incrementally (watches, ``logs -f``); :class:`ApiError` on non-2xx."""
        await self.limiter.acquire()
        self.requests_total += 1
        session, sent = await self._prepare(None)
        client_timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout)
        async with session.get(
            self.config.server + path, params=params, headers=sent, timeout=client_timeout
        ) as resp:
            if resp.status >= 300:
                if resp.status == 401:
                    self._unauthorized(sent)  # the caller's retry (a watch restart) runs the plugin again
                text = await resp.text()
                try:
                    decoded = json.loads(text)
                except ValueError:
                    decoded = None
                raise error_for(resp.status, decoded if isinstance(decoded, dict) else None, text)
            yield resp
