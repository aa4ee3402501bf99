"""``kubetrain validate``: every rule the cluster would apply, without a cluster."""

from __future__ import annotations

import json
import sys

import click

from kubetrain.api.errors import Result
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import validate_runtime_object
from kubetrain.cli._common import describe, files_option, load_all, print_findings, stderr, tag
from kubetrain.compiler import resolve_runtime, validate_trainjob
from kubetrain.runtimes import builtin_runtimes


def validate_files(files: tuple[str, ...], namespace: str | None) -> tuple[Result, int]:
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
    return result, len(objects)


def register(group: click.Group) -> None:
    @group.command("validate")
    @files_option
    @click.option("-n", "--namespace", default=None, help="Namespace for objects that name none (default: default).")
    @click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", help="Report format.")
    def validate(files: tuple[str, ...], namespace: str | None, output: str) -> None:
        """Check runtimes and TrainJobs: field paths, what was expected and how to fix it.

        TrainJobs are checked against the runtimes given with -f and the built-in ones.
        Exits 1 when any error is found; warnings alone exit 0.

        \b
        Examples:
          kubetrain validate -f runtime.yaml -f trainjob.yaml
          kubetrain validate -f manifests/ -o json
        """
        result, count = validate_files(files, namespace)
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
            status = "[green]valid[/]" if result.ok else "[red]invalid[/]"
            stderr.print(
                f"{count} object(s) {status}: {len(result.errors)} error(s), {len(result.warnings)} warning(s)",
                markup=True,
            )
        sys.exit(0 if result.ok else 1)

    _ = describe
