"""The contract every backend offers the CLI verbs (``apply``, ``get``, ``describe``, ``logs``, ``delete``).

Both ``kubetrain.local`` (processes on this machine) and ``kubetrain.k8s`` (a cluster) implement it
structurally; the CLI picks one (``--kubeconfig``/``--context`` or ``KUBETRAIN_BACKEND=k8s`` select the cluster).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubetrain.api import AnyRuntime, TrainJob


@dataclass
class StepView:
    """One pod of a TrainJob (``node-0-1``, ``dataset-initializer-0-0``) as ``describe`` shows it."""

    name: str
    replicated_job: str
    state: str  # Pending | Running | Succeeded | Failed | ...
    restarts: int = 0
    exit_code: int | None = None
    pid: int | None = None
    message: str | None = None


@dataclass
class Event:
    time: str
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class TrainJobDetails:
    trainjob: TrainJob
    steps: list[StepView] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    def apply(self, manifests: list[dict[str, Any]], *, namespace: str) -> list[str]:
        """Create or update TrainJobs/runtimes; returns ``kind/name`` of each object applied."""
        ...

    def list_trainjobs(self, namespace: str | None) -> list[TrainJob]:
        """``namespace=None`` means all namespaces."""
        ...

    def get_trainjob(self, name: str, namespace: str) -> TrainJob: ...

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails: ...

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        """Lines prefixed ``[step/rank]`` when several steps are shown."""
        ...

    def delete_trainjob(self, name: str, namespace: str) -> None: ...

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]: ...
