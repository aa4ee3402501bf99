"""``kubetrain logs``: each step's log with kubectl's flags, streamed in constant memory on both backends."""

from __future__ import annotations

import os
import sys

import click

from kubetrain.api import KubetrainError
from kubetrain.api.logtext import parse_duration, parse_rfc3339
from kubetrain.api.views import LogOptions
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.follow import Display, stream
from kubetrain.cli.logview import LogView, target


def register(group: click.Group) -> None:
    @group.command("logs")
    @click.argument("name")
    @click.option(
        "--step",
        default=None,
        help="One step: a pod (node-0-1), a job (node-0) or a replicated job (dataset-initializer).",
    )
    @click.option("-c", "--container", default=None, help="Container of the step (default: node, else the first).")
    @click.option(
        "-f",
        "--follow",
        is_flag=True,
        help="Wait for pods to start and stream, across restarts, until the TrainJob finishes.",
    )
    @click.option(
        "--tail", type=int, default=-1, show_default=True, help="Lines of each step's recent log to show; -1 shows all."
    )
    @click.option("--since", default=None, help="Only lines newer than a duration, e.g. 30s, 5m, 2h.")
    @click.option("--since-time", default=None, help="Only lines written at or after an RFC 3339 time.")
    @click.option("--timestamps", is_flag=True, help="Prefix each line with the time it was written (RFC 3339).")
    @click.option(
        "--prefix/--no-prefix",
        default=None,
        help="Prefix lines with [step/rank] (default: when more than one step writes).",
    )
    @with_backend_options
    def logs(
        name: str,
        step: str | None,
        container: str | None,
        follow: bool,
        tail: int,
        since: str | None,
        since_time: str | None,
        timestamps: bool,
        prefix: bool | None,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Print the logs of a TrainJob's steps, each line prefixed [step/rank] when several are shown.

        Lines are written as the pods wrote them; on a terminal a progress bar (carriage returns) shows its
        latest state live. Ctrl-C stops at once.

        \b
        Examples:
          kubetrain logs my-job
          kubetrain logs my-job --step node-0 -f
          kubetrain logs my-job --tail 100 --timestamps
          kubetrain logs my-job --since 10m -c node
        """
        if since and since_time:
            fail("--since and --since-time cannot be used together", "give one of them")
        try:
            options = LogOptions(
                step=step,
                container=container,
                follow=follow,
                tail=tail if tail >= 0 else None,
                since_seconds=parse_duration(since) if since else None,
                since_time=since_time if since_time and parse_rfc3339(since_time) is not None else None,
                timestamps=timestamps,
                progress=follow,
            )
            backend = select_backend(kubeconfig, context)
            view = LogView(target(sys.stdout), prefix=prefix)
            display = Display(f"trainjob {namespace}/{name}", view, steps_live=False)
            final = stream(display, backend.log_stream(name, namespace, options))
            if follow and final is not None and final.state == "Failed":
                # The stream ended because the job failed (or its supervisor died): say why, after its logs.
                click.echo(f"trainjob {name}: Failed ({final.reason}: {final.message})", err=True)
        except KubetrainError as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            sys.exit(130)  # as kubectl: Ctrl-C ends a follow without a word
        except BrokenPipeError:
            # `kubetrain logs x | head`: the reader had enough. Point stdout at /dev/null so the interpreter's
            # own flush at exit does not complain about the closed pipe.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
