"""The local status endpoint: a TrainJob's pods report progress (``status.trainerStatus``) to their supervisor.

The same request as on a cluster (upstream KEP-2779, ``kubetrain.api.progress``), served by the supervisor over
HTTPS on an address *inside* the TrainJob's network namespace (``NetworkNamespace.listen``), so only that job's
pods can reach it, as root or not. Instead of projected service-account tokens each pod gets its own random
token in a file, next to a per-TrainJob CA certificate, and the three ``KUBEFLOW_TRAINER_SERVER_*`` variables the
official SDK reads name them:

- no or an unknown token: 401; a token of this job's pod but a path naming another TrainJob: 403;
- more than ``RATE`` reports a second per pod (after a burst of ``BURST``): 429;
- a bad body: 422 naming the field; otherwise 200 echoing the report, which ``on_report`` stores.
"""

from __future__ import annotations

import datetime as dt
import hmac
import json
import logging
import secrets
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubetrain.api import progress as P
from kubetrain.local.netns import NetworkNamespace
from kubetrain.local.tls import make_serving_pair

log = logging.getLogger("kubetrain.local.status")

HOST = "kubetrain-status"
"""The endpoint's name inside the TrainJob's network (``/etc/hosts``), as ``<service>.<ns>.svc`` is on a cluster."""
ADDRESS = "127.0.0.1"
RATE, BURST = 2.0, 10
"""Reports per second per pod, and the burst allowed: the SDK sends at most one per 5 s; a loop gone wild is cut
off without slowing the supervisor."""
TIMEOUT = 10.0
"""Seconds a connection may take to send its request (upstream's read timeout)."""

Report = Callable[[str, dict[str, Any]], None]
"""``on_report(pod, trainerStatus)``: called on the server's thread for every accepted report."""


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self) -> None:
        self.tokens, self.stamp = float(BURST), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(float(BURST), self.tokens + (now - self.stamp) * RATE)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: StatusServer

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake happens on the request's own thread: a silent client cannot stall accepting.
        request.settimeout(TIMEOUT)
        try:
            tls = self.owner.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.close()
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
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


class StatusServer:
    """Serves one TrainJob's reports until ``close``; ``pod_env`` makes each pod's token file."""

    def __init__(self, namespace: str, name: str, directory: Path, on_report: Report) -> None:
        self.namespace, self.name = namespace, name
        self.directory = directory
        self.on_report = on_report
        self._tokens: dict[str, str] = {}  # pod -> token
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()
        pair = make_serving_pair([HOST, ADDRESS], dt.datetime.now(dt.UTC), label=f"{namespace}/{name} status")
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_file = directory / P.CA_FILE
        self.ca_file.write_bytes(pair.ca_cert)
        cert, key = directory / "tls.crt", directory / "tls.key"
        cert.write_bytes(pair.cert)
        key.touch(mode=0o600)
        key.write_bytes(pair.key)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.load_cert_chain(str(cert), str(key))
        key.unlink()  # loaded: the key is needed nowhere else
        self.port = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, netns: NetworkNamespace) -> None:
        """Listen inside ``netns`` and serve on a thread."""
        sock = netns.listen(ADDRESS, 0)
        self.port = sock.getsockname()[1]
        server = _Server((ADDRESS, self.port), _Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = sock
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="status-server", daemon=True)  # fmt: skip
        self._thread.start()
        log.info("status endpoint trainjob=%s/%s url=%s", self.namespace, self.name, self.url)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}{P.status_path(self.namespace, self.name)}"

    def env(self) -> dict[str, str]:
        """What every container gets: the endpoint's URL and the CA (the token file is per pod: ``pod_env``)."""
        return {P.ENV_URL: self.url, P.ENV_CA_CERT: str(self.ca_file)}

    def pod_env(self, pod: str) -> dict[str, str]:
        """The pod's own token file. The variables name the files where they are: a pod sees this machine's file
        system, so no mount is needed (and none under /var/run, which would cost every sandbox a rebuilt /run)."""
        d = self.directory / "pods" / pod
        d.mkdir(parents=True, exist_ok=True)
        with self._lock:
            token = self._tokens.get(pod)
            if token is None:
                token = self._tokens[pod] = secrets.token_urlsafe(32)
        tok = d / P.TOKEN_FILE
        if not tok.exists() or tok.read_text() != token:
            tok.touch(mode=0o600)
            tok.write_text(token)
        return {P.ENV_TOKEN: str(tok)}

    def pod_of(self, token: str) -> str | None:
        if not token:
            return None
        with self._lock:
            for pod, known in self._tokens.items():
                if hmac.compare_digest(known.encode(), token.encode()):
                    return pod
        return None

    def allow(self, pod: str) -> bool:
        with self._lock:
            return self._buckets.setdefault(pod, _Bucket()).take()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def no_proxy(env: dict[str, str]) -> dict[str, str]:
    """``NO_PROXY``/``no_proxy`` that keep the endpoint off an HTTP proxy ``env`` names (the SDK's ``requests``
    honours them); empty when no proxy is set."""
    if not any(env.get(k) for k in _PROXIES):
        return {}
    out = {}
    for var in ("NO_PROXY", "no_proxy"):
        current = [x for x in env.get(var, "").split(",") if x]
        out[var] = ",".join([*current, HOST, ADDRESS])
    return out
