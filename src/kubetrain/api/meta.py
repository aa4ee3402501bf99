"""Kubernetes object metadata and conditions, kept to the fields kubetrain reads or writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from kubetrain.api._base import Model, OpenModel


class OwnerReference(Model):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(OpenModel):
    """Standard object metadata. Fields kubetrain does not use pass through unchanged."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class TemplateMeta(Model):
    """Metadata allowed inside templates and patches (Kubernetes' embedded ObjectMeta).

    kubetrain merges labels and annotations; name, namespace and finalizers are accepted, as upstream's CRDs
    accept them, and passed through unchanged.
    """

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    name: str | None = None
    namespace: str | None = None
    finalizers: list[str] | None = None


class Condition(Model):
    """A ``metav1.Condition``."""

    type: str
    status: str = Field(description="True, False or Unknown")
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


class EnvVar(OpenModel):
    """A container environment variable (``value`` or ``valueFrom``)."""

    name: str = Field(min_length=1)
    value: str | None = None
    value_from: dict[str, Any] | None = None


class LocalObjectReference(Model):
    name: str


class ResourceRequirements(Model):
    """Container resources; quantities are kept as written (``"2"``, ``500m``, ``4Gi``)."""

    limits: dict[str, int | float | str] | None = None
    requests: dict[str, int | float | str] | None = None
    claims: list[dict[str, Any]] | None = None


class JobLike:
    """What a TrainJob and an OptimizationJob have in common (a mixin: the fields are the models')."""

    if TYPE_CHECKING:  # declared for the type checker only: pydantic would take them as fields (and reorder them)
        metadata: ObjectMeta
        status: Any

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    def condition(self, type_: str) -> Condition | None:
        for c in (self.status.conditions if self.status else None) or []:
            if c.type == type_:
                return c  # type: ignore[no-any-return]
        return None

    @property
    def finished(self) -> bool:
        return any(
            (c := self.condition(t)) is not None and c.status == "True" for t in ("Complete", "Failed")
        )
