"""The baseline-level checks of the Pod Security Standards, one function per check and policy version.

Each function takes a ``Pod`` and returns one ``Hit`` per offending field (empty: the pod passes). Which
function applies at which version is declared in ``registry``; the semantics follow Kubernetes'
``k8s.io/pod-security-admission/policy`` as shipped with kube-apiserver 1.36.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from kubetrain.api.podsecurity._pod import Container, Pod, flag, integer, items, obj, text


@dataclass(frozen=True)
class Hit:
    """One offending field: its path in the pod template, what is wrong and how to fix it; ``values``: the
    offending values (capabilities, a volume type, a port, ...) and ``unset``: the containers that leave a
    required field unset, for PodSecurity's wording of the failure (``kubetrain.api.podsecurity.summary``)."""

    path: str
    message: str
    fix: str
    values: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()


CheckFn = Callable[[Pod], list[Hit]]

# Capabilities a container runtime grants by default; baseline lets a container add these back and no others.
DEFAULT_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
        "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip

_SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}

_SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
_SELINUX_TYPES_1_31 = _SELINUX_TYPES_1_0 | {"container_engine_t"}

SECCOMP_ALLOWED = ("RuntimeDefault", "Localhost")
APPARMOR_ALLOWED = ("RuntimeDefault", "Localhost")
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"


def who(c: Container) -> str:
    """How findings name a container: `container "x"` or `ephemeral container "x"`."""
    kind = "ephemeral container" if c.ephemeral else "container"
    return f'{kind} "{c.name}"'


def privileged(pod: Pod) -> list[Hit]:
    return [
        Hit(
            c.field("securityContext", "privileged"),
            f"{who(c)} is privileged (full access to the node)",
            "remove securityContext.privileged or set it to false",
        )
        for c in pod.containers()
        if c.security is not None and flag(c.security.get("privileged")) is True
    ]


def host_namespaces(pod: Pod) -> list[Hit]:
    hits = []
    for field, what in (("hostNetwork", "network"), ("hostPID", "process"), ("hostIPC", "IPC")):
        if flag(pod.spec.get(field)) is True:
            hits.append(Hit(f"spec.{field}", f"the pod shares the node's {what} namespace", f"remove spec.{field}"))
    return hits


def host_ports(pod: Pod) -> list[Hit]:
    # A pod on the host network gets hostPort = containerPort for every port left at 0 (API defaulting of
    # Pods, done before admission), so its ports are host ports too. Ephemeral containers are not defaulted.
    host_network = flag(pod.spec.get("hostNetwork")) is True
    hits = []
    for c in pod.containers():
        for j, port in enumerate(items(c.spec.get("ports"))):
            p = obj(port)
            host_port = integer(p.get("hostPort")) or 0
            implied = False
            if host_port == 0 and host_network and not c.ephemeral:
                host_port, implied = integer(p.get("containerPort")) or 0, True
            if host_port != 0:
                hits.append(
                    Hit(
                        c.field(f"ports[{j}]", "hostPort"),
                        f"{who(c)} binds host port {host_port}"
                        + (" (every port is a host port under hostNetwork)" if implied else ""),
                        "remove spec.hostNetwork" if implied else "remove hostPort; reach the pod through a Service",
                        (str(host_port),),
                    )
                )
    return hits


def host_path_volumes(pod: Pod) -> list[Hit]:
    return [
        Hit(
            f"{path}.hostPath",
            f'volume "{text(v.get("name"))}" mounts the node\'s {text(obj(v["hostPath"]).get("path")) or "?"}',
            "use a persistentVolumeClaim, csi, emptyDir, configMap or secret volume instead of hostPath",
        )
        for path, v in pod.volumes()
        if v.get("hostPath") is not None
    ]


def capabilities_baseline(pod: Pod) -> list[Hit]:
    hits = []
    for c in pod.containers():
        added = [text(a) for a in items(obj(obj(c.security).get("capabilities")).get("add"))]
        extra = sorted({a for a in added if a not in DEFAULT_CAPABILITIES})
        if extra:
            hits.append(added_capabilities(c, extra, f"adds capabilities beyond the default set: {', '.join(extra)}"))
    return hits


def added_capabilities(c: Container, extra: list[str], what: str) -> Hit:
    """A container adding capabilities its level does not allow (``extra``); both levels word the fix alike."""
    return Hit(
        c.field("securityContext", "capabilities", "add"),
        f"{who(c)} {what}",
        f"remove {', '.join(extra)} from securityContext.capabilities.add",
        tuple(extra),
    )


def _apparmor_hits(path: str, who: str, sc: dict[str, object] | None) -> list[Hit]:
    if sc is None or not isinstance(sc.get("appArmorProfile"), dict):
        return []
    kind = text(obj(sc.get("appArmorProfile")).get("type"))
    if kind in APPARMOR_ALLOWED:
        return []
    return [
        Hit(
            f"{path}.appArmorProfile.type",
            f"{who} sets AppArmor profile type {kind or '(empty)'}",
            "set appArmorProfile.type to RuntimeDefault or Localhost, or remove appArmorProfile",
            (kind,),
        )
    ]


def app_armor_profile(pod: Pod) -> list[Hit]:
    hits = _apparmor_hits("spec.securityContext", "the pod", pod.security)
    for c in pod.containers():
        hits += _apparmor_hits(c.field("securityContext"), who(c), c.security)
    for key, value in sorted(pod.annotations.items()):
        if key.startswith(_APPARMOR_ANNOTATION) and not (
            value == "" or value == "runtime/default" or value.startswith("localhost/")
        ):
            hits.append(
                Hit(
                    f"metadata.annotations[{key}]",
                    f"annotation sets AppArmor profile {value!r}",
                    "use runtime/default or localhost/<profile>, or securityContext.appArmorProfile",
                    (f"{key}={json.dumps(value)}",),
                )
            )
    return hits


def _selinux_hits(path: str, who: str, sc: dict[str, object] | None, allowed: frozenset[str]) -> list[Hit]:
    if sc is None or not isinstance(sc.get("seLinuxOptions"), dict):
        return []
    opts = obj(sc.get("seLinuxOptions"))
    hits = []
    kind = text(opts.get("type"))
    if kind not in allowed:
        hits.append(
            Hit(
                f"{path}.seLinuxOptions.type",
                f"{who} sets SELinux type {kind}",
                f"remove seLinuxOptions.type or use one of {', '.join(sorted(a for a in allowed if a))}",
                (kind,),
            )
        )
    for field in ("user", "role"):
        if text(opts.get(field)):
            hits.append(
                Hit(
                    f"{path}.seLinuxOptions.{field}", f"{who} sets an SELinux {field}", f"remove seLinuxOptions.{field}"
                )
            )
    return hits


def _se_linux(pod: Pod, allowed: frozenset[str]) -> list[Hit]:
    hits = _selinux_hits("spec.securityContext", "the pod", pod.security, allowed)
    for c in pod.containers():
        hits += _selinux_hits(c.field("securityContext"), who(c), c.security, allowed)
    return hits


def se_linux_options_1_0(pod: Pod) -> list[Hit]:
    return _se_linux(pod, _SELINUX_TYPES_1_0)


def se_linux_options_1_31(pod: Pod) -> list[Hit]:
    return _se_linux(pod, _SELINUX_TYPES_1_31)


def seccomp_type(sc: dict[str, object] | None) -> str | None:
    """The seccomp profile type set in a security context; None when no profile is set."""
    if sc is None or not isinstance(sc.get("seccompProfile"), dict):
        return None
    return text(obj(sc.get("seccompProfile")).get("type"))


def seccomp_hit(path: str, who: str, kind: str) -> Hit:
    return Hit(
        f"{path}.seccompProfile.type",
        f"{who} sets seccomp profile type {kind or '(empty)'}",
        "set seccompProfile.type to RuntimeDefault or Localhost",
        (kind,),
    )


def seccomp_baseline_1_0(pod: Pod) -> list[Hit]:
    """Before 1.19 seccomp was set through alpha annotations."""

    def ok(value: str) -> bool:
        return value in ("runtime/default", "docker/default") or value.startswith("localhost/")

    keys = [_SECCOMP_POD_ANNOTATION] + [_SECCOMP_CONTAINER_ANNOTATION + c.name for c in pod.containers()]
    return [
        Hit(
            f"metadata.annotations[{key}]",
            f"annotation sets seccomp profile {pod.annotations[key]!r}",
            "use runtime/default or localhost/<profile>",
            (f"{key}={json.dumps(pod.annotations[key])}",),
        )
        for key in sorted(set(keys))
        if key in pod.annotations and not ok(pod.annotations[key])
    ]


def seccomp_baseline_1_19(pod: Pod) -> list[Hit]:
    hits = []
    kind = seccomp_type(pod.security)
    if kind is not None and kind not in SECCOMP_ALLOWED:
        hits.append(seccomp_hit("spec.securityContext", "the pod", kind))
    for c in pod.containers():
        kind = seccomp_type(c.security)
        if kind is not None and kind not in SECCOMP_ALLOWED:
            hits.append(seccomp_hit(c.field("securityContext"), who(c), kind))
    return hits


def _sysctls(pod: Pod, allowed: frozenset[str]) -> list[Hit]:
    hits = []
    for i, s in enumerate(items(obj(pod.security).get("sysctls"))):
        name = text(obj(s).get("name"))
        if name not in allowed:
            hits.append(
                Hit(
                    f"spec.securityContext.sysctls[{i}].name",
                    f"sysctl {name} is not in the safe set",
                    "remove it; only namespaced sysctls that cannot affect other pods are allowed",
                    (name,),
                )
            )
    return hits


def sysctls_1_0(pod: Pod) -> list[Hit]:
    return _sysctls(pod, _SYSCTLS_1_0)


def sysctls_1_27(pod: Pod) -> list[Hit]:
    return _sysctls(pod, _SYSCTLS_1_27)


def sysctls_1_29(pod: Pod) -> list[Hit]:
    return _sysctls(pod, _SYSCTLS_1_29)


def sysctls_1_32(pod: Pod) -> list[Hit]:
    return _sysctls(pod, _SYSCTLS_1_32)


def proc_mount(pod: Pod) -> list[Hit]:
    """Unconditional: any procMount other than Default unmasks /proc."""
    hits = []
    for c in pod.containers():
        sc = c.security
        if sc is None or not isinstance(sc.get("procMount"), str):
            continue
        if sc["procMount"] != "Default":
            hits.append(
                Hit(
                    c.field("securityContext", "procMount"),
                    f"{who(c)} sets procMount {sc['procMount']}",
                    "remove securityContext.procMount (or set it to Default)",
                    (sc["procMount"],),
                )
            )
    return hits


def proc_mount_1_35_baseline(pod: Pod) -> list[Hit]:
    """Since 1.35 baseline allows an unmasked /proc inside a pod's own user namespace."""
    if pod.user_namespace:
        return []
    return [replace(h, fix=h.fix + ", or spec.hostUsers: false") for h in proc_mount(pod)]


def windows_host_process(pod: Pod) -> list[Hit]:
    hits = []

    def on(sc: dict[str, object] | None) -> bool:
        return flag(obj(obj(sc).get("windowsOptions")).get("hostProcess")) is True

    if on(pod.security):
        hits.append(
            Hit(
                "spec.securityContext.windowsOptions.hostProcess",
                "the pod runs as a Windows HostProcess pod",
                "remove windowsOptions.hostProcess",
            )
        )
    for c in pod.containers():
        if on(c.security):
            hits.append(
                Hit(
                    c.field("securityContext", "windowsOptions", "hostProcess"),
                    f"{who(c)} runs as a Windows HostProcess container",
                    "remove windowsOptions.hostProcess",
                )
            )
    return hits


def _handler_hosts(c: Container, parts: tuple[str, ...], handler: object) -> Iterator[tuple[str, str]]:
    if not isinstance(handler, dict):
        return
    for kind in ("httpGet", "tcpSocket"):
        host = text(obj(handler.get(kind)).get("host"))
        if host:
            yield c.field(*parts, kind, "host"), host


def host_probes_and_lifecycle(pod: Pod) -> list[Hit]:
    hits = []
    for c in pod.containers():
        found: list[tuple[str, str]] = []
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            found += _handler_hosts(c, (probe,), c.spec.get(probe))
        lifecycle = obj(c.spec.get("lifecycle"))
        for hook in ("postStart", "preStop"):
            found += _handler_hosts(c, ("lifecycle", hook), lifecycle.get(hook))
        hits += [
            Hit(path, f"{who(c)} probes or hooks another host ({host})", "remove host; the pod's own IP is used",
                (host,))
            for path, host in found
        ]
    return hits
