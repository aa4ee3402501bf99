"""TrainingRuntime and ClusterTrainingRuntime: the blueprints platform admins publish."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from kubetrain.api._base import Model, defaulted
from kubetrain.api.constants import API_VERSION, KIND_CLUSTER_TRAINING_RUNTIME, KIND_TRAINING_RUNTIME
from kubetrain.api.jobset import JobSetTemplateSpec
from kubetrain.api.meta import ObjectMeta

NumProc = int | Literal["auto", "cpu", "gpu"]


class ElasticPolicy(Model):
    """Torch elastic training: torchrun ``--nnodes=min:max`` with c10d rendezvous and restarts."""

    max_restarts: int | None = Field(None, ge=0, description="Restarts of the worker group before failing.")
    min_nodes: int | None = Field(None, ge=1, description="Fewest nodes training continues with.")
    max_nodes: int | None = Field(None, ge=1, description="Most nodes the job may use.")
    metrics: list[dict[str, Any]] | None = Field(
        None,
        description="autoscaling/v2 MetricSpecs: a HorizontalPodAutoscaler per TrainJob scales numNodes on them "
        "between minNodes and maxNodes (locally the supervisor does).",
    )


class EnvInjectionTarget(Model):
    job_name: str = Field(min_length=1, max_length=253)
    container_names: list[str] = Field(min_length=1, max_length=8)


class EnvInjection(Model):
    targets: list[EnvInjectionTarget] | None = Field(None, max_length=16)


class TorchPolicy(Model):
    num_proc_per_node: NumProc | None = defaulted(
        "auto", description="Processes per node: auto, cpu, gpu or a positive integer."
    )
    elastic_policy: ElasticPolicy | None = None
    env_injection: EnvInjection | None = None


class MPIPolicy(Model):
    num_proc_per_node: int | None = defaulted(1, ge=1, description="Slots per node in the hostfile.")
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH", ""] | None = defaulted("OpenMPI")
    ssh_auth_mount_path: str | None = defaulted("/root/.ssh", max_length=4096)
    run_launcher_as_node: bool | None = defaulted(False)


class FluxPolicy(Model):
    num_proc_per_node: int | None = defaulted(1, ge=1)


class EmptyPolicy(Model):
    pass


class MLPolicy(Model):
    # No schema default (upstream has none either): the API server would fill in 1 and then refuse every runtime
    # with an elasticPolicy by the rule that the two exclude each other. The compiler uses 1 when it is unset.
    num_nodes: int | None = Field(None, ge=1, description="Number of training nodes. Defaults to 1.")
    torch: TorchPolicy | None = None
    mpi: MPIPolicy | None = None
    jax: EmptyPolicy | None = None
    xgboost: EmptyPolicy | None = None
    # kubetrain's own: Kubeflow Trainer has no TensorFlow policy (docs/compatibility.md).
    tensorflow: EmptyPolicy | None = None
    flux: FluxPolicy | None = None

    def frameworks(self) -> list[str]:
        return [n for n in ML_POLICIES if getattr(self, n) is not None]


# Every framework policy of MLPolicy; at most one may be set.
ML_POLICIES: Final = ("torch", "mpi", "jax", "xgboost", "tensorflow", "flux")


class CoschedulingPolicy(Model):
    schedule_timeout_seconds: int | None = defaulted(60, ge=0)


class NetworkTopology(Model):
    mode: Literal["hard", "soft"] | None = defaulted("hard")
    highest_tier_allowed: int | None = defaulted(1)


class VolcanoPolicy(Model):
    queue: str | None = None
    priority_class_name: str | None = None
    min_member: int | None = Field(None, ge=1)
    network_topology: NetworkTopology | None = None


class PodGroupPolicy(Model):
    coscheduling: CoschedulingPolicy | None = None
    volcano: VolcanoPolicy | None = None


class TrainingRuntimeSpec(Model):
    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None
    template: JobSetTemplateSpec = Field(default_factory=JobSetTemplateSpec)


class _RuntimeBase(Model):
    api_version: str = API_VERSION
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec = Field(default_factory=TrainingRuntimeSpec)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    def to_wire(self) -> dict[str, Any]:
        out = super().to_wire()
        return {k: out[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in out}

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels or {}


class TrainingRuntime(_RuntimeBase):
    """A namespaced runtime: usable only by TrainJobs in its own namespace."""

    kind: Literal["TrainingRuntime"] = KIND_TRAINING_RUNTIME


class ClusterTrainingRuntime(_RuntimeBase):
    """A cluster-scoped runtime: usable by TrainJobs in every namespace."""

    kind: Literal["ClusterTrainingRuntime"] = KIND_CLUSTER_TRAINING_RUNTIME


AnyRuntime = TrainingRuntime | ClusterTrainingRuntime
