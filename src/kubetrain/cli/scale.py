"""``kubetrain scale``: change the node count of a running elastic TrainJob, as ``kubectl scale`` does."""

from __future__ import annotations

import click

from kubetrain.api import KubetrainError
from kubetrain.api import constants as c
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail

KINDS = ("trainjob", "trainjobs", "tj")


def _target(kind_or_ref: str, name: str | None) -> str:
    """``trainjob NAME`` or ``trainjob/NAME`` (kubectl accepts both)."""
    kind, _, ref = kind_or_ref.partition("/")
    if kind not in KINDS:
        fail(f"cannot scale {kind!r}: only TrainJobs scale", "kubetrain scale trainjob NAME --replicas N")
    if ref and name:
        fail("give the TrainJob once: trainjob/NAME or trainjob NAME", "kubetrain scale trainjob NAME --replicas N")
    target = ref or name
    if not target:
        fail("which TrainJob? the name is missing", "kubetrain scale trainjob NAME --replicas N")
    return target


def register(group: click.Group) -> None:
    @group.command("scale")
    @click.argument("kind")
    @click.argument("name", required=False)
    @click.option(
        "--replicas",
        required=True,
        type=click.IntRange(min=0),
        help="The new number of trainer nodes (spec.trainer.numNodes).",
    )
    @with_backend_options
    def scale(
        kind: str,
        name: str | None,
        replicas: int,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Set the number of trainer nodes of a TrainJob whose runtime is elastic (mlPolicy.torch.elasticPolicy),
        within the policy's minNodes..maxNodes. The running job keeps going: node pods are added or removed and
        torch re-forms its rendezvous with the new world size. On a cluster this goes through the TrainJob's scale
        subresource, like `kubectl scale` and a HorizontalPodAutoscaler.

        \b
        Examples:
          kubetrain scale trainjob my-job --replicas 4
          kubetrain scale trainjob/my-job --replicas 2 -n team-a
          kubetrain scale tj my-job --replicas 3 --context prod
        """
        target = _target(kind, name)
        backend = select_backend(kubeconfig, context)
        try:
            backend.scale_trainjob(target, namespace, replicas)
        except KubetrainError as exc:
            fail(str(exc))
        click.echo(f"trainjob.{c.GROUP}/{target} scaled")
