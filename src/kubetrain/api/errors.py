"""Validation findings: every error names a field path, says what was expected and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem (or warning) found in a manifest.

    ``path`` is a Kubernetes-style field path (``spec.trainer.numNodes``); ``source`` is ``file:line`` when the
    finding could be traced to the YAML that produced it.
    """

    path: str
    message: str
    fix: str | None = None
    severity: Severity = "error"
    source: str | None = None
    obj: str | None = None  # "TrainJob default/my-job", when known

    def render(self) -> str:
        where = f"{self.source}: " if self.source else ""
        who = f"{self.obj}: " if self.obj else ""
        text = f"{where}{who}{self.path}: {self.message}" if self.path else f"{where}{who}{self.message}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return text

    def __str__(self) -> str:
        return self.render()


@dataclass
class Result:
    """Warnings and errors, aggregated across validators (the upstream ``(warnings, field.ErrorList)`` pair)."""

    warnings: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def error(self, path: str, message: str, fix: str | None = None) -> None:
        self.errors.append(Finding(path, message, fix, "error"))

    def warn(self, path: str, message: str, fix: str | None = None) -> None:
        self.warnings.append(Finding(path, message, fix, "warning"))

    def extend(self, other: Result) -> Result:
        self.warnings.extend(other.warnings)
        self.errors.extend(other.errors)
        return self

    def unique(self, path: str, value: str, seen: set[str], what: str, fix: str) -> None:
        """An error when ``value`` was seen before in this list (``seen`` collects the values)."""
        if value in seen:
            self.error(path, f"duplicate {what} {value!r}", fix)
        seen.add(value)

    def add(self, findings: Iterable[Finding]) -> None:
        for f in findings:
            (self.errors if f.severity == "error" else self.warnings).append(f)


class KubetrainError(Exception):
    """Base error for user-facing failures; its message is safe to print without a traceback."""


class InvalidObjectError(KubetrainError):
    """Raised when an object fails validation; carries every finding."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__("\n".join(f.render() for f in findings))


class CompileError(KubetrainError):
    """A TrainJob and runtime that cannot be turned into objects (for a reason validation would report)."""

    def __init__(self, path: str, message: str, fix: str | None = None):
        self.finding = Finding(path, message, fix)
        super().__init__(self.finding.render())
