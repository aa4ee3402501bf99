"""The PodSecurity policy a namespace asks for through its ``pod-security.kubernetes.io/*`` labels.

Same resolution as kube-apiserver: unset modes fall back to the defaults (``privileged:latest`` unless the
cluster's AdmissionConfiguration says otherwise); an invalid enforce level fails closed (restricted), an
invalid warn level fails open (privileged), an invalid version means latest; an unset warn level follows a
stricter enforce level (and its version, unless warn-version is set).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kubetrain.api.podsecurity.registry import LATEST, Level, level_rank, parse_level, parse_version

PREFIX: Final = "pod-security.kubernetes.io/"
ENFORCE: Final = PREFIX + "enforce"
ENFORCE_VERSION: Final = PREFIX + "enforce-version"
WARN: Final = PREFIX + "warn"
WARN_VERSION: Final = PREFIX + "warn-version"


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
    enforce_level, enforce_minor = base.enforce.level, base.enforce.minor
    warn_level, warn_minor = base.warn.level, base.warn.minor
    enforce_given = False

    if ENFORCE in labels:
        try:
            enforce_level, enforce_given = parse_level(labels[ENFORCE]), True
        except ValueError as exc:
            enforce_level = "restricted"
            errors.append(f"{ENFORCE}: {exc}")
    if ENFORCE_VERSION in labels:
        try:
            enforce_minor = parse_version(labels[ENFORCE_VERSION])
        except ValueError as exc:
            enforce_minor = None
            errors.append(f"{ENFORCE_VERSION}: {exc}")
    if WARN in labels:
        try:
            warn_level = parse_level(labels[WARN])
        except ValueError as exc:
            warn_level = "privileged"
            errors.append(f"{WARN}: {exc}")
    if WARN_VERSION in labels:
        try:
            warn_minor = parse_version(labels[WARN_VERSION])
        except ValueError as exc:
            warn_minor = None
            errors.append(f"{WARN_VERSION}: {exc}")
    if WARN not in labels and enforce_given and level_rank(enforce_level) > level_rank(warn_level):
        warn_level = enforce_level
        if WARN_VERSION not in labels:
            warn_minor = enforce_minor
    return NamespacePolicy(
        LevelVersion(enforce_level, enforce_minor), LevelVersion(warn_level, warn_minor), tuple(errors)
    )
