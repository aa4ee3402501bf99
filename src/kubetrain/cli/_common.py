"""What the CLI verbs share: loading ``-f`` files, printing findings, exit codes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from kubetrain.api.errors import Finding, Result

if TYPE_CHECKING:
    from rich.console import Console

    from kubetrain.api.loader import Loaded, Manifest


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
    from rich.markup import escape as rich_escape

    return rich_escape(text)

files_option = click.option(
    "-f", "--filename", "files", multiple=True, required=True, type=click.Path(dir_okay=True, allow_dash=True),
    help="Manifest file, directory or '-' for stdin (repeatable).",
)


class Source:
    """Where an object came from; ``locate(path)`` finds the line of one of its fields."""

    def __init__(self, loaded: Loaded, index: int):
        self.loaded, self.index = loaded, index

    def __str__(self) -> str:
        return self.loaded.sources[self.index]

    def locate(self, path: str) -> str:
        return self.loaded.locate(self.index, path) or str(self)


def load_all(files: Iterable[str]) -> tuple[list[Manifest], list[Source], Result]:
    from kubetrain.api.loader import load_file

    objects: list[Manifest] = []
    sources: list[Source] = []
    result = Result()
    for f in files:
        loaded: Loaded = load_file(f)
        objects += loaded.objects
        sources += [Source(loaded, i) for i in range(len(loaded.objects))]
        result.extend(loaded.result)
    return objects, sources, result


def print_findings(result: Result) -> None:
    for f in result.errors:
        _print(f, "error", "red")
    for f in result.warnings:
        _print(f, "warning", "yellow")


def _print(f: Finding, label: str, color: str) -> None:
    where = f"{f.source}: " if f.source else ""
    who = f"{f.obj}: " if f.obj else ""
    path = f"{f.path}: " if f.path else ""
    stderr.print(
        f"[bold {color}]{label}[/]: {escape(where)}{escape(who)}[bold]{escape(path)}[/]{escape(f.message)}",
        markup=True,
    )
    if f.fix:
        stderr.print(f"  [dim]fix:[/] {escape(f.fix)}", markup=True)


def fail(message: str, fix: str | None = None, code: int = 1) -> NoReturn:
    # Escaped: messages name fields like `replicatedJobs[node]`, which rich would take for markup and drop.
    stderr.print(f"[bold red]error[/]: {escape(message)}", markup=True)
    if fix:
        stderr.print(f"  [dim]fix:[/] {escape(fix)}", markup=True)
    sys.exit(code)


def dump(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List",
                                                                 "items": objects}, indent=2) + "\n"
    from kubetrain.api.yamlio import dump_all

    return dump_all(objects)


def describe(obj: Manifest) -> str:
    ns = getattr(obj.metadata, "namespace", None)
    return f"{obj.kind} {ns + '/' if ns and obj.kind != 'ClusterTrainingRuntime' else ''}{obj.metadata.name}"


def tag(result: Result, obj: Manifest, source: Source | None) -> Result:
    """Attach the object and the file:line of the offending field to each finding."""
    who = describe(obj)
    out = Result()
    for f in result.errors + result.warnings:
        where = f.source or (source.locate(f.path) if source is not None else None)
        g = Finding(f.path, f.message, f.fix, f.severity, where, f.obj or who)
        (out.errors if g.severity == "error" else out.warnings).append(g)
    return out
