"""The PodSecurity policy a namespace asks for through its ``pod-security.kubernetes.io/*`` labels.

Same resolution as kube-apiserver: unset modes fall back to the defaults (``privileged:latest`` unless the
cluster's AdmissionConfiguration says otherwise); an invalid enforce level fails closed (restricted), an
invalid warn level fails open (privileged), an invalid version means latest; an unset warn level follows a
stricter enforce level (and its version, unless warn-version is set).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

from kubetrain.api.podsecurity.registry import LATEST, Level, level_rank, parse_level, parse_version

PREFIX: Final = "pod-security.kubernetes.io/"
ENFORCE: Final = PREFIX + "enforce"
ENFORCE_VERSION: Final = PREFIX + "enforce-version"
WARN: Final = PREFIX + "warn"
WARN_VERSION: Final = PREFIX + "warn-version"

T = TypeVar("T")


@dataclass(frozen=True)
class LevelVersion:
    level: Level
    minor: int | None = None  # None: latest

    def __str__(self) -> str:
        return f"{self.level}:{LATEST if self.minor is None else f'v1.{self.minor}'}"


@dataclass(frozen=True)
class NamespacePolicy:
    enforce: LevelVersion = LevelVersion("privileged")
    warn: LevelVersion = LevelVersion("privileged")
    errors: tuple[str, ...] = field(default=())


def namespace_policy(labels: Mapping[str, str] | None, default: NamespacePolicy | None = None) -> NamespacePolicy:
    base = default or NamespacePolicy()
    labels = labels or {}
    errors: list[str] = []
    enforce_level, enforce_given = _label(labels, ENFORCE, parse_level, base.enforce.level, "restricted", errors)
    enforce_minor, _ = _label(labels, ENFORCE_VERSION, parse_version, base.enforce.minor, None, errors)
    warn_level, _ = _label(labels, WARN, parse_level, base.warn.level, "privileged", errors)
    warn_minor, _ = _label(labels, WARN_VERSION, parse_version, base.warn.minor, None, errors)
    if WARN not in labels and enforce_given and level_rank(enforce_level) > level_rank(warn_level):
        warn_level = enforce_level
        if WARN_VERSION not in labels:
            warn_minor = enforce_minor
    return NamespacePolicy(
        LevelVersion(enforce_level, enforce_minor), LevelVersion(warn_level, warn_minor), tuple(errors)
    )


def _label(
    labels: Mapping[str, str], key: str, parse: Callable[[str], T], unset: T, invalid: T, errors: list[str]
) -> tuple[T, bool]:
    """The label's value parsed and whether it was valid; ``unset`` without it, ``invalid`` (and an error) when it
    does not parse."""
    if key not in labels:
        return unset, False
    try:
        return parse(labels[key]), True
    except ValueError as exc:
        errors.append(f"{key}: {exc}")
        return invalid, False
