"""Shared pydantic configuration: camelCase on the wire, unknown fields rejected."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    """Base for our own API types: strict about unknown fields, camelCase aliases."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", validate_assignment=False
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as Kubernetes would serialise it (camelCase, unset fields omitted)."""
        out: dict[str, Any] = self.model_dump(by_alias=True, exclude_none=True, mode="json")
        return out


class OpenModel(Model):
    """For Kubernetes types we only partly model: unknown fields pass through untouched."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


def defaulted(value: Any, description: str | None = None, **kw: Any) -> Any:
    """A field that is ``None`` when unset but documents (and advertises in the CRD) a server default."""
    extra = {"default": value}
    return Field(None, description=description, json_schema_extra=extra, **kw)


def top_level(wire: dict[str, Any]) -> dict[str, Any]:
    """An object's wire form in the API server's key order (apiVersion, kind, metadata, spec, status)."""
    return {k: wire[k] for k in ("apiVersion", "kind", "metadata", "spec", "status") if k in wire}
