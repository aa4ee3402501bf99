"""Pod logs: whole, followed, or cut with the kubelet's parameters, read chunk by chunk as they arrive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypedDict, Unpack

from kubetrain.k8s.client.resources import POD
from kubetrain.k8s.client.session import ApiSession

CHUNK = 64 * 1024


async def pod_logs(
    session: ApiSession, name: str, namespace: str, *, container: str | None = None, follow: bool = False
) -> AsyncIterator[str]:
    """Line by line (without the newline)."""
    params = {"follow": "true" if follow else "false"}
    if container:
        params["container"] = container
    async with session.stream(POD.path(namespace, name, "log"), params=params) as resp:
        async for raw in resp.content:
            yield raw.decode(errors="replace").rstrip("\n")


class LogParams(TypedDict, total=False):
    """The kubelet's log parameters (``Client.pod_log_chunks`` takes the same)."""

    container: str | None
    follow: bool
    previous: bool
    tail_lines: int | None
    since_seconds: int | None
    since_time: str | None  # used only without since_seconds
    timestamps: bool
    limit_bytes: int | None


async def pod_log_chunks(
    session: ApiSession, name: str, namespace: str, **options: Unpack[LogParams]
) -> AsyncIterator[bytes]:
    """The log body as the server sends it, in chunks of at most 64 KiB (memory stays constant whatever the
    log's size); an unterminated last line arrives as soon as the server flushes it."""
    params: dict[str, str] = {"follow": "true" if options.get("follow") else "false"}
    if container := options.get("container"):
        params["container"] = container
    if options.get("previous"):
        params["previous"] = "true"
    tail_lines, since_seconds = options.get("tail_lines"), options.get("since_seconds")
    if tail_lines is not None and tail_lines >= 0:
        params["tailLines"] = str(tail_lines)
    if since_seconds is not None:
        params["sinceSeconds"] = str(max(1, since_seconds))
    elif since_time := options.get("since_time"):
        params["sinceTime"] = since_time
    if options.get("timestamps"):
        params["timestamps"] = "true"
    if (limit_bytes := options.get("limit_bytes")) is not None:
        params["limitBytes"] = str(limit_bytes)
    # No read timeout while following: a quiet training step may print nothing for an hour.
    async with session.stream(POD.path(namespace, name, "log"), params=params, timeout=None) as resp:
        async for chunk in resp.content.iter_chunked(CHUNK):
            yield chunk
