"""The workload verbs that submit: ``run`` and ``apply`` (``get``, ``describe``, ``logs``, ``delete`` and ``wait``
have their own modules).

They run against this machine (``kubetrain.local``) unless ``--kubeconfig``/``--context`` is given or
``KUBETRAIN_BACKEND=k8s`` is set, in which case the cluster backend (``kubetrain.k8s``) serves them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api.loader import Manifest
from kubetrain.api.logtext import parse_duration
from kubetrain.cli._backend import is_cluster as _is_cluster
from kubetrain.cli._backend import select_backend as _backend
from kubetrain.cli._backend import with_backend_options as _with_backend_options
from kubetrain.cli._common import fail, files_option, print_findings
from kubetrain.cli.backend import Backend
from kubetrain.cli.checking import check_files
from kubetrain.cli.follow import follow_remote as _follow_remote
from kubetrain.cli.follow import run_local as _run_local
from kubetrain.cli.output import print_applied

__all__ = ["print_applied", "register"]


def _load(files: tuple[str, ...], backend: Backend, namespace: str, cluster: bool) -> tuple[list[Manifest], list[str]]:
    """Load and check the files with the same rules as `validate` (against the backend's installed runtimes);
    print every finding, deprecation warnings included, and stop on errors before anything is applied."""
    checked = check_files(files, namespace=namespace, backend=backend, local=None if cluster else "run")
    print_findings(checked.result)
    if not checked.result.ok:
        sys.exit(1)
    # Locally a pod without workingDir starts where its manifest lives, so `command: [torchrun, train.py]`
    # finds a script next to the YAML.
    dirs = []
    for s in checked.sources:
        f = s.file or "-"
        dirs.append(str(Path(f).resolve().parent) if f not in ("-", "<stdin>") else os.getcwd())
    return checked.objects, dirs


def _run_errors(fn: Callable[[], None]) -> None:
    try:
        fn()
    except KubetrainError as exc:
        fail(str(exc))


def register(group: click.Group) -> None:
    @group.command("run")
    @files_option
    @_with_backend_options
    @click.option("-q", "--quiet", is_flag=True, help="Do not stream logs; print only the final state.")
    @click.option("--timeout", default=None,
                  help="Stop waiting after this long (30s, 10m, 2h): exit 124 naming the state then.")
    @click.option("--delete-on-timeout", is_flag=True,
                  help="On a cluster, delete the TrainJob when --timeout passes (it keeps running otherwise).")
    def run(
        files: tuple[str, ...],
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
        quiet: bool,
        timeout: str | None,
        delete_on_timeout: bool,
    ) -> None:
        """Run a TrainJob here (or on a cluster) and wait: live steps, streamed logs, the job's exit status.

        Exit status is 0 when the TrainJob ends Complete, 1 when it ends Failed, 124 when --timeout passes
        first and 130 on Ctrl-C. On a cluster it waits for the JobSet and its pods and says why they wait
        (no JobSet yet, PodGroup not scheduled, the scheduler's message, image pulls); Ctrl-C detaches and the
        TrainJob keeps running. Locally a timeout or Ctrl-C stops the TrainJob (its pods belong to this
        command). Runtimes in the same files are applied first; the built-in runtimes (`kubetrain runtimes
        list`) are always available.

        \b
        Examples:
          kubetrain run -f examples/quickstart/trainjob.yaml
          kubetrain run -f my-runtime.yaml -f my-trainjob.yaml
          kubetrain run -f trainjob.yaml --context kind-kind --timeout 30m     # on a cluster
        """
        try:
            limit = parse_duration(timeout, "--timeout") if timeout else None
        except KubetrainError as exc:
            fail(str(exc))
        cluster = _is_cluster(kubeconfig, context)
        backend = _backend(kubeconfig, context)
        objects, dirs = _load(files, backend, namespace, cluster)
        jobs = [(o, d) for o, d in zip(objects, dirs, strict=True) if isinstance(o, TrainJob)]
        if len(jobs) != 1:
            fail(
                f"`run` needs exactly one TrainJob in the files, found {len(jobs)}",
                "use `kubetrain apply -f` for several TrainJobs, then `kubetrain get trainjobs`",
            )
        others = [o.to_wire() for o in objects if not isinstance(o, TrainJob)]
        tj, workdir = jobs[0]
        ns = tj.metadata.namespace or namespace
        if cluster:
            _run_errors(lambda: print_applied(backend.apply([*others, tj.to_wire()], namespace=ns)))
            how = "".join(
                f" {flag} {value}"
                for flag, value in (("--kubeconfig", kubeconfig), ("--context", context), ("-n", ns))
                if value and (flag != "-n" or value != "default")
            )
            sys.exit(
                _follow_remote(
                    backend, tj.name, ns, quiet, timeout=limit, delete_on_timeout=delete_on_timeout, how=how
                )
            )
        sys.exit(_run_local(others, tj, workdir, ns, quiet, timeout=limit))

    @group.command("apply")
    @files_option
    @_with_backend_options
    def apply(files: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str) -> None:
        """Create TrainJobs (started in the background) and runtimes; re-applying may flip spec.suspend.

        \b
        Examples:
          kubetrain apply -f trainjob.yaml
          kubetrain apply -f runtimes/ -f trainjob.yaml
          kubetrain get trainjobs && kubetrain logs my-job -f
        """
        backend = _backend(kubeconfig, context)
        cluster = _is_cluster(kubeconfig, context)
        objects, dirs = _load(files, backend, namespace, cluster)
        wires = [o.to_wire() for o in objects]
        if cluster:
            _run_errors(lambda: print_applied(backend.apply(wires, namespace=namespace)))
            return
        from kubetrain.local.backend import LocalBackend

        assert isinstance(backend, LocalBackend)
        local = backend
        applied: list[str] = []

        def go() -> None:
            # One call per object so each TrainJob keeps the working directory of its own file.
            for w, d in sorted(zip(wires, dirs, strict=True), key=lambda p: p[0]["kind"] == "TrainJob"):
                applied.extend(local.apply([w], namespace=namespace, workdir=d))

        _run_errors(go)
        print_applied(applied)
