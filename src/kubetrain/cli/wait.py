"""``kubetrain wait trainjob NAME --for=condition=Complete --timeout=10m``, with kubectl's semantics.

- ``--for=condition=TYPE[=VALUE]`` (VALUE defaults to True; the type is matched case-insensitively),
  ``--for=delete``, ``--for=jsonpath='{.path}'[=VALUE]`` (without VALUE: the field exists and is not empty);
- ``--timeout`` defaults to 30s; 0 checks once; a negative value waits a week;
- exit 0 once every named TrainJob meets the condition (``trainjob.trainer.kubeflow.org/NAME condition met``);
  exit 1 on a timeout (``error: timed out waiting for the condition on trainjobs/NAME``) or when a TrainJob to
  wait for a condition on does not exist. ``--for=delete`` of a TrainJob that does not exist succeeds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.logtext import parse_duration
from kubetrain.cli import jsonpath
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.output import error_line

WEEK = 7 * 24 * 3600.0

Check = Callable[[TrainJob | None], bool]
"""``None``: the TrainJob does not exist (deleted)."""


def parse_for(spec: str) -> tuple[str, Check]:
    """``(what, check)`` from a ``--for`` value; ``what`` is ``delete``, ``condition`` or ``jsonpath``."""
    if spec == "delete":
        return "delete", lambda tj: tj is None
    kind, sep, rest = spec.partition("=")
    if kind == "condition" and sep and rest:
        ctype, eq, wanted = rest.partition("=")
        want = wanted if eq else "True"

        def has_condition(tj: TrainJob | None) -> bool:
            if tj is None:
                return False
            for cond in (tj.status.conditions if tj.status else None) or []:
                if cond.type.lower() == ctype.lower() and cond.status.lower() == want.lower():
                    return True
            return False

        return "condition", has_condition
    if kind == "jsonpath" and sep and rest:
        expr, value = _split_jsonpath(rest)
        template = jsonpath.parse_relaxed(expr, "--for=jsonpath")

        def matches(tj: TrainJob | None) -> bool:
            if tj is None:
                return False
            try:
                results = template.find(tj.to_wire(), allow_missing=True)
            except jsonpath.JSONPathError:
                return False  # e.g. [0] of a list still empty: not met yet, keep waiting
            if not results or not results[0]:
                return False
            # kubectl's rules: one value to compare, and a scalar
            if len(results) > 1 or len(results[0]) > 1:
                raise KubetrainError(
                    f"--for=jsonpath: given jsonpath expression matches more than one value ({template.source}) "
                    "(fix: narrow it to one field, e.g. with an index [0] or a filter [?(@.type==\"Complete\")])"
                )
            got = results[0][0]
            if value is None:
                return got not in (None, "", [], {})
            if isinstance(got, dict | list):
                raise KubetrainError(
                    f"--for=jsonpath: jsonpath leads to a nested object or list which is not supported "
                    f"({template.source}) (fix: point it at a field with a single value)"
                )
            return _text(got) == value

        return "jsonpath", matches
    raise KubetrainError(
        f"--for: unrecognized condition {spec!r} (fix: --for=condition=Complete, --for=delete or "
        "--for=jsonpath='{.status.conditions[0].type}'=Complete)"
    )


def _split_jsonpath(rest: str) -> tuple[str, str | None]:
    """``{.a.b}=x`` -> (``{.a.b}``, ``x``); the ``=`` after the closing brace separates the value."""
    if rest.startswith("{"):
        end = rest.find("}")
        if end < 0:
            raise KubetrainError(f"--for=jsonpath: missing '}}' in {rest!r} (fix: '{{.status.x}}=value')")
        expr, tail = rest[: end + 1], rest[end + 1 :]
        if not tail:
            return expr, None
        if not tail.startswith("="):
            raise KubetrainError(f"--for=jsonpath: expected '=' after {expr!r}, got {tail!r}")
        return expr, tail[1:]
    expr, eq, value = rest.partition("=")
    return expr, value if eq else None


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return "" if v is None else str(v)


def register(group: click.Group) -> None:
    @group.command("wait")
    @click.argument("kind", type=click.Choice(["trainjob", "trainjobs", "tj"]))
    @click.argument("names", nargs=-1, required=True)
    @click.option(
        "--for", "for_", required=True, help="condition=Complete[=True], delete, or jsonpath='{.path}'[=value]."
    )
    @click.option(
        "--timeout",
        default="30s",
        show_default=True,
        help="How long to wait (30s, 10m, 2h); 0 checks once, a negative value waits a week.",
    )
    @with_backend_options
    def wait(
        kind: str,
        names: tuple[str, ...],
        for_: str,
        timeout: str,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Wait until TrainJobs meet a condition, like kubectl wait (exit 0 when met, 1 on timeout).

        \b
        Examples:
          kubetrain wait trainjob my-job --for=condition=Complete --timeout=1h
          kubetrain wait tj a b --for=condition=Failed=False
          kubetrain wait trainjob my-job --for=delete
          kubetrain wait trainjob my-job --for=jsonpath='{.status.jobsStatus[0].active}'=2
        """
        try:
            what, check = parse_for(for_)
            t = timeout.strip()
            seconds = -1.0 if t.startswith("-") else parse_duration(t, "--timeout")
        except KubetrainError as exc:
            fail(str(exc))
        seconds = WEEK if seconds < 0 else seconds
        backend = select_backend(kubeconfig, context)
        deadline = time.monotonic() + seconds
        pending = set(names)
        current: dict[str, TrainJob | None] = {}
        rc = 0
        initial = True

        def settle(name: str) -> None:
            if name in pending and check(current.get(name)):
                pending.discard(name)
                click.echo(f"trainjob.{c.GROUP}/{name} condition met")

        try:
            for item in backend.watch_trainjobs(namespace, names=list(names)):
                if item is None:
                    if initial:
                        initial = False
                        for name in sorted(pending):
                            if name not in current:
                                if what == "delete":
                                    settle(name)
                                else:
                                    error_line(f'trainjobs.{c.GROUP} "{name}" not found in namespace {namespace}')
                                    pending.discard(name)
                                    rc = 1
                else:
                    name = item.trainjob.name
                    current[name] = None if item.type == "DELETED" else item.trainjob
                    settle(name)
                if not pending or (not initial and time.monotonic() >= deadline):
                    break
        except KubetrainError as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            sys.exit(130)
        for name in sorted(pending):
            error_line(f"timed out waiting for the condition on trainjobs/{name}")
            rc = 1
        sys.exit(rc)
