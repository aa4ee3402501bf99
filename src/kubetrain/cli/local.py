"""The workload verbs: ``run``, ``apply``, ``get``, ``describe``, ``logs``, ``delete``.

They run against this machine (``kubetrain.local``) unless ``--kubeconfig``/``--context`` is given or
``KUBETRAIN_BACKEND=k8s`` is set, in which case the cluster backend (``kubetrain.k8s``) serves them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.live import Live
from rich.table import Table

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api.loader import Manifest
from kubetrain.cli._backend import is_cluster as _is_cluster
from kubetrain.cli._backend import select_backend as _backend
from kubetrain.cli._backend import with_backend_options as _with_backend_options
from kubetrain.cli._common import fail, files_option, load_all, print_findings, stdout
from kubetrain.cli.backend import Backend


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


def _age(ts: str | None) -> str:
    if not ts:
        return "-"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "-"
    s = int((datetime.now(UTC) - then).total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"


def _nodes(tj: TrainJob) -> str:
    n = tj.spec.trainer.num_nodes if tj.spec.trainer else None
    return str(n) if n is not None else "-"


def _message(tj: TrainJob) -> str:
    conds = (tj.status.conditions if tj.status else None) or []
    return (conds[-1].message or "") if conds else ""


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
        if _is_cluster(kubeconfig, context):
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
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj"]))
    @click.argument("names", nargs=-1, required=True)
    @_with_backend_options
    def delete(
        kind: str, names: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str
    ) -> None:
        """Delete TrainJobs and stop every process of them. Locally, logs and volumes stay on disk.

        \b
        Examples:
          kubetrain delete trainjob my-job
          kubetrain delete tj job-a job-b -n team-a
        """
        backend = _backend(kubeconfig, context)
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


def print_applied(applied: list[str]) -> None:
    for a in applied:
        kind, _, name = a.partition("/")
        click.echo(
            f"{kind}.trainer.kubeflow.org/{name} applied"
            if kind in ("trainjob", "trainingruntime", "clustertrainingruntime")
            else f"{kind}/{name} applied"
        )


def _dump(objs: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        payload: Any = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


def _table(cols: list[str]) -> Table:
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in cols:
        t.add_column(c, no_wrap=c != "MESSAGE")
    return t


def _print_details(d: Any) -> None:
    tj: TrainJob = d.trainjob
    out = stdout
    fields: list[tuple[str, object]] = [
        ("Name", tj.name),
        ("Namespace", tj.namespace),
        ("Runtime", f"{tj.spec.runtime_ref.effective_kind}/{tj.spec.runtime_ref.name}"),
    ]
    tr = tj.spec.trainer
    if tr is not None:
        fields.append(
            (
                "Trainer",
                f"nodes={_nodes(tj)} procPerNode={tr.num_proc_per_node or '-'} "
                f"image={tr.image or '(runtime)'}",
            )
        )
        if tr.command or tr.args:
            cmd = " ".join((tr.command or []) + (tr.args or []))
            fields.append(("Command", cmd if len(cmd) <= 200 else cmd[:197] + "..."))
    fields += [
        ("Created", f"{tj.metadata.creation_timestamp or '-'} ({_age(tj.metadata.creation_timestamp)} ago)"),
        ("State", tj.state or "Running"),
    ]
    fields += [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in (d.extra or {}).items()]
    width = max(len(k) for k, _ in fields) + 2
    for k, v in fields:
        out.print(f"[bold]{k + ':':<{width}}[/]{v}", markup=True, highlight=False)
    out.print("[bold]Steps:[/]")
    t = _table(["  STEP", "JOB", "STATE", "RESTARTS", "EXIT", "PID", "MESSAGE"])
    for s in d.steps:
        t.add_row(
            "  " + s.name,
            s.replicated_job,
            s.state,
            str(s.restarts),
            "-" if s.exit_code is None else str(s.exit_code),
            str(s.pid or "-"),
            s.message or "",
        )
    out.print(t if d.steps else "  (none started)")
    out.print("[bold]Conditions:[/]")
    conds = (tj.status.conditions if tj.status else None) or []
    t = _table(["  TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"])
    for c in conds:
        t.add_row("  " + c.type, c.status, c.reason or "", c.message or "", c.last_transition_time or "")
    out.print(t if conds else "  (none)")
    js = (tj.status.jobs_status if tj.status else None) or []
    if js:
        out.print("[bold]Jobs:[/]")
        t = _table(["  NAME", "READY", "SUCCEEDED", "FAILED", "ACTIVE", "SUSPENDED"])
        for s in js:
            t.add_row(
                "  " + s.name, str(s.ready), str(s.succeeded), str(s.failed), str(s.active), str(s.suspended)
            )
        out.print(t)
    out.print("[bold]Events:[/]")
    t = _table(["  TIME", "TYPE", "REASON", "MESSAGE"])
    for e in d.events:
        t.add_row("  " + e.time, e.type, e.reason, e.message)
    out.print(t if d.events else "  (none)")


def _follow_remote(backend: Backend, name: str, namespace: str, quiet: bool) -> int:
    """Generic follow through the Backend protocol (used for the cluster backend)."""
    try:
        if not quiet:
            for line in backend.logs(name, namespace, step=None, follow=True):
                click.echo(line)
        while True:
            tj = backend.get_trainjob(name, namespace)
            if tj.finished:
                break
            time.sleep(1)
    except KubetrainError as exc:
        fail(str(exc))
    click.echo(f"trainjob {name}: {tj.state} {_message(tj)}", err=True)
    return 0 if tj.state == "Complete" else 1


def _run_local(others: list[dict[str, Any]], tj: TrainJob, workdir: str, namespace: str, quiet: bool) -> int:
    from kubetrain.local.backend import LocalBackend, LogTailer
    from kubetrain.local.supervisor import Supervisor, configure_logging, record_start_failure

    configure_logging()
    try:
        backend = LocalBackend()
        if others:
            print_applied(backend.apply(others, namespace=namespace))
        name = backend.submit(tj.to_wire(), namespace=namespace, workdir=workdir, detach=False)
    except KubetrainError as exc:
        fail(str(exc))
    ns = tj.metadata.namespace or namespace
    try:
        sup = Supervisor(backend.store, ns, name)
    except KubetrainError as exc:
        record_start_failure(backend.store, ns, name, str(exc))
        fail(str(exc))
    result: dict[str, Any] = {}
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.update(sup.run())
        except BaseException as exc:
            errors.append(exc)

    # The supervisor runs on its own thread because pods die with the thread that forked them (PDEATHSIG):
    # that thread lives exactly as long as the TrainJob, while this one draws progress and handles signals.
    worker = threading.Thread(target=target, name="supervisor")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: sup.terminate(signal.Signals(s).name))
    worker.start()
    tailer = LogTailer(lambda: backend.log_files(name, ns, None), prefix=True)
    console = Console(stderr=True, highlight=False)
    console.print(
        f"[dim]trainjob {ns}/{name}: running locally; images are not pulled, pods use the Python "
        f"environment {sys.prefix} (see docs/local.md to map images)[/]"
    )
    out_console = Console(highlight=False)
    # The live step table and the log lines share the terminal only when both go to it; otherwise (logs piped)
    # the logs stay plain on stdout and step changes are printed as lines on stderr.
    interactive = console.is_terminal and out_console.is_terminal
    seen: dict[str, str] = {}

    def progress() -> Table:
        t = Table(
            box=None,
            show_header=True,
            header_style="bold",
            title=f"trainjob {ns}/{name}",
            title_justify="left",
        )
        for col in ("STEP", "STATE", "RESTARTS"):
            t.add_column(col)
        for p in backend.store.list_pods(ns, name):
            t.add_row(p.name, p.state, str(p.restarts))
        return t

    def step_changes() -> None:
        for p in backend.store.list_pods(ns, name):
            if seen.get(p.name) != p.state:
                seen[p.name] = p.state
                console.print(f"[dim]step {p.name}: {p.state}[/]")

    def emit(lines: list[str], live: Live | None = None) -> None:
        if quiet:
            return
        for line in lines:
            if live is not None:
                live.console.print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                click.echo(line)

    if interactive:
        with Live(progress(), console=out_console, refresh_per_second=4, transient=True) as live:
            while worker.is_alive():
                emit(tailer.poll(), live)
                live.update(progress())
                worker.join(0.1)
    else:
        while worker.is_alive():
            emit(tailer.poll())
            step_changes()
            worker.join(0.1)
    emit(tailer.flush())
    if errors:
        error = errors[0]
        if isinstance(error, KubetrainError):
            fail(str(error))
        raise error
    final = backend.get_trainjob(name, ns)
    if interactive:
        console.print(progress())
    state = final.state
    color = "green" if state == "Complete" else "red"
    console.print(f"trainjob {ns}/{name}: [bold {color}]{state}[/] ({_message(final)})")
    if state != "Complete":
        console.print(f"[dim]details: kubetrain describe trainjob {name} -n {ns}[/]")
    return 0 if state == "Complete" else 1
