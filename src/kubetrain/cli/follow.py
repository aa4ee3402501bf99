"""Following a TrainJob to its end: streamed logs, live steps and state with the reason, exit by the final state.

``kubetrain run`` uses it on both backends (locally the supervisor runs on a thread of this process), and
``kubetrain logs -f`` for its stream. Exit codes, the same on both backends:

- 0 the TrainJob ended Complete, 1 it ended Failed;
- 124 ``--timeout`` passed first (the TrainJob keeps running unless ``--delete-on-timeout``);
- 130 Ctrl-C: on a cluster ``run`` detaches (the job keeps running); locally it stops the job;
- locally also 128+N after signal N (143 SIGTERM, 129 SIGHUP without ``--nohup``), and 127/126 when the job failed
  because a command could not be found/executed, as a shell would.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api import views
from kubetrain.api.errors import KubetrainError
from kubetrain.cli._common import TEARDOWN, escape, fail, stderr
from kubetrain.cli.logview import DIM, RESET, LogView, is_terminal, target, write_to
from kubetrain.cli.output import print_applied

if TYPE_CHECKING:
    from kubetrain.cli.backend import Backend

EXIT_COMPLETE, EXIT_FAILED, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 124, 130
PROGRESS_LINE_EVERY = 10.0
"""Piped output: at most one progress line per this many seconds (a terminal redraws its bar instead)."""
DERIVE_EVERY = 1.0
"""Seconds between two progress estimates from log lines (cluster runs whose job reports nothing)."""


class Timeout(Exception):
    pass


def _step_text(s: views.StepChange) -> str:
    parts = [s.state]
    why = ": ".join(p for p in (s.reason, s.message) if p)
    if s.exit_code is not None and s.state in ("Failed", "Succeeded"):
        why = f"exit code {s.exit_code}" + (f", {why}" if why and s.reason != "Completed" else "")
    return f"step {s.step}: {parts[0]}" + (f" ({why})" if why else "")


@dataclass
class Display:
    """Turns the stream's items into output: logs on stdout, steps and state live (terminal) or as lines."""

    title: str
    view: LogView
    quiet: bool = False
    steps_live: bool = True
    """Show step changes (``run``); ``logs -f`` shows only the job's state while it waits."""
    state: views.StateView | None = None
    steps: dict[str, views.StepChange] = field(default_factory=dict)
    saw_logs: bool = False
    progress: views.ProgressChange | None = None
    derive: Any = None
    """A ``kubetrain.api.logprogress.LogProgress`` when this process guesses progress from the log lines it
    shows (a cluster run; locally the supervisor does it), until the job reports progress itself."""
    _progress_printed: tuple[float, str] | None = None
    _derived_at: float = 0.0

    def progress_text(self, *, age: bool = False) -> str | None:
        """The last report as one line (bar, ETA, metrics; with ``age``, how old it is), or None."""
        from kubetrain.api.progress import progress_of, summary_text

        if self.progress is None:
            return None
        p = progress_of({"trainerStatus": self.progress.trainer_status}, self.progress.source)
        if p is None:
            return None
        finished = self.state is not None and self.state.finished
        return summary_text(p, now=dt.datetime.now(dt.UTC) if age else None, finished=finished)

    def _show_progress(self) -> None:
        plain = self.progress_text()
        if plain is None:
            return
        if self.view.tty:
            self._footer()
            return
        # Piped: a line when the report changed, at most every PROGRESS_LINE_EVERY seconds.
        now = time.monotonic()
        last = self._progress_printed
        if last is not None and (last[1] == plain or now - last[0] < PROGRESS_LINE_EVERY):
            return
        self._progress_printed = (now, plain)
        self.notice(f"{self.title}: progress {plain}")

    def _derive(self, item: views.LogChunk) -> None:
        if self.derive is None or (self.progress is not None and self.progress.source != "logs"):
            return
        self.derive.feed(item.text, time.time())
        now = time.monotonic()
        if now - self._derived_at < DERIVE_EVERY:
            return
        self._derived_at = now
        derived = self.derive.trainer_status(dt.datetime.now(dt.UTC))
        if derived is not None:
            self.progress = views.ProgressChange(derived, "logs")
            self._show_progress()

    def notice(self, text: str) -> None:
        """A line about the job (not from it): dim in the terminal's log area, else on stderr."""
        if self.view.tty:
            self.view._push(f"{DIM}{text}{RESET}\n")
            self.view.flush()
        else:
            self.view.flush()
            write_to(target(sys.stderr), (text + "\n").encode(errors="replace"))

    def _footer(self) -> None:
        if not self.view.tty:
            return
        lines = []
        if self.state is not None:
            lines.append(f"{self.title}: {self.state.explain()}")
        if self.steps_live and self.steps:
            summary = " · ".join(
                f"{s.step} {s.state}" + (f" ({s.reason})" if s.reason and s.state != "Running" else "")
                for s in self.steps.values()
            )
            lines.append(summary)
        progress = self.progress_text(age=True)
        if progress is not None:
            lines.append(f"progress {progress}")
        self.view.set_footer(lines)

    def handle(self, item: views.LogItem) -> None:
        if item is None:
            if self.progress is not None and self.view.tty:
                self._footer()  # the report's age moves on
            self.view.tick()
        elif isinstance(item, views.LogChunk):
            self.saw_logs = True
            if not self.quiet:
                self.view.write(item.step, item.text)
            self._derive(item)
        elif isinstance(item, views.ProgressChange):
            self.progress = item
            self._show_progress()
        elif isinstance(item, views.Notice):
            self.notice(item.text)
        elif isinstance(item, views.StepChange):
            old = self.steps.get(item.step)
            self.steps[item.step] = item
            moved = old is None or old.state != item.state
            self._footer()  # before the notice, whose flush redraws the live area
            # Piped: every change as a line. Terminal: the footer shows them live; only ends stay in the log.
            if self.steps_live and (not self.view.tty or (moved and item.state in ("Succeeded", "Failed"))):
                self.notice(_step_text(item))
        elif isinstance(item, views.StateChange):
            old_state = self.state
            self.state = item.state
            changed = old_state is None or old_state.state != item.state.state
            waiting_note = not self.steps_live and not self.saw_logs  # logs -f: say why nothing comes yet
            self._footer()
            # The final state is the command's last line (printed by the caller), not a notice.
            if not item.state.finished and ((self.steps_live and (changed or not self.view.tty)) or waiting_note):
                self.notice(f"{self.title}: {item.state.explain()}")


def exit_code(state: views.StateView | None) -> int:
    return EXIT_COMPLETE if state is not None and state.state == "Complete" else EXIT_FAILED


def stream(display: Display, items: Iterator[views.LogItem], deadline: float | None = None) -> views.StateView | None:
    """Render every item; :class:`Timeout` once ``deadline`` (monotonic) passes. Ctrl-C propagates."""
    try:
        for item in items:
            display.handle(item)
            if deadline is not None and time.monotonic() > deadline:
                raise Timeout()
    except BaseException:
        display.view.abort()
        raise
    display.view.close()
    return display.state


def follow_remote(
    backend: Backend,
    name: str,
    namespace: str,
    quiet: bool,
    *,
    timeout: float | None = None,
    delete_on_timeout: bool = False,
    how: str = "",
) -> int:
    """``kubetrain run`` on a cluster, after the apply: wait, explain, stream, and exit by the final state."""
    title = f"trainjob {namespace}/{name}"
    view = LogView(target(sys.stdout), prefix=True)
    display = Display(title, view, quiet=quiet, derive=_log_progress(backend, name, namespace))
    deadline = time.monotonic() + timeout if timeout else None
    items = backend.log_stream(name, namespace, views.LogOptions(follow=True, progress=True))
    try:
        state = stream(display, items, deadline)
    except Timeout:
        close_quietly(items)
        now = display.state.explain() if display.state else "unknown"
        if delete_on_timeout:
            try:
                backend.delete_trainjob(name, namespace)
                kept = "deleted it (--delete-on-timeout)"
            except KubetrainError as exc:
                kept = f"could not delete it: {exc}"
        else:
            kept = (
                f"it keeps running; follow: kubetrain logs {name} -f{how}; "
                f"delete: kubetrain delete trainjob {name}{how}"
            )
        stderr.print(
            f"[bold red]error[/]: timed out after {_human(timeout or 0)} waiting for {title}; "
            f"state then: {escape(now)}; {escape(kept)}",
            markup=True,
        )
        return EXIT_TIMEOUT
    except KeyboardInterrupt:
        close_quietly(items)
        now = display.state.explain() if display.state else "unknown"
        stderr.print(
            f"detached from {title} ({now}); it keeps running on the cluster.\n"
            f"  follow: kubetrain logs {name} -f{how}\n"
            f"  delete: kubetrain delete trainjob {name}{how}",
            markup=False,
        )
        return EXIT_INTERRUPTED
    except KubetrainError as exc:
        fail(str(exc))
    return _final(title, state, name, how, display.progress_text())


def _log_progress(backend: Backend, name: str, namespace: str) -> Any:
    """A parser of progress from log lines, unless the TrainJob opts out (annotation kubetrain.dev/log-progress)."""
    from kubetrain.api.logprogress import LogProgress
    from kubetrain.api.progress import ANNOTATION_LOG_PROGRESS, log_progress_enabled

    try:
        annotations = backend.get_trainjob(name, namespace).metadata.annotations or {}
    except KubetrainError:
        annotations = {}
    return LogProgress() if log_progress_enabled(annotations.get(ANNOTATION_LOG_PROGRESS)) else None


def _final(title: str, state: views.StateView | None, name: str, how: str, progress: str | None = None) -> int:
    if state is None:
        return EXIT_FAILED
    if progress is not None:
        stderr.print(f"{title}: progress {progress}", markup=False, highlight=False)
    color = "green" if state.state == "Complete" else "red"
    # The reason and message are the job's own text (exceptions, commands): never read as markup.
    detail = f" ({state.reason}: {state.message})".replace(" (: )", "")
    from rich.text import Text

    stderr.print(Text.assemble(f"{title}: ", (state.state, f"bold {color}"), detail))
    if state.state != "Complete":
        stderr.print(f"[dim]details: kubetrain describe trainjob {name}{how}[/]", markup=True)
    return exit_code(state)


def close_quietly(items: Iterator[Any]) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        try:
            close()
        except BaseException:
            pass


def _human(seconds: float) -> str:
    s = int(seconds)
    if s % 3600 == 0 and s >= 3600:
        return f"{s // 3600}h"
    if s % 60 == 0 and s >= 60:
        return f"{s // 60}m"
    return f"{seconds:g}s"


class _Signals:
    """``kubetrain run``'s signals: the first SIGINT/SIGTERM (or SIGHUP) stops the pods gracefully, a second one
    forces; with ``nohup`` a closed terminal (SIGHUP) only stops the output."""

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


def _with_signal_notices(items: Iterator[views.LogItem], signals: _Signals) -> Iterator[views.LogItem]:
    """The stream, plus a notice when a signal starts stopping the job (the stream's heartbeats come often)."""
    told = 0
    for item in items:
        if signals.count > told and not signals.hung_up:
            told = signals.count
            yield views.Notice(
                "stopping: SIGTERM sent to every pod, which may take up to its terminationGracePeriodSeconds "
                "(default 30 s); interrupt again to kill them now"
                if told == 1
                else "killing the pods now"
            )
        yield item


def local_exit_code(state: views.StateView | None, signum: int | None, exec_failure: int | None) -> int:
    """0 Complete; 128+N when stopped by signal N (130 for Ctrl-C); 127/126 when a command could not be
    executed, as a shell would; 1 for any other failure."""
    if state is not None and state.state == "Complete":
        return EXIT_COMPLETE
    if signum is not None:
        return 128 + signum
    if exec_failure is not None:
        return exec_failure
    return EXIT_FAILED


def _say(text: str) -> None:
    """A dim line on stderr (plain when it is not a terminal: no rich needed)."""
    if is_terminal(2):
        stderr.print(f"[dim]{escape(text)}[/]", markup=True)
    else:
        click.echo(text, err=True)


def run_local(
    others: list[dict[str, Any]],
    trainjob: dict[str, Any],
    workdir: str,
    namespace: str,
    quiet: bool,
    *,
    timeout: float | None = None,
    detach: bool = False,
    nohup: bool = False,
    replace: bool = False,
    compiled: Any = None,
    cache_key: str | None = None,
    file_index: int = 0,
    holder: Any = None,
    certificates: Any = None,
) -> int:
    """Submit ``trainjob`` (a wire dict) and supervise it on a thread of this process until it ends.
    ``compiled`` (a ``compile_cache.Compiled``) skips validation and compilation; otherwise, with ``cache_key``,
    the result is remembered for the next run of the same files."""
    from kubetrain.local.backend import LocalBackend
    from kubetrain.local.logs.stream import status_state
    from kubetrain.local.sandbox.netns import NetworkNamespace
    from kubetrain.local.store.db import Store
    from kubetrain.local.submit import compile_cache
    from kubetrain.local.supervisor.controller import Supervisor, configure_logging, record_start_failure

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
    how = f" -n {ns}" if ns != "default" else ""
    if detach:
        print_applied([f"trainjob/{name} {verb}"])
        click.echo(
            f"follow it: kubetrain logs {name} -f{how}    stop it: kubetrain delete trainjob {name}{how}", err=True
        )
        return 0
    try:
        sup = Supervisor(backend.store, ns, name)
    except KubetrainError as exc:
        record_start_failure(backend.store, ns, name, str(exc))
        fail(str(exc))
    result: dict[str, Any] = {}
    errors: list[BaseException] = []
    ended = threading.Event()

    def supervise() -> None:
        try:
            result.update(sup.run(holder, certificates))
        except BaseException as exc:
            errors.append(exc)
        finally:
            ended.set()

    # The supervisor runs on its own thread because pods die with the thread that forked them (PDEATHSIG):
    # that thread lives exactly as long as the TrainJob, while this one draws progress and handles signals.
    worker = threading.Thread(target=supervise, name="supervisor")
    signals = _Signals(sup.terminate, nohup)
    signals.install()
    worker.start()
    title = f"trainjob {ns}/{name}"
    if verb == "replaced":
        _say(f"{title}: replaced the finished run of that name")
    _say(f"{title}: running locally; {sup.environments()} (docs/local.md: images)")
    view = LogView(target(sys.stdout), prefix=True)
    display = Display(title, view, quiet=quiet)
    items = backend.log_stream(name, ns, views.LogOptions(follow=True, progress=True), ended=ended)
    timed_out = False
    try:
        stream(display, _with_signal_notices(items, signals), time.monotonic() + timeout if timeout else None)
    except Timeout:
        # The pods belong to this command's supervisor thread: a local run cannot outlive it, so it stops.
        timed_out = True
        close_quietly(items)
        sup.terminate(f"--timeout {_human(timeout or 0)} passed")
    finally:
        worker.join()
    TEARDOWN.skip = True  # the supervisor thread, its pods and its namespace are gone
    TEARDOWN.before_exit.append(Store.close_all)
    if timed_out:
        now = display.state.explain() if display.state else "unknown"
        stderr.print(
            f"[bold red]error[/]: timed out after {_human(timeout or 0)} waiting for {title}; "
            f"state then: {escape(now)}; the TrainJob was stopped (a local run ends with the command)",
            markup=True,
        )
        return EXIT_TIMEOUT
    if errors:
        error = errors[0]
        if isinstance(error, KubetrainError):
            fail(str(error))
        raise error
    final = backend.state(name, ns)
    problem = sup.unrecorded()
    if problem is not None and (outcome := status_state(result)) is not None:
        # The supervisor knows how the job ended but could not store it: say both, and exit by what happened.
        final = outcome
        stderr.print(
            f"[bold red]error[/]: {escape(title)} ended {escape(outcome.explain())}, but that could not be recorded: "
            f"{escape(problem)}",
            markup=True,
        )
    if not signals.hung_up:
        if is_terminal(2):
            _final(title, final, name, how, display.progress_text())
        else:
            if (progress := display.progress_text()) is not None:
                click.echo(f"{title}: progress {progress}", err=True)
            click.echo(f"{title}: {final.state} ({final.reason}: {final.message})".replace(" (: )", ""), err=True)
            if final.state != "Complete":
                click.echo(f"details: kubetrain describe trainjob {name}{how}", err=True)
    return local_exit_code(final, signals.first, sup.exec_failure)


__all__ = ["Display", "follow_remote", "is_terminal", "run_local", "stream"]
