"""The ``kubetrain`` command: one click group; each verb lives in its own module under ``kubetrain.cli``.

Modules are imported only when one of their commands runs, so ``kubetrain run`` does not pay for the
Kubernetes client and ``kubetrain validate`` does not pay for the local supervisor.
"""

from __future__ import annotations

import importlib
import sys

import click

from kubetrain import __version__

# command name -> module defining ``register(group)`` that adds it.
COMMANDS: dict[str, str] = {
    "validate": "kubetrain.cli.validate",
    "render": "kubetrain.cli.render",
    "runtimes": "kubetrain.cli.runtimes",
    "crds": "kubetrain.cli.crds",
    "run": "kubetrain.cli.local",
    "apply": "kubetrain.cli.local",
    "get": "kubetrain.cli.get",
    "describe": "kubetrain.cli.describe",
    "logs": "kubetrain.cli.logs",
    "metrics": "kubetrain.cli.metrics",
    "delete": "kubetrain.cli.delete",
    "scale": "kubetrain.cli.scale",
    "wait": "kubetrain.cli.wait",
    "prune": "kubetrain.cli.prune",
    "cluster": "kubetrain.cli.cluster",
    "operator": "kubetrain.cli.operator",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            holder = click.Group()
            importlib.import_module(COMMANDS[cmd_name]).register(holder)
            for name, command in holder.commands.items():
                self.commands.setdefault(name, command)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="kubetrain")
def cli() -> None:
    """kubetrain: TrainJobs and training runtimes, compiled to JobSets, run locally or on Kubernetes.

    \b
    Examples:
      kubetrain validate -f runtime.yaml -f trainjob.yaml
      kubetrain render -f trainjob.yaml -o yaml
      kubetrain run -f examples/quickstart/trainjob.yaml
    """


def main() -> None:
    try:
        cli.main(prog_name="kubetrain", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
