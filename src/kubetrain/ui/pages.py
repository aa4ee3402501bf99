"""The HTML pages: the TrainJobs list, a TrainJob, the runtimes catalogue and the submit form.

Each is rendered complete on the server (what the browser paints first is already right), with the data its script
needs embedded as JSON; the script then keeps it live.
"""

from __future__ import annotations

import asyncio
import secrets
import string
from typing import Any

from aiohttp import web

from kubetrain.api import constants as c
from kubetrain.ui import present
from kubetrain.ui.errors import UiError, from_exception
from kubetrain.ui.requests import check_name, scope_of, selector_of
from kubetrain.ui.state import UI_KEY

FIRST_LIST_TIMEOUT = 60.0
FIRST_ROWS = 100
"""Rows a list page carries itself; the rest follow on its event stream right after the first paint (a screen
shows a few dozen, and a page of 1,000 rows would take longer to lay out than the 300 ms first paint allows)."""


def routes(app: web.Application) -> None:
    app.router.add_get("/", home)
    app.router.add_get("/trainjobs", trainjobs)
    app.router.add_get("/trainjobs/{namespace}/{name}", trainjob)
    app.router.add_get("/runtimes", runtimes)
    app.router.add_get("/submit", submit)


async def home(request: web.Request) -> web.Response:
    return web.Response(status=303, headers={"Location": "/trainjobs"})


async def trainjobs(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui)
    try:
        selector_text, selector = selector_of(request)
        selector_error = None
    except UiError as exc:
        selector_text, selector, selector_error = request.query.get("selector", ""), None, exc
    hub = ui.hubs.get(scope)
    try:
        await asyncio.wait_for(hub.ready.wait(), FIRST_LIST_TIMEOUT)
    except TimeoutError:
        raise UiError(504, "the TrainJobs could not be listed in time", "reload the page in a moment") from None
    rows = [] if selector_error is not None else hub.snapshot(selector)
    return ui.page(
        "trainjobs.html",
        title="TrainJobs",
        page="trainjobs",
        rows=rows[:FIRST_ROWS],
        total=len(rows),
        # A page that carries only the first rows asks for the whole list (version -1) once it is painted.
        version=hub.version if len(rows) <= FIRST_ROWS else -1,
        namespace=scope or "",
        all_namespaces=scope is None,
        selector=selector_text,
        selector_error=selector_error,
        error=hub.error,
    )


async def trainjob(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = request.match_info["namespace"], request.match_info["name"]
    check_name(ns, "namespace")
    check_name(name, "TrainJob name")
    call = ui.backends.call
    details, history, compiled = await asyncio.gather(
        call(lambda b: b.describe_trainjob(name, ns)),
        call(lambda b: b.progress_history(name, ns)),
        call(lambda b: b.compiled_objects(name, ns)),
        return_exceptions=True,
    )
    if isinstance(details, BaseException):
        raise from_exception(details)
    tj = details.trainjob
    history_error = from_exception(history) if isinstance(history, BaseException) else None
    compiled_error = from_exception(compiled) if isinstance(compiled, BaseException) else None
    objs: list[dict[str, Any]] = [] if isinstance(compiled, BaseException) else compiled
    points = [] if isinstance(history, BaseException) else [present.point(p) for p in history]
    jobset = present.jobset_of(objs)
    snapshot = present.snapshot_of(name, objs)
    wire = tj.to_wire()
    (wire.get("metadata") or {}).pop("managedFields", None)
    data = {
        "namespace": ns,
        "name": name,
        "details": present.details(details),
        "points": points,
        "containers": present.containers(jobset),
        "elastic": present.elastic_bounds(snapshot, tj),
        "cluster": ui.settings.cluster,
    }
    return ui.page(
        "trainjob.html",
        title=f"{name} · TrainJob",
        page="trainjob",
        tj=tj,
        data=data,
        d=data["details"],
        trainjob_yaml=present.to_yaml([wire]),
        jobset_yaml=present.to_yaml([jobset]) if jobset is not None else "",
        snapshot_yaml=present.to_yaml([o for o in objs if o.get("kind") == "ConfigMap"
                                       and o["metadata"]["name"] == f"{name}-runtime-snapshot"]),
        other_objects=[f"{o.get('kind')}/{(o.get('metadata') or {}).get('name')}" for o in objs
                       if o is not jobset and o.get("kind") != "ConfigMap"],
        compiled_error=compiled_error,
        history_error=history_error,
        extra=details.extra,
    )


async def runtimes(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui)
    found = await ui.backends.call(lambda b: b.list_runtimes(scope))
    entries = sorted(
        (present.runtime_entry(r) for r in found),
        key=lambda e: (e["kind"] != c.KIND_CLUSTER_TRAINING_RUNTIME, e["namespace"], e["name"]),
    )
    return ui.page("runtimes.html", title="Runtimes", page="runtimes", runtimes=entries, namespace=scope or "",
                   all_namespaces=scope is None)


async def submit(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui) or ui.settings.namespace
    found = await ui.backends.call(lambda b: b.list_runtimes(scope))
    entries = sorted(
        (present.runtime_entry(r) for r in found),
        key=lambda e: (e["deprecated"], e["kind"] != c.KIND_CLUSTER_TRAINING_RUNTIME, e["name"]),
    )
    chosen = request.query.get("runtime", "")
    if not any(_runtime_value(e) == chosen for e in entries):
        chosen = next((_runtime_value(e) for e in entries if e["name"] == "torch-distributed"),
                      _runtime_value(entries[0]) if entries else "")
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    return ui.page(
        "submit.html",
        title="Submit a TrainJob",
        page="submit",
        runtimes=[{**e, "value": _runtime_value(e)} for e in entries],
        chosen=chosen,
        namespace=scope,
        suggested_name=f"trainjob-{suffix}",
        workdir=ui.settings.workdir,
        search_open=request.query.get("search") == "1",
    )


def _runtime_value(e: dict[str, Any]) -> str:
    return f"{e['kind']}/{e['namespace']}/{e['name']}" if e["namespace"] else f"{e['kind']}/{e['name']}"
