"""Admission warnings short enough to survive the trip to the user.

Kubernetes asks for warnings of at most 120 characters ("be brief"), and clients show them on one line
(``Warning: ...``). Validation findings are written to be complete (the upstream deprecation notice alone is 200
characters), so the webhook sends each as a brief line with its key words first, and keeps the complete text
for an Event on the object (``kubectl describe`` shows it), when the webhook can record one.

Pure: no I/O. ``brief(finding)`` is the line; ``AdmissionWarning.detail`` the complete text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kubetrain.api.constants import LABEL_FRAMEWORK
from kubetrain.api.errors import Finding

MAX_LENGTH: Final = 120
"""What Kubernetes recommends for a warning (and what kubectl users see on one line)."""
SEE_EVENTS: Final = "; see Events"
EVENT_REASON: Final = "AdmissionWarning"
ELLIPSIS: Final = "…"

_NAME = r'"(?P<name>[^"]*)"'
_KIND = r"(?P<kind>ClusterTrainingRuntime|TrainingRuntime)"

# Findings whose wording leads with the subject are rewritten to lead with what is wrong. Each entry maps a
# pattern on the complete message to the brief form (``{name}`` is shortened to fit).
_REWRITES: Final[list[tuple[re.Pattern[str], str]]] = [
    (
        re.compile(rf"^Referenced {_KIND} {_NAME} is deprecated"),
        'deprecated runtime: {kind} "{name}" will be removed in a future release',
    ),
    (
        re.compile(rf"^{_KIND} {_NAME} is deprecated"),
        'deprecated: {kind} "{name}" will be removed in a future release',
    ),
    (
        re.compile(rf"^{_KIND} {_NAME} has no {re.escape(LABEL_FRAMEWORK)} label"),
        'no framework label on {kind} "{name}": the Kubeflow SDK will not list it',
    ),
]


@dataclass(frozen=True)
class AdmissionWarning:
    text: str
    """At most ``MAX_LENGTH`` characters, key words first: what the API server passes to the client."""
    detail: str
    """The complete finding (path, message, fix), for an Event."""

    @property
    def shortened(self) -> bool:
        return self.text != self.detail


def _fit(template: str, name: str, kind: str, limit: int) -> str:
    text = template.format(kind=kind, name=name)
    if len(text) <= limit:
        return text
    room = len(name) - (len(text) - limit) - len(ELLIPSIS)
    return template.format(kind=kind, name=name[: max(room, 1)] + ELLIPSIS) if room > 0 else _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    """The first clause of ``text`` if that fits, else as many whole words as fit, ending in an ellipsis."""
    if len(text) <= limit:
        return text
    for sep in (". ", "; "):
        head = text.split(sep, 1)[0]
        if 30 <= len(head) <= limit:
            return head
    words = text[: limit - len(ELLIPSIS) + 1].rsplit(" ", 1)[0]
    return words.rstrip(" ,;:.") + ELLIPSIS


def brief(finding: Finding, limit: int = MAX_LENGTH) -> str:
    """The warning line for ``finding``: the bare message when it fits (upstream's shape), else key words
    first and cut to ``limit`` characters."""
    message = finding.message
    if len(message) <= limit:
        return message
    for pattern, template in _REWRITES:
        m = pattern.match(message)
        if m:
            return _fit(template, m.group("name"), m.group("kind"), limit)
    return _cut(message, limit)


def detail(finding: Finding) -> str:
    text = f"{finding.path}: {finding.message}" if finding.path else finding.message
    return f"{text} (fix: {finding.fix})" if finding.fix else text


def admission_warnings(findings: Iterable[Finding], *, events: bool) -> list[AdmissionWarning]:
    """One brief warning per distinct message. With ``events`` (the webhook records the complete text as an
    Event), a shortened line says so."""
    out: list[AdmissionWarning] = []
    seen: set[str] = set()
    for f in findings:
        if f.message in seen:
            continue
        seen.add(f.message)
        text = brief(f)
        full = detail(f)
        if events and text != f.message:
            text = brief(f, MAX_LENGTH - len(SEE_EVENTS)) + SEE_EVENTS
        out.append(AdmissionWarning(text, full))
    return out

