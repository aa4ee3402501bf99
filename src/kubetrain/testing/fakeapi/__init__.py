"""An in-memory Kubernetes API server for tests and benchmarks (the same HTTP wire the client speaks)."""

from kubetrain.testing.fakeapi.server import FakeApiServer, default_resources
from kubetrain.testing.fakeapi.store import Store, StoreError

__all__ = ["FakeApiServer", "Store", "StoreError", "default_resources"]
