"""One line per pod template in the words of Kubernetes' PodSecurity admission:
``would violate PodSecurity "restricted:latest": privileged (container "node" must not set
securityContext.privileged=true), allowPrivilegeEscalation != false (...), ...``.

kube-apiserver sends this line as the warning for a pod that fails the namespace's ``warn`` level: each failed
check once, by its reason, with the containers, volumes and values it concerns. The lint's findings are one per
field; this is the same set of failures grouped per check, so a user sees at once everything a level refuses, in
the text they know from ``kubectl apply``. One deviation: the details of one check are always joined with
"; " (kube-apiserver joins runAsNonRoot's two with a newline), to keep the warning on one line. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from kubetrain.api.podsecurity.registry import Violation

_NAME = re.compile(r'"(.*)"$')


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quote(items: Iterable[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _names(violations: Iterable[Violation]) -> list[str]:
    """The container (or volume) names the violations are about, in order."""
    return _unique(m.group(1) for v in violations if (m := _NAME.search(v.subject)))


def _containers(names: Sequence[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_quote(names)}"


def _setters(violations: Sequence[Violation]) -> str:
    """``pod and containers "a", "b"``: who sets the offending value."""
    parts = ["pod"] if any(v.subject == "pod" for v in violations) else []
    names = _names(v for v in violations if v.subject != "pod")
    if names:
        parts.append(_containers(names))
    return " and ".join(parts)


def _values(violations: Iterable[Violation]) -> list[str]:
    return sorted({value for v in violations for value in v.values})


def _must_not(field: str) -> Callable[[Sequence[Violation]], str]:
    return lambda vs: f"{_containers(_names(vs))} must not set securityContext.{field}"


def _host_namespaces(vs: Sequence[Violation]) -> str:
    return ", ".join(f"{v.path.rsplit('.', 1)[-1]}=true" for v in vs)


def _capabilities_added(vs: Sequence[Violation]) -> str:
    return f"{_containers(_names(vs))} must not include {_quote(_values(vs))} in securityContext.capabilities.add"


def _capabilities_restricted(vs: Sequence[Violation]) -> str:
    details = []
    drop = [v for v in vs if v.path.endswith(".drop")]
    if drop:
        details.append(f'{_containers(_names(drop))} must set securityContext.capabilities.drop=["ALL"]')
    added = [v for v in vs if v.path.endswith(".add")]
    if added:
        details.append(_capabilities_added(added))
    return "; ".join(details)


def _host_ports(vs: Sequence[Violation]) -> str:
    names, ports = _names(vs), _values(vs)
    return (f"{_containers(names)} {_plural('uses', 'use', len(names))} "
            f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(ports)}")


def _host_probes(vs: Sequence[Violation]) -> str:
    names, hosts = sorted(_names(vs)), _values(vs)
    return (f"{_containers(names)} {_plural('uses', 'use', len(names))} "
            f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {_quote(hosts)}")


def _volumes(vs: Sequence[Violation]) -> str:
    names = _names(vs)
    return f"{_plural('volume', 'volumes', len(names))} {_quote(names)}"


def _restricted_volumes(vs: Sequence[Violation]) -> str:
    names, kinds = _names(vs), _values(vs)
    return (f"{_volumes(vs)} {_plural('uses', 'use', len(names))} "
            f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} {_quote(kinds)}")


def _annotation(v: Violation) -> bool:
    return v.path.startswith("metadata.annotations")


def _apparmor(vs: Sequence[Violation]) -> str:
    fields = [v for v in vs if not _annotation(v)]
    annotations = sorted({value for v in vs if _annotation(v) for value in v.values})
    setters = [_setters(fields)] if fields else []
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    values = [*_values(fields), *annotations]
    return f"{' and '.join(s for s in setters if s)} must not set AppArmor profile type to {_quote(values)}"


def _apparmor_reason(vs: Sequence[Violation]) -> str:
    count = len(_values(v for v in vs if not _annotation(v))) + len({x for v in vs if _annotation(v) for x in v.values})
    return _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", count)


def _se_linux(vs: Sequence[Violation]) -> str:
    data = []
    types = _values(v for v in vs if v.path.endswith(".type"))
    if types:
        data.append(f"{_plural('type', 'types', len(types))} {_quote(types)}")
    data += [f"{field} may not be set" for field in ("user", "role") if any(v.path.endswith(f".{field}") for v in vs)]
    return f"{_setters(vs)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"


def _seccomp(vs: Sequence[Violation]) -> str:
    annotations = [value for v in vs if _annotation(v) for value in v.values]
    if annotations:
        return f"forbidden {_plural('annotation', 'annotations', len(annotations))} {', '.join(annotations)}"
    details = []
    explicit = [v for v in vs if not v.unset]
    if explicit:
        details.append(f"{_setters(explicit)} must not set securityContext.seccompProfile.type to "
                       f"{_quote(_values(explicit))}")
    unset = _unique(name for v in vs for name in v.unset)
    if unset:
        details.append(f'pod or {_containers(unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" '
                       'or "Localhost"')
    return "; ".join(details)


def _run_as_non_root(vs: Sequence[Violation]) -> str:
    details = []
    explicit = [v for v in vs if not v.unset]
    if explicit:
        details.append(f"{_setters(explicit)} must not set securityContext.runAsNonRoot=false")
    unset = _unique(name for v in vs for name in v.unset)
    if unset:
        details.append(f"pod or {_containers(unset)} must set securityContext.runAsNonRoot=true")
    return "; ".join(details)


def _proc_mount(vs: Sequence[Violation]) -> str:
    return f"{_containers(_names(vs))} must not set securityContext.procMount to {_quote(_values(vs))}"


# check ID -> (PodSecurity's reason, its detail for the check's violations).
_CHECKS: dict[str, tuple[str | Callable[[Sequence[Violation]], str], Callable[[Sequence[Violation]], str]]] = {
    "appArmorProfile": (_apparmor_reason, _apparmor),
    "capabilities_baseline": ("non-default capabilities", _capabilities_added),
    "hostNamespaces": ("host namespaces", _host_namespaces),
    "hostPathVolumes": ("hostPath volumes", _volumes),
    "hostPorts": ("hostPort", _host_ports),
    "hostProbesAndHostLifecycle": ("probe or lifecycle host", _host_probes),
    "privileged": ("privileged", _must_not("privileged=true")),
    "procMount": ("procMount", _proc_mount),
    "seLinuxOptions": ("seLinuxOptions", _se_linux),
    "seccompProfile_baseline": ("seccompProfile", _seccomp),
    "sysctls": ("forbidden sysctls", lambda vs: ", ".join(_unique(x for v in vs for x in v.values))),
    "windowsHostProcess": (
        "hostProcess", lambda vs: f"{_setters(vs)} must not set securityContext.windowsOptions.hostProcess=true"
    ),
    "allowPrivilegeEscalation": (
        "allowPrivilegeEscalation != false",
        lambda vs: f"{_containers(_names(vs))} must set securityContext.allowPrivilegeEscalation=false",
    ),
    "capabilities_restricted": ("unrestricted capabilities", _capabilities_restricted),
    "procMount_restricted": ("procMount", _proc_mount),
    "restrictedVolumes": ("restricted volume types", _restricted_volumes),
    "runAsNonRoot": ("runAsNonRoot != true", _run_as_non_root),
    "runAsUser": ("runAsUser=0", lambda vs: f"{_setters(vs)} must not set runAsUser=0"),
    "seccompProfile_restricted": ("seccompProfile", _seccomp),
}


def reasons(violations: Sequence[Violation]) -> list[str]:
    """``reason (detail)`` per failed check, in the order of ``violations`` (PodSecurity's check order)."""
    by_check: dict[str, list[Violation]] = {}
    for v in violations:
        by_check.setdefault(v.check, []).append(v)
    out = []
    for check, vs in by_check.items():
        reason, detail = _CHECKS.get(check, (check, lambda _: ""))
        text = reason if isinstance(reason, str) else reason(vs)
        described = detail(vs)
        out.append(f"{text} ({described})" if described else text)
    return out


def would_violate(violations: Sequence[Violation], level_version: str) -> str:
    """PodSecurity's warning for a pod whose violations of ``level_version`` (``"restricted:latest"``) are
    ``violations`` (as ``evaluate`` returns them); empty when there are none."""
    if not violations:
        return ""
    return f'would violate PodSecurity "{level_version}": ' + ", ".join(reasons(violations))
