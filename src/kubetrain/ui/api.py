"""The UI's API: server-sent event streams (the list, a TrainJob, its logs) and the actions (suspend, resume,
scale, delete, submit), each answered as JSON; errors as ``{"error", "fix", "status"}``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from aiohttp_sse import EventSourceResponse, sse_response

from kubetrain.api import KubetrainError
from kubetrain.api import constants as c
from kubetrain.api.logtext import step_prefix
from kubetrain.api.views import Backend, LogChunk, LogOptions, Notice
from kubetrain.ui import present, submit
from kubetrain.ui.errors import UiError, from_exception
from kubetrain.ui.requests import scope_of, selector_of, target
from kubetrain.ui.security import Handler, stream_headers
from kubetrain.ui.state import UI_KEY, Ui, json_dumps

PING = 10.0
"""Seconds between keep-alive comments on a quiet stream (a closed browser tab is noticed by then)."""
LOG_BATCH_SECONDS = 0.05
LOG_BATCH_BYTES = 256 * 1024
TAIL_CHOICES = (100, 1000, 10000)


def routes(app: web.Application) -> None:
    app.router.add_get("/api/trainjobs/watch", _as_stream(list_stream))
    app.router.add_get("/api/trainjobs/{namespace}/{name}/watch", _as_stream(trainjob_stream))
    app.router.add_get("/api/trainjobs/{namespace}/{name}/logs", _as_stream(log_stream))
    app.router.add_get("/api/trainjobs/{namespace}/{name}/metrics", metrics)
    app.router.add_post("/api/trainjobs/{namespace}/{name}/suspend", suspend)
    app.router.add_post("/api/trainjobs/{namespace}/{name}/scale", scale)
    app.router.add_post("/api/trainjobs/{namespace}/{name}/delete", delete)
    app.router.add_post("/api/validate", validate)
    app.router.add_post("/api/submit", create)


def _as_stream(handler: Handler) -> Handler:
    """A browser's EventSource cannot read an error response (it only retries, forever): what goes wrong before a
    stream starts (a bad parameter, a missing TrainJob, a 403) is sent as the stream's one ``failure`` event."""

    async def stream(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except UiError as exc:
            error: BaseException = exc
        except KubetrainError as exc:
            error = exc
        async with sse_response(request, headers=stream_headers(), ping_interval=PING) as resp:
            await _send_error(resp, error)
        return resp

    return stream


async def _send(resp: EventSourceResponse, event: str, data: Any) -> None:
    await resp.send(json_dumps(data), event=event)


async def _send_error(resp: EventSourceResponse, exc: BaseException) -> None:
    error = from_exception(exc)
    with contextlib.suppress(ConnectionError, RuntimeError):
        await _send(resp, "failure", {"status": error.status, "message": error.message, "fix": error.fix})


@contextlib.asynccontextmanager
async def _reporting(resp: EventSourceResponse, stream: Any) -> AsyncIterator[None]:
    """Around a stream's use: what fails is shown on the page (a ``failure`` event), a closed page or a cancel
    ends it quietly, and the stream is closed either way."""
    try:
        yield
    except (ConnectionError, asyncio.CancelledError):
        raise
    except Exception as exc:  # any failure of the backend is the page's to show, not a dropped connection
        await _send_error(resp, exc)
    finally:
        stream.close()


# -- the list --------------------------------------------------------------------------------------------------------
async def list_stream(request: web.Request) -> web.StreamResponse:
    """Changes of the list since the version the page was rendered at (``?since=``), then each change."""
    ui = request.app[UI_KEY]
    scope = scope_of(request, ui)
    _, selector = selector_of(request)
    try:
        since = int(request.query.get("since", "-1"))
    except ValueError:
        raise UiError(400, "since: expected the page's list version (a whole number)") from None
    hub = ui.hubs.get(scope)
    async with sse_response(request, headers=stream_headers(), ping_interval=PING) as resp:
        await hub.ready.wait()
        while resp.is_connected():
            changes = hub.changes(since, selector)
            if changes.version != since:
                await _send(resp, "changes", changes.as_json())
                since = changes.version
            await hub.wait(since, PING)
    return resp


# -- one TrainJob ----------------------------------------------------------------------------------------------------
async def trainjob_stream(request: web.Request) -> web.StreamResponse:
    """The page's live parts: ``details`` when state, steps, conditions or events change, ``points`` for new
    progress reports (``?after=`` the time of the last one the page has), ``deleted`` when it is gone."""
    ui = request.app[UI_KEY]
    ns, name = target(request)
    try:
        after = float(request.query.get("after", "0") or 0)
    except ValueError:
        raise UiError(400, "after: expected a time in seconds since the epoch") from None
    refresh = 3.0 if ui.settings.cluster else 1.0
    await ui.backends.call(lambda b: b.get_trainjob(name, ns))  # missing: a 404 with close names, at once
    async with sse_response(request, headers=stream_headers(), ping_interval=PING) as resp:
        stream = ui.backends.stream(lambda b: b.watch_trainjobs(ns, names=[name]), name=f"job-{name}")
        last: dict[str, Any] | None = None
        last_status: Any = None
        next_look = 0.0
        async with _reporting(resp, stream):
            async for item in stream:
                if item is not None and item.type == "DELETED":
                    await _send(resp, "deleted", {"namespace": ns, "name": name})
                    break
                finished = last is not None and last["state"]["finished"]
                if item is None and (finished or time.monotonic() < next_look):
                    continue
                next_look = time.monotonic() + refresh
                try:
                    d = await ui.backends.call(lambda b: b.describe_trainjob(name, ns))
                except KubetrainError as exc:
                    if from_exception(exc).status == 404:
                        await _send(resp, "deleted", {"namespace": ns, "name": name})
                        break
                    raise
                now = present.details(d)
                if now != last:
                    await _send(resp, "details", now)
                    last = now
                if now["trainerStatus"] != last_status:
                    last_status = now["trainerStatus"]
                    history = await ui.backends.call(lambda b: b.progress_history(name, ns))
                    fresh = [present.point(p) for p in history if p.time > after]
                    if fresh:
                        after = max(p["time"] for p in fresh)
                        await _send(resp, "points", fresh)
    return resp


async def log_stream(request: web.Request) -> web.StreamResponse:
    """A TrainJob's logs, followed: ``log`` events carry ``[[step, prefix, text], ...]`` as written (carriage
    returns and colour codes included; the page renders them as text), ``notice`` what the user should know,
    ``end`` once the TrainJob has finished and every log is read."""
    ui = request.app[UI_KEY]
    ns, name = target(request)
    q = request.query
    step = q.get("step") or None
    container = q.get("container") or None
    tail_text = q.get("tail", "1000")
    if tail_text == "all":
        tail = None
    elif tail_text.isdigit():
        tail = int(tail_text)
    else:
        raise UiError(400, f"tail: expected a number of lines or 'all', got {tail_text!r}")
    options = LogOptions(step=step, container=container, follow=True, tail=tail)
    # A missing TrainJob or a bad step/container is answered as an error before the stream starts.
    await ui.backends.call(lambda b: b.get_trainjob(name, ns))
    async with sse_response(request, headers=stream_headers(), ping_interval=PING) as resp:
        stream = ui.backends.stream(lambda b: b.log_stream(name, ns, options), name=f"logs-{name}", maxsize=256)
        async with _reporting(resp, stream):
            async for batch in _batches(stream):
                if batch is None:
                    await _send(resp, "end", {})
                    break
                logs, notices = batch
                if logs:
                    await _send(resp, "log", logs)
                for text in notices:
                    await _send(resp, "notice", {"text": text})
    return resp


async def _batches(stream: Any) -> AsyncIterator[tuple[list[list[str]], list[str]] | None]:
    """Chunks gathered for up to 50 ms (or 256 KiB), so a chatty job costs a few messages a second, not one per
    write; ``None`` once the stream has ended."""
    items = aiter(stream)
    pending: asyncio.Future[Any] | None = None
    try:
        while True:
            logs: list[list[str]] = []
            notices: list[str] = []
            size = 0
            deadline: float | None = None
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(items))
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                done, _ = await asyncio.wait({pending}, timeout=timeout)
                if not done:
                    break  # the batch's time is up; the pending read carries over to the next batch
                future, pending = pending, None
                try:
                    item = future.result()
                except StopAsyncIteration:
                    if logs or notices:
                        yield logs, notices
                    yield None
                    return
                if isinstance(item, LogChunk):
                    logs.append([item.step, step_prefix(item.step), item.text])
                    size += len(item.text)
                elif isinstance(item, Notice):
                    notices.append(item.text)
                elif item is None and (logs or notices):
                    break  # a heartbeat: nothing more is coming right now
                if deadline is None and (logs or notices):
                    deadline = time.monotonic() + LOG_BATCH_SECONDS
                if size >= LOG_BATCH_BYTES:
                    break
            if logs or notices:
                yield logs, notices
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


async def metrics(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request)
    history = await ui.backends.call(lambda b: b.progress_history(name, ns))
    return web.json_response([present.point(p) for p in history])


# -- actions ---------------------------------------------------------------------------------------------------------
async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UiError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise UiError(400, "the request body must be a JSON object")
    return body


def _set_suspend(b: Backend, name: str, ns: str, value: bool) -> str:
    """Suspend or resume: the TrainJob applied again with ``spec.suspend`` changed (both backends apply by
    upstream's update rules: suspend may change at any time before the job finishes)."""
    tj = b.get_trainjob(name, ns)
    wire = tj.to_wire()
    meta = wire.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    manifest = {
        "apiVersion": wire.get("apiVersion", f"{c.GROUP}/{c.VERSION}"),
        "kind": c.KIND_TRAINJOB,
        "metadata": {"name": name, "namespace": ns, **({"labels": meta["labels"]} if meta.get("labels") else {}),
                     **({"annotations": annotations} if annotations else {})},
        "spec": {**(wire.get("spec") or {}), "suspend": value},
    }
    b.apply([manifest], namespace=ns)
    return f'trainjob "{name}" {"suspended" if value else "resumed"}'


async def suspend(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request)
    body = await _body(request)
    value = body.get("suspend")
    if not isinstance(value, bool):
        raise UiError(400, "suspend: expected true (suspend) or false (resume)")
    message = await ui.backends.call(lambda b: _set_suspend(b, name, ns, value))
    return web.json_response({"message": message})


async def scale(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request)
    body = await _body(request)
    replicas = body.get("replicas")
    if isinstance(replicas, str) and replicas.strip().isdigit():
        replicas = int(replicas)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise UiError(422, "replicas: expected a whole number of nodes (0 or more)")
    await ui.backends.call(lambda b: b.scale_trainjob(name, ns, replicas))
    return web.json_response({"message": f'trainjob "{name}" scaled to {replicas} nodes'})


async def delete(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    ns, name = target(request)
    await ui.backends.call(lambda b: b.delete_trainjob(name, ns))
    return web.json_response({"message": f'trainjob "{name}" deleted'})


# -- submit ----------------------------------------------------------------------------------------------------------
async def _checked(ui: Ui, request: web.Request) -> tuple[submit.Built, list[Any], list[Any]]:
    built = submit.build(await _body(request))
    errors, warnings = await ui.backends.call(lambda b: submit.check(built, b, cluster=ui.settings.cluster))
    return built, errors, warnings


def _findings(built: submit.Built, errors: list[Any], warnings: list[Any]) -> dict[str, Any]:
    return {
        "yaml": submit.as_yaml(built),
        "errors": [submit.finding_json(f) for f in errors],
        "warnings": [submit.finding_json(f) for f in warnings],
    }


async def validate(request: web.Request) -> web.Response:
    """What ``kubetrain validate`` would say of the form's TrainJob; nothing is created."""
    ui = request.app[UI_KEY]
    built, errors, warnings = await _checked(ui, request)
    return web.json_response(_findings(built, errors, warnings))


async def create(request: web.Request) -> web.Response:
    ui = request.app[UI_KEY]
    built, errors, warnings = await _checked(ui, request)
    if errors:
        body = _findings(built, errors, warnings)
        what = "OptimizationJob" if built.manifest["kind"] == c.KIND_OPTIMIZATIONJOB else "TrainJob"
        body.update(error=f"the {what} has {len(errors)} error{'s' * (len(errors) != 1)}; nothing was created",
                    status=422, fix="fix the fields marked below")
        return web.json_response(body, status=422)
    ns, name = built.namespace, str(built.manifest["metadata"]["name"])
    search = built.manifest["kind"] == c.KIND_OPTIMIZATIONJOB

    def run(b: Backend) -> str:
        try:
            b.get_optimizationjob(name, ns) if search else b.get_trainjob(name, ns)
        except KubetrainError:
            pass  # not there: create it
        else:
            kind = "optimizationjob" if search else "trainjob"
            raise UiError(409, f'{kind} "{name}" already exists in namespace {ns}', "pick another name")
        return submit.apply(built, b, cluster=ui.settings.cluster, workdir=ui.settings.workdir)

    message = await ui.backends.call(run)
    return web.json_response({
        "message": message, "namespace": ns, "name": name,
        "url": f"/optimizationjobs/{ns}/{name}" if search else f"/trainjobs/{ns}/{name}",
        "warnings": [submit.finding_json(f) for f in warnings],
    })
