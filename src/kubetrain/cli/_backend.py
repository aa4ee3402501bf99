"""Which backend serves a CLI verb: this machine, or the cluster named by --kubeconfig/--context."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._common import fail

if TYPE_CHECKING:
    from kubetrain.cli.backend import Backend

backend_options = [
    click.option("--kubeconfig", default=None, help="Use the Kubernetes cluster of this kubeconfig."),
    click.option("--context", default=None, help="kubeconfig context (implies the cluster backend)."),
    click.option("-n", "--namespace", default="default", show_default=True, help="Namespace."),
]


def with_backend_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(backend_options):
        f = opt(f)
    return f


def is_cluster(kubeconfig: str | None, context: str | None) -> bool:
    return bool(
        kubeconfig or context or os.environ.get("KUBETRAIN_BACKEND", "").lower() in ("k8s", "kubernetes")
    )


def select_backend(kubeconfig: str | None, context: str | None) -> Backend:
    if is_cluster(kubeconfig, context):
        try:
            from kubetrain.k8s.cli_backend import ClusterBackend
        except ImportError as exc:
            fail(
                f"the Kubernetes backend is not available in this installation ({exc})",
                "unset KUBETRAIN_BACKEND and drop --kubeconfig/--context to run on this machine",
            )
        try:
            backend: Backend = ClusterBackend(kubeconfig, context)
        except KubetrainError as exc:
            fail(str(exc), "pass --kubeconfig/--context of a reachable cluster, or drop them to run locally")
        return backend
    try:
        return local_backend()
    except (OSError, sqlite3.Error) as exc:
        fail(
            f"cannot open this machine's kubetrain state: {exc}",
            "point KUBETRAIN_HOME at a writable directory (default ~/.kubetrain)",
        )


def local_backend() -> Backend:
    """This machine's backend; raises ``OSError``/``sqlite3.Error`` when its state cannot be opened."""
    # Imported here so `kubetrain --help` and the cluster backend never load the local one.
    from kubetrain.local.backend import LocalBackend

    try:
        return LocalBackend()
    except KubetrainError as exc:  # an unusable KUBETRAIN_HOME or state file: the message says why and the fix
        raise OSError(str(exc)) from None


