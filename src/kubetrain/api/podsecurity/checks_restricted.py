"""The restricted-level checks of the Pod Security Standards (on top of baseline, some replacing a baseline
check: see ``registry``). Same conventions as ``checks_baseline``."""

from __future__ import annotations

from dataclasses import replace

from kubetrain.api.podsecurity._pod import Container, Pod, flag, integer, items, obj, quoted, text
from kubetrain.api.podsecurity.checks_baseline import (
    SECCOMP_ALLOWED,
    CheckFn,
    Hit,
    added_capabilities,
    proc_mount,
    seccomp_hit,
    seccomp_type,
    who,
)

# Inline volume sources restricted pods may use; everything else (hostPath, nfs, iscsi, ...) is refused.
ALLOWED_VOLUME_SOURCES = (
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected",
    "secret",
)  # fmt: skip
# Every other source the core API knows; a volume with none of the allowed ones names the first it carries.
_OTHER_VOLUME_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd",
    "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos",
)  # fmt: skip


def _not_windows(check: CheckFn) -> CheckFn:
    """From 1.25 a pod with ``spec.os.name: windows`` skips the Linux-only checks (the API server rejects
    those fields on Windows pods anyway)."""

    def windows_exempt(pod: Pod) -> list[Hit]:
        return [] if pod.windows else check(pod)

    windows_exempt.__name__ = f"{check.__name__}_1_25"
    return windows_exempt


def allow_privilege_escalation_1_8(pod: Pod) -> list[Hit]:
    return [
        Hit(
            c.field("securityContext", "allowPrivilegeEscalation"),
            f"{who(c)} does not set allowPrivilegeEscalation: false",
            "set securityContext.allowPrivilegeEscalation: false",
        )
        for c in pod.containers()
        if flag(obj(c.security).get("allowPrivilegeEscalation")) is not False
    ]


def capabilities_restricted_1_22(pod: Pod) -> list[Hit]:
    hits = []
    for c in pod.containers():
        caps = obj(obj(c.security).get("capabilities"))
        if "ALL" not in [text(d) for d in items(caps.get("drop"))]:
            hits.append(
                Hit(
                    c.field("securityContext", "capabilities", "drop"),
                    f"{who(c)} does not drop ALL capabilities",
                    'set securityContext.capabilities.drop: ["ALL"]',
                )
            )
        extra = sorted({text(a) for a in items(caps.get("add"))} - {"NET_BIND_SERVICE"})
        if extra:
            hits.append(
                added_capabilities(c, extra, f"adds {', '.join(extra)}; restricted allows adding only NET_BIND_SERVICE")
            )
    return hits


def restricted_volumes(pod: Pod) -> list[Hit]:
    hits = []
    for path, v in pod.volumes():
        if any(v.get(k) is not None for k in ALLOWED_VOLUME_SOURCES):
            continue
        kind = next((k for k in _OTHER_VOLUME_SOURCES if v.get(k) is not None), None)
        if kind is None:
            continue  # API defaulting turns a volume without a known source into an emptyDir
        hits.append(
            Hit(
                f"{path}.{kind}",
                f'volume "{text(v.get("name"))}" is of type {kind}, not allowed at restricted',
                "use one of " + ", ".join(ALLOWED_VOLUME_SOURCES),
                (kind,),
            )
        )
    return hits


def _unset_names(containers: list[Container]) -> str:
    return quoted([c.name for c in containers])


def run_as_non_root_1_0(pod: Pod) -> list[Hit]:
    pod_value = flag(obj(pod.security).get("runAsNonRoot"))
    containers = list(pod.containers())
    hits = []
    implicit = [c for c in containers if flag(obj(c.security).get("runAsNonRoot")) is None]
    if pod_value is False:
        hits.append(
            Hit(
                "spec.securityContext.runAsNonRoot",
                "the pod sets runAsNonRoot: false",
                "set spec.securityContext.runAsNonRoot: true",
            )
        )
    elif pod_value is None and implicit:
        hits.append(
            Hit(
                "spec.securityContext.runAsNonRoot",
                f"runAsNonRoot is not true for {'containers' if len(implicit) > 1 else 'container'} "
                f"{_unset_names(implicit)}",
                "set spec.securityContext.runAsNonRoot: true",
                unset=tuple(c.name for c in implicit),
            )
        )
    for c in containers:
        if flag(obj(c.security).get("runAsNonRoot")) is False:
            hits.append(
                Hit(
                    c.field("securityContext", "runAsNonRoot"),
                    f"{who(c)} sets runAsNonRoot: false",
                    "set securityContext.runAsNonRoot: true or remove it (the pod-level value then applies)",
                )
            )
    return hits


def run_as_user_1_23(pod: Pod) -> list[Hit]:
    hits = []
    if integer(obj(pod.security).get("runAsUser")) == 0:
        hits.append(
            Hit("spec.securityContext.runAsUser", "the pod runs as root (runAsUser: 0)", "set a non-zero runAsUser")
        )
    for c in pod.containers():
        if integer(obj(c.security).get("runAsUser")) == 0:
            hits.append(
                Hit(
                    c.field("securityContext", "runAsUser"),
                    f"{who(c)} runs as root (runAsUser: 0)",
                    "set a non-zero runAsUser",
                )
            )
    return hits


def _user_namespace_relaxed(check: CheckFn) -> CheckFn:
    """From 1.35 a pod in its own user namespace (``hostUsers: false``) may run as UID 0 inside it."""

    def relaxed(pod: Pod) -> list[Hit]:
        if pod.user_namespace:
            return []
        return [replace(h, fix=h.fix + ", or spec.hostUsers: false") for h in check(pod)]

    relaxed.__name__ = f"{check.__name__}_1_35"
    return relaxed


def seccomp_restricted_1_19(pod: Pod) -> list[Hit]:
    hits = []
    pod_kind = seccomp_type(pod.security)
    if pod_kind is not None and pod_kind not in SECCOMP_ALLOWED:
        hits.append(seccomp_hit("spec.securityContext", "the pod", pod_kind))
    implicit = []
    for c in pod.containers():
        kind = seccomp_type(c.security)
        if kind is None:
            implicit.append(c)
        elif kind not in SECCOMP_ALLOWED:
            hits.append(seccomp_hit(c.field("securityContext"), who(c), kind))
    if implicit and pod_kind is None:
        hits.append(
            Hit(
                "spec.securityContext.seccompProfile.type",
                f"no seccomp profile for {'containers' if len(implicit) > 1 else 'container'} {_unset_names(implicit)}",
                "set spec.securityContext.seccompProfile.type: RuntimeDefault",
                unset=tuple(c.name for c in implicit),
            )
        )
    return hits


allow_privilege_escalation_1_25 = _not_windows(allow_privilege_escalation_1_8)
capabilities_restricted_1_25 = _not_windows(capabilities_restricted_1_22)
seccomp_restricted_1_25 = _not_windows(seccomp_restricted_1_19)
run_as_non_root_1_35 = _user_namespace_relaxed(run_as_non_root_1_0)
run_as_user_1_35 = _user_namespace_relaxed(run_as_user_1_23)
proc_mount_restricted = proc_mount
