"""``kubetrain render``: the exact objects the cluster would get for a TrainJob."""

from __future__ import annotations

import sys

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.cli._common import dump, fail, files_option, load_all, print_findings, tag
from kubetrain.compiler import compile_trainjob, ecdsa_keygen, fixed_keygen, resolve_runtime, validate_trainjob
from kubetrain.runtimes import builtin_runtimes


def register(group: click.Group) -> None:
    @group.command("render")
    @files_option
    @click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", help="Output format.")
    @click.option("-n", "--namespace", default=None, help="Namespace for TrainJobs that name none.")
    @click.option(
        "--fixed-keys", is_flag=True,
        help="Use placeholder MPI SSH keys instead of fresh ones (stable output for diffs and golden files).",
    )
    def render(files: tuple[str, ...], output: str, namespace: str | None, fixed_keys: bool) -> None:
        """Compile TrainJobs with their runtimes and print the JobSet (+ PodGroup, MPI objects, snapshot).

        Runtimes come from the -f files, then the built-in ones. Nothing is applied anywhere.

        \b
        Examples:
          kubetrain render -f trainjob.yaml -f runtime.yaml -o yaml
          kubetrain render -f examples/quickstart/trainjob.yaml --fixed-keys | kubectl apply --dry-run=server -f -
        """
        objects, sources, result = load_all(files)
        runtimes = [o for o in objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)]
        names = {(r.kind, r.name) for r in runtimes}
        catalog = runtimes + [r for r in builtin_runtimes() if (r.kind, r.name) not in names]
        jobs = [(o, s) for o, s in zip(objects, sources, strict=True) if isinstance(o, TrainJob)]
        if not jobs and result.ok:
            fail("no TrainJob in the given files", "pass the TrainJob manifest with -f")
        out: list[dict[str, object]] = []
        keygen = fixed_keygen() if fixed_keys else ecdsa_keygen
        for tj, source in jobs:
            if namespace and not tj.metadata.namespace:
                tj.metadata.namespace = namespace
            runtime, found = resolve_runtime(tj, catalog)
            checked = found.extend(validate_trainjob(tj, runtime))
            result.extend(tag(checked, tj, source))
            if runtime is None or not checked.ok:
                continue
            try:
                out += compile_trainjob(tj, runtime, keygen=keygen)
            except KubetrainError as exc:
                fail(str(exc))
        print_findings(result)
        if not result.ok:
            sys.exit(1)
        sys.stdout.write(dump(out, output))
