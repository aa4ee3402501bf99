"""The service layer: what every front end does the same way, below ``kubetrain.cli``, ``kubetrain.ui`` and
``kubetrain.client``.

- ``backends``: which backend serves a request (this machine, or the cluster of a kubeconfig) and opening it;
- ``sources``: loading manifests from files or text, with ``file:line`` for every finding;
- ``checking``: load + the one validation entry point (``kubetrain.compiler.validate``) against the runtimes the
  backend has installed; ``podsecurity`` and ``capacity`` add the Pod Security lint and the capacity warnings;
- ``submit``: check, then hand the objects to the backend;
- ``present``: small renderings both the CLI and the UI show (ages).

The front ends only parse their input (flags, forms, arguments) and present the result, so ``kubetrain validate``,
the UI's form and ``Client.train`` cannot accept what another refuses.
"""
