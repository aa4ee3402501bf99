"""What ``kubetrain get`` does the same way for every kind: fetch the named objects (each one that is missing is
an error line, the others still print), keep what ``--field-selector`` selects, order by ``--sort-by``, and print
the formats that do not depend on the kind (``-o jsonpath|custom-columns|yaml|json|name``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import click

from kubetrain.api import KubetrainError
from kubetrain.cli.output import OutputFormat, dump_objects, error_line, print_generic, sort_objects

T = TypeVar("T")


@dataclass(frozen=True)
class Query:
    """What ``kubetrain get`` was asked, the same for every kind."""

    names: tuple[str, ...]
    namespace: str
    all_namespaces: bool
    fmt: OutputFormat
    selector: str | None = None
    field_selector: str | None = None
    sort_by: str | None = None
    no_headers: bool = False
    allow_missing: bool = True

    @property
    def scope(self) -> str | None:
        """The namespace to list (None: all)."""
        return None if self.all_namespaces else self.namespace


@dataclass
class Listing(Generic[T]):
    """The objects to print (``items``), their wire form (``wires``, same order) and the exit status so far."""

    items: list[T]
    wires: list[dict[str, Any]]
    rc: int = 0


def fetch_named(names: Sequence[str], get: Callable[[str], T]) -> tuple[list[T], int]:
    """``get(name)`` for each name; one that fails prints its error and makes the exit status 1."""
    found, rc = [], 0
    for name in names:
        try:
            found.append(get(name))
        except KubetrainError as exc:
            error_line(str(exc))
            rc = 1
    return found, rc


def select(
    items: list[T],
    wire: Callable[[T], dict[str, Any]],
    *,
    keep: Callable[[list[dict[str, Any]]], list[int]] | None = None,
    sort_by: str | None,
    rc: int = 0,
) -> Listing[T]:
    """``items`` filtered by ``keep`` (indexes of the wires it keeps, e.g. a field selector) and sorted."""
    wires = [wire(i) for i in items]
    if keep is not None:
        kept = keep(wires)
        items, wires = [items[i] for i in kept], [wires[i] for i in kept]
    order = sort_objects(wires, sort_by)
    return Listing([items[i] for i in order], [wires[i] for i in order], rc)


def print_common(listing: Listing[T], q: Query, *, name_of: Callable[[T], str], dump_empty: bool = False) -> bool:
    """Print the kind-independent formats; False when ``fmt`` is a table, which the caller prints. A single name
    that was not found prints nothing more (its error line said it); ``dump_empty``: yaml/json of nothing
    anyway."""
    wires, fmt, names = listing.wires, q.fmt, q.names
    if fmt.generic:
        if listing.items or len(names) != 1:
            print_generic(wires, fmt, single=len(names) == 1, allow_missing=q.allow_missing, no_headers=q.no_headers)
    elif fmt.kind in ("yaml", "json"):
        if listing.items or not names or dump_empty:
            dump_objects(wires, fmt.kind)
    elif fmt.kind == "name":
        for item in listing.items:
            click.echo(name_of(item))
    else:
        return False
    return True
