"""``IGNORE_PATTERNS`` matching, the way the Hugging Face client filters a repository's files (so a pattern means
the same for every scheme): shell globs over the path relative to the source, where ``*`` also crosses ``/`` and a
pattern ending in ``/`` names a directory."""

from __future__ import annotations

from fnmatch import fnmatch


def ignored(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(fnmatch(path, p + "*" if p.endswith("/") else p) for p in patterns)
