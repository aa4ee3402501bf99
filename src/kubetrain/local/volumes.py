"""Pod volumes as host directories, bound at their ``mountPath``s inside the pod sandbox.

``emptyDir`` is per pod; PVCs and JobSet ``volumeClaimPolicies`` are per-TrainJob directories shared by its pods
(and kept after the TrainJob is deleted, like a retained PVC); ``configMap``/``secret`` are materialised from the
compiled objects with their file modes; ``hostPath`` is bound as is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.env import ObjectIndex
from kubetrain.local.namespaces import Bind


class VolumeError(KubetrainError):
    pass


def _safe_name(name: str) -> str:
    return name.replace("/", "_")


def _project(kind: str, src: dict[str, Any], index: ObjectIndex, dest: Path, where: str) -> None:
    name = src.get("secretName") if kind == "Secret" else src.get("name")
    data = index.data(kind, name or "")
    if data is None:
        if src.get("optional"):
            data = {}
        else:
            raise VolumeError(
                f"{where}: {kind} {name!r} not found (compile or apply it before running the pod)"
            )
    default_mode = int(src.get("defaultMode", 0o644))
    items = src.get("items")
    entries = (
        [(it["key"], it["path"], int(it.get("mode", default_mode))) for it in items]
        if items
        else [(k, k, default_mode) for k in data]
    )
    dest.mkdir(parents=True, exist_ok=True)
    for key, rel, mode in entries:
        if key not in data:
            if src.get("optional"):
                continue
            raise VolumeError(f"{where}.items: key {key!r} not found in {kind} {name!r}")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.chmod(0o600)
        target.write_bytes(data[key])
        target.chmod(mode)


def pod_volumes(
    spec: dict[str, Any],
    *,
    pod_dir: Path,
    claims_dir: Path,
    claim_templates: set[str],
    index: ObjectIndex,
    where: str,
) -> dict[str, Path]:
    """Host directory (or file) for each volume of the pod, created and filled now."""
    out: dict[str, Path] = {}
    for i, vol in enumerate(spec.get("volumes") or []):
        name = vol["name"]
        vwhere = f"{where}.volumes[{i}]"
        if "emptyDir" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            path.mkdir(parents=True, exist_ok=True)
        elif "persistentVolumeClaim" in vol:
            path = claims_dir / _safe_name(vol["persistentVolumeClaim"]["claimName"])
            path.mkdir(parents=True, exist_ok=True)
        elif "configMap" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            _project("ConfigMap", vol["configMap"], index, path, f"{vwhere}.configMap")
        elif "secret" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            _project("Secret", vol["secret"], index, path, f"{vwhere}.secret")
        elif "hostPath" in vol:
            path = Path(vol["hostPath"]["path"])
            kind = vol["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                raise VolumeError(f"{vwhere}.hostPath.path: {path} does not exist on this machine")
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise VolumeError(
                f"{vwhere}: volume type {kinds} is not supported by the local backend "
                "(supported: emptyDir, persistentVolumeClaim, configMap, secret, hostPath)"
            )
        out[name] = path
    # JobSet adds a volume for each volumeClaimPolicies template a container mounts without declaring it.
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for m in c.get("volumeMounts") or []:
            if m["name"] not in out and m["name"] in claim_templates:
                path = claims_dir / _safe_name(m["name"])
                path.mkdir(parents=True, exist_ok=True)
                out[m["name"]] = path
    return out


def container_binds(container: dict[str, Any], volumes: dict[str, Path], where: str) -> list[Bind]:
    binds: list[Bind] = []
    for i, m in enumerate(container.get("volumeMounts") or []):
        if m["name"] not in volumes:
            raise VolumeError(
                f"{where}.volumeMounts[{i}].name: no volume {m['name']!r} in the pod (declare it under volumes)"
            )
        src = volumes[m["name"]]
        if m.get("subPath"):
            src = src / m["subPath"]
            if not src.exists():
                src.mkdir(parents=True, exist_ok=True)
        mount_path = m.get("mountPath", "")
        if not os.path.isabs(mount_path):
            raise VolumeError(
                f"{where}.volumeMounts[{i}].mountPath: must be an absolute path, got {mount_path!r}"
            )
        binds.append(Bind(str(src), os.path.normpath(mount_path), bool(m.get("readOnly"))))
    return binds


def claim_template_names(jobset_spec: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for p in jobset_spec.get("volumeClaimPolicies") or []:
        for t in p.get("templates") or []:
            if (t.get("metadata") or {}).get("name"):
                names.add(t["metadata"]["name"])
    return names
