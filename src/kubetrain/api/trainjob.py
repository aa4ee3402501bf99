"""TrainJob: what an ML engineer submits, referencing a runtime."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kubetrain.api._base import Model, OpenModel, defaulted, top_level
from kubetrain.api.constants import (
    API_VERSION,
    GROUP,
    KIND_CLUSTER_TRAINING_RUNTIME,
    KIND_TRAINJOB,
    MANAGED_BY_DEFAULT,
)
from kubetrain.api.meta import (
    Condition,
    EnvVar,
    JobLike,
    LocalObjectReference,
    ObjectMeta,
    ResourceRequirements,
    TemplateMeta,
)
from kubetrain.api.runtime import NumProc


class RuntimeRef(Model):
    name: str = Field(min_length=1, max_length=253)
    api_group: str | None = defaulted(GROUP, max_length=253)
    kind: str | None = defaulted(KIND_CLUSTER_TRAINING_RUNTIME, max_length=253)

    @property
    def effective_kind(self) -> str:
        return self.kind or KIND_CLUSTER_TRAINING_RUNTIME

    @property
    def effective_group(self) -> str:
        return self.api_group or GROUP


class InitializerSpec(Model):
    storage_uri: str | None = Field(None, max_length=2048)
    env: list[EnvVar] | None = Field(None, max_length=128)
    secret_ref: LocalObjectReference | None = None


class Initializer(Model):
    dataset: InitializerSpec | None = None
    model: InitializerSpec | None = None


class Trainer(Model):
    image: str | None = Field(None, max_length=500)
    command: list[str] | None = Field(None, max_length=128)
    args: list[str] | None = Field(None, max_length=128)
    env: list[EnvVar] | None = Field(None, max_length=128)
    num_nodes: int | None = Field(None, ge=0)
    resources_per_node: ResourceRequirements | None = None
    num_proc_per_node: NumProc | None = None


class TargetJob(Model):
    name: str = Field(min_length=1)


class PodTemplateOverride(Model):
    """v2.1 shape: a strategic merge onto the pod templates of the named replicated jobs."""

    target_jobs: list[TargetJob] = Field(min_length=1)
    metadata: TemplateMeta | None = None
    spec: dict[str, Any] | None = None


class PodTemplatePatch(Model):
    metadata: TemplateMeta | None = None
    spec: dict[str, Any] | None = None


class JobSpecPatch(Model):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(Model):
    metadata: TemplateMeta | None = None
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(Model):
    name: str = Field(min_length=1, max_length=253)
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(Model):
    replicated_jobs: list[ReplicatedJobPatch] | None = Field(None, max_length=100)


class JobSetTemplatePatch(Model):
    metadata: TemplateMeta | None = None
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(Model):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(Model):
    """v2.2+ shape: a patch owned by one manager (e.g. ``kueue.x-k8s.io/manager``)."""

    manager: str = Field(min_length=1, max_length=253)
    time: str | None = None
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None


class TrainJobSpec(Model):
    runtime_ref: RuntimeRef
    initializer: Initializer | None = None
    trainer: Trainer | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    pod_template_overrides: list[PodTemplateOverride] | None = None
    runtime_patches: list[RuntimePatch] | None = Field(None, max_length=16)
    suspend: bool | None = defaulted(False)
    active_deadline_seconds: int | None = Field(None, ge=1)
    managed_by: str | None = defaulted(MANAGED_BY_DEFAULT, max_length=253)


class JobStatus(Model):
    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class TrainerMetric(OpenModel):
    name: str = Field(min_length=1, max_length=64, description='A label for the metric, e.g. "loss".')
    value: str = Field(min_length=1, max_length=64, description="The metric's value, as a string.")


class TrainerStatus(OpenModel):
    """Progress the training process reports (upstream v2.3 ``TrainJobStatus`` feature)."""

    progress_percentage: int | None = Field(
        None, ge=0, le=100, description="How complete the training is, in percent."
    )
    estimated_remaining_seconds: int | None = Field(
        None, ge=0, description="Estimated seconds until the training completes."
    )
    metrics: list[TrainerMetric] | None = Field(None, max_length=256, description="Current model metrics.")
    last_updated_time: str | None = Field(None, description="When this status was observed.")


class ScalingStatus(Model):
    """Bookkeeping of an elastic TrainJob whose JobSet had to be re-created to change its node count (JobSet
    does not let a running JobSet's pod counts change unless its ElasticJobSet feature gate is on)."""

    recreations: int = Field(0, ge=0, description="JobSets re-created to change numNodes.")
    node_failures: int = Field(
        0, ge=0, description="Trainer pod failures in the JobSets before the current one (restart budget used)."
    )
    job_set_restarts: int = Field(
        0, ge=0, description="JobSet failure-policy restarts before the current one (restart budget used)."
    )


class PodFailure(OpenModel):
    """A failed run of one of the TrainJob's pods, recorded by the operator as it happened (beyond upstream): it
    outlives the pod, which the Job controller may delete."""

    step: str = Field(description="The step (pod) that failed: <replicated job>-<job index>-<completion index>.")
    pod: str = Field(description="The pod that failed last in this step.")
    container: str = Field(description="The container that failed (empty: the pod failed as a whole).")
    exit_code: int | None = Field(None, description="The container's exit code.")
    signal: str | None = Field(None, description="The signal that ended it (SIGKILL, SIGSEGV, ...).")
    reason: str | None = Field(
        None, description="The kubelet's reason (Error, OOMKilled, ...) or the pod's (Evicted, DeadlineExceeded, ...)."
    )
    message: str | None = Field(None, max_length=256, description="The termination message, shortened.")
    restarts: int = Field(0, ge=0, description="The container's restart count when last seen.")
    failures: int = Field(1, ge=1, description="Failed runs recorded for this step and container.")
    last_failure_time: str | None = Field(None, description="When the last recorded failure happened.")
    log_tail: str | None = Field(
        None,
        max_length=4096,
        description="The last log lines read (at most 10 lines, 2 KiB); dropped once the TrainJob finished "
        "(the Failed condition's message keeps those of the failure that caused it).",
    )


class TrainJobStatus(OpenModel):
    conditions: list[Condition] | None = Field(None, max_length=8)
    jobs_status: list[JobStatus] | None = Field(None, max_length=100)
    trainer_status: TrainerStatus | None = None
    num_nodes: int | None = Field(
        None, ge=0, description="Trainer nodes of the running JobSet (the scale subresource's status replicas)."
    )
    selector: str | None = Field(
        None, description="Label selector of the trainer pods (the scale subresource's selector, used by an HPA)."
    )
    scaling: ScalingStatus | None = None
    pod_failures: list[PodFailure] | None = Field(
        None,
        max_length=8,
        description="Failed runs of the TrainJob's pods, one item per step and container, the first ones to fail "
        "(kubetrain, beyond upstream).",
    )


class TrainJob(JobLike, Model):
    api_version: str = API_VERSION
    kind: Literal["TrainJob"] = KIND_TRAINJOB
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus | None = None

    def to_wire(self) -> dict[str, Any]:
        return top_level(super().to_wire())

    @property
    def state(self) -> str:
        """The kubectl ``STATE`` column: the type of the last condition, or empty."""
        conds = (self.status.conditions if self.status else None) or []
        return conds[-1].type if conds else ""


Manifest = Any  # TrainJob | TrainingRuntime | ClusterTrainingRuntime; kept loose to avoid import cycles
State = Literal["Suspended", "Complete", "Failed", ""]
