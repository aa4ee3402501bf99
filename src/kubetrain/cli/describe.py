"""``kubetrain describe trainjob``: spec summary, state with its reason, steps, conditions, events, failed logs."""

from __future__ import annotations

import click

from kubetrain.api import KubetrainError
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.core_objects import CORE_KINDS, describe_core
from kubetrain.cli.optimization import OPTIMIZATIONJOB_KINDS, describe_optimizationjob
from kubetrain.cli.output import details_dict, dump_objects, print_details


def register(group: click.Group) -> None:
    @group.command("describe")
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj", *OPTIMIZATIONJOB_KINDS, *CORE_KINDS]))
    @click.argument("name")
    @click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "yaml", "json"]),
        default="text",
        help="yaml/json: the same facts as data (trainJob, state, steps, events, failureLogs).",
    )
    @with_backend_options
    def describe(
        kind: str, name: str, output: str, kubeconfig: str | None, context: str | None, namespace: str
    ) -> None:
        """Spec summary, state and why, steps (pods) with states and exit codes, conditions, the events of the
        TrainJob and everything it owns, and the last log lines of failed steps. For an OptimizationJob: the
        search, its best trial and a table of every trial (parameters, state, objective), best first.

        \b
        Examples:
          kubetrain describe trainjob my-job
          kubetrain describe tj my-job -n team-a -o yaml
          kubetrain describe optimizationjob tune-lr       # or: describe oj tune-lr -o json
          kubetrain describe pvc my-data        # also configmap, secret (a Secret's values are never shown)
        """
        backend = select_backend(kubeconfig, context)
        if kind in OPTIMIZATIONJOB_KINDS:
            try:
                describe_optimizationjob(backend, name, namespace, output)
            except KubetrainError as exc:
                fail(str(exc))
            return
        if kind in CORE_KINDS:
            try:
                describe_core(backend, CORE_KINDS[kind], name, namespace, output)
            except KubetrainError as exc:
                fail(str(exc))
            return
        try:
            d = backend.describe_trainjob(name, namespace)
        except KubetrainError as exc:
            fail(str(exc))
        if output == "text":
            print_details(d)
        else:
            dump_objects([details_dict(d)], output)
