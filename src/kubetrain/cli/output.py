"""How the workload verbs print: applied objects, yaml/json dumps, tables and the ``describe`` page."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli import jsonpath
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
            if kind in ("trainjob", "trainingruntime", "clustertrainingruntime", "optimizationjob")
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


# -- ``-o``: kubectl's output formats --------------------------------------------------------------------------

PLAIN_FORMATS = ("table", "wide", "yaml", "json", "name")
FORMATS_HELP = (
    "table, wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC or "
    "custom-columns-file=FILE"
)


@dataclass(frozen=True)
class OutputFormat:
    """What ``-o`` asked for: ``kind`` is one of PLAIN_FORMATS, ``jsonpath`` or ``custom-columns``."""

    kind: str
    template: jsonpath.Template | None = None
    columns: tuple[tuple[str, jsonpath.Template], ...] = ()

    @property
    def generic(self) -> bool:
        """Printed from the objects themselves (a template or columns), the same way for every kind."""
        return self.kind in ("jsonpath", "custom-columns")


def parse_output(value: str) -> OutputFormat:
    """``-o``'s value, parsed before anything is fetched so a bad template fails at once (as kubectl does)."""
    if value in PLAIN_FORMATS:
        return OutputFormat(value)
    name, _, arg = value.partition("=")
    if name in ("jsonpath", "jsonpath-file", "custom-columns", "custom-columns-file") and not arg:
        example = {
            "jsonpath": "-o jsonpath='{.items[*].metadata.name}'",
            "jsonpath-file": "-o jsonpath-file=names.tmpl",
            "custom-columns": "-o custom-columns=NAME:.metadata.name,STATE:.status.conditions[0].type",
            "custom-columns-file": "-o custom-columns-file=columns.txt",
        }[name]
        what = "template" if name.startswith("jsonpath") else "custom columns"
        raise KubetrainError(f"-o {name}: no {what} given after '{name}=' (fix: {example})")
    if name in ("jsonpath-file", "custom-columns-file"):
        try:
            with open(arg, encoding="utf-8") as f:
                arg = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise KubetrainError(
                f"-o {name}: cannot read {arg!r}: {getattr(exc, 'strerror', None) or exc} "
                "(fix: give the path of a readable text file)"
            ) from None
    if name in ("jsonpath", "jsonpath-file"):
        return OutputFormat("jsonpath", template=jsonpath.parse(arg, f"-o {name}"))
    if name == "custom-columns":
        return OutputFormat("custom-columns", columns=_columns_from_spec(arg))
    if name == "custom-columns-file":
        return OutputFormat("custom-columns", columns=_columns_from_file(arg))
    raise KubetrainError(f"-o/--output: unknown format {value!r} (fix: use one of {FORMATS_HELP})")


def _columns_from_spec(spec: str) -> tuple[tuple[str, jsonpath.Template], ...]:
    """kubectl's ``HEADER:PATH,HEADER:PATH`` (a comma always separates columns, as kubectl splits them)."""
    out = []
    for part in spec.split(","):
        header, colon, path = part.partition(":")
        if not colon:
            raise KubetrainError(
                f"-o custom-columns: unexpected custom-columns spec {part!r}, expected <header>:<json-path-expr> "
                "(fix: e.g. -o custom-columns=NAME:.metadata.name,STATE:.status.conditions[0].type)"
            )
        out.append((header, jsonpath.parse_relaxed(path, f"-o custom-columns ({header})")))
    return tuple(out)


def _columns_from_file(text: str) -> tuple[tuple[str, jsonpath.Template], ...]:
    """kubectl's template file: a line of headers, then a line of paths, separated by whitespace."""
    lines = text.splitlines()
    form = "one line of space-separated headers, then one line of space-separated paths"
    if not lines or not lines[0].split():
        raise KubetrainError(f"-o custom-columns-file: missing the header line (fix: write {form})")
    if len(lines) < 2 or not lines[1].split():
        raise KubetrainError(f"-o custom-columns-file: missing the line of paths (fix: write {form})")
    headers, paths = lines[0].split(), lines[1].split()
    if len(headers) != len(paths):
        raise KubetrainError(
            f"-o custom-columns-file: number of headers ({len(headers)}) and field specifications ({len(paths)}) "
            f"don't match (fix: write {form}, one path per header)"
        )
    return tuple(
        (h, jsonpath.parse_relaxed(p, f"-o custom-columns-file ({h})")) for h, p in zip(headers, paths, strict=True)
    )


def as_list(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """What kubectl hands a template for several objects (or none, or a selector's)."""
    return {"apiVersion": "v1", "kind": "List", "items": objs, "metadata": {"resourceVersion": ""}}


def print_generic(
    objs: list[dict[str, Any]], fmt: OutputFormat, *, single: bool, allow_missing: bool, no_headers: bool
) -> None:
    """``-o jsonpath|custom-columns`` for any kind: ``single`` (exactly one name asked and found) gives the
    template the object itself; otherwise a ``List`` of them, as kubectl does."""
    if fmt.kind == "jsonpath":
        assert fmt.template is not None
        data = objs[0] if single and len(objs) == 1 else as_list(objs)
        click.echo(execute(fmt.template, data, allow_missing=allow_missing), nl=False)
        return
    headers = [h for h, _ in fmt.columns]
    rows = [custom_row(o, fmt) for o in objs]
    click.echo(plain_table(headers, rows, no_headers=no_headers), nl=False)


def execute(template: jsonpath.Template, data: Any, *, allow_missing: bool) -> str:
    try:
        return template.execute(data, allow_missing=allow_missing)
    except jsonpath.JSONPathError as exc:
        fix = "check the path against the object (-o json)"
        if not allow_missing and str(exc).endswith("is not found"):
            fix += ", or drop --allow-missing-template-keys=false to print nothing for a missing key"
        raise KubetrainError(f"error executing jsonpath {json.dumps(template.source)}: {exc} (fix: {fix})") from None


def custom_row(obj: dict[str, Any], fmt: OutputFormat) -> list[str]:
    """One object's cells: every value of a column's path joined by commas, ``<none>`` when there is none."""
    row = []
    for header, template in fmt.columns:
        try:
            results = template.find(obj, allow_missing=True)
        except jsonpath.JSONPathError as exc:
            raise KubetrainError(
                f"-o custom-columns: column {header} ({template.source}): {exc} (fix: check the path against the "
                "object (-o json))"
            ) from None
        values = [jsonpath.go_sprint(v) for r in results for v in r]
        row.append(",".join(values) if results and results[0] else "<none>")
    return row


def sort_objects(objs: list[dict[str, Any]], sort_by: str | None) -> list[int]:
    """The order ``--sort-by`` gives (stable; objects without the field first), as indexes into ``objs``. Like
    kubectl, a path that none of the objects has is an error: it is most likely misspelt."""
    order = list(range(len(objs)))
    if not sort_by:
        return order
    template = jsonpath.parse_relaxed(sort_by, "--sort-by")
    try:
        keys = [jsonpath.first_value(template, o) for o in objs]
    except jsonpath.JSONPathError as exc:
        raise KubetrainError(f"--sort-by: {template.source}: {exc} (fix: check the path against -o json)") from None
    if objs and not any(found for found, _ in keys):
        raise KubetrainError(
            f"--sort-by: couldn't find any field with path {json.dumps(template.source)} in the list of objects "
            "(fix: check the path against -o json, e.g. '{.metadata.creationTimestamp}')"
        )
    order.sort(key=lambda i: jsonpath.sort_key(*keys[i]))
    return order
