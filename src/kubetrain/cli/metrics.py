"""``kubetrain metrics NAME``: a TrainJob's progress and metric history as a table and a terminal chart."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
import sys

import click

from kubetrain.api import KubetrainError
from kubetrain.api.progress import duration_text
from kubetrain.api.views import ProgressPoint
from kubetrain.cli import chart
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.output import plain_table

MAX_COLUMNS = 8


def _time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t else "-"


def _row(p: ProgressPoint, names: list[str]) -> list[str]:
    ts = p.trainer_status
    values = {m.get("name"): m.get("value") for m in ts.get("metrics") or [] if isinstance(m, dict)}
    pct, eta = ts.get("progressPercentage"), ts.get("estimatedRemainingSeconds")
    return [
        _time(p.time),
        p.source or "-",
        f"{pct}%" if isinstance(pct, int) else "-",
        duration_text(eta) if isinstance(eta, int) else "-",
        *(str(values.get(n, "-")) for n in names),
    ]


def register(group: click.Group) -> None:
    @group.command("metrics")
    @click.argument("name")
    @click.option("-m", "--metric", "metrics", multiple=True, help="Only this metric (repeatable; default: all).")
    @click.option("--tail", default=20, show_default=True, help="Table rows: the last N reports (0: all).")
    @click.option(
        "--chart/--no-chart", "draw", default=True, show_default=True, help="Draw each metric in the terminal."
    )
    @click.option("--png", "png", default=None, metavar="FILE", help="Also write a plot (needs matplotlib).")
    @click.option(
        "-o", "--output", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
    )
    @with_backend_options
    def metrics(
        name: str,
        metrics: tuple[str, ...],
        tail: int,
        draw: bool,
        png: str | None,
        output: str,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Progress and metrics a TrainJob reported (status.trainerStatus) over time: a table and a chart.

        Locally every report is kept (and, for jobs that report nothing, what their log lines showed); a
        cluster keeps only the latest report, so there this shows one row.

        \b
        Examples:
          kubetrain metrics my-job
          kubetrain metrics my-job -m loss -m eval_loss --tail 0
          kubetrain metrics my-job --png loss.png
          kubetrain metrics my-job -o csv > history.csv
        """
        backend = select_backend(kubeconfig, context)
        try:
            history = backend.progress_history(name, namespace)
        except KubetrainError as exc:
            fail(str(exc))
        known = names = chart.metric_names(history)
        if metrics:
            unknown = [m for m in metrics if m not in known]
            if unknown:
                fail(
                    f"TrainJob {name} reported no metric {unknown[0]!r}",
                    f"its metrics: {', '.join(known) or 'none'}",
                )
            names = list(metrics)
        if output == "json":
            click.echo(json.dumps([
                {"time": _time(p.time), "source": p.source, "trainerStatus": p.trainer_status} for p in history
            ], indent=2))  # fmt: skip
            return
        columns = names[:MAX_COLUMNS]
        headers = ["TIME", "SOURCE", "PROGRESS", "ETA", *columns]
        if output == "csv":
            w = csv.writer(sys.stdout)
            w.writerow(headers)
            for p in history:
                w.writerow(_row(p, names))
            return
        if not history:
            click.echo(f"TrainJob {name} has reported no progress or metrics yet.", err=True)
            return
        shown = history[-tail:] if tail > 0 else history
        if len(shown) < len(history):
            click.echo(f"(last {len(shown)} of {len(history)} reports; --tail 0 for all)", err=True)
        click.echo(plain_table(headers, [_row(p, columns) for p in shown]), nl=False)
        if len(names) > MAX_COLUMNS:
            click.echo(f"({len(names) - MAX_COLUMNS} more metrics; pick with -m)", err=True)
        if draw and len(history) > 1:
            width = max(20, shutil.get_terminal_size().columns - 14)
            for n in ["progress", *names]:
                s = chart.series(history, n)
                if len(s.points) > 1:
                    click.echo("")
                    click.echo("\n".join(chart.render(s, width)))
        if png is not None:
            try:
                chart.write_png(history, names, png, f"TrainJob {namespace}/{name}")
            except ImportError:
                fail("--png needs matplotlib", "pip install 'kubetrain[plot]' (or matplotlib==3.11.2)")
            except OSError as exc:
                fail(f"--png {png}: {exc.strerror or exc}")
            click.echo(f"wrote {png}", err=True)

