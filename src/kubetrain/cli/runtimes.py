"""``kubetrain runtimes list|show``: built-in and given runtimes, framework, deprecation status."""

from __future__ import annotations

import click
from rich.table import Table

from kubetrain.api import constants as c
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.yamlio import dump, dump_all
from kubetrain.cli._common import fail, load_all, print_findings, stdout
from kubetrain.runtimes import builtin_runtimes


def _catalog(files: tuple[str, ...]) -> list[tuple[AnyRuntime, str]]:
    objects, _, result = load_all(files) if files else ([], [], None)
    if result is not None:
        print_findings(result)
    given = [(o, "file") for o in objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)]
    names = {(r.kind, r.name) for r, _ in given}
    return given + [(r, "built-in") for r in builtin_runtimes() if (r.kind, r.name) not in names]


def _policy(r: AnyRuntime) -> str:
    ml = r.spec.ml_policy
    kinds = ml.frameworks() if ml else []
    return kinds[0] if kinds else "plain"


def register(group: click.Group) -> None:
    @group.group("runtimes")
    def runtimes() -> None:
        """Built-in and given training runtimes.

        \b
        Examples:
          kubetrain runtimes list
          kubetrain runtimes show torch-distributed
        """

    @runtimes.command("list")
    @click.option("-f", "--filename", "files", multiple=True, type=click.Path(allow_dash=True),
                  help="Also list the runtimes in these files.")
    @click.option("-o", "--output", type=click.Choice(["table", "yaml", "name"]), default="table")
    def list_(files: tuple[str, ...], output: str) -> None:
        """List runtimes with their framework label, ML policy, nodes and support status.

        \b
        Example:
          kubetrain runtimes list -f my-runtimes.yaml
        """
        rows = _catalog(files)
        if output == "name":
            for r, _ in rows:
                click.echo(f"{r.kind.lower()}/{r.name}")
            return
        if output == "yaml":
            click.echo(dump_all([r.to_wire() for r, _ in rows]), nl=False)
            return
        table = Table(box=None, pad_edge=False)
        for col in ("NAME", "KIND", "FRAMEWORK", "POLICY", "NODES", "SUPPORT", "SOURCE"):
            table.add_column(col)
        for r, source in rows:
            ml = r.spec.ml_policy
            support = "deprecated" if r.labels.get(c.LABEL_SUPPORT) == c.SUPPORT_DEPRECATED else "supported"
            table.add_row(r.name, r.kind, r.labels.get(c.LABEL_FRAMEWORK, "<none>"), _policy(r),
                          str((ml.num_nodes if ml else None) or 1), support, source)
        stdout.print(table)

    @runtimes.command("show")
    @click.argument("name")
    @click.option("-f", "--filename", "files", multiple=True, type=click.Path(allow_dash=True),
                  help="Also search the runtimes in these files.")
    def show(name: str, files: tuple[str, ...]) -> None:
        """Print one runtime as YAML.

        \b
        Example:
          kubetrain runtimes show deepspeed-distributed
        """
        for r, _ in _catalog(files):
            if r.name == name:
                click.echo(dump(r.to_wire()), nl=False)
                return
        known = ", ".join(sorted(r.name for r, _ in _catalog(files)))
        fail(f"runtime {name!r} not found", f"known runtimes: {known}")
