"""OptimizationJobs in the browser: the list, and a search's page with its trials best first and a chart of the
objective against each parameter, kept live by one server-sent event stream (``view``: the same
``kubetrain.service.optimization`` view ``kubetrain describe optimizationjob -o json`` prints)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web
from aiohttp_sse import sse_response

from kubetrain.api import KubetrainError
from kubetrain.api.optimization import OptimizationJob
from kubetrain.compiler.optimization import state_of, trial_count
from kubetrain.service.optimization import view
from kubetrain.ui import present
from kubetrain.ui.errors import UiError, from_exception
from kubetrain.ui.requests import scope_of, target
from kubetrain.ui.security import stream_headers
from kubetrain.ui.state import UI_KEY, json_dumps

PING = 10.0


def routes(app: web.Application) -> None:
    app.router.add_get("/optimizationjobs", list_page)
    app.router.add_get("/optimizationjobs/{namespace}/{name}", page)
    app.router.add_get("/api/optimizationjobs", list_json)
    app.router.add_get("/api/optimizationjobs/{namespace}/{name}", page_json)
    app.router.add_get("/api/optimizationjobs/{namespace}/{name}/watch", watch)
    app.router.add_post("/api/optimizationjobs/{namespace}/{name}/delete", delete)


def row(job: OptimizationJob) -> dict[str, Any]:
    state, reason, message = state_of(job.to_wire().get("status"))
    result = job.status.result if job.status is not None else None
    return {
        "namespace": job.namespace,
        "name": job.name,
        "state": state or "Created",
        "reason": reason,
        "message": message,
        "metric": job.spec.objective.metric,
        "best": result.train_job_name if result is not None else "",
        "trials": trial_count(job.spec),
        "parallel": job.spec.parallel,
        "created": job.metadata.creation_timestamp,
    }


def spaces(job: OptimizationJob) -> list[dict[str, Any]]:
    """Each parameter's space, as the chart needs it (a log axis for logUniform, categories for choices)."""
    out = []
    for p in job.spec.parameters:
        space = p.search_space
        numeric = space.uniform or space.log_uniform
        out.append({
            "name": p.name,
            "kind": space.kind,
            "min": numeric.min if numeric is not None else None,
            "max": numeric.max if numeric is not None else None,
            "choices": list(space.categorical.choices) if space.categorical is not None else None,
        })
    return out


async def list_page(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui)
    jobs = await ui.backends.call(lambda b: b.list_optimizationjobs(scope))
    rows = sorted((row(j) for j in jobs), key=lambda r: r["created"] or "", reverse=True)
    return ui.page("optimizationjobs.html", title="OptimizationJobs", page="optimizationjobs", rows=rows,
                   namespace=scope or "", all_namespaces=scope is None)


async def list_json(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui)
    jobs = await ui.backends.call(lambda b: b.list_optimizationjobs(scope))
    rows = sorted((row(j) for j in jobs), key=lambda r: r["created"] or "", reverse=True)
    return web.Response(text=json_dumps({"rows": rows}), content_type="application/json")


async def page(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request, "OptimizationJob")
    v = await ui.backends.call(lambda b: view(b, name, ns))
    data = {"namespace": ns, "name": name, "view": v.to_json(), "spaces": spaces(v.job)}
    return ui.page("optimizationjob.html", title=f"{name} · OptimizationJob", page="optimizationjob", oj=v.job,
                   row=row(v.job), data=data, yaml=present.to_yaml([v.job.to_wire()]))


async def page_json(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request, "OptimizationJob")
    v = await ui.backends.call(lambda b: view(b, name, ns))
    return web.Response(text=json_dumps(v.to_json()), content_type="application/json")


async def watch(request: web.Request) -> web.StreamResponse:
    """``view`` whenever the search or one of its trials changes (looked at every second here, every three on a
    cluster), ``deleted`` when it is gone, ``failure`` when it cannot be read."""
    ui = request.app[UI_KEY]
    ns, name = target(request, "OptimizationJob")
    every = 3.0 if ui.settings.cluster else 1.0
    async with sse_response(request, headers=stream_headers(), ping_interval=PING) as resp:
        last: dict[str, Any] | None = None
        while resp.is_connected():
            started = time.monotonic()
            try:
                now = (await ui.backends.call(lambda b: view(b, name, ns))).to_json()
            except (KubetrainError, UiError) as exc:
                error = from_exception(exc)
                if error.status == 404:
                    await resp.send(json_dumps({"namespace": ns, "name": name}), event="deleted")
                else:
                    await resp.send(json_dumps({"status": error.status, "message": error.message,
                                                "fix": error.fix}), event="failure")
                break
            if now != last:
                await resp.send(json_dumps(now), event="view")
                last = now
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
    return resp


async def delete(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request, "OptimizationJob")
    await ui.backends.call(lambda b: b.delete_optimizationjob(name, ns))
    return web.json_response({"message": f'optimizationjob "{name}" deleted (and its trials)',
                              "url": "/optimizationjobs"})
