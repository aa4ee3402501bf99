"""``Client``: the verb modules bound to one session, with kubetrain's field manager as the default."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Unpack

from kubetrain.api.constants import FIELD_MANAGER
from kubetrain.k8s.client import applying, deleting, getting, logs, patching, watching, writing
from kubetrain.k8s.client.config import ClusterConfig
from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.session import ApiSession


class Client:
    """Typed thin client. Create and use it inside one event loop; ``await client.close()`` at the end."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = 50.0,
        burst: int = 100,
        field_manager: str = FIELD_MANAGER,
    ):
        self.config = config
        self.session = ApiSession(config, qps=qps, burst=burst)
        self.field_manager = field_manager

    async def close(self) -> None:
        await self.session.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await getting.get(self.session, res, name, namespace)

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        return await getting.list_(
            self.session,
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            transform=transform,
        )

    async def apply(self, obj: dict[str, Any], *, force: bool = True) -> dict[str, Any]:
        return await applying.apply(self.session, obj, field_manager=self.field_manager, force=force)

    async def create(self, obj: dict[str, Any], *, resource: Resource | None = None) -> dict[str, Any]:
        return await writing.create(self.session, obj, field_manager=self.field_manager, resource=resource)

    async def replace(self, obj: dict[str, Any], *, resource: Resource | None = None) -> dict[str, Any]:
        return await writing.replace(self.session, obj, field_manager=self.field_manager, resource=resource)

    async def merge_patch(
        self, res: Resource, name: str, namespace: str | None, patch: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        return await patching.merge_patch(
            self.session, res, name, namespace, patch, subresource=subresource, field_manager=self.field_manager
        )

    async def scale(self, res: Resource, name: str, namespace: str | None, replicas: int) -> dict[str, Any]:
        """Set ``spec.replicas`` through the scale subresource (what ``kubectl scale`` and an HPA do)."""
        return await self.merge_patch(res, name, namespace, {"spec": {"replicas": replicas}}, subresource="scale")

    async def patch_status(
        self, res: Resource, name: str, namespace: str | None, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Merge ``{"status": status}`` through the status subresource (lists in it are replaced whole)."""
        return await self.merge_patch(res, name, namespace, {"status": status}, subresource="status")

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        missing_ok: bool = False,
        propagation: str = "Background",
    ) -> dict[str, Any] | None:
        return await deleting.delete(
            self.session, res, name, namespace, missing_ok=missing_ok, propagation=propagation
        )

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        **options: Unpack[watching.WatchOptions],
    ) -> AsyncIterator[watching.WatchEvent]:
        return watching.watch(self.session, res, namespace, resource_version=resource_version, **options)

    def pod_logs(
        self, name: str, namespace: str, *, container: str | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        return logs.pod_logs(self.session, name, namespace, container=container, follow=follow)

    def pod_log_chunks(self, name: str, namespace: str, **options: Unpack[logs.LogParams]) -> AsyncIterator[bytes]:
        return logs.pod_log_chunks(self.session, name, namespace, **options)
