"""Small helpers plugins share for writing into containers (env, ports, mounts, volumes)."""

from __future__ import annotations

from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding
from kubetrain.api.meta import EnvVar
from kubetrain.compiler.merge import upsert

Obj = dict[str, Any]


def set_env(container: Obj, name: str, value: str) -> None:
    upsert(container.setdefault("env", []), {"name": name, "value": value})


def set_env_from_index(container: Obj, name: str) -> None:
    """An env var holding the pod's Job completion index (its rank), via the downward API."""
    ref = {"fieldRef": {"fieldPath": f"metadata.annotations['{c.ANNOTATION_COMPLETION_INDEX}']"}}
    upsert(container.setdefault("env", []), {"name": name, "valueFrom": ref})


def upsert_envs(container: Obj, envs: list[Obj]) -> None:
    for e in envs:
        upsert(container.setdefault("env", []), dict(e))


def add_port(container: Obj, port: int = c.DEFAULT_PORT) -> None:
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port, "protocol": "TCP"})


def add_mount(container: Obj, name: str, path: str, read_only: bool | None = None) -> None:
    mount: Obj = {"name": name, "mountPath": path}
    if read_only is not None:
        mount["readOnly"] = read_only
    upsert(container.setdefault("volumeMounts", []), mount, key="mountPath")


def add_volume(pod_spec: Obj, volume: Obj) -> None:
    upsert(pod_spec.setdefault("volumes", []), volume)


def add_dns_search(pod_spec: Obj, domain: str) -> None:
    """One more search domain in the pod's resolv.conf (``dnsConfig.searches``), after those it has."""
    searches = pod_spec.setdefault("dnsConfig", {}).setdefault("searches", [])
    if domain not in searches:
        searches.append(domain)


def reserved_env(env: list[EnvVar] | None, reserved: set[str] | tuple[str, ...], fix: str) -> list[Finding]:
    """Upstream's single finding listing every reserved name the TrainJob tried to set."""
    names = sorted({x.name for x in env or [] if x.name in reserved})
    if not names:
        return []
    message = f"must not have reserved envs, invalid envs configured: [{' '.join(names)}]"
    return [Finding("spec.trainer.env", message, fix)]


def reserved_env_entries(
    env: list[EnvVar] | None, reserved: tuple[str, ...], framework: str, fix: str
) -> list[Finding]:
    """One finding per env entry the runtime sets itself (kubetrain's own frameworks name the entry)."""
    return [
        Finding(f"spec.trainer.env[{i}]", f"{x.name} is reserved for the {framework} runtime", fix)
        for i, x in enumerate(env or [])
        if x.name in reserved
    ]
