"""``kubetrain crds``: print (or write) the CustomResourceDefinitions generated from the API models."""

from __future__ import annotations

from pathlib import Path

import click

from kubetrain.api.crd import crd_filename, dump_yaml, generate_crds


@click.command("crds")
@click.option(
    "--output-dir",
    "-d",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write one <group>_<plural>.yaml file per CRD into this directory instead of printing.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(["TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "OptimizationJob"]),
    help="Only this kind (repeatable). Default: all four.",
)
def crds(output_dir: Path | None, kinds: tuple[str, ...]) -> None:
    """Print the TrainJob, TrainingRuntime, ClusterTrainingRuntime and OptimizationJob CRDs as multi-document YAML.

    \b
    Examples:
      kubetrain crds | kubectl apply --server-side -f -
      kubetrain crds --kind TrainJob > trainjob-crd.yaml
      kubetrain crds --kind OptimizationJob | kubectl apply --server-side -f -
      kubetrain crds --output-dir manifests/base/crds
    """
    docs = [c for c in generate_crds() if not kinds or c["spec"]["names"]["kind"] in kinds]
    if output_dir is None:
        click.echo(dump_yaml(docs), nl=False)
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        path = output_dir / crd_filename(doc)
        path.write_text(dump_yaml([doc]))
        click.echo(f"wrote {path}", err=True)


def register(group: click.Group) -> None:
    group.add_command(crds)
