"""The workload verbs: ``run``, ``apply``, ``get``, ``describe``, ``logs``, ``delete``.

They run against this machine (``kubetrain.local``) unless ``--kubeconfig``/``--context`` is given or
``KUBETRAIN_BACKEND=k8s`` is set, in which case the cluster backend (``kubetrain.k8s``) serves them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._backend import is_cluster as _is_cluster
from kubetrain.cli._backend import select_backend as _backend
from kubetrain.cli._backend import with_backend_options as _with_backend_options
from kubetrain.cli._common import fail, files_option, load_all, print_findings, stdout
from kubetrain.cli.follow import follow_remote as _follow_remote
from kubetrain.cli.follow import run_local as _run_local
from kubetrain.cli.output import age as _age
from kubetrain.cli.output import dump_objects as _dump
from kubetrain.cli.output import last_message as _message
from kubetrain.cli.output import nodes as _nodes
from kubetrain.cli.output import print_applied
from kubetrain.cli.output import print_details as _print_details
from kubetrain.cli.output import table as _table

if TYPE_CHECKING:
    from kubetrain.api import TrainJob
    from kubetrain.api.loader import Manifest

__all__ = ["print_applied", "register"]


def _load(files: tuple[str, ...]) -> tuple[list[Manifest], list[str]]:
    objects, sources, result = load_all(files)
    print_findings(result)
    if not result.ok:
        sys.exit(1)
    # Locally a pod without workingDir starts where its manifest lives, so `command: [torchrun, train.py]`
    # finds a script next to the YAML.
    dirs = []
    for s in sources:
        f = s.loaded.files[s.index] if s.loaded.files else "-"
        dirs.append(str(Path(f).resolve().parent) if f not in ("-", "<stdin>") else os.getcwd())
    return objects, dirs


def _cached(files: tuple[str, ...], namespace: str) -> tuple[Any, str | None]:
    """The compile cache's entry for these files, if any, and their key (None: not cacheable)."""
    from kubetrain.local import compile_cache
    from kubetrain.local.store import Store

    if compile_cache.disabled():
        return None, None
    try:
        key = compile_cache.key(files, namespace)
        if key is None:
            return None, None
        return compile_cache.lookup(Store(), key), key
    except KubetrainError:
        return None, None  # the full path reports what is wrong (e.g. an unusable KUBETRAIN_HOME)


def _file_of(files: tuple[str, ...], workdir: str) -> int:
    """Which -f argument is in ``workdir`` (the TrainJob's file; only asked when every -f is a plain file)."""
    for i, f in enumerate(files):
        if f != "-" and str(Path(f).resolve().parent) == workdir:
            return i
    return 0


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
    @click.option(
        "-d", "--detach", is_flag=True, help="Start it in the background and return (follow with `kubetrain logs -f`)."
    )
    @click.option(
        "--nohup",
        is_flag=True,
        help="Keep running when the terminal closes (SIGHUP, e.g. a dropped SSH session); output stops, logs stay.",
    )
    @click.option(
        "--replace", is_flag=True, help="Replace a finished TrainJob of the same name (its state and logs are removed)."
    )
    def run(
        files: tuple[str, ...],
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
        quiet: bool,
        detach: bool,
        nohup: bool,
        replace: bool,
    ) -> None:
        """Run a TrainJob here (or on a cluster) and wait: live steps, streamed logs, the job's exit status.

        Exit status: 0 when the TrainJob ends Complete; 1 when it ends Failed; 127 (126) when a command could
        not be found (executed); 130 after Ctrl-C (128 + the signal number after SIGTERM/SIGHUP). Ctrl-C stops
        the pods like the kubelet (SIGTERM, terminationGracePeriodSeconds, SIGKILL); a second Ctrl-C kills them
        at once. Runtimes in the same files are applied first; the built-in runtimes (`kubetrain runtimes list`)
        are always available.

        \b
        Examples:
          kubetrain run -f examples/quickstart/trainjob.yaml
          kubetrain run -f my-runtime.yaml -f my-trainjob.yaml
          kubetrain run -f trainjob.yaml --detach            # like apply, for one TrainJob
          kubetrain run -f trainjob.yaml --nohup > run.log   # survives logging out
          kubetrain run -f trainjob.yaml --context kind-kind # on a cluster
        """
        cluster = _is_cluster(kubeconfig, context)
        key = None
        holder = None
        if not cluster:
            if not detach:
                from kubetrain.local.netns import NetworkNamespace

                # The TrainJob's network namespace comes up while its manifest is read and checked.
                holder = NetworkNamespace.start()
            hit, key = _cached(files, namespace)
            if hit is not None:
                workdir = str(Path(files[hit.file_index]).resolve().parent)
                code = _run_local(
                    hit.others, hit.trainjob, workdir, namespace, quiet,
                    detach=detach, nohup=nohup, replace=replace, compiled=hit, holder=holder,
                )
                sys.exit(code)
        from kubetrain.api import TrainJob

        objects, dirs = _load(files)
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
            if detach:
                return
            sys.exit(_follow_remote(backend, tj.name, ns, quiet))
        sys.exit(
            _run_local(
                others, tj.to_wire(), workdir, ns, quiet, detach=detach, nohup=nohup, replace=replace,
                cache_key=key, file_index=_file_of(files, workdir), holder=holder,
            )
        )

    @group.command("apply")
    @files_option
    @_with_backend_options
    def apply(files: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str) -> None:
        """Create TrainJobs (started in the background) and runtimes, or update them like kubectl.

        Re-applying an unchanged manifest changes nothing ("unchanged"). A TrainJob's runtimeRef, trainer,
        initializer, activeDeadlineSeconds and managedBy are immutable; spec.suspend, labels and annotations may
        change; runtimePatches only while it is suspended.

        \b
        Examples:
          kubetrain apply -f trainjob.yaml
          kubetrain apply -f runtimes/ -f trainjob.yaml
          kubetrain get trainjobs && kubetrain logs my-job -f
        """
        objects, dirs = _load(files)
        backend = _backend(kubeconfig, context)
        wires = [o.to_wire() for o in objects]
        if _is_cluster(kubeconfig, context):
            _run_errors(lambda: print_applied(backend.apply(wires, namespace=namespace)))
            return
        from kubetrain.local.backend import LocalBackend

        assert isinstance(backend, LocalBackend)
        local = backend
        applied: list[str] = []

        def go() -> None:
            # One call per object so each TrainJob keeps the working directory of its own file; each result is
            # printed as it happens, so a later error never hides what was already applied.
            for w, d in sorted(zip(wires, dirs, strict=True), key=lambda p: p[0]["kind"] == "TrainJob"):
                done = local.apply([w], namespace=namespace, workdir=d)
                applied.extend(done)
                print_applied(done)

        _run_errors(go)

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
                _state(j),
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
            if follow:
                tj = backend.get_trainjob(name, namespace)
                if tj.state == "Failed":
                    click.echo(f"trainjob {name}: Failed: {_message(tj)}", err=True)
        except KubetrainError as exc:
            fail(str(exc))

    @group.command("delete")
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj"]))
    @click.argument("names", nargs=-1, required=True)
    @click.option("--keep-logs", is_flag=True, help="Locally: keep the TrainJob's logs on disk (the path is printed).")
    @_with_backend_options
    def delete(
        kind: str,
        names: tuple[str, ...],
        keep_logs: bool,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Delete TrainJobs: stop every process (SIGTERM, the pods' grace period, SIGKILL) and remove their state
        and, locally, their logs (unless --keep-logs). Local volumes (PVCs) stay on disk.

        \b
        Examples:
          kubetrain delete trainjob my-job
          kubetrain delete tj job-a job-b -n team-a
          kubetrain delete trainjob my-job --keep-logs
        """
        backend = _backend(kubeconfig, context)
        for name in names:
            kept = ""
            try:
                if _is_cluster(kubeconfig, context):
                    backend.delete_trainjob(name, namespace)
                else:
                    from kubetrain.local.backend import LocalBackend

                    assert isinstance(backend, LocalBackend)
                    logs_dir = backend.logs_dir(name, namespace) if keep_logs else None
                    backend.delete_trainjob(name, namespace, keep_logs=keep_logs)
                    kept = f" (logs kept in {logs_dir})" if logs_dir else ""
            except KubetrainError as exc:
                fail(str(exc))
            click.echo(f'trainjob.trainer.kubeflow.org "{name}" deleted{kept}')


def _state(j: TrainJob) -> str:
    """The STATE column; a queued TrainJob also says what it waits for."""
    queued = j.condition("Queued")
    if j.state == "Queued" and queued is not None and queued.reason:
        return f"Queued ({queued.reason})"
    return j.state or "Running"
