"""Read-only access to a PodTemplateSpec dict the way the PodSecurity checks need it.

Pod specs stay Kubernetes-shaped dicts in kubetrain. These helpers never raise on odd shapes (a wrong type
is the schema check's business, ``kubetrain.api.podschema``); a field of the wrong type reads as unset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

Obj = dict[str, Any]

# The lists PodSecurity visits, in its order: init containers, containers, ephemeral containers.
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def obj(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def flag(value: Any) -> bool | None:
    """A Go ``*bool``: True, False or unset (anything that is not a bool)."""
    return value if isinstance(value, bool) else None


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(value: Any) -> str:
    """A Go ``string``: unset and non-strings read as empty."""
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Container:
    """One container of any of the three lists, with the path prefix of its fields."""

    path: str  # "spec.containers[0]"
    name: str
    spec: Obj
    ephemeral: bool

    @property
    def security(self) -> Obj | None:
        sc = self.spec.get("securityContext")
        return sc if isinstance(sc, dict) else None

    def field(self, *parts: str) -> str:
        return ".".join((self.path, *parts))


@dataclass(frozen=True)
class Pod:
    """The metadata and spec of a pod template, as PodSecurity evaluates them."""

    meta: Obj
    spec: Obj

    @classmethod
    def from_template(cls, template: Any) -> Pod:
        t = obj(template)
        return cls(obj(t.get("metadata")), obj(t.get("spec")))

    @property
    def security(self) -> Obj | None:
        sc = self.spec.get("securityContext")
        return sc if isinstance(sc, dict) else None

    @property
    def annotations(self) -> dict[str, str]:
        return {k: v for k, v in obj(self.meta.get("annotations")).items() if isinstance(v, str)}

    @property
    def windows(self) -> bool:
        return text(obj(self.spec.get("os")).get("name")) == "windows"

    @property
    def user_namespace(self) -> bool:
        """``hostUsers: false``: the pod runs in its own user namespace (some checks relax, KEP-127)."""
        return flag(self.spec.get("hostUsers")) is False

    def containers(self) -> tuple[Container, ...]:
        return self._containers

    @cached_property
    def _containers(self) -> tuple[Container, ...]:
        # Every check walks the containers; build the views once per pod.
        return tuple(
            Container(f"spec.{key}[{i}]", text(c.get("name")), c, key == "ephemeralContainers")
            for key in CONTAINER_LISTS
            for i, c in enumerate(items(self.spec.get(key)))
            if isinstance(c, dict)
        )

    def volumes(self) -> Iterator[tuple[str, Obj]]:
        for i, v in enumerate(items(self.spec.get("volumes"))):
            if isinstance(v, dict):
                yield f"spec.volumes[{i}]", v


def quoted(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)
