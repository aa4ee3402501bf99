"""Manifests from files or text, and where each object and finding came from (``file:line``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kubetrain.api.errors import Finding, Result

if TYPE_CHECKING:
    from kubetrain.api.loader import LineMap, Loaded, Manifest


class Source:
    """Where an object came from (``file:line``); ``locate(path)`` finds the line of one of its fields."""

    def __init__(self, text: str, lines: LineMap | None = None, file: str | None = None):
        self.text, self.lines, self.file = text, lines, file

    def __str__(self) -> str:
        return self.text

    def locate(self, path: str) -> str:
        from kubetrain.api.loader import locate

        if self.lines is None or self.file is None:
            return self.text
        return locate(self.lines, self.file, path) or self.text


def load_all(files: Iterable[str]) -> tuple[list[Manifest], list[Source], Result]:
    """The objects that loaded, where each came from, and the loader's findings (see also ``checking``)."""
    loaded = load_files(files)
    sources = [Source(loaded.sources[i], loaded.lines[i], loaded.files[i]) for i in range(len(loaded.objects))]
    return loaded.objects, sources, loaded.result


def load_files(files: Iterable[str]) -> Loaded:
    from kubetrain.api.loader import Loaded, load_file

    loaded = Loaded()
    for f in files:
        loaded.extend(load_file(f))
    return loaded


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
