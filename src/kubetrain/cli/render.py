"""``kubetrain render``: the exact objects the cluster would get for a TrainJob."""

from __future__ import annotations

import sys

import click

from kubetrain.api import constants as c
from kubetrain.api.core import ConfigMap, PersistentVolumeClaim, Secret
from kubetrain.api.errors import KubetrainError, Result
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.trainjob import TrainJob
from kubetrain.cli._backend import select_checking_backend
from kubetrain.cli._common import dump, fail, files_option, print_findings
from kubetrain.compiler import compile_trainjob, ecdsa_keygen, fixed_keygen
from kubetrain.compiler.optimization import build_trials
from kubetrain.service.backends import close_backend
from kubetrain.service.checking import check_files
from kubetrain.service.sources import Source, tag

CORE_TYPES = (ConfigMap, Secret, PersistentVolumeClaim)


def managed_elsewhere(tj: TrainJob, source: Source) -> Result:
    """A warning when another controller manages ``tj`` (``spec.managedBy``): the Kubeflow Trainer controller,
    like kubetrain's operator, creates nothing for it, so there is nothing to render. Empty otherwise."""
    managed_by = tj.spec.managed_by
    found = Result()
    if managed_by in (None, "", c.MANAGED_BY_DEFAULT):
        return found
    who = ("MultiKueue dispatches it to a worker cluster, whose controller creates them"
           if managed_by == c.MANAGED_BY_MULTIKUEUE else "that controller creates whatever it runs")
    found.warn(
        "spec.managedBy",
        f"not rendered: the TrainJob is managed by {managed_by!r}, so the Kubeflow Trainer controller creates no "
        f"objects for it ({who})",
        f"to see the objects a cluster creates for it, render it without spec.managedBy (or with "
        f"{c.MANAGED_BY_DEFAULT})",
    )
    return tag(found, tj, source)


def unseeded(oj: OptimizationJob, source: Source) -> Result:
    """A warning when a random search has no seed: the controller derives one from the object's uid, which only
    exists once it is created, so the rendered values are an example of what its trials get, not those values."""
    found = Result()
    algorithm = oj.spec.search_algorithm
    if oj.spec.algorithm == "random" and (algorithm is None or algorithm.random is None or algorithm.random.seed is
                                          None):
        found.warn("spec.searchAlgorithm", "rendered with seed 0: without spec.searchAlgorithm.random.seed the "
                   "controller seeds the search from the OptimizationJob's uid, so its trials get other values",
                   "set spec.searchAlgorithm.random.seed to render (and rerun) the exact trials")
    return tag(found, oj, source)


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
        """Compile TrainJobs with their runtimes and print the JobSet (+ PodGroup, MPI objects, snapshot); print
        an OptimizationJob's trials, the TrainJobs its controller creates.

        Runtimes come from the -f files, then the backend's installed ones (this machine's applied and built-in
        runtimes, or a cluster's with --context/--kubeconfig). ConfigMaps, Secrets and PersistentVolumeClaims of
        the files are printed first, as given. Nothing is applied anywhere; nothing is printed unless every object
        is valid. A TrainJob managed by another controller (spec.managedBy, e.g. kueue.x-k8s.io/multikueue) gets
        no objects, as on a cluster: a warning on stderr says so, and the exit status stays 0.

        \b
        Examples:
          kubetrain render -f trainjob.yaml -f runtime.yaml -o yaml
          kubetrain render -f examples/quickstart/trainjob.yaml --fixed-keys | kubectl apply --dry-run=server -f -
          kubetrain render -f examples/optimization/optimizationjob.yaml     # the 6 trial TrainJobs
        """
        backend = select_checking_backend(kubeconfig, context)
        try:
            checked = check_files(files, namespace=namespace, backend=backend, local=None)
        finally:
            close_backend(backend)
        print_findings(checked.result)
        if not checked.result.ok:
            sys.exit(1)
        jobs = [
            (o, source, runtime)
            for o, source, runtime in zip(checked.objects, checked.sources, checked.runtimes, strict=True)
            if isinstance(o, TrainJob | OptimizationJob)
        ]
        if not jobs:
            fail("no TrainJob or OptimizationJob in the given files", "pass the TrainJob manifest with -f")
        # The ConfigMaps, Secrets and claims of the files first: what the rendered pods reference.
        out: list[dict[str, object]] = [o.to_wire() for o in checked.objects if isinstance(o, CORE_TYPES)]
        keygen = fixed_keygen() if fixed_keys else ecdsa_keygen
        for tj, source, runtime in jobs:
            if isinstance(tj, OptimizationJob):
                print_findings(unseeded(tj, source))
                out += build_trials(tj)
                continue
            skipped = managed_elsewhere(tj, source)
            if skipped.warnings:
                print_findings(skipped)
                continue
            if runtime is None:  # every TrainJob is valid here, so validation checked it against its runtime
                fail(f'TrainJob "{tj.name}": its runtime "{tj.spec.runtime_ref.name}" could not be checked', None)
            try:
                out += compile_trainjob(tj, runtime, keygen=keygen)
            except KubetrainError as exc:
                fail(str(exc))
        sys.stdout.write(dump(out, output))
