"""The TrainJob defaulter: stamps ``spec.runtimePatches[].time``. Everything else is defaulted by the CRD.

Rules (upstream Kubeflow Trainer's): on CREATE every patch without a time gets now; on UPDATE a patch whose
manager existed before keeps the old time if its content (time ignored) is unchanged and gets now if it
changed; a new manager's patch gets now unless it carries a time. The result lets a reader tell which
manager touched the job last.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubetrain.k8s.webhook.admission import object_at, pointer


def format_time(t: datetime) -> str:
    """``metav1.Time`` wire format: RFC 3339 in UTC with whole seconds."""
    return t.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def _content(patch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in patch.items() if k != "time"}


def runtime_patch_times(
    obj: dict[str, Any], old: dict[str, Any] | None, operation: str, now: datetime
) -> list[dict[str, Any]]:
    """JSON patch operations that set the times; empty when nothing changes."""
    patches = object_at(obj, "spec").get("runtimePatches")
    if not isinstance(patches, list):
        return []
    old_by_manager: dict[str, dict[str, Any]] = {}
    if operation == "UPDATE" and old:
        old_patches = object_at(old, "spec").get("runtimePatches")
        for p in old_patches if isinstance(old_patches, list) else []:
            if isinstance(p, dict) and isinstance(p.get("manager"), str):
                old_by_manager[p["manager"]] = p
    stamp = format_time(now)
    ops: list[dict[str, Any]] = []
    for i, patch in enumerate(patches):
        if not isinstance(patch, dict):
            continue  # schema validation rejects it; nothing sensible to stamp
        current = patch.get("time")
        manager = patch.get("manager", "")
        before = old_by_manager.get(manager) if operation == "UPDATE" and isinstance(manager, str) else None
        if before is not None:
            # Unchanged content keeps the old time exactly (even none), so the validator sees no change.
            want = before.get("time") if _content(before) == _content(patch) else stamp
        else:
            want = current or stamp
        if want is None:
            if "time" in patch:
                ops.append({"op": "remove", "path": pointer("spec", "runtimePatches", i, "time")})
        elif want != current:
            ops.append(
                {
                    "op": "replace" if "time" in patch else "add",
                    "path": pointer("spec", "runtimePatches", i, "time"),
                    "value": want,
                }
            )
    return ops
