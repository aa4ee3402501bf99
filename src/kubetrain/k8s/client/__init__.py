"""The only code in kubetrain that talks to the Kubernetes API server.

A thin async client over aiohttp, one module per verb (``getting``, ``applying``, ``writing`` (create, replace),
``patching``, ``deleting``, ``watching``, ``logs``) sharing one :class:`ApiSession` (auth, QPS/burst limit,
retries honouring ``Retry-After``). :class:`Client` bundles them for callers that want one object.
"""

from kubetrain.k8s.client.api import Client
from kubetrain.k8s.client.config import ClusterConfig, ConfigError
from kubetrain.k8s.client.errors import ApiError, Conflict, Gone, Invalid, NotFound, TooManyRequests
from kubetrain.k8s.client.resources import Resource
from kubetrain.k8s.client.watching import WatchEvent

__all__ = [
    "ApiError",
    "Client",
    "ClusterConfig",
    "ConfigError",
    "Conflict",
    "Gone",
    "Invalid",
    "NotFound",
    "Resource",
    "TooManyRequests",
    "WatchEvent",
]
