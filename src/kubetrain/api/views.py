"""The contract every backend offers the CLI verbs (``apply``, ``get``, ``describe``, ``logs``, ``delete``, ``wait``).

Both ``kubetrain.local`` (processes on this machine) and ``kubetrain.k8s`` (a cluster) implement it
structurally; the CLI picks one (``--kubeconfig``/``--context`` or ``KUBETRAIN_BACKEND=k8s`` select the cluster).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:  # annotations only: the local supervisor and a cached `run` use these views without pydantic
    from kubetrain.api import AnyRuntime, TrainJob
    from kubetrain.api.optimization import OptimizationJob


def camel_fields(obj: Any, *, omit: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass's fields as a JSON object with the API's camelCase keys, in declaration order."""
    return {_camel(f.name): getattr(obj, f.name) for f in fields(obj) if f.name not in omit}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


@dataclass
class StepView:
    """One pod of a TrainJob (``node-0-1``, ``dataset-initializer-0-0``) as ``describe`` shows it."""

    name: str
    replicated_job: str
    state: str  # Pending | Running | Succeeded | Failed | Terminating
    restarts: int = 0
    exit_code: int | None = None
    pid: int | None = None
    message: str | None = None
    reason: str | None = None
    """Why the step is not running, in the kubelet's or scheduler's words (``ImagePullBackOff``,
    ``Unschedulable``, ``Error``); ``message`` then carries their explanation."""

    def to_json(self) -> dict[str, Any]:
        """The step as ``describe -o json`` and the UI give it (camelCase, as the API's own fields)."""
        return camel_fields(self, omit=("pid",))


@dataclass
class Event:
    time: str
    type: str  # Normal | Warning
    reason: str
    message: str
    object: str = ""
    """``Kind/name`` the event is about (``Pod/job-node-0-0-x``); empty where the backend has one object."""


@dataclass(frozen=True)
class FailureView:
    """A failed run of a step that the cluster's operator recorded on the TrainJob (``status.podFailures``): it
    outlives the pod."""

    step: str
    container: str
    pod: str
    exit_code: int | None = None
    signal: str | None = None
    reason: str = ""
    message: str = ""
    restarts: int = 0
    failures: int = 1
    time: str = ""


@dataclass
class TrainJobDetails:
    trainjob: TrainJob
    steps: list[StepView] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    state: StateView | None = None
    failure_logs: dict[str, list[str]] = field(default_factory=dict)
    """Last log lines of each failed step (``step -> lines``), for ``describe``."""
    progress_source: str | None = None
    """Where ``status.trainerStatus`` came from: ``report`` (the job), ``logs`` (derived locally), or None."""
    failures: list[FailureView] = field(default_factory=list)
    """Failed runs the operator recorded (cluster only), also those of pods that are gone."""


@dataclass(frozen=True)
class StateView:
    """A TrainJob's state as upstream's SDK reports it, plus why.

    ``state`` is one of ``Created`` (no pod exists yet), ``Pending`` (pods exist, not every trainer pod
    runs), ``Suspended``, ``Running`` (every trainer pod Running or Succeeded), ``Complete`` or ``Failed``;
    ``reason``/``message`` say why (the condition's, or the first step that holds the job back).
    """

    state: str
    reason: str = ""
    message: str = ""
    cluster: str = ""
    """The worker cluster that runs it when MultiKueue dispatched it there (``status.clusterName`` of its Kueue
    Workload on the manager), else empty."""

    @property
    def finished(self) -> bool:
        return self.state in ("Complete", "Failed")

    def explain(self) -> str:
        """``Pending (ImagePullBackOff: node-0-0: Back-off pulling image "x")``."""
        why = ": ".join(p for p in (self.reason, self.message) if p)
        return f"{self.state} ({why})" if why else self.state


@dataclass(frozen=True)
class LogOptions:
    """What ``kubetrain logs`` asks for; the flags mean what kubectl's do, per step (pod)."""

    step: str | None = None
    """A pod (``node-0-1``), a job (``node-0``) or a replicated job (``node``); ``None``: every step."""
    container: str | None = None
    """One container of each step (init containers included); ``None``: the default one (see
    ``kubetrain.api.logtext.default_container``)."""
    all_containers: bool = False
    """Every container of each step, each as its own stream keyed ``step/container``."""
    follow: bool = False
    """Wait for pods to exist and stream until the TrainJob finishes, across restarts."""
    tail: int | None = None
    """Only the last ``tail`` lines of each step (``None``: all)."""
    since_seconds: float | None = None
    since_time: str | None = None
    """RFC 3339; only lines written at or after it."""
    timestamps: bool = False
    """Prefix each line with the time it was written (RFC 3339, nanoseconds, UTC)."""
    progress: bool = False
    """Also yield :class:`StepChange` and :class:`StateChange` items (``kubetrain run`` shows them)."""


class LogChunk(NamedTuple):
    """Text one step wrote, as it arrived: several lines, and possibly an unterminated last line."""

    step: str
    text: str


@dataclass(frozen=True)
class StepChange:
    """A step (pod) changed state; ``reason``/``message`` say why it waits or ended."""

    step: str
    state: str
    reason: str = ""
    message: str = ""
    exit_code: int | None = None


@dataclass(frozen=True)
class StateChange:
    """The TrainJob's :class:`StateView` changed (or its reason did)."""

    state: StateView


@dataclass(frozen=True)
class ProgressChange:
    """The TrainJob's ``status.trainerStatus`` changed (``kubetrain run`` draws it as a progress bar)."""

    trainer_status: dict[str, Any]
    source: str | None = None
    """``logs`` when the local backend derived it from log lines; None when the job reported it."""


@dataclass(frozen=True)
class ProgressPoint:
    """One recorded ``trainerStatus`` of a TrainJob (``kubetrain metrics``)."""

    time: float
    """When it was recorded (seconds since the epoch)."""
    trainer_status: dict[str, Any]
    source: str | None = None
    """``report`` (the job), ``logs`` (derived from its log lines), or None (a cluster: the API's latest)."""


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not a log line or a state: a step's log cannot be read."""

    text: str


LogItem = LogChunk | StepChange | StateChange | ProgressChange | Notice | None
"""What ``log_stream`` yields; ``None`` is a heartbeat at least every half second while nothing happens, so a
caller can enforce its own deadline and react to Ctrl-C."""


@dataclass(frozen=True)
class WatchItem:
    """One change seen by ``watch_trainjobs``: ``type`` is ``ADDED``, ``MODIFIED`` or ``DELETED``."""

    type: str
    trainjob: TrainJob
    state: StateView


class Backend(Protocol):
    def apply(self, manifests: list[dict[str, Any]], *, namespace: str) -> list[str]:
        """Create or update TrainJobs/runtimes; returns ``kind/name`` of each object applied."""
        ...

    def list_trainjobs(self, namespace: str | None, selector: str | None = None) -> list[TrainJob]:
        """``namespace=None`` means all namespaces; ``selector`` is a label selector (``-l``)."""
        ...

    def get_trainjob(self, name: str, namespace: str) -> TrainJob:
        """Raises a ``KubetrainError`` naming at most a few close matches when it does not exist."""
        ...

    def states(self, jobs: list[TrainJob]) -> list[StateView]:
        """The :class:`StateView` of each job, in order (one look at the pods for all of them)."""
        ...

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails: ...

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        """Lines prefixed ``[step/rank]`` when several steps are shown."""
        ...

    def log_stream(self, name: str, namespace: str, options: LogOptions) -> Iterator[LogItem]:
        """Chunks of each step's log as written (constant memory, whatever the log's size), with heartbeats."""
        ...

    def watch_trainjobs(
        self, namespace: str | None, *, names: list[str] | None = None, selector: str | None = None
    ) -> Iterator[WatchItem | None]:
        """The current TrainJobs as ``ADDED``, then at once one ``None`` (the initial list is complete), then every
        change, forever, with ``None`` heartbeats in between."""
        ...

    def progress_history(self, name: str, namespace: str) -> list[ProgressPoint]:
        """Every ``trainerStatus`` the TrainJob had, oldest first, as far as this backend keeps them (a
        cluster keeps only the latest)."""
        ...

    def compiled_objects(self, name: str, namespace: str) -> list[dict[str, Any]]:
        """What the TrainJob was compiled into, as the backend holds it: at least its JobSet and its runtime
        snapshot ConfigMap once they exist (locally every object made for it). A Secret's values are never
        returned (see :func:`secret_values_hidden`)."""
        ...

    def delete_trainjob(self, name: str, namespace: str) -> None: ...

    def scale_trainjob(self, name: str, namespace: str, replicas: int) -> str:
        """Set ``spec.trainer.numNodes`` of a TrainJob with an elastic runtime (the scale subresource on a
        cluster); raises a ``KubetrainError`` saying why when the runtime is not elastic or the count is outside
        minNodes..maxNodes."""
        ...

    def delete_runtime(self, kind: str, name: str, namespace: str | None) -> None: ...

    def list_optimizationjobs(self, namespace: str | None) -> list[OptimizationJob]:
        """``namespace=None`` means all namespaces. Their trials are TrainJobs (``list_trainjobs`` with the
        ``kubetrain.dev/optimizationjob`` label)."""
        ...

    def get_optimizationjob(self, name: str, namespace: str) -> OptimizationJob:
        """Raises a ``KubetrainError`` naming close matches when it does not exist."""
        ...

    def delete_optimizationjob(self, name: str, namespace: str) -> None:
        """Deletes it and its trials (on a cluster the garbage collector deletes the trials)."""
        ...

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]: ...

    def list_core(
        self, kind: str, namespace: str | None, selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """ConfigMaps, Secrets, PersistentVolumeClaims, and (read only) Pods and Events (``kind``) as the API returns
        them; ``selector`` is a label selector (``-l``), ``field_selector`` kubectl's ``--field-selector``."""
        ...

    def get_core(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        """Raises a ``KubetrainError`` naming close matches when it does not exist."""
        ...

    def delete_core(self, kind: str, name: str, namespace: str) -> str:
        """Returns what to print (``configmap "x" deleted``, and why a claim in use stays for now)."""
        ...

    def core_users(self, kind: str, name: str, namespace: str) -> list[str]:
        """TrainJobs whose pods use the object, where the backend knows it cheaply."""
        ...


def secret_values_hidden(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with a Secret's ``data``/``stringData`` values replaced by their sizes (``<1675 bytes>``), as
    ``kubectl describe secret`` shows them; any other object unchanged. Pure: the input is not modified."""
    if obj.get("kind") != "Secret":
        return obj
    out = dict(obj)
    for key in ("data", "stringData"):
        values = obj.get(key)
        if isinstance(values, dict):
            out[key] = {k: f"<{_size(v, encoded=key == 'data')} bytes, hidden>" for k, v in values.items()}
    return out


def _size(value: object, *, encoded: bool) -> int:
    text = str(value)
    if encoded:
        try:
            return len(base64.b64decode(text, validate=True))
        except (ValueError, TypeError):
            pass  # not base64 (a hand-written manifest): its own length
    return len(text.encode())
