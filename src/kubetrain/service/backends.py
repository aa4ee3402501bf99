"""Which backend serves a request, and opening it: this machine (``kubetrain.local``), or the cluster named by a
kubeconfig/context or ``KUBETRAIN_BACKEND=k8s`` (``kubetrain.k8s.backend``). The CLI verbs, ``kubetrain ui`` and
the Python Client make the same choice here and get the same reasons when a backend cannot be opened."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError

if TYPE_CHECKING:
    from kubetrain.api.views import Backend

LOCAL_STATE_FIX = "point KUBETRAIN_HOME at a writable directory (default ~/.kubetrain)"

backend_options = [
    click.option("--kubeconfig", default=None, help="Use the Kubernetes cluster of this kubeconfig."),
    click.option("--context", default=None, help="kubeconfig context (implies the cluster backend)."),
    click.option("-n", "--namespace", default="default", show_default=True, help="Namespace."),
]


def with_backend_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--kubeconfig``, ``--context`` and ``-n`` on a command, as every command that reaches a backend has them."""
    for opt in reversed(backend_options):
        f = opt(f)
    return f


class BackendUnavailable(KubetrainError):
    """The chosen backend cannot be opened; ``fix`` says what to do instead."""

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.message, self.fix = message, fix


def is_cluster(kubeconfig: str | None, context: str | None) -> bool:
    return bool(
        kubeconfig or context or os.environ.get("KUBETRAIN_BACKEND", "").lower() in ("k8s", "kubernetes")
    )


def open_backend(kubeconfig: str | None, context: str | None, *, elsewhere: str = "run locally") -> Backend:
    """The backend of this request. ``elsewhere`` ends the fix of a cluster that cannot be reached ("drop them to
    ..."). Raises ``BackendUnavailable``."""
    if is_cluster(kubeconfig, context):
        return cluster_backend(kubeconfig, context, elsewhere=elsewhere)
    try:
        return local_backend()
    except (OSError, sqlite3.Error) as exc:
        raise BackendUnavailable(f"cannot open this machine's kubetrain state: {exc}", LOCAL_STATE_FIX) from None


def cluster_backend(kubeconfig: str | None, context: str | None, *, elsewhere: str = "run locally") -> Backend:
    """The cluster backend of a kubeconfig/context; raises ``BackendUnavailable``."""
    try:
        from kubetrain.k8s.backend import ClusterBackend
    except ImportError as exc:
        raise BackendUnavailable(
            f"the Kubernetes backend is not available in this installation ({exc})",
            f"unset KUBETRAIN_BACKEND and drop --kubeconfig/--context to {elsewhere}",
        ) from None
    try:
        backend: Backend = ClusterBackend(kubeconfig, context)
    except KubetrainError as exc:
        raise BackendUnavailable(
            str(exc), f"pass --kubeconfig/--context of a reachable cluster, or drop them to {elsewhere}"
        ) from None
    return backend


def local_backend() -> Backend:
    """This machine's backend; raises ``OSError``/``sqlite3.Error`` when its state cannot be opened."""
    # Imported here so `kubetrain --help` and the cluster backend never load the local one.
    from kubetrain.local.backend import LocalBackend

    try:
        return LocalBackend()
    except KubetrainError as exc:  # an unusable KUBETRAIN_HOME or state file: the message says why and the fix
        raise OSError(str(exc)) from None


def close_backend(backend: object) -> None:
    """Close a cluster backend's HTTP session now rather than at interpreter exit (which warns)."""
    close = getattr(backend, "close", None)
    if callable(close):
        close()
