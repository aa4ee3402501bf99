"""``kubetrain validate``: every rule the cluster would apply, without a cluster."""

from __future__ import annotations

import json
import sys

import click
from rich.text import Text

from kubetrain.api.errors import Result
from kubetrain.api.podsecurity import LEVELS, Level
from kubetrain.cli._backend import is_cluster, select_checking_backend
from kubetrain.cli._common import files_option, print_findings, stderr
from kubetrain.compiler.podsecurity import PodSecurityReport
from kubetrain.service.backends import close_backend
from kubetrain.service.capacity import capacity_warnings
from kubetrain.service.checking import BuiltinsOnly, RuntimeCatalog, check_files
from kubetrain.service.podsecurity import pod_security


def validate_files(
    files: tuple[str, ...],
    namespace: str | None,
    backend: RuntimeCatalog | None = None,
    *,
    cluster: bool = False,
    pod_security_level: Level = "baseline",
    reports: list[PodSecurityReport] | None = None,
) -> tuple[Result, int]:
    """Every finding for the objects in ``files`` and how many objects they hold; Pod Security reports are
    appended to ``reports``. ``backend``: also resolve TrainJobs against the runtimes it has installed (None:
    the files' runtimes and the built-in ones)."""
    if backend is None and not cluster:
        backend = BuiltinsOnly()
    checked = check_files(files, namespace=namespace, backend=backend, local=None if cluster else "check")
    checked.result.extend(pod_security(checked.objects, checked.sources, checked.results, checked.runtimes,
                                       pod_security_level, [] if reports is None else reports))
    if not cluster:
        checked.result.extend(capacity_warnings(checked.objects, checked.sources, checked.runtimes))
    return checked.result, checked.documents


def register(group: click.Group) -> None:
    @group.command("validate")
    @files_option
    @click.option("-n", "--namespace", default=None, help="Namespace for objects that name none (default: default).")
    @click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Report format.")
    @click.option(
        "--pod-security", "pod_security_level", type=click.Choice(LEVELS), default="baseline", show_default=True,
        help="Pod Security Standards level to warn against (the level of every pod is reported either way).",
    )  # fmt: skip
    @click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
    @click.option("--kubeconfig", default=None, help="Resolve runtimes on the cluster of this kubeconfig.")
    @click.option("--context", default=None, help="kubeconfig context (implies the cluster).")
    def validate(
        files: tuple[str, ...],
        namespace: str | None,
        output: str,
        pod_security_level: Level,
        strict: bool,
        kubeconfig: str | None,
        context: str | None,
    ) -> None:
        """Check runtimes and TrainJobs: field paths, what was expected and how to fix it.

        TrainJobs are checked against the runtimes given with -f, then the ones installed on the backend: those
        applied on this machine and the built-in ones, or a cluster's with --context/--kubeconfig. Every error
        of every file is reported at once. The pods every runtime and TrainJob compiles to are rated
        privileged, baseline or restricted as Kubernetes' PodSecurity admission rates them; each check that
        keeps them from --pod-security is a warning, and pods below restricted get PodSecurity's own line
        listing everything restricted refuses. Exits 1 when any error is found (with --strict: any warning
        too).

        \b
        Examples:
          kubetrain validate -f runtime.yaml -f trainjob.yaml
          kubetrain validate -f manifests/ -o json
          kubetrain validate -f runtime.yaml --pod-security restricted --strict
          kubetrain validate -f trainjob.yaml --context prod     # against the cluster's runtimes
        """
        reports: list[PodSecurityReport] = []
        cluster = is_cluster(kubeconfig, context)
        backend = select_checking_backend(kubeconfig, context)
        try:
            result, count = validate_files(files, namespace, backend, cluster=cluster,
                                           pod_security_level=pod_security_level, reports=reports)
        finally:
            close_backend(backend)
        failed = not result.ok or (strict and bool(result.warnings))
        if output == "json":
            report = {
                "valid": result.ok,
                "objects": count,
                "errors": [vars(f) for f in result.errors],
                "warnings": [vars(f) for f in result.warnings],
                "podSecurity": [r.to_json() for r in reports],
            }
            click.echo(json.dumps(report, indent=2))
        else:
            print_findings(result)
            shown: set[str] = set()
            for r in reports:
                stderr.print(f"pod security: {r.kind} {r.name}: {r.level or r.error}", markup=False)
                # What restricted refuses, as PodSecurity words it; a TrainJob does not repeat its runtime's.
                for line in r.summaries():
                    if line not in shown:
                        shown.add(line)
                        stderr.print(f"  {line}", markup=False, highlight=False)
            status = ("valid", "green") if result.ok else ("invalid", "red")
            stderr.print(Text.assemble(
                f"{count} object(s) ", status, f": {len(result.errors)} error(s), {len(result.warnings)} warning(s)"
            ))
        sys.exit(1 if failed else 0)
