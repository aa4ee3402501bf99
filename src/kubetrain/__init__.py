"""kubetrain: Kubeflow Trainer-compatible training runtimes, run locally or on Kubernetes.

``kubetrain.Client`` is the Python entry point for running TrainJobs on this machine (or a cluster), and
``Client.optimize`` with ``Search``, ``Objective``, ``RandomSearch``/``GridSearch`` for a hyperparameter search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain._version import __version__

if TYPE_CHECKING:
    from kubetrain.api.search import GridSearch, Objective, RandomSearch, Search, TrialConfig
    from kubetrain.client import Client

__all__ = ["Client", "GridSearch", "Objective", "RandomSearch", "Search", "TrialConfig", "__version__"]
_SEARCH = ("GridSearch", "Objective", "RandomSearch", "Search", "TrialConfig")


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package (e.g. for the CLI) does not load the local backend.
    if name == "Client":
        from kubetrain.client import Client

        return Client
    if name in _SEARCH:
        from kubetrain.api import search

        return getattr(search, name)
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
