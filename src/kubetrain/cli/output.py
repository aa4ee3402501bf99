"""How the workload verbs print: applied objects, yaml/json dumps, tables and the ``describe`` page."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import click

from kubetrain.cli._common import escape, stderr, stdout
from kubetrain.service.present import age

if TYPE_CHECKING:
    from rich.table import Table

    from kubetrain.api import TrainJob


def nodes(tj: TrainJob) -> str:
    n = tj.spec.trainer.num_nodes if tj.spec.trainer else None
    return str(n) if n is not None else "-"


def last_message(tj: TrainJob) -> str:
    conds = (tj.status.conditions if tj.status else None) or []
    return (conds[-1].message or "") if conds else ""


def error_line(message: str) -> None:
    """``error: ...`` on stderr for one failed item of several; the command goes on with the others."""
    stderr.print("[bold red]error[/]: " + escape(message), markup=True)


def print_applied(applied: list[str]) -> None:
    """``kind/name`` (printed ``applied``) or ``kind/name verb`` (``created``, ``configured``, ``unchanged``)."""
    for a in applied:
        ref, _, verb = a.partition(" ")
        kind, _, name = ref.partition("/")
        click.echo(
            f"{kind}.trainer.kubeflow.org/{name} {verb or 'applied'}"
            if kind in ("trainjob", "trainingruntime", "clustertrainingruntime")
            else f"{kind}/{name} {verb or 'applied'}"
        )


def dump_objects(objs: list[dict[str, Any]], output: str) -> None:
    import yaml

    if output == "json":
        payload: Any = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


def plain_rich_table(**kwargs: Any) -> Table:
    """A rich Table whose string cells are shown as written (see ``_plain_table``)."""
    return _plain_table()(**kwargs)


@functools.cache
def _plain_table() -> type[Table]:
    """A table whose cells are shown as written: Rich would read ``[x]`` in a message as markup and drop it.
    (Made on first use: rich is imported only by commands that draw tables.)"""
    from rich.table import Table
    from rich.text import Text

    class PlainTable(Table):
        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            super().add_row(*(Text(r) if isinstance(r, str) else r for r in renderables), **kwargs)

    return PlainTable


def plain_table(headers: list[str], rows: list[list[str]], *, no_headers: bool = False) -> str:
    """Columns padded with three spaces, like kubectl: never truncated, whatever the terminal's width."""
    body = rows if no_headers else [headers, *rows]
    if not body:
        return ""
    widths = [max(len(r[i]) for r in body) for i in range(len(headers))]
    out = []
    for r in body:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(r[:-1])] + [r[-1]]
        out.append("   ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def table(cols: list[str]) -> Table:
    t = _plain_table()(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in cols:
        t.add_column(c, no_wrap=c != "MESSAGE")
    return t


def print_details(d: Any) -> None:
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
                f"nodes={nodes(tj)} procPerNode={tr.num_proc_per_node or '-'} "
                f"image={tr.image or '(runtime)'}",
            )
        )
        if tr.command or tr.args:
            cmd = " ".join((tr.command or []) + (tr.args or []))
            fields.append(("Command", cmd if len(cmd) <= 200 else cmd[:197] + "..."))
    fields += [
        ("Created", f"{tj.metadata.creation_timestamp or '-'} ({age(tj.metadata.creation_timestamp)} ago)"),
        ("State", d.state.explain() if d.state is not None else tj.state or "-"),
    ]
    progress = _progress(d)
    if progress is not None:
        fields.append(("Progress", progress[0]))
    fields += [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in (d.extra or {}).items()]
    width = max(len(k) for k, _ in fields) + 2
    for k, v in fields:
        out.print(f"[bold]{k + ':':<{width}}[/]{escape(str(v))}", markup=True, highlight=False)
    if progress is not None and progress[1]:
        out.print("[bold]Metrics:[/]")
        t = table(["  NAME", "VALUE"])
        for name, value in progress[1]:
            t.add_row("  " + name, value)
        out.print(t)
    out.print("[bold]Steps:[/]")
    t = table(["  STEP", "JOB", "STATE", "RESTARTS", "EXIT", "PID", "MESSAGE"])
    for s in d.steps:
        t.add_row(
            "  " + s.name,
            s.replicated_job,
            s.state,
            str(s.restarts),
            "-" if s.exit_code is None else str(s.exit_code),
            str(s.pid or "-"),
            ": ".join(p for p in (s.reason, s.message) if p),  # a PlainTable cell: shown as written
        )
    out.print(t if d.steps else "  (none started)")
    failures = getattr(d, "failures", None) or []
    if failures:
        # Recorded by the cluster's operator as the pods failed: still here after the Job controller deleted them.
        out.print("[bold]Failures:[/]")
        t = table(["  STEP", "CONTAINER", "EXIT", "SIGNAL", "REASON", "RESTARTS", "FAILURES", "LAST", "POD"])
        for f in failures:
            t.add_row(
                "  " + f.step,
                f.container or "-",
                "-" if f.exit_code is None else str(f.exit_code),
                f.signal or "-",
                ": ".join(p for p in (f.reason, f.message) if p) or "-",
                str(f.restarts),
                str(f.failures),
                f.time or "-",
                f.pod,
            )
        out.print(t)
    out.print("[bold]Conditions:[/]")
    conds = (tj.status.conditions if tj.status else None) or []
    t = table(["  TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"])
    for c in conds:
        # A multi-line message (a Failed message with log lines) shows its first line; the lines follow below.
        message = (c.message or "").split("\n")
        shown = message[0] + (" ..." if len(message) > 1 else "")
        t.add_row("  " + c.type, c.status, c.reason or "", shown, c.last_transition_time or "")
    out.print(t if conds else "  (none)")
    js = (tj.status.jobs_status if tj.status else None) or []
    if js:
        out.print("[bold]Jobs:[/]")
        t = table(["  NAME", "READY", "SUCCEEDED", "FAILED", "ACTIVE", "SUSPENDED"])
        for s in js:
            t.add_row(
                "  " + s.name, str(s.ready), str(s.succeeded), str(s.failed), str(s.active), str(s.suspended)
            )
        out.print(t)
    out.print("[bold]Events:[/]")
    with_objects = any(e.object for e in d.events)
    t = table(["  TIME", "TYPE", "REASON", *(["OBJECT"] if with_objects else []), "MESSAGE"])
    for e in d.events:
        t.add_row("  " + e.time, e.type, e.reason, *([e.object] if with_objects else []), e.message)
    out.print(t if d.events else "  (none)")
    for step, lines in (getattr(d, "failure_logs", None) or {}).items():
        exit_code = next((s.exit_code for s in d.steps if s.name == step), None)
        if exit_code is None:  # the pod is gone: the operator's record still has it
            exit_code = next((f.exit_code for f in failures if f.step == step and f.exit_code is not None), None)
        code = f", exit code {exit_code}" if exit_code is not None else ""
        out.print(f"[bold]Last log lines of {escape(step)}{code}:[/]")
        for line in lines or ["(empty)"]:
            out.print("  " + escape(line), markup=True, highlight=False)


def _progress(d: Any) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """``describe``'s Progress line (bar, ETA, age, where it came from) and the metrics, or None."""
    import datetime as dt

    from kubetrain.api.progress import SOURCE_LOGS, SOURCE_REPORT, Progress, progress_of, summary_text

    tj: TrainJob = d.trainjob
    p = progress_of(tj.to_wire().get("status"), getattr(d, "progress_source", None))
    if p is None:
        return None
    line = summary_text(
        Progress(p.percent, p.eta_seconds, (), p.updated), now=dt.datetime.now(dt.UTC), finished=tj.finished
    )
    origin = {SOURCE_LOGS: "derived from log lines", SOURCE_REPORT: "reported by the job"}.get(p.source or "")
    return (f"{line} ({origin})" if origin else line), p.metrics


def details_dict(d: Any) -> dict[str, Any]:
    """``describe -o yaml|json``: the same facts as the page, as data."""
    return {
        "trainJob": d.trainjob.to_wire(),
        "state": (
            {"state": d.state.state, "reason": d.state.reason, "message": d.state.message}
            if d.state is not None
            else None
        ),
        "steps": [
            {**s.to_json(), **({"pid": s.pid} if s.pid else {})}
            for s in d.steps
        ],
        "events": [
            {"time": e.time, "type": e.type, "reason": e.reason, "object": e.object, "message": e.message}
            for e in d.events
        ],
        "failureLogs": dict(d.failure_logs),
        "failures": [
            {
                k: v
                for k, v in (
                    ("step", f.step),
                    ("container", f.container),
                    ("pod", f.pod),
                    ("exitCode", f.exit_code),
                    ("signal", f.signal),
                    ("reason", f.reason),
                    ("message", f.message),
                    ("restarts", f.restarts),
                    ("failures", f.failures),
                    ("lastFailureTime", f.time),
                )
                if v not in (None, "")
            }
            for f in getattr(d, "failures", None) or []
        ],
        "progressSource": getattr(d, "progress_source", None),
        "details": {k: v for k, v in (d.extra or {}).items()},
    }
