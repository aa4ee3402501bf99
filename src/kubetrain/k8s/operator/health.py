"""``/healthz``, ``/readyz`` and ``/metrics`` on one small aiohttp server."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class HealthServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        ready: Callable[[], bool],
        alive: Callable[[], bool] = lambda: True,
    ) -> None:
        self.registry = registry
        self.ready = ready
        self.alive = alive
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.alive() else web.Response(status=500, text="unhealthy")

    async def _readyz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok") if self.ready() else web.Response(status=503, text="not ready")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()
