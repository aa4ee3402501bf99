"""What every UI handler shares: the settings ``kubetrain ui`` was started with, the session, the backends, the
list hubs and the page templates (``Ui``, reached from a request as ``request.app[UI_KEY]``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import web

from kubetrain.api.progress import duration_text
from kubetrain.api.views import Backend
from kubetrain.ui import security
from kubetrain.ui.bridge import Backends
from kubetrain.ui.hub import Hubs

DEFAULT_PORT = 8421
STATIC = resources.files("kubetrain.ui") / "static"
TEMPLATES = resources.files("kubetrain.ui") / "templates"


@dataclass
class UiSettings:
    """What ``kubetrain ui`` was started with."""

    namespace: str = "default"
    """The namespace pages start in (``-n``)."""
    all_namespaces: bool = False
    """Start on every namespace (``-A``)."""
    kubeconfig: str | None = None
    context: str | None = None
    cluster: bool = False
    """A cluster (``--kubeconfig``/``--context``/``KUBETRAIN_BACKEND=k8s``) rather than this machine."""
    address: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    """0: any free port (tests)."""
    workdir: str = field(default_factory=os.getcwd)
    """Where TrainJobs submitted from the form start locally (a pod without workingDir starts there)."""
    verbose: bool = False
    """Log every request (method, path without its query, status, seconds)."""


UI_KEY: web.AppKey[Ui] = web.AppKey("ui")


class Ui:
    """What every handler shares: the settings, the session, the backends and the list hubs."""

    def __init__(self, settings: UiSettings, factory: Callable[[], Backend], *, label: str) -> None:
        import jinja2

        self.settings = settings
        self.session = security.Session(settings.port)  # after `bind`: the port is the one really bound
        self.session.allow_host(settings.address)
        self.backends = Backends(factory)
        self.hubs = Hubs(self.backends)
        self.label = label
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATES)),
            autoescape=True,  # every value from a TrainJob, a log or a runtime is text, never markup
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals.update(age=_age, eta_text=_eta_text)
        self.asset_version = _asset_version()
        from kubetrain.ui.charts import plotly_js

        self.plotly = plotly_js()

    @property
    def default_scope(self) -> str | None:
        return None if self.settings.all_namespaces else self.settings.namespace

    def page(self, template: str, *, title: str, status: int = 200, **values: Any) -> web.Response:
        values.setdefault("page", "")
        html = self.templates.get_template(template).render(
            title=title, csrf=self.session.csrf, asset=self.asset_version, backend_label=self.label,
            cluster=self.settings.cluster, **values,
        )
        return web.Response(text=html, content_type="text/html", status=status)


def _age(created: str | None) -> str:
    from kubetrain.service.present import age

    return age(created) if created else "–"


def _eta_text(eta: int | None, reported: str | None, finished: bool) -> str:
    """The reported ETA counted down since the report (the page's script keeps counting)."""
    if eta is None or finished:
        return ""
    left = float(eta)
    if reported:
        with contextlib.suppress(ValueError):
            then = dt.datetime.fromisoformat(reported.replace("Z", "+00:00"))
            left -= (dt.datetime.now(dt.UTC) - then).total_seconds()
    return f"ETA {duration_text(int(max(0.0, left)))}"


def _asset_version() -> str:
    """Changes whenever a static file does, so browsers may cache them for good (``?v=`` in every link)."""
    digest = hashlib.sha256()
    for item in sorted(STATIC.iterdir(), key=lambda p: p.name):
        if item.is_file():
            digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()[:12]


def json_dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
