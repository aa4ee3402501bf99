"""``kubetrain runtimes list|show``: the runtimes a TrainJob can reference, framework, deprecation status."""

from __future__ import annotations

import click

from kubetrain.api import constants as c
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.yamlio import dump, dump_all
from kubetrain.cli._backend import is_cluster, select_backend
from kubetrain.cli._common import fail, print_findings, stdout
from kubetrain.cli.output import plain_rich_table
from kubetrain.runtimes import builtin_runtimes
from kubetrain.service.sources import load_all

Key = tuple[str, str | None, str]


def _key(r: AnyRuntime) -> Key:
    return (r.kind, r.metadata.namespace if r.kind == c.KIND_TRAINING_RUNTIME else None, r.name)


def _catalog(
    files: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None
) -> list[tuple[AnyRuntime, str]]:
    """Runtimes from the -f files, then the backend's: a cluster's, or this machine's applied and built-in ones."""
    objects, _, result = load_all(files) if files else ([], [], None)
    if result is not None:
        print_findings(result)
    rows: list[tuple[AnyRuntime, str]] = [
        (o, "file") for o in objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)
    ]
    if is_cluster(kubeconfig, context):
        rows += [(r, "cluster") for r in select_backend(kubeconfig, context).list_runtimes(namespace)]
    else:
        from kubetrain.local.backend import LocalBackend

        rows += [(r, "applied") for r in LocalBackend().store_runtimes(namespace)]
        rows += [(r, "built-in") for r in builtin_runtimes()]
    seen: set[Key] = set()
    unique = []
    for r, source in rows:  # earlier sources shadow later ones, as they would when a TrainJob resolves
        if _key(r) not in seen:
            seen.add(_key(r))
            unique.append((r, source))
    return sorted(unique, key=lambda row: (row[0].name, row[0].kind))


def _policy(r: AnyRuntime) -> str:
    ml = r.spec.ml_policy
    kinds = ml.frameworks() if ml else []
    return kinds[0] if kinds else "plain"


def _source_options(f: click.decorators.FC) -> click.decorators.FC:
    for opt in reversed([
        click.option("-f", "--filename", "files", multiple=True, type=click.Path(allow_dash=True),
                     help="Also consider the runtimes in these files."),
        click.option("--kubeconfig", default=None, help="Use the runtimes of this kubeconfig's cluster."),
        click.option("--context", default=None, help="kubeconfig context (implies the cluster)."),
        click.option("-n", "--namespace", default=None, help="Namespace of TrainingRuntimes (default: all)."),
    ]):
        f = opt(f)
    return f


def register(group: click.Group) -> None:
    @group.group("runtimes")
    def runtimes() -> None:
        """Training runtimes: built-in, applied on this machine, in files, or on a cluster.

        \b
        Examples:
          kubetrain runtimes list
          kubetrain runtimes show torch-distributed
        """

    @runtimes.command("list")
    @_source_options
    @click.option("-o", "--output", type=click.Choice(["table", "yaml", "name"]), default="table")
    def list_(files: tuple[str, ...], kubeconfig: str | None, context: str | None, namespace: str | None,
              output: str) -> None:
        """List runtimes with their framework label, ML policy, nodes, support status and the Pod Security
        level of the pods a plain TrainJob gets from them (privileged, baseline or restricted).

        \b
        Examples:
          kubetrain runtimes list -f my-runtimes.yaml
          kubetrain runtimes list --context prod -n team-a
        """
        rows = _catalog(files, kubeconfig, context, namespace)
        if output == "name":
            for r, _ in rows:
                click.echo(f"{r.kind.lower()}/{r.name}")
            return
        if output == "yaml":
            click.echo(dump_all([r.to_wire() for r, _ in rows]), nl=False)
            return
        table = plain_rich_table(box=None, pad_edge=False)
        from kubetrain.compiler.podsecurity import lint_runtime

        for col in ("NAME", "KIND", "NAMESPACE", "FRAMEWORK", "POLICY", "NODES", "SUPPORT", "POD SECURITY", "SOURCE"):
            table.add_column(col)
        for r, source in rows:
            ml = r.spec.ml_policy
            support = "deprecated" if r.labels.get(c.LABEL_SUPPORT) == c.SUPPORT_DEPRECATED else "supported"
            table.add_row(r.name, r.kind, _key(r)[1] or "", r.labels.get(c.LABEL_FRAMEWORK, "<none>"), _policy(r),
                          str((ml.num_nodes if ml else None) or 1), support, lint_runtime(r).level or "?", source)
        stdout.print(table)

    @runtimes.command("show")
    @click.argument("name")
    @_source_options
    def show(name: str, files: tuple[str, ...], kubeconfig: str | None, context: str | None,
             namespace: str | None) -> None:
        """Print one runtime as YAML.

        \b
        Examples:
          kubetrain runtimes show deepspeed-distributed
          kubetrain runtimes show team-torch -n team-a --context prod
        """
        rows = _catalog(files, kubeconfig, context, namespace)
        for r, _ in rows:
            if r.name == name:
                click.echo(dump(r.to_wire()), nl=False)
                return
        fail(f"runtime {name!r} not found", f"known runtimes: {', '.join(sorted({r.name for r, _ in rows}))}")
