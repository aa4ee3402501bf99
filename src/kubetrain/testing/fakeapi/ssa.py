"""Server-side apply as the fake API server does it: field ownership per manager, conflicts, releases.

Simplification (documented in docs/operator.md): lists are atomic, i.e. one field owned as a whole, where
the real server merges lists that declare ``listMapKeys`` item by item. kubetrain always applies whole
objects with a single manager, so the difference does not change what the operator observes.
"""

from __future__ import annotations

import copy
from typing import Any

Path = tuple[str, ...]
Owners = dict[str, tuple[str, set[Path]]]  # manager -> (operation, fields)

# Identity and server-owned metadata are never "fields" anyone owns.
_IGNORED_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
}


def leaf_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """Every leaf of ``obj`` (dicts recursed, lists and scalars are leaves)."""
    out: set[Path] = set()
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            if not prefix and key in ("apiVersion", "kind"):
                continue
            if prefix == ("metadata",) and key in _IGNORED_META:
                continue
            out |= leaf_paths(value, (*prefix, key))
    elif prefix:
        out.add(prefix)
    return out


_MISSING = object()


def lookup(obj: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def remove(obj: dict[str, Any], path: Path) -> None:
    """Delete ``path`` and any maps it leaves empty on the way up."""
    parents: list[tuple[dict[str, Any], str]] = []
    cur: Any = obj
    for key in path[:-1]:
        if not isinstance(cur, dict) or key not in cur:
            return
        parents.append((cur, key))
        cur = cur[key]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
        for parent, key in reversed(parents):
            if parent[key] == {}:
                del parent[key]
            else:
                break


def deep_merge(live: dict[str, Any], applied: dict[str, Any]) -> None:
    for key, value in applied.items():
        if isinstance(value, dict) and isinstance(live.get(key), dict):
            deep_merge(live[key], value)
        else:
            live[key] = copy.deepcopy(value)


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[tuple[str, Path]]):
        self.conflicts = conflicts
        detail = "; ".join(f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts)
        super().__init__(f"Apply failed with {len(conflicts)} conflict(s): {detail}")


def apply(
    live: dict[str, Any] | None, applied: dict[str, Any], owners: Owners, manager: str, *, force: bool
) -> dict[str, Any]:
    """Return the new object; updates ``owners`` in place. Raises :class:`ApplyConflict` without ``force``."""
    result: dict[str, Any] = copy.deepcopy(live) if live is not None else {}
    fields = leaf_paths(applied)
    conflicts = [
        (other, path)
        for other, (_, owned) in owners.items()
        if other != manager
        for path in fields & owned
        if lookup(result, path) != lookup(applied, path)
    ]
    if conflicts and not force:
        raise ApplyConflict(sorted(conflicts))
    for other, path in conflicts:
        owners[other][1].discard(path)
    previous = owners.get(manager, ("Apply", set()))[1]
    still_owned = set().union(*(owned for m, (_, owned) in owners.items() if m != manager))
    for path in previous - fields:
        if path not in still_owned:
            remove(result, path)
    deep_merge(result, applied)
    owners[manager] = ("Apply", fields)
    for m in [m for m, (_, owned) in owners.items() if not owned]:
        del owners[m]
    return result


def record_update(old: dict[str, Any] | None, new: dict[str, Any], owners: Owners, manager: str) -> None:
    """A non-apply write (create, PUT, merge patch): the writer takes over every field it changed."""
    changed = {p for p in leaf_paths(new) if old is None or lookup(old, p) != lookup(new, p)}
    if not changed:
        return
    for other, (_, owned) in owners.items():
        if other != manager:
            owned -= changed
    op, owned = owners.get(manager, ("Update", set()))
    owners[manager] = (op if manager in owners else "Update", owned | changed)
    for m in [m for m, (_, o) in owners.items() if not o]:
        del owners[m]


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Render owned paths in the ``FieldsV1`` shape (``{"f:spec": {"f:x": {}}}``)."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        cur = root
        for key in path:
            cur = cur.setdefault(f"f:{key}", {})
    return root


def managed_fields(owners: Owners, api_version: str, now: str) -> list[dict[str, Any]]:
    return [
        {
            "manager": manager,
            "operation": op,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(paths),
        }
        for manager, (op, paths) in sorted(owners.items())
    ]
