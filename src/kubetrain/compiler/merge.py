"""Strategic merge patch for the Kubernetes shapes a runtime carries (JobSetSpec, PodSpec).

Lists with a merge key are merged element by element (``containers`` by ``name``, ``volumeMounts`` by
``mountPath``, ...); other lists are replaced; ``null`` deletes a key; ``$patch: delete`` on a list element
removes the matching element. Order: existing elements keep their position, new ones are appended.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS: dict[str, str] = {
    "replicatedJobs": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "claims": "name",
    "hostAliases": "ip",
    "targets": "jobName",
}


def strategic_merge(base: Any, patch: Any, field: str | None = None) -> Any:
    """Return ``base`` with ``patch`` applied; neither argument is modified."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if key == "$patch":
                continue
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = strategic_merge(out[key], value, key)
            else:
                out[key] = copy.deepcopy(_strip_directives(value))
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        return _merge_list(base, patch, MERGE_KEYS[field])
    return copy.deepcopy(_strip_directives(patch))


def _merge_list(base: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(x) for x in base]
    index = {x.get(key): i for i, x in enumerate(out) if isinstance(x, dict)}
    removed: set[int] = set()
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        at = index.get(item[key])
        if item.get("$patch") == "delete":
            if at is not None:
                removed.add(at)
            continue
        if at is None:
            index[item[key]] = len(out)
            out.append(copy.deepcopy(_strip_directives(item)))
        else:
            out[at] = strategic_merge(out[at], item)
    return [x for i, x in enumerate(out) if i not in removed]


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if k != "$patch"}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def upsert(items: list[dict[str, Any]], new: dict[str, Any], key: str = "name") -> None:
    """Replace the element with the same key in place, or append: how upstream upserts env and volumes."""
    for i, item in enumerate(items):
        if item.get(key) == new.get(key):
            items[i] = new
            return
    items.append(new)
