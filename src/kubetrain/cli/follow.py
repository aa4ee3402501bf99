"""``kubetrain run``'s wait: follow a TrainJob to its end, with live steps and streamed logs, and exit by its state.

Locally the supervisor runs on a thread of this process; on a cluster the backend is polled.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.cli._common import fail
from kubetrain.cli.backend import Backend
from kubetrain.cli.output import last_message, print_applied


def follow_remote(backend: Backend, name: str, namespace: str, quiet: bool) -> int:
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
    click.echo(f"trainjob {name}: {tj.state} {last_message(tj)}", err=True)
    return 0 if tj.state == "Complete" else 1


def run_local(others: list[dict[str, Any]], tj: TrainJob, workdir: str, namespace: str, quiet: bool) -> int:
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
        f"trainjob {ns}/{name}: running locally; images are not pulled, pods use the Python "
        f"environment {sys.prefix} (see docs/local.md to map images)", style="dim", markup=False
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
                console.print(f"step {p.name}: {p.state}", style="dim", markup=False)

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
    # The message is the job's own text (exceptions, commands): never read as markup.
    console.print(Text.assemble(f"trainjob {ns}/{name}: ", (state, f"bold {color}"), f" ({last_message(final)})"))
    if state != "Complete":
        console.print(f"details: kubetrain describe trainjob {name} -n {ns}", style="dim", markup=False)
    return 0 if state == "Complete" else 1
