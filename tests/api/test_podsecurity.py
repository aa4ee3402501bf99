"""Pod Security checks, one table per check: a restricted pod with one thing changed, the level it then meets
and the (check, field path) of every violation. Versions as in kube-apiserver 1.36's PodSecurity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubetrain.api.podsecurity import (
    LEVELS,
    Level,
    assess,
    checks_for,
    evaluate,
    level_rank,
    namespace_policy,
    parse_level,
    parse_version,
)
from tests.api.podsecurity_builder import PodT

C0 = "spec.containers[0]"
SC0 = f"{C0}.securityContext"
PSC = "spec.securityContext"


@dataclass
class Case:
    id: str
    pod: PodT
    level: Level
    found: set[tuple[str, str]]
    minor: int | None = None


def run(case: Case) -> None:
    got = assess(case.pod.build(), case.minor)
    assert (got.level, {(v.check, v.path) for v in got.violations}) == (case.level, case.found)


ALL_CASES: list[Case] = []
"""Every table case; tests/e2e/test_podsecurity.py has a real API server judge the same pods."""


def table(*cases: Case) -> pytest.MarkDecorator:
    ALL_CASES.extend(cases)
    return pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])


def test_the_builder_starts_restricted() -> None:
    assert assess(PodT().build()).level == "restricted"
    assert assess(PodT(restricted=False).build()).level == "baseline"


# --- baseline checks ---------------------------------------------------------------------------------------


@table(
    # privileged implies privilege escalation (the API server refuses allowPrivilegeEscalation: false with it)
    Case("privileged", PodT().csc(privileged=True, allowPrivilegeEscalation=None), "privileged",
         {("privileged", f"{SC0}.privileged"), ("allowPrivilegeEscalation", f"{SC0}.allowPrivilegeEscalation")}),
    Case("privileged false", PodT().csc(privileged=False), "restricted", set()),
    Case(
        "init container",
        PodT().add("initContainers", securityContext={"privileged": True, "capabilities": {"drop": ["ALL"]}}),
        "privileged",
        {("privileged", "spec.initContainers[0].securityContext.privileged"),
         ("allowPrivilegeEscalation", "spec.initContainers[0].securityContext.allowPrivilegeEscalation")},
    ),
    Case(
        "ephemeral container",
        PodT().add("ephemeralContainers").csc(0, "ephemeralContainers", privileged=True, allowPrivilegeEscalation=None),
        "privileged",
        {("privileged", "spec.ephemeralContainers[0].securityContext.privileged"),
         ("allowPrivilegeEscalation", "spec.ephemeralContainers[0].securityContext.allowPrivilegeEscalation")},
    ),
)  # fmt: skip
def test_privileged(case: Case) -> None:
    run(case)


@table(
    Case("hostNetwork", PodT().spec(hostNetwork=True), "privileged", {("hostNamespaces", "spec.hostNetwork")}),
    Case("hostPID", PodT().spec(hostPID=True), "privileged", {("hostNamespaces", "spec.hostPID")}),
    Case("hostIPC", PodT().spec(hostIPC=True), "privileged", {("hostNamespaces", "spec.hostIPC")}),
    Case("all false", PodT().spec(hostNetwork=False, hostPID=False, hostIPC=False), "restricted", set()),
)
def test_host_namespaces(case: Case) -> None:
    run(case)


@table(
    Case("hostPort", PodT().c(ports=[{"containerPort": 80, "hostPort": 8080}]), "privileged",
         {("hostPorts", f"{C0}.ports[0].hostPort")}),
    Case("hostPort 0", PodT().c(ports=[{"containerPort": 80, "hostPort": 0}]), "restricted", set()),
    Case("implied by hostNetwork", PodT().spec(hostNetwork=True).c(ports=[{"containerPort": 80}]), "privileged",
         {("hostNamespaces", "spec.hostNetwork"), ("hostPorts", f"{C0}.ports[0].hostPort")}),
    Case("ephemeral ports are not defaulted",
         PodT().spec(hostNetwork=True).add("ephemeralContainers", ports=[{"containerPort": 80}]), "privileged",
         {("hostNamespaces", "spec.hostNetwork")}),
)  # fmt: skip
def test_host_ports(case: Case) -> None:
    run(case)


@table(
    Case("hostPath", PodT().volume("root", hostPath={"path": "/"}), "privileged",
         {("hostPathVolumes", "spec.volumes[0].hostPath")}),
    Case("hostPath null", PodT().volume("v", hostPath=None), "restricted", set()),
)  # fmt: skip
def test_host_path_volumes(case: Case) -> None:
    run(case)


@table(
    Case("SYS_ADMIN", PodT().csc(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}), "privileged",
         {("capabilities_baseline", f"{SC0}.capabilities.add")}),
    Case("a default capability", PodT().csc(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}), "baseline",
         {("capabilities_restricted", f"{SC0}.capabilities.add")}),
    Case("NET_BIND_SERVICE", PodT().csc(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
         "restricted", set()),
    Case("no drop", PodT().csc(capabilities={}), "baseline",
         {("capabilities_restricted", f"{SC0}.capabilities.drop")}),
    Case("drop is case sensitive", PodT().csc(capabilities={"drop": ["all"]}), "baseline",
         {("capabilities_restricted", f"{SC0}.capabilities.drop")}),
    Case("no security context", PodT().c(securityContext=None), "baseline",
         {("capabilities_restricted", f"{SC0}.capabilities.drop"),
          ("allowPrivilegeEscalation", f"{SC0}.allowPrivilegeEscalation")}),
    Case("not checked before 1.22", PodT().csc(capabilities={"add": ["CHOWN"]}), "restricted", set(), minor=21),
)  # fmt: skip
def test_capabilities(case: Case) -> None:
    run(case)


AA = "container.apparmor.security.beta.kubernetes.io/main"


@table(
    Case("pod Unconfined", PodT().sc(appArmorProfile={"type": "Unconfined"}), "privileged",
         {("appArmorProfile", f"{PSC}.appArmorProfile.type")}),
    Case("container Unconfined", PodT().csc(appArmorProfile={"type": "Unconfined"}), "privileged",
         {("appArmorProfile", f"{SC0}.appArmorProfile.type")}),
    Case("Localhost", PodT().csc(appArmorProfile={"type": "Localhost", "localhostProfile": "p"}), "restricted",
         set()),
    Case("RuntimeDefault", PodT().sc(appArmorProfile={"type": "RuntimeDefault"}), "restricted", set()),
    Case("annotation unconfined", PodT().annotate(AA, "unconfined"), "privileged",
         {("appArmorProfile", f"metadata.annotations[{AA}]")}),
    Case("annotation runtime/default", PodT().annotate(AA, "runtime/default"), "restricted", set()),
    Case("annotation localhost/", PodT().annotate(AA, "localhost/custom"), "restricted", set()),
    Case("annotation empty", PodT().annotate(AA, ""), "restricted", set()),
)  # fmt: skip
def test_app_armor(case: Case) -> None:
    run(case)


@table(
    Case("spc_t", PodT().sc(seLinuxOptions={"type": "spc_t"}), "privileged",
         {("seLinuxOptions", f"{PSC}.seLinuxOptions.type")}),
    Case("container_t", PodT().csc(seLinuxOptions={"type": "container_t", "level": "s0:c1"}), "restricted", set()),
    Case("container_engine_t since 1.31", PodT().csc(seLinuxOptions={"type": "container_engine_t"}), "restricted",
         set()),
    Case("container_engine_t at 1.30", PodT().csc(seLinuxOptions={"type": "container_engine_t"}), "privileged",
         {("seLinuxOptions", f"{SC0}.seLinuxOptions.type")}, minor=30),
    Case("user", PodT().csc(seLinuxOptions={"user": "root"}), "privileged",
         {("seLinuxOptions", f"{SC0}.seLinuxOptions.user")}),
    Case("role", PodT().sc(seLinuxOptions={"role": "sysadm_r"}), "privileged",
         {("seLinuxOptions", f"{PSC}.seLinuxOptions.role")}),
)  # fmt: skip
def test_se_linux(case: Case) -> None:
    run(case)


SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"


@table(
    Case("pod Unconfined", PodT().sc(seccompProfile={"type": "Unconfined"}), "privileged",
         {("seccompProfile_baseline", f"{PSC}.seccompProfile.type")}),
    Case("container Unconfined", PodT().csc(seccompProfile={"type": "Unconfined"}), "privileged",
         {("seccompProfile_baseline", f"{SC0}.seccompProfile.type")}),
    Case("container overrides pod",
         PodT().no_sc("seccompProfile").csc(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}),
         "restricted", set()),
    Case("unset", PodT().no_sc("seccompProfile"), "baseline",
         {("seccompProfile_restricted", f"{PSC}.seccompProfile.type")}),
    Case("one container unset",
         PodT().no_sc("seccompProfile").csc(seccompProfile={"type": "RuntimeDefault"}).add(), "baseline",
         {("seccompProfile_restricted", f"{PSC}.seccompProfile.type")}),
    Case("annotation before 1.19", PodT().no_sc("seccompProfile").annotate(SECCOMP_POD, "unconfined"),
         "privileged", {("seccompProfile_baseline", f"metadata.annotations[{SECCOMP_POD}]")}, minor=18),
    Case("annotation ignored since 1.19", PodT().no_sc("seccompProfile").annotate(SECCOMP_POD, "unconfined"),
         "baseline", {("seccompProfile_restricted", f"{PSC}.seccompProfile.type")}),
    Case("restricted had no seccomp rule before 1.19", PodT().no_sc("seccompProfile"), "restricted", set(),
         minor=18),
)  # fmt: skip
def test_seccomp(case: Case) -> None:
    run(case)


def sysctl(name: str) -> PodT:
    return PodT().sc(sysctls=[{"name": "kernel.shm_rmid_forced", "value": "1"}, {"name": name, "value": "1"}])


@table(
    Case("safe", sysctl("net.ipv4.ping_group_range"), "restricted", set()),
    Case("unsafe", sysctl("kernel.msgmax"), "privileged", {("sysctls", f"{PSC}.sysctls[1].name")}),
    Case("tcp_rmem since 1.32", sysctl("net.ipv4.tcp_rmem"), "restricted", set()),
    Case("tcp_rmem at 1.31", sysctl("net.ipv4.tcp_rmem"), "privileged", {("sysctls", f"{PSC}.sysctls[1].name")},
         minor=31),
    Case("keepalive since 1.29", sysctl("net.ipv4.tcp_keepalive_time"), "restricted", set(), minor=29),
    Case("keepalive at 1.28", sysctl("net.ipv4.tcp_keepalive_time"), "privileged",
         {("sysctls", f"{PSC}.sysctls[1].name")}, minor=28),
    Case("reserved ports since 1.27", sysctl("net.ipv4.ip_local_reserved_ports"), "restricted", set(), minor=27),
    Case("slash form is not the same name", sysctl("net/ipv4/ping_group_range"), "privileged",
         {("sysctls", f"{PSC}.sysctls[1].name")}),
)  # fmt: skip
def test_sysctls(case: Case) -> None:
    run(case)


@table(
    Case("Unmasked", PodT().csc(procMount="Unmasked"), "privileged", {("procMount", f"{SC0}.procMount")}),
    Case("Default", PodT().csc(procMount="Default"), "restricted", set()),
    Case("user namespace: baseline since 1.35", PodT().spec(hostUsers=False).csc(procMount="Unmasked"),
         "baseline", {("procMount_restricted", f"{SC0}.procMount")}),
    Case("user namespace at 1.34", PodT().spec(hostUsers=False).csc(procMount="Unmasked"), "privileged",
         {("procMount", f"{SC0}.procMount")}, minor=34),
)  # fmt: skip
def test_proc_mount(case: Case) -> None:
    run(case)


def windows() -> PodT:
    """A Windows pod (the API server forbids the Linux-only fields restricted otherwise asks for)."""
    return PodT(restricted=False).spec(os={"name": "windows"}).sc(runAsNonRoot=True)


HOST_PROCESS = {"hostProcess": True, "runAsUserName": "NT AUTHORITY\\SYSTEM"}


@table(
    Case("exempt from the Linux-only checks", windows(), "restricted", set()),
    Case("not exempt before 1.25", windows(), "baseline",
         {("allowPrivilegeEscalation", f"{SC0}.allowPrivilegeEscalation"),
          ("capabilities_restricted", f"{SC0}.capabilities.drop"),
          ("seccompProfile_restricted", f"{PSC}.seccompProfile.type")}, minor=24),
    Case("HostProcess pod", windows().spec(hostNetwork=True).sc(windowsOptions=HOST_PROCESS), "privileged",
         {("windowsHostProcess", f"{PSC}.windowsOptions.hostProcess"), ("hostNamespaces", "spec.hostNetwork")}),
    Case("HostProcess container", windows().spec(hostNetwork=True).csc(windowsOptions=HOST_PROCESS), "privileged",
         {("windowsHostProcess", f"{SC0}.windowsOptions.hostProcess"), ("hostNamespaces", "spec.hostNetwork")}),
    Case("hostProcess false", PodT().csc(windowsOptions={"hostProcess": False}), "restricted", set()),
)  # fmt: skip
def test_windows(case: Case) -> None:
    run(case)


@table(
    Case("liveness httpGet host", PodT().c(livenessProbe={"httpGet": {"port": 80, "host": "10.0.0.1"}}),
         "privileged", {("hostProbesAndHostLifecycle", f"{C0}.livenessProbe.httpGet.host")}),
    Case("readiness tcpSocket host", PodT().c(readinessProbe={"tcpSocket": {"port": 80, "host": "db"}}),
         "privileged", {("hostProbesAndHostLifecycle", f"{C0}.readinessProbe.tcpSocket.host")}),
    Case("preStop host", PodT().c(lifecycle={"preStop": {"httpGet": {"port": 80, "host": "x"}}}), "privileged",
         {("hostProbesAndHostLifecycle", f"{C0}.lifecycle.preStop.httpGet.host")}),
    Case("no host", PodT().c(startupProbe={"httpGet": {"port": 80}}), "restricted", set()),
    Case("not checked before 1.34", PodT().c(livenessProbe={"httpGet": {"port": 80, "host": "h"}}), "restricted",
         set(), minor=33),
)  # fmt: skip
def test_probe_hosts(case: Case) -> None:
    run(case)


# --- restricted checks -------------------------------------------------------------------------------------


@table(
    Case("unset", PodT().csc(allowPrivilegeEscalation=None), "baseline",
         {("allowPrivilegeEscalation", f"{SC0}.allowPrivilegeEscalation")}),
    Case("true", PodT().csc(allowPrivilegeEscalation=True), "baseline",
         {("allowPrivilegeEscalation", f"{SC0}.allowPrivilegeEscalation")}),
    Case("init container too", PodT().add("initContainers").csc(0, "initContainers", allowPrivilegeEscalation=True),
         "baseline", {("allowPrivilegeEscalation", "spec.initContainers[0].securityContext.allowPrivilegeEscalation")}),
    Case("not checked before 1.8", PodT().csc(allowPrivilegeEscalation=True), "restricted", set(), minor=7),
)  # fmt: skip
def test_allow_privilege_escalation(case: Case) -> None:
    run(case)


VOLUMES = {  # one valid source of every kind restricted allows
    "configMap": {"name": "cm"},
    "csi": {"driver": "csi.example.com"},
    "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
    "emptyDir": {},
    "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                   "resources": {"requests": {"storage": "1Gi"}}}}},
    "image": {"reference": "registry.example/data:1"},
    "persistentVolumeClaim": {"claimName": "data"},
    "projected": {"sources": [{"configMap": {"name": "cm"}}]},
    "secret": {"secretName": "s"},
}  # fmt: skip


@table(
    Case("nfs", PodT().volume("data", nfs={"server": "s", "path": "/"}), "baseline",
         {("restrictedVolumes", "spec.volumes[0].nfs")}),
    Case("gitRepo", PodT().volume("src", gitRepo={"repository": "r"}), "baseline",
         {("restrictedVolumes", "spec.volumes[0].gitRepo")}),
    Case("no source defaults to emptyDir", PodT().volume("scratch"), "restricted", set()),
    *(Case(kind, PodT().volume("v", **{kind: source}), "restricted", set()) for kind, source in VOLUMES.items()),
)  # fmt: skip
def test_restricted_volumes(case: Case) -> None:
    run(case)


@table(
    Case("pod unset, every container true", PodT().no_sc("runAsNonRoot").csc(runAsNonRoot=True), "restricted",
         set()),
    Case("pod unset, a container unset", PodT().no_sc("runAsNonRoot").csc(runAsNonRoot=True).add(), "baseline",
         {("runAsNonRoot", f"{PSC}.runAsNonRoot")}),
    Case("pod false, containers true", PodT().sc(runAsNonRoot=False).csc(runAsNonRoot=True), "baseline",
         {("runAsNonRoot", f"{PSC}.runAsNonRoot")}),
    Case("pod true, container false", PodT().csc(runAsNonRoot=False), "baseline",
         {("runAsNonRoot", f"{SC0}.runAsNonRoot")}),
    Case("user namespace", PodT().no_sc("runAsNonRoot").spec(hostUsers=False), "restricted", set()),
    Case("user namespace at 1.34", PodT().no_sc("runAsNonRoot").spec(hostUsers=False), "baseline",
         {("runAsNonRoot", f"{PSC}.runAsNonRoot")}, minor=34),
)  # fmt: skip
def test_run_as_non_root(case: Case) -> None:
    run(case)


@table(
    Case("pod 0", PodT().sc(runAsUser=0), "baseline", {("runAsUser", f"{PSC}.runAsUser")}),
    Case("container 0", PodT().csc(runAsUser=0), "baseline", {("runAsUser", f"{SC0}.runAsUser")}),
    Case("1000", PodT().sc(runAsUser=1000).csc(runAsUser=1001), "restricted", set()),
    Case("user namespace", PodT().spec(hostUsers=False).sc(runAsUser=0), "restricted", set()),
    Case("not checked before 1.23", PodT().sc(runAsUser=0), "restricted", set(), minor=22),
)  # fmt: skip
def test_run_as_user(case: Case) -> None:
    run(case)


# --- registry, levels, versions ----------------------------------------------------------------------------


def test_privileged_level_checks_nothing() -> None:
    pod = PodT(restricted=False).csc(privileged=True).spec(hostPID=True).build()
    assert evaluate(pod, "privileged") == []
    assert checks_for("privileged") == ()


def test_restricted_replaces_the_baseline_checks_it_overrides() -> None:
    ids = [c.id for c, _ in checks_for("restricted")]
    for replaced in ("capabilities_baseline", "seccompProfile_baseline", "hostPathVolumes", "procMount"):
        assert replaced not in ids
    assert ids[:3] == ["appArmorProfile", "hostNamespaces", "hostPorts"]  # baseline first, in ID order
    at_1_34 = [c.id for c, _ in checks_for("restricted", 34)]
    assert "procMount" in at_1_34 and "procMount_restricted" not in at_1_34
    assert [c.id for c, _ in checks_for("baseline", 33)].count("hostProbesAndHostLifecycle") == 0


def test_future_versions_evaluate_as_latest() -> None:
    pod = PodT().spec(hostUsers=False).sc(runAsUser=0).build()
    assert evaluate(pod, "restricted", 99) == evaluate(pod, "restricted", None) == []


@pytest.mark.parametrize(("text", "minor"), [("latest", None), ("v1.0", 0), ("v1.36", 36)])
def test_parse_version(text: str, minor: int | None) -> None:
    assert parse_version(text) == minor


@pytest.mark.parametrize("text", ["v2.0", "1.30", "v1.01", "v1.x", ""])
def test_parse_version_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r'"latest" or "v1\.x"'):
        parse_version(text)


def test_parse_level() -> None:
    assert [parse_level(x) for x in LEVELS] == list(LEVELS)
    with pytest.raises(ValueError, match="privileged, baseline, restricted"):
        parse_level("Restricted")


@pytest.mark.parametrize(
    ("labels", "enforce", "warn", "errors"),
    [
        (None, "privileged:latest", "privileged:latest", 0),
        ({"pod-security.kubernetes.io/enforce": "restricted"}, "restricted:latest", "restricted:latest", 0),
        (
            {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.30"},
            "baseline:v1.30",
            "baseline:v1.30",
            0,
        ),
        (
            {"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted"},
            "baseline:latest",
            "restricted:latest",
            0,
        ),
        # Invalid labels: enforce fails closed, warn fails open, a bad version means latest.
        ({"pod-security.kubernetes.io/enforce": "strict"}, "restricted:latest", "privileged:latest", 1),
        (
            {"pod-security.kubernetes.io/warn": "nope", "pod-security.kubernetes.io/enforce-version": "1.30"},
            "privileged:latest",
            "privileged:latest",
            2,
        ),
    ],
)
def test_namespace_policy(labels: dict[str, str] | None, enforce: str, warn: str, errors: int) -> None:
    policy = namespace_policy(labels)
    assert (str(policy.enforce), str(policy.warn), len(policy.errors)) == (enforce, warn, errors)


def test_kitchen_sink_reports_one_violation_per_field() -> None:
    pod = (
        PodT(restricted=False)
        .spec(hostNetwork=True, hostPID=True)
        .c(ports=[{"containerPort": 80}])
        .csc(privileged=True, allowPrivilegeEscalation=True, runAsUser=0, capabilities={"add": ["SYS_ADMIN"]})
        .volume("root", hostPath={"path": "/"})
        .build()
    )
    got = assess(pod)
    assert got.level == "privileged"
    paths = [v.path for v in got.violations]
    assert len(paths) == len(set(paths))
    assert {v.check for v in got.violations} == {
        "hostNamespaces", "hostPorts", "privileged", "capabilities_baseline", "hostPathVolumes",
        "allowPrivilegeEscalation", "capabilities_restricted", "runAsNonRoot", "runAsUser",
        "seccompProfile_restricted",
    }  # fmt: skip
    by_path = {v.path: v for v in got.violations}
    assert by_path[f"{SC0}.privileged"].subject == 'container "main"'
    assert by_path["spec.volumes[0].hostPath"].subject == 'volume "root"'
    assert by_path["spec.hostPID"].subject == "pod"
    assert by_path["spec.volumes[0].hostPath"].message == 'volume "root" mounts the node\'s /'


# --- properties ---------------------------------------------------------------------------------------------

# Changes that each lower a restricted pod to the given level (and never raise it).
CHANGES = {
    "privileged": lambda p: p.csc(privileged=True),
    "hostPID": lambda p: p.spec(hostPID=True),
    "hostPath": lambda p: p.volume("h", hostPath={"path": "/data"}),
    "sysadmin": lambda p: p.csc(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
    "root": lambda p: p.sc(runAsUser=0),
    "escalate": lambda p: p.csc(allowPrivilegeEscalation=True),
    "nfs": lambda p: p.volume("n", nfs={"server": "s", "path": "/"}),
    "no-seccomp": lambda p: p.no_sc("seccompProfile"),
    "userns": lambda p: p.spec(hostUsers=False),
    "safe-sysctl": lambda p: p.sc(sysctls=[{"name": "net.ipv4.tcp_syncookies", "value": "1"}]),
}
LOWERS_TO = {
    "privileged": "privileged", "hostPID": "privileged", "hostPath": "privileged", "sysadmin": "privileged",
    "root": "baseline", "escalate": "baseline", "nfs": "baseline", "no-seccomp": "baseline",
    "userns": "restricted", "safe-sysctl": "restricted",
}  # fmt: skip


@settings(max_examples=200, deadline=None)
@example(["root", "userns"], None)
@example(["root", "userns"], 34)
@given(st.lists(st.sampled_from(sorted(CHANGES)), unique=True), st.sampled_from([None, 0, 19, 23, 25, 34, 35]))
def test_level_is_the_strictest_level_without_violations(changes: list[str], minor: int | None) -> None:
    pod = PodT()
    for name in changes:
        CHANGES[name](pod)
    t = pod.build()
    got = assess(t, minor)
    passing = [lv for lv in LEVELS if not evaluate(t, lv, minor)]
    assert got.level == passing[-1]
    # Every level below the one met passes too (restricted implies baseline).
    assert passing == list(LEVELS[: level_rank(got.level) + 1])
    if minor is None:
        lowers = dict(LOWERS_TO)
        if "userns" in changes:  # since 1.35 UID 0 inside the pod's own user namespace is fine
            lowers["root"] = "restricted"
        expected = min((lowers[c] for c in changes), key=level_rank, default="restricted")
        assert got.level == expected
