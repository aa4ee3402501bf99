"""How the workload verbs print: applied objects, yaml/json dumps, tables and the ``describe`` page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
import yaml
from rich.table import Table
from rich.text import Text

from kubetrain.api import TrainJob
from kubetrain.cli._common import stdout


def age(ts: str | None) -> str:
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


def nodes(tj: TrainJob) -> str:
    n = tj.spec.trainer.num_nodes if tj.spec.trainer else None
    return str(n) if n is not None else "-"


def last_message(tj: TrainJob) -> str:
    conds = (tj.status.conditions if tj.status else None) or []
    return (conds[-1].message or "") if conds else ""



def print_applied(applied: list[str]) -> None:
    for a in applied:
        kind, _, name = a.partition("/")
        click.echo(
            f"{kind}.trainer.kubeflow.org/{name} applied"
            if kind in ("trainjob", "trainingruntime", "clustertrainingruntime")
            else f"{kind}/{name} applied"
        )


def dump_objects(objs: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        payload: Any = objs[0] if len(objs) == 1 else {"apiVersion": "v1", "kind": "List", "items": objs}
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(yaml.safe_dump_all(objs, sort_keys=False), nl=False)


class PlainTable(Table):
    """A table whose cells are shown as written: Rich would read ``[x]`` in a message as markup and drop it."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*(Text(r) if isinstance(r, str) else r for r in renderables), **kwargs)


def table(cols: list[str]) -> Table:
    t = PlainTable(box=None, pad_edge=False, show_edge=False, header_style="bold")
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
        ("State", tj.state or "Running"),
    ]
    fields += [(k, ", ".join(map(str, v)) if isinstance(v, list) else v) for k, v in (d.extra or {}).items()]
    width = max(len(k) for k, _ in fields) + 2
    for k, v in fields:
        out.print(Text.assemble((f"{k + ':':<{width}}", "bold"), str(v)), highlight=False)
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
            s.message or "",
        )
    out.print(t if d.steps else "  (none started)")
    out.print("[bold]Conditions:[/]")
    conds = (tj.status.conditions if tj.status else None) or []
    t = table(["  TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"])
    for c in conds:
        t.add_row("  " + c.type, c.status, c.reason or "", c.message or "", c.last_transition_time or "")
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
    t = table(["  TIME", "TYPE", "REASON", "MESSAGE"])
    for e in d.events:
        t.add_row("  " + e.time, e.type, e.reason, e.message)
    out.print(t if d.events else "  (none)")
