"""``kubetrain validate``: every rule the cluster would apply, without a cluster."""

from __future__ import annotations

import json
import sys

import click

from kubetrain.api.errors import Result
from kubetrain.api.podsecurity import LEVELS, Level
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import validate_runtime_object
from kubetrain.cli._common import describe, files_option, load_all, print_findings, stderr, tag
from kubetrain.cli._podsecurity import pod_security
from kubetrain.compiler import resolve_runtime, validate_trainjob
from kubetrain.compiler.podsecurity import PodSecurityReport
from kubetrain.runtimes import builtin_runtimes


def validate_files(
    files: tuple[str, ...],
    namespace: str | None,
    *,
    pod_security_level: Level = "baseline",
    reports: list[PodSecurityReport] | None = None,
) -> tuple[Result, int]:
    """Every finding for the objects in ``files``; Pod Security reports are appended to ``reports``."""
    objects, sources, result = load_all(files)
    given = [o for o in objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)]
    given_names = {(r.kind, r.name) for r in given}
    catalog = given + [r for r in builtin_runtimes() if (r.kind, r.name) not in given_names]
    for obj, source in zip(objects, sources, strict=True):
        if namespace and obj.kind != "ClusterTrainingRuntime" and not obj.metadata.namespace:
            obj.metadata.namespace = namespace
        if isinstance(obj, TrainJob):
            runtime, found = resolve_runtime(obj, catalog)
            checked = found.extend(validate_trainjob(obj, runtime))
        else:
            checked = validate_runtime_object(obj)
        result.extend(tag(checked, obj, source))
    result.extend(pod_security(objects, sources, catalog, pod_security_level, [] if reports is None else reports))
    return result, len(objects)


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
    def validate(
        files: tuple[str, ...], namespace: str | None, output: str, pod_security_level: Level, strict: bool
    ) -> None:
        """Check runtimes and TrainJobs: field paths, what was expected and how to fix it.

        TrainJobs are checked against the runtimes given with -f and the built-in ones. The pods every
        runtime and TrainJob compiles to are rated privileged, baseline or restricted as Kubernetes'
        PodSecurity admission rates them; each check that keeps them from --pod-security is a warning.
        Exits 1 when any error is found (with --strict: any warning too).

        \b
        Examples:
          kubetrain validate -f runtime.yaml -f trainjob.yaml
          kubetrain validate -f manifests/ -o json
          kubetrain validate -f runtime.yaml --pod-security restricted --strict
        """
        reports: list[PodSecurityReport] = []
        result, count = validate_files(files, namespace, pod_security_level=pod_security_level, reports=reports)
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
            for r in reports:
                stderr.print(f"pod security: {r.kind} {r.name}: {r.level or r.error}")
            status = "[green]valid[/]" if result.ok else "[red]invalid[/]"
            stderr.print(
                f"{count} object(s) {status}: {len(result.errors)} error(s), {len(result.warnings)} warning(s)",
                markup=True,
            )
        sys.exit(1 if failed else 0)

    _ = describe
