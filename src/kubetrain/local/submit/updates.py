"""What ``apply`` may change on an existing TrainJob: upstream's mutability rules, locally.

``runtimeRef``, ``initializer``, ``trainer``, ``activeDeadlineSeconds`` and ``managedBy`` are immutable (CRD
CEL ``self == oldSelf``), except ``trainer.numNodes``, which the backend checks against the runtime (it may change
for an elastic runtime, within minNodes..maxNodes); ``runtimePatches`` may change only while the TrainJob is
suspended before or after the update (the TrainJob webhook); ``suspend``, labels and annotations may always change.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.errors import KubetrainError

IMMUTABLE = ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy")


class ImmutableFieldError(KubetrainError):
    pass


def _first_difference(old: Any, new: Any, path: str) -> tuple[str, Any, Any]:
    if isinstance(old, dict) and isinstance(new, dict):
        for k in list(old) + [k for k in new if k not in old]:
            if old.get(k) != new.get(k):
                return _first_difference(old.get(k), new.get(k), f"{path}.{k}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return path, old, new


def _short(value: Any) -> str:
    text = "unset" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def num_nodes(spec: dict[str, Any]) -> Any:
    return (spec.get("trainer") or {}).get("numNodes")


def _immutable_part(spec: dict[str, Any], field: str) -> Any:
    value = spec.get(field)
    if field == "trainer":  # a trainer that only sets numNodes is no trainer as far as immutability goes
        value = {k: v for k, v in (value or {}).items() if k != "numNodes"}
    return value


def finished_rebuild(name: str, state: str, old_spec: dict[str, Any], new_spec: dict[str, Any]) -> ImmutableFieldError:
    """The error for a change that would rebuild the pods (numNodes, runtimePatches) of a TrainJob that has
    finished. What ran is what it ended with: on a cluster the operator never re-creates a finished TrainJob's
    JobSet (upstream #3891), so a new node count would be a spec no pod ever ran."""
    if num_nodes(old_spec) != num_nodes(new_spec):
        path, a, b = "spec.trainer.numNodes", num_nodes(old_spec), num_nodes(new_spec)
    else:
        path, a, b = _first_difference(old_spec.get("runtimePatches"), new_spec.get("runtimePatches"),
                                       "spec.runtimePatches")  # fmt: skip
    return ImmutableFieldError(
        f'TrainJob "{name}" is invalid: {path}: the TrainJob has finished ({state}) and its JobSet never runs '
        f"again ({_short(a)} -> {_short(b)}). Fix: `kubetrain run --replace` runs it again as a new TrainJob, or "
        "apply it under a new metadata.name"
    )


def plan_update(old: dict[str, Any], new: dict[str, Any]) -> str:
    """``unchanged`` or ``configured`` for the wire TrainJobs ``old`` (stored) and ``new`` (applied); raises
    ``ImmutableFieldError`` naming the field when the change is not allowed."""
    name = (old.get("metadata") or {}).get("name")
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    for field in IMMUTABLE:
        if _immutable_part(old_spec, field) != _immutable_part(new_spec, field):
            path, a, b = _first_difference(
                _immutable_part(old_spec, field), _immutable_part(new_spec, field), f"spec.{field}"
            )
            raise ImmutableFieldError(
                f'TrainJob "{name}" is invalid: spec.{field}: field is immutable ({path}: {_short(a)} -> '
                f"{_short(b)}). Fix: `kubetrain delete trainjob {name}` and apply it again, or apply it under a "
                "new metadata.name"
            )
    if old_spec.get("runtimePatches") != new_spec.get("runtimePatches") and not (
        old_spec.get("suspend") or new_spec.get("suspend")
    ):
        raise ImmutableFieldError(
            f'TrainJob "{name}" is invalid: spec.runtimePatches: Forbidden: RuntimePatches can only be modified '
            "when the TrainJob is suspended before or after the update. Fix: apply it with spec.suspend: true "
            "first, change runtimePatches, then resume"
        )
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    same_meta = all(
        (old_meta.get(k) or {}) == (new_meta.get(k) or {}) for k in ("labels", "annotations")
    )
    same_spec = {k: v for k, v in old_spec.items() if k != "suspend"} == {
        k: v for k, v in new_spec.items() if k != "suspend"
    } and bool(old_spec.get("suspend")) == bool(new_spec.get("suspend"))
    return "unchanged" if same_spec and same_meta else "configured"


def merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The stored TrainJob after an allowed update: the new spec and labels/annotations, the old identity and
    status."""
    out = dict(old)
    out["spec"] = new.get("spec") or {}
    meta = dict(old.get("metadata") or {})
    for k in ("labels", "annotations"):
        if (new.get("metadata") or {}).get(k) is not None:
            meta[k] = new["metadata"][k]
        else:
            meta.pop(k, None)
    out["metadata"] = meta
    return out
