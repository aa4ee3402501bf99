"""Pod logs, whole or followed."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kubetrain.k8s.client.resources import POD
from kubetrain.k8s.client.session import ApiSession


async def pod_logs(
    session: ApiSession, name: str, namespace: str, *, container: str | None = None, follow: bool = False
) -> AsyncIterator[str]:
    params = {"follow": "true" if follow else "false"}
    if container:
        params["container"] = container
    async with session.stream(POD.path(namespace, name, "log"), params=params) as resp:
        async for raw in resp.content:
            yield raw.decode(errors="replace").rstrip("\n")
