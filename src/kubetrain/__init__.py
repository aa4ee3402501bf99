"""kubetrain: Kubeflow Trainer-compatible training runtimes, run locally or on Kubernetes.

``kubetrain.Client`` is the Python entry point for running TrainJobs on this machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain._version import __version__

if TYPE_CHECKING:
    from kubetrain.client import Client

__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package (e.g. for the CLI) does not load the local backend.
    if name == "Client":
        from kubetrain.client import Client

        return Client
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
