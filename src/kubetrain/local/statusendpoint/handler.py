"""The HTTP side of a TrainJob's local status endpoint (``server``): TLS, the request, the answers.

Imported by the endpoint's thread when the first pod connects, so that a TrainJob whose pods never report (and
every job's start) does not pay for ``http.server`` and ``ssl``.
"""

from __future__ import annotations

import json
import socket
import ssl
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kubetrain.api import progress as P
from kubetrain.local.statusendpoint.limits import RATE, TIMEOUT, log

if TYPE_CHECKING:
    from kubetrain.local.statusendpoint.tls import ServingPair


class Owner(Protocol):
    """What the HTTP side asks of the endpoint that owns it (``server.StatusServer``)."""

    namespace: str
    name: str

    def pod_of(self, token: str) -> str | None: ...

    def allow(self, pod: str) -> bool: ...

    def on_report(self, pod: str, report: dict[str, Any]) -> None: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: Owner
    context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake happens on the request's own thread: a silent client cannot stall accepting.
        request.settimeout(TIMEOUT)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except OSError:  # ssl.SSLError included
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.close()
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per report would flood the supervisor log; refusals are logged in _refuse

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, code: int, message: str) -> None:
        log.info("status report refused code=%d path=%s message=%r", code, self.path, message)
        self._send(code, P.error_body(code, message))

    def do_GET(self) -> None:
        self._refuse(405 if P.parse_path(self.path) else 404, "only POST is served here")

    def do_POST(self) -> None:
        owner = self.server.owner
        target = P.parse_path(self.path.split("?", 1)[0])
        if target is None:
            self._refuse(404, f"not found: {self.path}; POST to {P.status_path(owner.namespace, owner.name)}")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > P.MAX_BODY:
            self._refuse(413, f"request body of {length} bytes; at most {P.MAX_BODY} bytes are accepted")
            self.close_connection = True
            return
        body = self.rfile.read(length) if length > 0 else b""
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        pod = owner.pod_of(token.strip()) if scheme.lower() == "bearer" else None
        if pod is None:
            self._refuse(401, "missing or invalid bearer token (the pod's token file is named by "
                         f"${P.ENV_TOKEN})")  # fmt: skip
            return
        if target != (owner.namespace, owner.name):
            mine, theirs = f"{owner.namespace}/{owner.name}", f"{target[0]}/{target[1]}"
            self._refuse(403, f"pod {pod} belongs to TrainJob {mine}, not {theirs}")
            return
        if not owner.allow(pod):
            self._refuse(429, f"more than {RATE:g} reports a second from pod {pod}; report less often")
            return
        try:
            report = P.parse_report(body)
        except P.ReportError as exc:
            self._refuse(exc.code, exc.message)
            return
        if report is not None:
            owner.on_report(pod, report)
        self._send(200, json.dumps({"trainerStatus": report}).encode())


def serve(owner: Owner, sock: socket.socket, pair: ServingPair) -> Server:
    """A server for ``owner`` around its listening socket (``sock``), with a TLS context for ``pair``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # ``ssl`` loads keys only from files: a private directory, removed at once (the key stays in memory only).
    with tempfile.TemporaryDirectory(prefix="kubetrain-status-") as d:
        cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
        cert.write_bytes(pair.cert)
        key.touch(mode=0o600)
        key.write_bytes(pair.key)
        context.load_cert_chain(str(cert), str(key))
    server = Server(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.owner = owner
    server.context = context
    return server
