"""The JobSet template a runtime carries (``jobset.x-k8s.io/v1alpha2`` JobSetSpec).

Pod specs stay Kubernetes-shaped dictionaries: kubetrain validates the parts it reads (containers, volumes) and
passes the rest through to JobSet unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kubetrain.api._base import Model, OpenModel, defaulted
from kubetrain.api.meta import TemplateMeta


class PodTemplateSpec(Model):
    metadata: TemplateMeta | None = None
    spec: dict[str, Any] = Field(default_factory=dict, description="A Kubernetes PodSpec.")


class JobSpec(OpenModel):
    """A ``batch/v1`` JobSpec. Fields beyond the ones named here pass through to the Job."""

    parallelism: int | None = Field(None, ge=0)
    completions: int | None = Field(None, ge=0)
    backoff_limit: int | None = Field(None, ge=0)
    completion_mode: Literal["Indexed", "NonIndexed"] | None = None
    active_deadline_seconds: int | None = Field(None, ge=1)
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class JobTemplateSpec(Model):
    metadata: TemplateMeta | None = None
    spec: JobSpec = Field(default_factory=JobSpec)


class DependsOn(Model):
    name: str = Field(min_length=1)
    status: Literal["Ready", "Complete"]


class ReplicatedJob(Model):
    name: str = Field(min_length=1, max_length=63)
    group_name: str | None = None
    replicas: int | None = defaulted(1, ge=0)
    depends_on: list[DependsOn] | None = None
    template: JobTemplateSpec = Field(default_factory=JobTemplateSpec)


class Network(Model):
    enable_dns_hostnames: bool | None = Field(None, alias="enableDNSHostnames")
    subdomain: str | None = None
    publish_not_ready_addresses: bool | None = None


class SuccessPolicy(Model):
    operator: Literal["All", "Any"]
    target_replicated_jobs: list[str] | None = None


class FailurePolicyRule(OpenModel):
    name: str
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    on_job_failure_reasons: list[str] | None = None
    on_job_failure_message_patterns: list[str] | None = None
    target_replicated_jobs: list[str] | None = None


class FailurePolicy(Model):
    max_restarts: int | None = Field(None, ge=0)
    restart_strategy: Literal["Recreate", "BlockingRecreate"] | None = None
    rules: list[FailurePolicyRule] | None = None


class StartupPolicy(Model):
    startup_policy_order: Literal["AnyOrder", "InOrder"]


class VolumeRetentionPolicy(Model):
    when_deleted: Literal["Delete", "Retain"] | None = defaulted(
        "Delete", description="What happens to the claims when the JobSet is deleted."
    )


class VolumeClaimPolicy(OpenModel):
    templates: list[dict[str, Any]] | None = Field(
        None, description="PersistentVolumeClaims created once per JobSet and mounted by its pods."
    )
    retention_policy: VolumeRetentionPolicy | None = None


class Coordinator(Model):
    replicated_job: str
    job_index: int | None = None
    pod_index: int | None = None


class JobSetSpec(Model):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    suspend: bool | None = None
    coordinator: Coordinator | None = None
    managed_by: str | None = None
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    volume_claim_policies: list[VolumeClaimPolicy] | None = None


class JobSetTemplateSpec(Model):
    metadata: TemplateMeta | None = None
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
