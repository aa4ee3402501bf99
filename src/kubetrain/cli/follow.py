"""``kubetrain run``'s wait: follow a TrainJob to its end, with live steps and streamed logs, and exit by its state.

Locally the supervisor runs on a thread of this process; on a cluster the backend is polled.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._common import fail
from kubetrain.cli.output import last_message, print_applied

if TYPE_CHECKING:
    from rich.live import Live
    from rich.table import Table

    from kubetrain.cli.backend import Backend


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


class _Signals:
    """``kubetrain run``'s signal handling: the first SIGINT/SIGTERM (or SIGHUP) stops the pods gracefully,
    a second one forces; with ``nohup`` a closed terminal (SIGHUP) only stops the output."""

    def __init__(self, terminate: Any, nohup: bool) -> None:
        self._terminate = terminate
        self.nohup = nohup
        self.first: int | None = None  # the signal that stopped the run
        self.count = 0
        self.hung_up = False

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP and self.nohup:
            if not self.hung_up:
                self.hung_up = True
                # The terminal is gone: writing to it would fail; the logs are in their files anyway.
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                os.close(devnull)
            return
        self.count += 1
        if self.first is None:
            self.first = signum
        self._terminate(signal.Signals(signum).name)


def run_local(
    others: list[dict[str, Any]],
    trainjob: dict[str, Any],
    workdir: str,
    namespace: str,
    quiet: bool,
    *,
    detach: bool = False,
    nohup: bool = False,
    replace: bool = False,
    compiled: Any = None,
    cache_key: str | None = None,
    file_index: int = 0,
    holder: Any = None,
) -> int:
    """Submit ``trainjob`` (a wire dict) and supervise it on a thread of this process until it ends.
    ``compiled`` (a ``compile_cache.Compiled``) skips validation and compilation; otherwise, with ``cache_key``,
    the result is remembered for the next run of the same files."""
    from kubetrain.local import compile_cache
    from kubetrain.local.backend import LocalBackend, LogTailer
    from kubetrain.local.netns import NetworkNamespace
    from kubetrain.local.supervisor import Supervisor, configure_logging, record_start_failure

    ns = (trainjob.get("metadata") or {}).get("namespace") or namespace
    if holder is None and not detach:
        # The TrainJob's network namespace starts now, alongside validation and compilation.
        holder = NetworkNamespace.start()
    try:
        configure_logging()
        backend = LocalBackend()
        if others:
            print_applied(backend.apply(others, namespace=namespace))
        if compiled is not None:
            for w in compiled.warnings:
                click.echo(f"warning: {w}", err=True)
            wire, objects = compile_cache.fresh(compiled, compile_cache.new_uid())
            name, verb = backend.submit_compiled(wire, objects, workdir=workdir, detach=detach, replace=replace)
        else:
            name, verb = backend.submit(
                trainjob, namespace=namespace, workdir=workdir, detach=detach, replace=replace, create_only=True
            )
            if cache_key is not None:
                row = backend.store.get_trainjob(ns, name)
                if row is not None and not trainjob.get("metadata", {}).get("generateName"):
                    warnings = [f"{w.path}: {w.message}" if w.path else w.message for w in backend.last_warnings]
                    entry = compile_cache.Compiled(row.trainjob, row.objects, others, warnings, row.uid, file_index)
                    compile_cache.remember(backend.store, cache_key, entry, backend.last_runtime)
    except KubetrainError as exc:
        fail(str(exc))
    if detach:
        print_applied([f"trainjob/{name} {verb}"])
        click.echo(
            f"follow it: kubetrain logs {name} -n {ns} -f    stop it: kubetrain delete trainjob {name} -n {ns}",
            err=True,
        )
        return 0
    try:
        sup = Supervisor(backend.store, ns, name)
    except KubetrainError as exc:
        record_start_failure(backend.store, ns, name, str(exc))
        fail(str(exc))
    result: dict[str, Any] = {}
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.update(sup.run(holder))
        except BaseException as exc:
            errors.append(exc)

    # The supervisor runs on its own thread because pods die with the thread that forked them (PDEATHSIG):
    # that thread lives exactly as long as the TrainJob, while this one draws progress and handles signals.
    worker = threading.Thread(target=target, name="supervisor")
    signals = _Signals(sup.terminate, nohup)
    signals.install()
    worker.start()
    tailer = LogTailer(lambda: backend.log_files(name, ns, None), prefix=True)
    # The live step table and the log lines share the terminal only when both go to it; otherwise (logs piped)
    # the logs stay plain on stdout and step changes are printed as lines on stderr (and rich is not needed).
    interactive = sys.stderr.isatty() and sys.stdout.isatty()
    console: Any = None
    out_console: Any = None
    if interactive:
        from rich.console import Console

        console = Console(stderr=True, highlight=False)
        out_console = Console(highlight=False)

    def say(text: str, style: str = "dim") -> None:
        if signals.hung_up:
            return
        if console is not None:
            from rich.markup import escape

            console.print(f"[{style}]{escape(text)}[/]")
        else:
            click.echo(text, err=True)

    if verb == "replaced":
        say(f"trainjob {ns}/{name}: replaced the finished run of that name")
    say(
        f"trainjob {ns}/{name}: running locally; images are not pulled, pods use the Python "
        f"environment {sys.prefix} (see docs/local.md to map images)"
    )
    seen: dict[str, str] = {}
    told = 0

    def progress() -> Table:
        from rich.table import Table

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
                say(f"step {p.name}: {p.state}")

    def emit(lines: list[str], live: Live | None = None) -> None:
        if quiet or signals.hung_up:
            return
        for line in lines:
            if live is not None:
                live.console.print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                click.echo(line)

    def tell_stopping() -> None:
        nonlocal told
        if signals.count > told and not signals.hung_up:
            told = signals.count
            if told == 1:
                say(
                    "stopping: SIGTERM sent to every pod, which may take up to its terminationGracePeriodSeconds "
                    "(default 30 s); interrupt again to kill them now",
                    "yellow",
                )
            else:
                say("killing the pods now", "yellow")

    if interactive:
        from rich.live import Live

        with Live(progress(), console=out_console, refresh_per_second=4, transient=True) as live:
            while worker.is_alive():
                emit(tailer.poll(), live)
                tell_stopping()
                live.update(progress())
                worker.join(0.1)
    else:
        while worker.is_alive():
            emit(tailer.poll())
            tell_stopping()
            if not signals.hung_up:
                step_changes()
            worker.join(0.05)
    emit(tailer.flush())
    if errors:
        error = errors[0]
        if isinstance(error, KubetrainError):
            fail(str(error))
        raise error
    final = backend.get_status(name, ns)
    if console is not None:
        console.print(progress())
    state = status_state(final)
    conds = final.get("conditions") or []
    message = conds[-1].get("message", "") if conds else ""
    if console is not None:
        from rich.markup import escape

        color = "green" if state == "Complete" else "red"
        console.print(f"trainjob {ns}/{name}: [bold {color}]{state}[/] ({escape(message)})")
    elif not signals.hung_up:
        click.echo(f"trainjob {ns}/{name}: {state} ({message})", err=True)
    if state != "Complete":
        say(f"details: kubetrain describe trainjob {name} -n {ns}")
    return exit_code(state, signals.first, sup.exec_failure)


def status_state(st: dict[str, Any]) -> str:
    conds = st.get("conditions") or []
    return str(conds[-1]["type"]) if conds else ""


def exit_code(state: str, signum: int | None, exec_failure: int | None) -> int:
    """0 Complete; 128+N when stopped by signal N (130 for Ctrl-C); 127/126 when a command could not be
    executed, as a shell would; 1 for any other failure."""
    if state == "Complete":
        return 0
    if signum is not None:
        return 128 + signum
    if exec_failure is not None:
        return exec_failure
    return 1
