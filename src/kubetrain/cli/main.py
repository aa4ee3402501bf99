"""The ``kubetrain`` command: one click group; each verb lives in its own module under ``kubetrain.cli``."""

from __future__ import annotations

import importlib
import sys

import click

from kubetrain import __version__

# Modules that each define ``register(group)``. A missing module is skipped so the CLI always starts.
_COMMAND_MODULES = (
    "kubetrain.cli.validate",
    "kubetrain.cli.render",
    "kubetrain.cli.runtimes",
    "kubetrain.cli.crds",
    "kubetrain.cli.local",
    "kubetrain.cli.cluster",
    "kubetrain.cli.operator",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="kubetrain")
def cli() -> None:
    """kubetrain: TrainJobs and training runtimes, compiled to JobSets, run locally or on Kubernetes.

    \b
    Examples:
      kubetrain validate -f runtime.yaml -f trainjob.yaml
      kubetrain render -f trainjob.yaml -o yaml
      kubetrain run -f examples/quickstart/trainjob.yaml
    """


def _register() -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(cli)


_register()


def main() -> None:
    try:
        cli.main(prog_name="kubetrain", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
