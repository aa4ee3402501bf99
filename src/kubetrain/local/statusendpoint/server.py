"""The local status endpoint: a TrainJob's pods report progress (``status.trainerStatus``) to their supervisor.

The same request as on a cluster (upstream KEP-2779, ``kubetrain.api.progress``), served by the supervisor over
HTTPS on an address *inside* the TrainJob's network namespace (``NetworkNamespace.listen``), so only that job's
pods can reach it, as root or not. Instead of projected service-account tokens each pod gets its own random
token in a file, next to a copy of the endpoints' CA certificate (``kubetrain.local.statusendpoint.tls``), and the three
``KUBEFLOW_TRAINER_SERVER_*`` variables the official SDK reads name them:

- no or an unknown token: 401; a token of this job's pod but a path naming another TrainJob: 403;
- more than ``RATE`` reports a second per pod (after a burst of ``BURST``): 429;
- a bad body: 422 naming the field; otherwise 200 echoing the report, which ``on_report`` stores.

The HTTP side (``status_http``) is loaded when the first pod connects.
"""

from __future__ import annotations

import datetime as dt
import hmac
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api import progress as P
from kubetrain.api.errors import KubetrainError
from kubetrain.local.plan import GATEWAY
from kubetrain.local.statusendpoint.limits import BURST, RATE, log

if TYPE_CHECKING:
    from kubetrain.local.sandbox.netns import NetworkNamespace
    from kubetrain.local.statusendpoint.tls import ServingPair

HOST = "kubetrain-status"
"""The endpoint's name inside the TrainJob's network (``/etc/hosts``), as ``<service>.<ns>.svc`` is on a cluster."""
ADDRESS = GATEWAY

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


class Certificates:
    """The endpoint's CA and serving certificate (``statusendpoint.tls``), fetched on a thread from construction on:
    read from ``$KUBETRAIN_HOME``, or made when there are none yet (loading ``cryptography`` then takes tens of
    milliseconds, which ``kubetrain run`` spends reading the manifest and waiting for the network namespace
    instead). ``get`` waits for them."""

    def __init__(self, directory: Path | None = None) -> None:
        """``directory``: where they are kept (default ``$KUBETRAIN_HOME/tls``)."""
        self.directory = directory
        self._pair: ServingPair | Exception | None = None
        self._thread = threading.Thread(target=self._fetch, name="status-certificates", daemon=True)
        self._thread.start()

    def _fetch(self) -> None:
        try:
            from kubetrain.local import paths
            from kubetrain.local.statusendpoint import tls

            directory = self.directory or paths.home() / "tls"
            self._pair = tls.status_pair(directory, [HOST, ADDRESS], dt.datetime.now(dt.UTC))
        except Exception as exc:  # handed to get(), on the caller's thread
            self._pair = exc

    def get(self) -> ServingPair:
        self._thread.join()
        pair = self._pair
        if isinstance(pair, Exception):
            raise KubetrainError(f"its TLS certificates could not be read or made: {pair}") from pair
        assert pair is not None
        return pair


class StatusServer:
    """Serves one TrainJob's reports until ``close``; ``pod_env`` makes each pod's token file."""

    def __init__(
        self, namespace: str, name: str, directory: Path, on_report: Report, certificates: Certificates | None = None
    ) -> None:
        """``certificates``: fetched earlier (``kubetrain run`` starts that before it reads the manifest), or by this
        endpoint from now on, while the supervisor waits for other things."""
        self.namespace, self.name = namespace, name
        self.directory = directory
        self.on_report = on_report
        self._tokens: dict[str, str] = {}  # pod -> token
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()
        self.ca_file = directory / P.CA_FILE
        self._certificates = certificates or Certificates()
        self.port = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None

    def start(self, netns: NetworkNamespace) -> None:
        """Write the CA certificate for the pods, listen inside ``netns`` and serve on a thread."""
        pair = self._certificates.get()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ca_file.write_bytes(pair.ca_cert)
        self._sock = netns.listen(ADDRESS, 0)
        self.port = self._sock.getsockname()[1]
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._serve, args=(self._sock, self._wake[0], pair),
                                        name="status-server", daemon=True)  # fmt: skip
        self._thread.start()
        log.info("status endpoint trainjob=%s/%s url=%s", self.namespace, self.name, self.url)

    def _serve(self, sock: socket.socket, wake: int, pair: ServingPair) -> None:
        # Not serve_forever: its shutdown waits for the next poll interval, and every job's end would wait with it;
        # close() wakes this loop through a pipe at once. Until the first pod connects there is no HTTP server
        # (``status_http``): connections wait in the listen backlog meanwhile.
        sock.setblocking(False)  # a client gone between select and accept must not block the loop
        server: Any = None
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            sel.register(wake, selectors.EVENT_READ)
            while True:
                if any(key.fd == wake for key, _ in sel.select()):
                    if server is not None:
                        server.server_close()
                    return
                try:
                    request, address = sock.accept()
                except OSError:
                    continue
                if server is None:
                    try:
                        from kubetrain.local.statusendpoint.handler import serve

                        server = serve(self, sock, pair)
                    except OSError as exc:  # ssl.SSLError included
                        log.error("status endpoint unusable trainjob=%s/%s error=%r", self.namespace, self.name,
                                  str(exc))  # fmt: skip
                        request.close()
                        continue
                server.process_request(request, address)  # a thread per connection (ThreadingMixIn)

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
        if self._wake is None or self._thread is None:
            return
        os.write(self._wake[1], b"x")
        self._thread.join()
        for fd in self._wake:
            os.close(fd)
        self._wake = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


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
