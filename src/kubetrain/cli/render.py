"""``kubetrain render``: the exact objects the cluster would get for a TrainJob."""

from __future__ import annotations

import sys

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.cli._common import dump, fail, files_option, print_findings
from kubetrain.cli.checking import check_files, checking_backend, close_backend
from kubetrain.compiler import compile_trainjob, ecdsa_keygen, fixed_keygen, resolve_runtime


def register(group: click.Group) -> None:
    @group.command("render")
    @files_option
    @click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", help="Output format.")
    @click.option("-n", "--namespace", default=None, help="Namespace for TrainJobs that name none.")
    @click.option(
        "--fixed-keys", is_flag=True,
        help="Use placeholder MPI SSH keys instead of fresh ones (stable output for diffs and golden files).",
    )
    @click.option("--kubeconfig", default=None, help="Resolve runtimes on the cluster of this kubeconfig.")
    @click.option("--context", default=None, help="kubeconfig context (implies the cluster).")
    def render(
        files: tuple[str, ...],
        output: str,
        namespace: str | None,
        fixed_keys: bool,
        kubeconfig: str | None,
        context: str | None,
    ) -> None:
        """Compile TrainJobs with their runtimes and print the JobSet (+ PodGroup, MPI objects, snapshot).

        Runtimes come from the -f files, then the backend's installed ones (this machine's applied and built-in
        runtimes, or a cluster's with --context/--kubeconfig). Nothing is applied anywhere; nothing is printed
        unless every object is valid.

        \b
        Examples:
          kubetrain render -f trainjob.yaml -f runtime.yaml -o yaml
          kubetrain render -f examples/quickstart/trainjob.yaml --fixed-keys | kubectl apply --dry-run=server -f -
        """
        backend = checking_backend(kubeconfig, context)
        try:
            checked = check_files(files, namespace=namespace, backend=backend, local=None)
        finally:
            close_backend(backend)
        print_findings(checked.result)
        if not checked.result.ok:
            sys.exit(1)
        jobs = [o for o in checked.objects if isinstance(o, TrainJob)]
        if not jobs:
            fail("no TrainJob in the given files", "pass the TrainJob manifest with -f")
        runtimes = [o for o in checked.objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)]
        out: list[dict[str, object]] = []
        keygen = fixed_keygen() if fixed_keys else ecdsa_keygen
        for tj in jobs:
            runtime, _ = resolve_runtime(tj, runtimes + checked.installed)
            if runtime is None:  # validation resolved it; only a runtime deleted meanwhile gets here
                fail(f'TrainJob "{tj.name}": its runtime "{tj.spec.runtime_ref.name}" is gone', None)
            try:
                out += compile_trainjob(tj, runtime, keygen=keygen)
            except KubetrainError as exc:
                fail(str(exc))
        sys.stdout.write(dump(out, output))
