"""Which backend serves a CLI verb (``kubetrain.service.backends`` decides); a backend that cannot be opened ends
the command with the reason and the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubetrain.cli._common import fail
from kubetrain.service.backends import BackendUnavailable, is_cluster, local_backend, open_backend, with_backend_options
from kubetrain.service.checking import RuntimeCatalog, checking_backend

if TYPE_CHECKING:
    from kubetrain.api.views import Backend

__all__ = ["is_cluster", "local_backend", "select_backend", "select_checking_backend", "with_backend_options"]


def select_backend(kubeconfig: str | None, context: str | None) -> Backend:
    try:
        return open_backend(kubeconfig, context)
    except BackendUnavailable as exc:
        fail(exc.message, exc.fix)


def select_checking_backend(kubeconfig: str | None, context: str | None) -> RuntimeCatalog:
    """Whose runtimes ``validate`` and ``render`` resolve against (``kubetrain.service.checking``)."""
    try:
        return checking_backend(kubeconfig, context)
    except BackendUnavailable as exc:
        fail(exc.message, exc.fix)
