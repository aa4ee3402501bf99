"""An in-memory Kubernetes API server for tests and benchmarks (the same HTTP wire the client speaks)."""

from kubetrain.k8s.fakeapi.server import FakeApiServer, default_resources
from kubetrain.k8s.fakeapi.store import Store, StoreError

__all__ = ["FakeApiServer", "Store", "StoreError", "default_resources"]
