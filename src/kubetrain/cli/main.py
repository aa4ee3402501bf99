"""The ``kubetrain`` command: one click group; each verb lives in its own module under ``kubetrain.cli``.

Modules are imported only when one of their commands runs, so ``kubetrain run`` does not pay for the
Kubernetes client and ``kubetrain validate`` does not pay for the local supervisor.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

import click

from kubetrain._version import __version__

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
    "images": "kubetrain.cli.images",
    "cluster": "kubetrain.cli.cluster",
    "operator": "kubetrain.cli.operator",
    # The web UI sits beside the CLI (kubetrain.ui may use the CLI's helpers, never the other way round), so it is
    # named here only as a string.
    "ui": "kubetrain.ui.command",
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
    except SystemExit as exc:
        from kubetrain.cli._common import TEARDOWN

        if TEARDOWN.skip and (exc.code is None or isinstance(exc.code, int)):
            _exit_now(exc.code or 0, TEARDOWN.before_exit)
        raise


def _exit_now(code: int, before_exit: list[Callable[[], object]]) -> NoReturn:
    """What the interpreter's exit would do that matters (files closed, output flushed), then exit at once."""
    import logging

    for step in before_exit:
        try:
            step()
        except Exception:  # exiting anyway: each step is best effort, as at a normal exit
            pass
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can be shown anyway
    os._exit(code)


if __name__ == "__main__":
    main()
