"""The workload verbs: ``run``, ``apply``, ``get``, ``describe``, ``logs``, ``delete``.

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
from kubetrain.cli._backend import is_cluster as _is_cluster
from kubetrain.cli._backend import select_backend as _backend
from kubetrain.cli._backend import with_backend_options as _with_backend_options
from kubetrain.cli._common import fail, files_option, print_findings, stdout
from kubetrain.cli.backend import Backend
from kubetrain.cli.checking import check_files
from kubetrain.cli.follow import follow_remote as _follow_remote
from kubetrain.cli.follow import run_local as _run_local
from kubetrain.cli.output import age as _age
from kubetrain.cli.output import dump_objects as _dump
from kubetrain.cli.output import last_message as _message
from kubetrain.cli.output import nodes as _nodes
from kubetrain.cli.output import print_applied
from kubetrain.cli.output import print_details as _print_details
from kubetrain.cli.output import table as _table

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


_RUNTIME_KINDS = {
    "trainingruntime": "TrainingRuntime", "trainingruntimes": "TrainingRuntime",
    "clustertrainingruntime": "ClusterTrainingRuntime", "clustertrainingruntimes": "ClusterTrainingRuntime",
}


def _delete_runtimes(backend: Backend, kind: str, names: tuple[str, ...], namespace: str) -> None:
    delete_runtime = getattr(backend, "delete_runtime", None)
    if delete_runtime is None:
        fail(f"deleting a {kind} is not supported on this backend",
             f"use kubectl delete {kind.lower()} NAME on a cluster")
    for name in names:
        try:
            delete_runtime(kind, name, namespace)
        except KubetrainError as exc:
            fail(str(exc))
        click.echo(f'{kind.lower()}.trainer.kubeflow.org "{name}" deleted')


def register(group: click.Group) -> None:
    @group.command("run")
    @files_option
    @_with_backend_options
    @click.option("-q", "--quiet", is_flag=True, help="Do not stream logs; print only the final state.")
    def run(
        files: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str, quiet: bool
    ) -> None:
        """Run a TrainJob here (or on a cluster) and wait: live steps, streamed logs, the job's exit status.

        Exit status is 0 when the TrainJob ends Complete and 1 when it ends Failed. Runtimes in the same files
        are applied first; the built-in runtimes (`kubetrain runtimes list`) are always available.

        \b
        Examples:
          kubetrain run -f examples/quickstart/trainjob.yaml
          kubetrain run -f my-runtime.yaml -f my-trainjob.yaml
          kubetrain run -f trainjob.yaml --context kind-kind     # on a cluster
        """
        cluster = _is_cluster(kubeconfig, context)
        objects, dirs = _load(files, _backend(kubeconfig, context), namespace, cluster)
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
            backend = _backend(kubeconfig, context)
            _run_errors(lambda: print_applied(backend.apply([*others, tj.to_wire()], namespace=ns)))
            sys.exit(_follow_remote(backend, tj.name, ns, quiet))
        sys.exit(_run_local(others, tj, workdir, ns, quiet))

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

    @group.command("get")
    @click.argument("kind", type=click.Choice(["trainjobs", "trainjob", "tj", "runtimes", "runtime"]))
    @click.argument("name", required=False)
    @click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
    @click.option("-o", "--output", type=click.Choice(["table", "wide", "yaml", "json"]), default="table")
    @_with_backend_options
    def get(
        kind: str,
        name: str | None,
        all_namespaces: bool,
        output: str,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """List TrainJobs (NAME RUNTIME STATE NODES AGE) or runtimes, like kubectl get.

        \b
        Examples:
          kubetrain get trainjobs
          kubetrain get trainjobs -A -o wide
          kubetrain get trainjob my-job -o yaml
          kubetrain get runtimes
        """
        backend = _backend(kubeconfig, context)
        ns = None if all_namespaces else namespace
        if kind.startswith("runtime"):
            rts = backend.list_runtimes(ns)
            if name:
                rts = [r for r in rts if r.name == name]
            if output in ("yaml", "json"):
                _dump([r.to_wire() for r in rts], output)
                return
            t = _table(["KIND", "NAME", "FRAMEWORK", "NODES"])
            for r in rts:
                ml = r.spec.ml_policy
                t.add_row(
                    r.kind,
                    r.name,
                    ",".join(ml.frameworks()) if ml else "-",
                    str(ml.num_nodes or 1) if ml else "-",
                )
            stdout.print(t)
            return
        try:
            jobs = [backend.get_trainjob(name, namespace)] if name else backend.list_trainjobs(ns)
        except KubetrainError as exc:
            fail(str(exc))
        if output in ("yaml", "json"):
            _dump([j.to_wire() for j in jobs], output)
            return
        if not jobs:
            click.echo(
                f"No TrainJobs found in {'any namespace' if ns is None else f'namespace {ns}'}.", err=True
            )
            return
        cols = (["NAMESPACE"] if ns is None else []) + ["NAME", "RUNTIME", "STATE", "NODES", "AGE"]
        if output == "wide":
            cols += ["JOBS", "MESSAGE"]
        t = _table(cols)
        for j in jobs:
            row = ([j.namespace] if ns is None else []) + [
                j.name,
                j.spec.runtime_ref.name,
                j.state or "Running",
                _nodes(j),
                _age(j.metadata.creation_timestamp),
            ]
            if output == "wide":
                js = (j.status.jobs_status if j.status else None) or []
                row += [
                    ", ".join(f"{s.name}(active={s.active},ok={s.succeeded},failed={s.failed})" for s in js),
                    _message(j),
                ]
            t.add_row(*row)
        stdout.print(t)

    @group.command("describe")
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj"]))
    @click.argument("name")
    @_with_backend_options
    def describe(kind: str, name: str, kubeconfig: str | None, context: str | None, namespace: str) -> None:
        """Spec summary, steps (pods) with states and restarts, conditions and events of a TrainJob.

        \b
        Examples:
          kubetrain describe trainjob my-job
          kubetrain describe tj my-job -n team-a
        """
        backend = _backend(kubeconfig, context)
        try:
            d = backend.describe_trainjob(name, namespace)
        except KubetrainError as exc:
            fail(str(exc))
        _print_details(d)

    @group.command("logs")
    @click.argument("name")
    @click.option(
        "--step",
        default=None,
        help="One step: a pod (node-0-1), a job (node-0) or a replicated job (dataset-initializer).",
    )
    @click.option("-f", "--follow", is_flag=True, help="Keep streaming until the TrainJob finishes.")
    @_with_backend_options
    def logs(
        name: str, step: str | None, follow: bool, kubeconfig: str | None, context: str | None, namespace: str
    ) -> None:
        """Print the logs of a TrainJob's steps, each line prefixed [step/rank] when several are shown.

        \b
        Examples:
          kubetrain logs my-job
          kubetrain logs my-job --step node-0 -f
          kubetrain logs my-job --step dataset-initializer
        """
        backend = _backend(kubeconfig, context)
        try:
            for line in backend.logs(name, namespace, step=step, follow=follow):
                click.echo(line)
        except KubetrainError as exc:
            fail(str(exc))

    @group.command("delete")
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj", *_RUNTIME_KINDS]))
    @click.argument("names", nargs=-1, required=True)
    @_with_backend_options
    def delete(
        kind: str, names: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str
    ) -> None:
        """Delete TrainJobs (stopping every process of them) or applied runtimes. Locally, logs and volumes stay
        on disk; TrainJobs keep the runtime they were created with.

        \b
        Examples:
          kubetrain delete trainjob my-job
          kubetrain delete tj job-a job-b -n team-a
          kubetrain delete clustertrainingruntime my-runtime
          kubetrain delete trainingruntime team-runtime -n team-a
        """
        backend = _backend(kubeconfig, context)
        if kind in _RUNTIME_KINDS:
            _delete_runtimes(backend, _RUNTIME_KINDS[kind], names, namespace)
            return
        for name in names:
            logs_dir = None
            try:
                if hasattr(backend, "logs_dir"):
                    logs_dir = backend.logs_dir(name, namespace)
                backend.delete_trainjob(name, namespace)
            except KubetrainError as exc:
                fail(str(exc))
            kept = f" (logs kept in {logs_dir})" if logs_dir else ""
            click.echo(f'trainjob.trainer.kubeflow.org "{name}" deleted{kept}')
