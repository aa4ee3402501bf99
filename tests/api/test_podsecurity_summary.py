"""PodSecurity admission's own warning line for a pod (``would violate PodSecurity "restricted:latest": ...``),
one case per check: the reason kube-apiserver gives and its detail, with its pluralisation and grouping (several
containers in one detail, pod and containers joined with "and", values sorted)."""

from __future__ import annotations

import pytest

from kubetrain.api.podsecurity import evaluate, would_violate
from tests.api.podsecurity_builder import PodT

R = "restricted:latest"
PREFIX = f'would violate PodSecurity "{R}": '


def line(pod: PodT, level_version: str = R) -> str:
    level, _, version = level_version.partition(":")
    minor = None if version == "latest" else int(version.removeprefix("v1."))
    return would_violate(evaluate(pod.build(), level, minor), level_version)  # type: ignore[arg-type]


@pytest.mark.parametrize(("pod", "expected"), [
    (PodT().spec(hostNetwork=True, hostIPC=True), "host namespaces (hostNetwork=true, hostIPC=true)"),
    (PodT().csc(privileged=True).add(name="b", securityContext={
        "privileged": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
     'privileged (containers "main", "b" must not set securityContext.privileged=true)'),
    (PodT().spec(volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "nfs", "nfs": {"server": "s"}}]),
     'restricted volume types (volumes "root", "nfs" use restricted volume types "hostPath", "nfs")'),
    (PodT().csc(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN", "NET_ADMIN"]}),
     'unrestricted capabilities (container "main" must not include "NET_ADMIN", "SYS_ADMIN" in '
     "securityContext.capabilities.add)"),
    (PodT().c(ports=[{"containerPort": 80, "hostPort": 8080}]),
     'hostPort (container "main" uses hostPort 8080)'),
    (PodT().sc(runAsUser=0).csc(runAsUser=0),
     'runAsUser=0 (pod and container "main" must not set runAsUser=0)'),
    (PodT().sc(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "forbidden sysctls (kernel.msgmax)"),
    (PodT().csc(procMount="Unmasked"),
     'procMount (container "main" must not set securityContext.procMount to "Unmasked")'),
    (PodT().sc(seLinuxOptions={"type": "spc_t", "user": "u"}),
     'seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set)'),
    (PodT().sc(appArmorProfile={"type": "Unconfined"}),
     'forbidden AppArmor profile (pod must not set AppArmor profile type to "Unconfined")'),
    (PodT().sc(seccompProfile={"type": "Unconfined"}),
     'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'),
    (PodT().c(readinessProbe={"httpGet": {"host": "example.com", "port": 80}}),
     'probe or lifecycle host (container "main" uses probe or lifecycle host "example.com")'),
])  # fmt: skip
def test_each_check_in_podsecuritys_words(pod: PodT, expected: str) -> None:
    assert line(pod) == PREFIX + expected


def test_a_pod_without_security_settings_gets_the_four_requirements_kubectl_users_know() -> None:
    """The warning kube-apiserver gives a plain Deployment in a namespace that warns at restricted."""
    assert line(PodT(restricted=False).add(name="sidecar", restricted=False)) == PREFIX + (
        'allowPrivilegeEscalation != false (containers "main", "sidecar" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (containers "main", "sidecar" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or containers "main", "sidecar" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or containers "main", "sidecar" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )


def test_explicit_and_implicit_failures_of_one_check_are_both_named() -> None:
    pod = PodT(restricted=False).csc(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]},
                                     runAsNonRoot=False, seccompProfile={"type": "Unconfined"})
    pod.add(name="b")
    assert line(pod) == PREFIX + (
        'runAsNonRoot != true (container "main" must not set securityContext.runAsNonRoot=false; '
        'pod or container "b" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (container "main" must not set securityContext.seccompProfile.type to "Unconfined"; '
        'pod or container "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
    )


def test_baseline_names_only_baseline_checks_and_a_version_is_honoured() -> None:
    pod = PodT(restricted=False).csc(privileged=True)
    assert line(pod, "baseline:v1.30") == (
        'would violate PodSecurity "baseline:v1.30": privileged (container "main" must not set '
        "securityContext.privileged=true)"
    )
    assert line(PodT()) == "" and line(PodT(restricted=False), "baseline:latest") == ""
