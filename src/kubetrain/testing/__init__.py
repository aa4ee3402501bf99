"""Test tools shipped with kubetrain, never imported by the product itself (import-linter enforces it).

``kubetrain.testing.fakeapi``: an in-memory Kubernetes API server over real HTTP, for unit tests, the
benchmark (``bench/operator_burst.py``) and trying the operator without a cluster
(``python -m kubetrain.testing.fakeapi``). It is no substitute for a real API server: it runs no admission,
no CRD schemas and no CEL, so ``tests/e2e`` runs the same scenarios against a real kube-apiserver.
"""
