"""The UI's web application: error pages, static files, routes, and serving it (what handlers share is in
``kubetrain.ui.state``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Middleware

from kubetrain.ui import security
from kubetrain.ui.errors import UiError, from_exception
from kubetrain.ui.state import STATIC, UI_KEY, Ui, UiSettings

log = logging.getLogger("kubetrain.ui")

SWEEPER_KEY: web.AppKey[asyncio.Future[None]] = web.AppKey("sweeper")

def wants_json(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def error_response(ui: Ui, request: web.Request, error: UiError) -> web.Response:
    if wants_json(request):
        body = {"error": error.message, "fix": error.fix, "status": error.status}
        return web.json_response(body, status=error.status)
    return ui.page("error.html", title=f"Error {error.status}", status=error.status, error=error)


def errors_middleware(ui: Ui) -> Middleware:
    @web.middleware
    async def errors(request: web.Request, handler: security.Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except UiError as exc:
            return error_response(ui, request, exc)
        except web.HTTPNotFound:
            missing = UiError(404, f"no page at {request.path}", "start from the TrainJobs list")
            return error_response(ui, request, missing)
        except web.HTTPMethodNotAllowed as exc:
            return error_response(ui, request, UiError(405, f"{request.method} is not allowed at {request.path}",
                                                       f"use {', '.join(sorted(exc.allowed_methods))}"))
        except web.HTTPException:
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            error = from_exception(exc)
            if error.status >= 500:
                log.exception("request failed method=%s path=%s", request.method, request.path)
            return error_response(ui, request, error)

    return errors


async def _no_content(request: web.Request) -> web.Response:
    return web.Response(status=204)


async def static(request: web.Request) -> web.StreamResponse:
    ui = request.app[UI_KEY]
    name = request.match_info["name"]
    if name == "plotly.min.js":
        if ui.plotly is None:
            raise UiError(404, "plotly.js is not installed", "pip install 'kubetrain[ui]' (it brings plotly==7.1.0)")
        path = ui.plotly
    else:
        item = STATIC / name
        if "/" in name or name.startswith(".") or not item.is_file():
            raise UiError(404, f"no static file {name!r}")
        path = Path(str(item))
    response = web.FileResponse(path)
    response.headers["Cache-Control"] = "public, max-age=31536000, immutable" if request.query.get("v") else "no-cache"
    return response


def make_app(ui: Ui) -> web.Application:
    from kubetrain.ui import api, optimization, pages

    app = web.Application(middlewares=[security.headers, errors_middleware(ui), security.middleware(ui.session)])
    app[UI_KEY] = ui
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/favicon.ico", _no_content)
    pages.routes(app)
    api.routes(app)
    optimization.routes(app)

    async def on_startup(app: web.Application) -> None:
        ui.hubs.get(ui.default_scope, keep=True)  # the first page is drawn from a list that is already there
        app[SWEEPER_KEY] = asyncio.ensure_future(_sweep(ui))

    async def on_cleanup(app: web.Application) -> None:
        app[SWEEPER_KEY].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await app[SWEEPER_KEY]
        await ui.hubs.close()
        ui.backends.close()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


async def _sweep(ui: Ui) -> None:
    while True:
        await asyncio.sleep(30)
        await ui.hubs.sweep()


def bind(settings: UiSettings) -> socket.socket:
    """The listening socket, bound before the URL is printed (so the URL works at once; port 0 picks one)."""
    family = socket.AF_INET6 if ":" in settings.address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.address, settings.port))
    except OSError as exc:
        sock.close()
        raise UiError(
            0, f"cannot listen on {settings.address}:{settings.port}: {exc.strerror or exc}",
            "pick another port with --port (0 picks a free one)",
        ) from None
    sock.listen(128)
    sock.setblocking(False)
    settings.port = sock.getsockname()[1]
    return sock


async def serve(ui: Ui, sock: socket.socket, started: Callable[[], None], stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set."""
    if ui.settings.verbose:
        runner = web.AppRunner(make_app(ui), handler_cancellation=True, access_log_class=_AccessLogger,
                               access_log=logging.getLogger("kubetrain.ui.access"), shutdown_timeout=1.0)
    else:
        runner = web.AppRunner(make_app(ui), handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.SockSite(runner, sock)
    await site.start()
    started()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


class _AccessLogger(AbstractAccessLogger):
    """One line per request, without the query: the first request's query carries the session token."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info("request method=%s path=%s status=%s seconds=%.3f", request.method, request.path,
                         response.status, time)
