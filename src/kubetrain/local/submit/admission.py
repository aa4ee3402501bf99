"""What a TrainJob's pods may ask of this machine, checked when it is submitted so that nothing is recorded when
the answer is no: ``hostPath`` volumes only below ``security.allowedHostPaths`` (none by default), ``privileged``
containers only when kubetrain runs as root and they are allowed (``--allow-privileged`` or
``security.allowPrivileged``). The supervisor checks the same again when it starts each pod."""

from __future__ import annotations

import os
from typing import Any

from kubetrain.local import config, paths
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.sandbox.volumes import VolumeError, check_host_path


def privileged_refusal(where: str) -> str | None:
    """Why a privileged container cannot be submitted here, or None when it can."""
    if os.geteuid() != 0:
        return sc.privileged_needs_root(where)
    if sc.privileged_allowed(config.load().security.allow_privileged):
        return None
    return (
        f"{where}: privileged containers are refused by default: running as root, such a pod gets every "
        "capability and write access to /sys of this machine. Fix: pass --allow-privileged to `kubetrain run` or "
        f"`kubetrain apply`, or set `security: {{allowPrivileged: true}}` in {paths.config_file()}"
    )


def check(objects: list[dict[str, Any]]) -> None:
    """Raise ``SecurityContextError`` listing every refused volume and container of the compiled JobSet."""
    problems: list[str] = []
    allowed: list[str] | None = None
    for o in objects:
        if o.get("kind") != "JobSet":
            continue
        name = (o.get("metadata") or {}).get("name", "")
        for rj in (o.get("spec") or {}).get("replicatedJobs") or []:
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            base = f"JobSet {name} spec.replicatedJobs[{rj.get('name')}].template.spec.template.spec"
            for i, vol in enumerate(pod.get("volumes") or []):
                if "hostPath" not in vol:
                    continue
                if allowed is None:
                    allowed = config.load().security.allowed_host_paths
                try:
                    check_host_path(
                        str((vol["hostPath"] or {}).get("path", "")),
                        allowed,
                        f"{base}.volumes[{i}]",
                        str(vol.get("name", "")),
                        str(paths.config_file()),
                    )
                except VolumeError as exc:
                    problems.append(str(exc))
            for kind in ("initContainers", "containers"):
                for c in pod.get(kind) or []:
                    if (c.get("securityContext") or {}).get("privileged"):
                        where = f"{base}.{kind}[{c.get('name')}].securityContext.privileged"
                        refusal = privileged_refusal(where)
                        if refusal is not None:
                            problems.append(refusal)
    if problems:
        raise sc.SecurityContextError("; ".join(dict.fromkeys(problems)))
