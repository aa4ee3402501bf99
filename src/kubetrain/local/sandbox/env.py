"""Container environment as the kubelet builds it: ``value``, downward-API ``fieldRef``, ``resourceFieldRef``,
``secretKeyRef``/``configMapKeyRef``, ``envFrom`` and ``$(VAR)`` expansion."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from kubetrain.api.constants import ANNOTATION_COMPLETION_INDEX
from kubetrain.api.errors import KubetrainError

_FIELD_KEY = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


class EnvError(KubetrainError):
    pass


class MissingReference(EnvError):
    """A ConfigMap, Secret (or key) the pod needs does not exist (yet): the kubelet keeps such a pod waiting with
    ``reason`` and retries, so applying the object later starts it. ``message`` is in the kubelet's words."""

    FIX = "the pod waits until it exists: apply it with `kubetrain apply -f`, or mark the reference optional"

    def __init__(self, reason: str, message: str, where: str) -> None:
        super().__init__(f"{where}: {message} ({self.FIX})")
        self.reason = reason
        self.message = message


CONFIG_ERROR = "CreateContainerConfigError"  # env / envFrom: the container cannot be created
JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
MOUNT_WAIT = "ContainerCreating"  # a configMap/secret volume cannot be set up (event FailedMount)


def not_found(kind: str, name: str) -> str:
    """The API server's words: ``configmap "x" not found``."""
    return f'{kind.lower()} "{name}" not found'


class ObjectIndex:
    """The ConfigMaps, Secrets and PersistentVolumeClaims a pod can reference: the compiled ones and those applied
    by the user in the TrainJob's namespace."""

    def __init__(self, objects: list[dict[str, Any]], namespace: str = "default") -> None:
        self.namespace = namespace
        self._by_key: dict[tuple[str, str], dict[str, Any]] = {}
        for o in objects:
            if o.get("kind") in ("ConfigMap", "Secret", "PersistentVolumeClaim"):
                self._by_key[(o["kind"], o["metadata"]["name"])] = o

    def claim(self, name: str) -> dict[str, Any] | None:
        """An applied PersistentVolumeClaim of that name."""
        return self._by_key.get(("PersistentVolumeClaim", name))

    def data(self, kind: str, name: str) -> dict[str, bytes] | None:
        obj = self._by_key.get((kind, name))
        if obj is None:
            return None
        out: dict[str, bytes] = {}
        if kind == "Secret":
            for k, v in (obj.get("data") or {}).items():
                out[k] = base64.b64decode(v)
        else:
            for k, v in (obj.get("binaryData") or {}).items():
                out[k] = base64.b64decode(v)
            for k, v in (obj.get("data") or {}).items():
                out[k] = str(v).encode()
        for k, v in (obj.get("stringData") or {}).items():
            out[k] = str(v).encode()
        return out


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: unknown references stay as written, ``$$`` escapes ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR_REF.sub(sub, text)


def field_ref(path: str, meta: dict[str, Any], *, pod_ip: str, host_ip: str, node_name: str) -> str:
    m = _FIELD_KEY.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": node_name,
        "spec.serviceAccountName": "default",
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
    }
    if path not in simple:
        raise EnvError(f"fieldRef.fieldPath {path!r} is not supported by the local backend")
    return str(simple[path])


def _key_ref(kind: str, ref: dict[str, Any], index: ObjectIndex, where: str) -> str | None:
    data = index.data(kind, ref.get("name", ""))
    optional = bool(ref.get("optional"))
    if data is None:
        if optional:
            return None
        raise MissingReference(CONFIG_ERROR, not_found(kind, ref.get("name", "")), where)
    if ref.get("key") not in data:
        if optional:
            return None
        raise MissingReference(
            CONFIG_ERROR, f"couldn't find key {ref.get('key')} in {kind} {index.namespace}/{ref.get('name')}", where
        )
    return data[ref["key"]].decode(errors="replace")


def _resource(ref: dict[str, Any], container: dict[str, Any]) -> str:
    res = ref.get("resource", "")
    section, _, name = res.partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    if value is None:
        return "0"
    return str(value)


def container_env(
    container: dict[str, Any],
    meta: dict[str, Any],
    index: ObjectIndex,
    *,
    base: Mapping[str, str],
    pod_ip: str,
    host_ip: str = "127.0.0.1",
    node_name: str = "localhost",
    where: str,
) -> dict[str, str]:
    """``base`` is what the "image" provides (the local Python environment); the container's env overrides it."""
    env = dict(base)
    declared: dict[str, str] = {}
    for i, src in enumerate(container.get("envFrom") or []):
        prefix = src.get("prefix", "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = src.get(key)
            if not ref:
                continue
            data = index.data(kind, ref.get("name", ""))
            if data is None:
                if ref.get("optional"):
                    continue
                where_ref = f"{where}.envFrom[{i}].{key}"
                raise MissingReference(CONFIG_ERROR, not_found(kind, ref.get("name", "")), where_ref)
            for k, v in data.items():
                declared[prefix + k] = v.decode(errors="replace")
    for i, var in enumerate(container.get("env") or []):
        name = var["name"]
        path = f"{where}.env[{i}]"
        vf = var.get("valueFrom")
        if vf is None:
            # Expansion sees only variables declared earlier in the list, like the kubelet.
            declared[name] = expand(str(var.get("value", "")), declared)
            continue
        value: str | None
        if "fieldRef" in vf:
            value = field_ref(
                vf["fieldRef"]["fieldPath"], meta, pod_ip=pod_ip, host_ip=host_ip, node_name=node_name
            )
        elif "resourceFieldRef" in vf:
            value = _resource(vf["resourceFieldRef"], container)
        elif "secretKeyRef" in vf:
            value = _key_ref("Secret", vf["secretKeyRef"], index, f"{path}.valueFrom.secretKeyRef")
        elif "configMapKeyRef" in vf:
            value = _key_ref("ConfigMap", vf["configMapKeyRef"], index, f"{path}.valueFrom.configMapKeyRef")
        else:
            raise EnvError(f"{path}.valueFrom: unsupported source {sorted(vf)}")
        if value is not None:
            declared[name] = value
    index_value = (meta.get("annotations") or {}).get(ANNOTATION_COMPLETION_INDEX)
    if index_value is not None and not any(v.get("name") == JOB_COMPLETION_INDEX for v in container.get("env") or []):
        # The Job controller appends it to every container of an Indexed Job (a fieldRef to the annotation), so
        # it wins over envFrom and loses to the container's own entry of that name.
        declared[JOB_COMPLETION_INDEX] = str(index_value)
    env.update(declared)
    return env


def command_line(container: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    argv = [expand(a, env) for a in (container.get("command") or [])]
    argv += [expand(a, env) for a in (container.get("args") or [])]
    return argv
