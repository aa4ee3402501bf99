"""Following a TrainJob to its end: streamed logs, live steps and state with the reason, exit by the final state.

``kubetrain run`` uses it on both backends (locally the supervisor runs on a thread of this process), and
``kubetrain logs -f`` for its stream. Exit codes, the same on both backends:

- 0 the TrainJob ended Complete, 1 it ended Failed;
- 124 ``--timeout`` passed first (the TrainJob keeps running unless ``--delete-on-timeout``);
- 130 Ctrl-C: on a cluster ``run`` detaches (the job keeps running); locally it stops the job.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.text import Text

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api.views import LogChunk, LogItem, LogOptions, Notice, StateChange, StateView, StepChange
from kubetrain.cli._common import fail, stderr
from kubetrain.cli.backend import Backend
from kubetrain.cli.logview import DIM, RESET, LogView, is_terminal, target, write_to
from kubetrain.cli.output import print_applied

EXIT_COMPLETE, EXIT_FAILED, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 124, 130


class Timeout(Exception):
    pass


def _step_text(s: StepChange) -> str:
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
    state: StateView | None = None
    steps: dict[str, StepChange] = field(default_factory=dict)
    saw_logs: bool = False

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
        self.view.set_footer(lines)

    def handle(self, item: LogItem) -> None:
        if item is None:
            self.view.tick()
        elif isinstance(item, LogChunk):
            self.saw_logs = True
            if not self.quiet:
                self.view.write(item.step, item.text)
        elif isinstance(item, Notice):
            self.notice(item.text)
        elif isinstance(item, StepChange):
            old = self.steps.get(item.step)
            self.steps[item.step] = item
            moved = old is None or old.state != item.state
            self._footer()  # before the notice, whose flush redraws the live area
            # Piped: every change as a line. Terminal: the footer shows them live; only ends stay in the log.
            if self.steps_live and (not self.view.tty or (moved and item.state in ("Succeeded", "Failed"))):
                self.notice(_step_text(item))
        elif isinstance(item, StateChange):
            old_state = self.state
            self.state = item.state
            changed = old_state is None or old_state.state != item.state.state
            waiting_note = not self.steps_live and not self.saw_logs  # logs -f: say why nothing comes yet
            self._footer()
            # The final state is the command's last line (printed by the caller), not a notice.
            if not item.state.finished and ((self.steps_live and (changed or not self.view.tty)) or waiting_note):
                self.notice(f"{self.title}: {item.state.explain()}")


def exit_code(state: StateView | None) -> int:
    return EXIT_COMPLETE if state is not None and state.state == "Complete" else EXIT_FAILED


def stream(display: Display, items: Iterator[LogItem], deadline: float | None = None) -> StateView | None:
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
    display = Display(title, view, quiet=quiet)
    deadline = time.monotonic() + timeout if timeout else None
    items = backend.log_stream(name, namespace, LogOptions(follow=True, progress=True))
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
    return _final(title, state, name, how)


def _final(title: str, state: StateView | None, name: str, how: str) -> int:
    if state is None:
        return EXIT_FAILED
    color = "green" if state.state == "Complete" else "red"
    # The reason and message are the job's own text (exceptions, commands): never read as markup.
    detail = f" ({state.reason}: {state.message})".replace(" (: )", "")
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


def run_local(
    others: list[dict[str, Any]],
    tj: TrainJob,
    workdir: str,
    namespace: str,
    quiet: bool,
    *,
    timeout: float | None = None,
) -> int:
    from kubetrain.local.backend import LocalBackend
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

    def supervise() -> None:
        try:
            result.update(sup.run())
        except BaseException as exc:
            errors.append(exc)

    # The supervisor runs on its own thread because pods die with the thread that forked them (PDEATHSIG):
    # that thread lives exactly as long as the TrainJob, while this one draws progress and handles signals.
    worker = threading.Thread(target=supervise, name="supervisor")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: sup.terminate(signal.Signals(s).name))
    worker.start()
    stderr.print(
        f"trainjob {ns}/{name}: running locally; images are not pulled, pods use the Python "
        f"environment {sys.prefix} (see docs/local.md to map images)",
        style="dim",
        markup=False,
    )
    title = f"trainjob {ns}/{name}"
    view = LogView(target(sys.stdout), prefix=True)
    display = Display(title, view, quiet=quiet)
    items = backend.log_stream(name, ns, LogOptions(follow=True, progress=True))
    timed_out = False
    try:
        stream(display, items, time.monotonic() + timeout if timeout else None)
    except Timeout:
        # The pods belong to this command's supervisor thread: a local run cannot outlive it, so it stops.
        timed_out = True
        close_quietly(items)
        sup.terminate(f"--timeout {_human(timeout or 0)} passed")
    finally:
        worker.join()
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
    final = backend.states([backend.get_trainjob(name, ns)])[0]
    return _final(title, final, name, f" -n {ns}" if ns != "default" else "")


__all__ = ["Display", "follow_remote", "is_terminal", "run_local", "stream"]
