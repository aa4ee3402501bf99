"""``python -m kubetrain.local.optimizer NAMESPACE NAME``: the detached process that runs one OptimizationJob's
controller (``kubetrain.local.trials``) with this machine's backend, until the search ends."""

from __future__ import annotations

import logging
import signal
import sys

from kubetrain.api.errors import KubetrainError
from kubetrain.local import optimizationjobs
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store, StoreError
from kubetrain.local.supervisor.controller import configure_logging
from kubetrain.local.trials import Controller

log = logging.getLogger("kubetrain.local.trials")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="kubetrain OptimizationJob controller (started by `kubetrain apply`)")
    parser.add_argument("namespace")
    parser.add_argument("name")
    args = parser.parse_args()
    if sys.stdin.buffer.read(len(optimizationjobs.GO)) != optimizationjobs.GO:
        return  # whoever started us died before recording our pid: a reader starts a controller instead
    configure_logging()
    store = Store()
    backend = LocalBackend(store)
    controller = Controller(store, args.namespace, args.name, backend.submit_trial, backend.stop_trial)
    _warm(backend, store, args.namespace, args.name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _s, _f: controller.stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        controller.run()
    except (KubetrainError, StoreError) as exc:
        log.error("optimization controller failed optimizationjob=%s/%s error=%r", args.namespace, args.name,
                  str(exc))
        raise SystemExit(1) from None


def _warm(backend: LocalBackend, store: Store, namespace: str, name: str) -> None:
    """Load now what submitting a trial needs (the models, the compiler, the trials' runtime): the first trials run
    already (``kubetrain apply`` started them), and the next one should start the moment one of them ends, not a
    second of imports later."""
    import kubetrain.compiler  # noqa: F401 (the import is the point)

    row = optimizationjobs.find(store, name, namespace)
    runtime = (((row.manifest.get("spec") or {}).get("trainJobTemplate") or {}).get("spec") or {}).get(
        "runtimeRef", {}).get("name") if row is not None else None
    if runtime:
        backend.runtimes(only=runtime)


if __name__ == "__main__":
    main()
