"""``kubetrain prune``: remove finished TrainJobs and leftovers from this machine's ``$KUBETRAIN_HOME``."""

from __future__ import annotations

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._common import fail


def register(group: click.Group) -> None:
    @group.command("prune")
    @click.option(
        "--older-than",
        default="0s",
        show_default=True,
        help="Only TrainJobs that finished at least this long ago (90s, 30m, 12h, 7d).",
    )
    @click.option("--volumes", is_flag=True, help="Also remove local volumes (PVCs) of TrainJobs that no longer exist.")
    @click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
    @click.option("-A", "--all-namespaces", is_flag=True, help="Prune in every namespace.")
    @click.option("-n", "--namespace", default="default", show_default=True, help="Namespace.")
    def prune(older_than: str, volumes: bool, dry_run: bool, all_namespaces: bool, namespace: str) -> None:
        """Remove finished TrainJobs on this machine (state, logs, pod scratch) and leftover files.

        Running TrainJobs are never touched. To do this automatically, set a retention in
        $KUBETRAIN_HOME/config.yaml (`retention: {ttlAfterFinished: 7d, maxFinished: 100}`, see docs/local.md).

        \b
        Examples:
          kubetrain prune -A
          kubetrain prune --older-than 7d --dry-run
          kubetrain prune -n team-a --volumes
        """
        from kubetrain.local.backend import LocalBackend
        from kubetrain.local.config import parse_duration

        try:
            age = parse_duration(older_than, "--older-than")
            pruned = LocalBackend().prune(
                older_than=age, namespace=None if all_namespaces else namespace, volumes=volumes, dry_run=dry_run
            )
        except KubetrainError as exc:
            fail(str(exc))
        verb = "would remove" if dry_run else "removed"
        for p in pruned:
            click.echo(f"{verb} {p.what} ({_size(p.bytes)})")
        total = sum(p.bytes for p in pruned)
        click.echo(f"{verb} {len(pruned)} item(s), {_size(total)}" if pruned else "nothing to prune", err=True)


def _size(n: int) -> str:
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f:
            return f"{n / f:.1f} {unit}"
    return f"{n} B"


