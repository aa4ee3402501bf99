"""Kubernetes object metadata and conditions, kept to the fields kubetrain reads or writes."""

from __future__ import annotations

from typing import Any

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
