"""The cluster side of the backend contract (``kubetrain.api.views.Backend``; ``kubetrain.local.backend`` is the
other side): what the CLI, the UI and the Python Client do on a cluster. ``cluster`` is the backend itself;
``describe``, ``follow`` (``run``/``logs -f``), ``watch`` (``get -w``, ``wait``), ``log_stamps`` and ``multikueue``
serve it, and ``install_check`` is ``kubetrain cluster install-check``. The operator never imports this package:
what both read of pods lives below, in ``kubetrain.k8s.pods``."""

from kubetrain.k8s.backend.cluster import ClusterBackend

__all__ = ["ClusterBackend"]
