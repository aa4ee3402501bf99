"""One HTTP session to the API server: auth, rate limit, retries on 429/5xx, JSON in and out.

Every verb module (getting, applying, patching, ...) goes through :meth:`ApiSession.request` or
:meth:`ApiSession.stream`, so throttling and retry behaviour live in exactly one place.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from kubetrain.k8s.client.config import ClusterConfig
from kubetrain.k8s.client.errors import ApiError, error_for
from kubetrain.k8s.client.ratelimit import TokenBucket

log = logging.getLogger("kubetrain.k8s.client")

RETRYABLE = frozenset({429, 500, 502, 503, 504})


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
        self.warnings: list[str] = []
        """``Warning`` headers from the server (admission warnings, deprecations), oldest first."""
        connector = aiohttp.TCPConnector(ssl=config.ssl_context(), limit=100)
        # A hung request must not pin a reconcile worker for aiohttp's default five minutes; the API server
        # itself gives up on most requests after 60 s. Streams (watches, logs) override this.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=request_timeout),
            base_url=None,
            connector=connector,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
        )

    async def close(self) -> None:
        await self._session.close()

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        token = self.config.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _collect_warnings(self, headers: list[str]) -> None:
        # RFC 7234 form used by the API server: `299 - "message"`.
        for h in headers:
            code, _, rest = h.partition(" ")
            agent, _, text = rest.partition(" ")
            self.warnings.append(text.strip().strip('"') if code == "299" and agent == "-" else h)

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
        while True:
            await self.limiter.acquire()
            self.requests_total += 1
            try:
                async with self._session.request(
                    method,
                    self.config.server + path,
                    params=params,
                    data=data,
                    headers=self._headers(headers),
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
        client_timeout = aiohttp.ClientTimeout(total=None, sock_read=timeout)
        async with self._session.get(
            self.config.server + path, params=params, headers=self._headers(None), timeout=client_timeout
        ) as resp:
            if resp.status >= 300:
                text = await resp.text()
                try:
                    decoded = json.loads(text)
                except ValueError:
                    decoded = None
                raise error_for(resp.status, decoded if isinstance(decoded, dict) else None, text)
            yield resp
