"""``kubetrain validate``: every rule the cluster would apply, without a cluster."""

from __future__ import annotations

import json
import sys

import click
from rich.text import Text

from kubetrain.api.errors import Result
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime
from kubetrain.cli._backend import is_cluster, select_backend
from kubetrain.cli._common import files_option, print_findings, stderr
from kubetrain.cli.backend import Backend
from kubetrain.cli.checking import check_files


def validate_files(
    files: tuple[str, ...], namespace: str | None, backend: Backend | None = None, *, cluster: bool = False
) -> tuple[Result, int]:
    """Findings for the files and how many objects they hold. ``backend``: also resolve TrainJobs against the
    runtimes it has installed (None: the files' runtimes and the built-in ones)."""
    if backend is None and not cluster:
        from kubetrain.runtimes import builtin_runtimes

        backend = _Builtins(builtin_runtimes())  # type: ignore[assignment]
    checked = check_files(files, namespace=namespace, backend=backend, local=None if cluster else "check")
    return checked.result, checked.documents


class _Builtins:
    """The smallest stand-in for a backend: only the built-in runtimes are installed."""

    def __init__(self, runtimes: list[ClusterTrainingRuntime]) -> None:
        self.runtimes = runtimes

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        return list(self.runtimes)


def register(group: click.Group) -> None:
    @group.command("validate")
    @files_option
    @click.option("-n", "--namespace", default=None, help="Namespace for objects that name none (default: default).")
    @click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Report format.")
    @click.option("--kubeconfig", default=None, help="Resolve runtimes on the cluster of this kubeconfig.")
    @click.option("--context", default=None, help="kubeconfig context (implies the cluster).")
    def validate(
        files: tuple[str, ...], namespace: str | None, output: str, kubeconfig: str | None, context: str | None
    ) -> None:
        """Check runtimes and TrainJobs: field paths, what was expected and how to fix it.

        TrainJobs are checked against the runtimes given with -f, then the ones installed on the backend: those
        applied on this machine and the built-in ones, or a cluster's with --context/--kubeconfig. Every error
        of every file is reported at once. Exits 1 when any error is found; warnings alone exit 0.

        \b
        Examples:
          kubetrain validate -f runtime.yaml -f trainjob.yaml
          kubetrain validate -f manifests/ -o json
          kubetrain validate -f trainjob.yaml --context prod     # against the cluster's runtimes
        """
        cluster = is_cluster(kubeconfig, context)
        result, count = validate_files(files, namespace, select_backend(kubeconfig, context), cluster=cluster)
        if output == "json":
            report = {
                "valid": result.ok,
                "objects": count,
                "errors": [vars(f) for f in result.errors],
                "warnings": [vars(f) for f in result.warnings],
            }
            click.echo(json.dumps(report, indent=2))
        else:
            print_findings(result)
            status = ("valid", "green") if result.ok else ("invalid", "red")
            stderr.print(Text.assemble(
                f"{count} object(s) ", status, f": {len(result.errors)} error(s), {len(result.warnings)} warning(s)"
            ))
        sys.exit(0 if result.ok else 1)
