"""A Hugging Face Hub for tests: the part of its HTTP API that ``huggingface_hub.snapshot_download`` uses (repo
info, recursive tree listing, ``resolve`` downloads with the hub's headers and error codes), serving repositories
from a directory: ``<root>/models/<owner>/<name>/...`` and ``<root>/datasets/<owner>/<name>/...``.

Standard library only, so it also runs as a pod of a TrainJob in any environment::

    python fakehub.py --root DIR --port 8080 [--token SECRET --gated owner/name ...]

Gated repositories answer 401 (no or wrong token) the way the hub does; unknown ones 404 ``RepoNotFound``."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


class Hub:
    def __init__(self, root: Path, token: str | None = None, gated: tuple[str, ...] = ()) -> None:
        self.root, self.token, self.gated = root, token, set(gated)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization) seen, for tests

    def repo_dir(self, kind: str, repo: str) -> Path | None:
        d = self.root / kind / repo
        return d if d.is_dir() and len(repo.split("/")) <= 2 else None

    @staticmethod
    def files(d: Path) -> list[str]:
        return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())

    def sha(self, d: Path) -> str:
        h = hashlib.sha1()
        for f in self.files(d):
            h.update(f.encode())
            h.update(hashlib.sha1((d / f).read_bytes()).digest())
        return h.hexdigest()


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"fakehub: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def do_GET(self) -> None:
            self._serve(body=True)

        def _send(self, code: int, data: bytes, headers: dict[str, str], body: bool) -> None:
            self.send_response(code)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def _error(self, code: int, error_code: str, message: str, body: bool) -> None:
            data = json.dumps({"error": message}).encode()
            headers = {"Content-Type": "application/json", "X-Error-Code": error_code, "X-Error-Message": message}
            self._send(code, data, headers, body)

        def _serve(self, body: bool) -> None:
            auth = self.headers.get("Authorization")
            path = unquote(urlparse(self.path).path)
            hub.requests.append((self.command, path, auth))
            parts = [p for p in path.split("/") if p]
            # /api/{models,datasets}/<owner>/<name>/(revision|tree)/<rev>
            # or [/datasets]/<owner>/<name>/resolve/<rev>/<file>
            if parts[:1] == ["api"] and len(parts) >= 6 and parts[1] in ("models", "datasets"):
                kind, repo, verb = parts[1], "/".join(parts[2:4]), parts[4]
            elif "resolve" in parts:
                i = parts.index("resolve")
                kind = "datasets" if parts[0] == "datasets" else "models"
                repo = "/".join(parts[1:i] if kind == "datasets" else parts[:i])
                verb, file = "resolve", "/".join(parts[i + 2 :])
            else:
                self._error(404, "EntryNotFound", f"no route {path}", body)
                return
            d = hub.repo_dir(kind, repo)
            if d is None:
                self._error(404, "RepoNotFound", "Repository not found", body)
                return
            if repo in hub.gated and auth != f"Bearer {hub.token}":
                if auth is None:
                    msg = (f"Access to {kind[:-1]} {repo} is restricted. "
                           "You must have access to it and be authenticated.")
                    self._error(401, "GatedRepo", msg, body)
                else:
                    self._error(401, "", "Invalid credentials in Authorization header", body)
                return
            sha = hub.sha(d)
            if verb == "revision":
                info = {"id": repo, "sha": sha, "siblings": [{"rfilename": f} for f in hub.files(d)], "private": False}
                self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)
            elif verb == "tree":
                tree = [
                    {"type": "file", "path": f, "size": (d / f).stat().st_size,
                     "oid": hashlib.sha1((d / f).read_bytes()).hexdigest()}
                    for f in hub.files(d)
                ]
                self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, body)
            elif verb == "resolve":
                target = d / file
                if not target.is_file():
                    self._error(404, "EntryNotFound", f"{file} not found", body)
                    return
                data = target.read_bytes()
                headers = {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                           "Content-Type": "application/octet-stream"}
                self._send(200, data, headers, body)
            else:
                self._error(404, "EntryNotFound", f"no route {path}", body)

    return Handler


def serve(hub: Hub, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; ``server.server_address`` has the port. Stop with ``shutdown()``."""
    server = ThreadingHTTPServer((host, port), _handler(hub))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", required=True, type=Path)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--token")
    p.add_argument("--gated", action="append", default=[])
    a = p.parse_args()
    server = ThreadingHTTPServer((a.host, a.port), _handler(Hub(a.root, a.token, tuple(a.gated))))
    print(f"fakehub: serving {a.root} on {a.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
