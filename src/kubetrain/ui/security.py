"""Who may use the UI, and what a page may do.

- **Loopback** by default (``--address`` says otherwise, with a warning), and requests must name this server in
  their ``Host`` header: a web page elsewhere cannot reach it through a DNS name that resolves to 127.0.0.1.
- **A token per session** (256 bits), in the URL ``kubetrain ui`` prints. The first request that carries it gets
  it as a cookie (HttpOnly, SameSite=Strict, named after the port, since cookies do not tell ports apart) and is
  redirected to the same page without it, so the token does not stay in the address bar or the history.
- **CSRF**: every request that changes something must be a POST with the page's CSRF token in the
  ``X-CSRF-Token`` header (a value derived from the session token, which another site can neither read nor
  send), and with this server as its ``Origin`` when the browser names one.
- **Headers**: a Content-Security-Policy that runs only this server's scripts (never inline ones, so text from a log
  or a manifest cannot become code), no framing, no referrer, no caching of pages. Inline *styles* are allowed
  because plotly.js sets its chart styles that way; the pages never put text from the server into markup, so no
  one else's style can get in either.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Middleware

from kubetrain.ui.errors import UiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; "
    "font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SAFE_METHODS = ("GET", "HEAD")


@dataclass
class Session:
    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    hosts: set[str] = field(default_factory=set)

    @property
    def cookie(self) -> str:
        return f"kubetrain_ui_{self.port}"

    @property
    def csrf(self) -> str:
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    def allow_host(self, address: str) -> None:
        """Accept requests naming this host (with the port) in ``Host``."""
        for name in {address, "127.0.0.1", "localhost", "[::1]"} if _loopback(address) else {address}:
            self.hosts.add(f"{name}:{self.port}".lower())

    def valid(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.token)


def _loopback(address: str) -> bool:
    return address in ("127.0.0.1", "localhost", "::1", "[::1]") or address.startswith("127.")


def middleware(session: Session) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if (request.host or "").lower() not in session.hosts:
            raise UiError(421, f"this server does not answer for host {request.host!r}",
                          "open the address `kubetrain ui` printed")
        if request.path.startswith("/static/"):
            return await handler(request)  # scripts and styles: nothing secret, and cached by the browser
        token = request.query.get("token")
        if token is not None and request.method in SAFE_METHODS:
            if not session.valid(token):
                raise UiError(401, "this link's token is not the one of the running `kubetrain ui`",
                              "open the address `kubetrain ui` printed when it started (it changes every start)")
            query = {k: v for k, v in request.query.items() if k != "token"}
            response = web.Response(status=303, headers={"Location": str(request.rel_url.with_query(query))})
            response.set_cookie(session.cookie, session.token, httponly=True, samesite="Strict", path="/")
            return response
        if not session.valid(request.cookies.get(session.cookie)):
            raise UiError(401, "this browser has no session with this `kubetrain ui`",
                          "open the address `kubetrain ui` printed when it started (it carries the session's token)")
        if request.method not in SAFE_METHODS:
            origin = request.headers.get("Origin")
            if origin is not None and origin.lower().split("://", 1)[-1] not in session.hosts:
                raise UiError(403, f"refused a request from another site ({origin})")
            if not hmac.compare_digest(request.headers.get("X-CSRF-Token", ""), session.csrf):
                raise UiError(403, "refused a change without this page's CSRF token", "reload the page and try again")
        return await handler(request)

    return guard


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    _secure(response, static=request.path.startswith("/static/"))
    return response


def _secure(response: web.StreamResponse, *, static: bool) -> None:
    if response.prepared:
        return  # a stream (server-sent events) sets its headers before it starts
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("X-Frame-Options", "DENY")
    if not static:
        response.headers.setdefault("Cache-Control", "no-store")


def stream_headers() -> dict[str, str]:
    """The same headers for a response that starts streaming before the middleware sees it."""
    return {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store"}
