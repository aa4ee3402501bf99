"""Plugin interfaces (one method each) and the fixed order phases run in.

Phases: ML policy -> pod-group policy -> pre-build sync -> build. Upstream iterates a Go map inside a phase, so
its order there is random; ours is the registry order below, always.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from kubetrain.api.errors import Result
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.info import Info
from kubetrain.compiler.keys import KeyGen


@runtime_checkable
class MLPolicyPlugin(Protocol):
    def enforce_ml_policy(self, info: Info) -> None: ...


@runtime_checkable
class PodGroupPolicyPlugin(Protocol):
    def enforce_pod_group_policy(self, info: Info) -> None: ...


@runtime_checkable
class PreBuildPlugin(Protocol):
    def pre_build(self, info: Info) -> None: ...


@runtime_checkable
class BuildPlugin(Protocol):
    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]: ...


@runtime_checkable
class ValidatePlugin(Protocol):
    def validate(self, info: Info, old: TrainJob | None) -> Result: ...


def owner_reference(info: Info) -> dict[str, Any]:
    from kubetrain.api.constants import API_VERSION, KIND_TRAINJOB

    return {
        "apiVersion": API_VERSION,
        "kind": KIND_TRAINJOB,
        "name": info.name,
        "uid": trainjob_uid(info.trainjob),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def trainjob_uid(trainjob: TrainJob) -> str:
    """The TrainJob's uid, or a stable one derived from its name when it has none yet (render, tests)."""
    import uuid

    if trainjob.metadata.uid:
        return trainjob.metadata.uid
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kubetrain:{trainjob.namespace}/{trainjob.name}"))


def object_meta(info: Info, name: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": info.namespace}
    meta.update(extra)
    meta["ownerReferences"] = [owner_reference(info)]
    return meta
