"""What the CLI verbs share: the ``-f`` option, printing findings, exit codes (loading lives in
``kubetrain.service.sources``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from kubetrain.api.errors import Finding, Result

if TYPE_CHECKING:
    from rich.console import Console



class Teardown:
    """Set by a command that leaves nothing running behind it (``run`` on this machine, once its supervisor thread
    has ended): ``main`` then exits without the interpreter's teardown, which frees every module one by one and
    costs a quick job's run as much as its pods do. ``before_exit`` still runs (closing the state database folds
    its write-ahead log back, as a normal exit does)."""

    def __init__(self) -> None:
        self.skip = False
        self.before_exit: list[Callable[[], object]] = []


TEARDOWN = Teardown()


class _LazyConsole:
    """A rich Console made on first use: commands that print nothing through rich (a ``run`` answered from the
    compile cache) do not pay for importing it."""

    def __init__(self, make: Callable[[], Console]) -> None:
        self._make = make
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = self._make()
        return getattr(self._console, name)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


stderr = cast("Console", _LazyConsole(_stderr))
stdout = cast("Console", _LazyConsole(_stdout))


def escape(text: str) -> str:
    """Rich markup escaping, for text put into a markup string."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)

files_option = click.option(
    "-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=True, allow_dash=True),
    help="Manifest file, directory or '-' for stdin (repeatable).",
)


def print_findings(result: Result) -> None:
    for f in result.errors:
        _print(f, "error", "red")
    for f in result.warnings:
        _print(f, "warning", "yellow")


def _print(f: Finding, label: str, color: str) -> None:
    from rich.text import Text

    # Text pieces, never markup: messages quote user input ("[auto cpu gpu]", "labels[x/y]") verbatim.
    where = f"{f.source}: " if f.source else ""
    who = f"{f.obj}: " if f.obj else ""
    path = f"{f.path}: " if f.path else ""
    stderr.print(Text.assemble((label, f"bold {color}"), ": ", where, who, (path, "bold"), f.message))
    if f.fix:
        stderr.print(Text.assemble("  ", ("fix:", "dim"), " ", f.fix))


def fail(message: str, fix: str | None = None, code: int = 1) -> NoReturn:
    from rich.text import Text

    stderr.print(Text.assemble(("error", "bold red"), ": ", message))
    if fix:
        stderr.print(Text.assemble("  ", ("fix:", "dim"), " ", fix))
    sys.exit(code)


def dump(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List",
                                                                 "items": objects}, indent=2) + "\n"
    from kubetrain.api.yamlio import dump_all

    return dump_all(objects)
