"""The Pod Security lint against the real thing: kube-apiserver's PodSecurity admission judges each pod (a
server-side dry-run create in namespaces labelled enforce=baseline and enforce=restricted, at the version the
case is about) and must accept exactly the pods the lint rates at that level or better, refusing them for
exactly the checks the lint names.

Pods come from every built-in runtime (the restricted variant included), upstream's runtimes, the insecure
examples of the issue and seed 003, and every case of the unit tables (tests/api/test_podsecurity.py).

Ephemeral containers cannot be set on create: such a pod is created without them and PodSecurity judges it when
they are added (a dry-run update of ``pods/ephemeralcontainers``, which PodSecurity checks like a create). A few
table cases are pods no API server admits at all (``NEVER_VALID``); for them the test asserts the server refuses
them for that reason, since PodSecurity never sees them.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubetrain.api.loader import load_file
from kubetrain.api.podsecurity import Level, evaluate
from kubetrain.compiler import compile_trainjob, fixed_keygen
from kubetrain.compiler.podsecurity import probe_trainjob
from kubetrain.k8s.client import ApiError, Client, Conflict, Invalid
from kubetrain.k8s.client import resources as r
from kubetrain.runtimes import builtin_runtimes
from tests.api.test_podsecurity import ALL_CASES
from tests.conftest import SHARED
from tests.e2e.conftest import KUBECONFIG, call

pytestmark = pytest.mark.e2e

# PodSecurity's reason for each check (the words its denial message lists).
REASONS = {
    "appArmorProfile": "forbidden AppArmor profile",
    "capabilities_baseline": "non-default capabilities",
    "hostNamespaces": "host namespaces",
    "hostPathVolumes": "hostPath volumes",
    "hostPorts": "hostPort",
    "hostProbesAndHostLifecycle": "probe or lifecycle host",
    "privileged": "privileged",
    "procMount": "procMount",
    "procMount_restricted": "procMount",
    "seLinuxOptions": "seLinuxOptions",
    "seccompProfile_baseline": "seccompProfile",
    "seccompProfile_restricted": "seccompProfile",
    "sysctls": "forbidden sysctls",
    "windowsHostProcess": "hostProcess",
    "allowPrivilegeEscalation": "allowPrivilegeEscalation != false",
    "capabilities_restricted": "unrestricted capabilities",
    "restrictedVolumes": "restricted volume types",
    "runAsNonRoot": "runAsNonRoot != true",
    "runAsUser": "runAsUser=0",
}


@dataclass
class PodCase:
    id: str
    template: dict[str, Any]
    minor: int | None = None


def _runtime_pods(runtime: Any, prefix: str) -> list[PodCase]:
    objects = compile_trainjob(probe_trainjob(runtime), runtime, keygen=fixed_keygen())
    jobset = next(o for o in objects if o["kind"] == "JobSet")
    return [
        PodCase(f"{prefix}/{runtime.name}/{rj['name']}", rj["template"]["spec"]["template"])
        for rj in jobset["spec"]["replicatedJobs"]
    ]


def _container(**security: Any) -> dict[str, Any]:
    return {"name": "node", "image": "img", "securityContext": security}


ISSUE_11 = {  # what `kubetrain validate` used to accept with 0 warnings
    "spec": {
        "hostNetwork": True,
        "hostPID": True,
        "containers": [
            _container(privileged=True, allowPrivilegeEscalation=True, runAsUser=0, capabilities={"add": ["SYS_ADMIN"]})
            | {"volumeMounts": [{"name": "root", "mountPath": "/host"}]}
        ],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }
}
SEED_003_SECURE = {  # seed 003's "secure" pod: non-root, no escalation, read-only root, no capabilities
    "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "fsGroup": 1000},
        "containers": [
            _container(allowPrivilegeEscalation=False, readOnlyRootFilesystem=True, capabilities={"drop": ["ALL"]})
        ],
    }
}
SEED_003_RDMA = {  # seed 003's RDMA example: IPC_LOCK and /dev/infiniband from the host
    "spec": {
        "containers": [
            _container(capabilities={"add": ["IPC_LOCK"]})
            | {"volumeMounts": [{"name": "rdma", "mountPath": "/dev/ib"}]}
        ],
        "volumes": [{"name": "rdma", "hostPath": {"path": "/dev/infiniband"}}],
    }
}


def cases() -> list[PodCase]:
    out: list[PodCase] = []
    for rt in builtin_runtimes():
        out += _runtime_pods(rt, "builtin")
    for path in sorted((SHARED / "reference" / "upstream" / "runtimes").glob("v*/*.yaml")):
        (rt,) = load_file(path).objects
        out += _runtime_pods(rt, f"upstream-{path.parent.name}")
    out += [
        PodCase("issue-11-insecure", ISSUE_11),
        PodCase("seed-003-secure", SEED_003_SECURE),
        PodCase("seed-003-rdma", SEED_003_RDMA),
    ]
    out += [PodCase(f"table/{c.id}", c.pod.build(), c.minor) for c in ALL_CASES]
    return out


def _as_pod(template: dict[str, Any], namespace: str) -> dict[str, Any]:
    spec = copy.deepcopy(template.get("spec") or {})
    meta = template.get("metadata") or {}
    # The ServiceAccount admission plugin refuses pods of accounts that do not exist; PodSecurity ignores them.
    spec.pop("serviceAccountName", None)
    # JobSet adds a PVC volume for each volumeClaimPolicies template; do the same so the pod validates.
    have = {v["name"] for v in spec.get("volumes") or []}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for m in c.get("volumeMounts") or []:
            if m["name"] not in have:
                have.add(m["name"])
                spec.setdefault("volumes", []).append(
                    {"name": m["name"], "persistentVolumeClaim": {"claimName": m["name"]}}
                )
    metadata = {"name": f"pss-{uuid.uuid4().hex[:8]}", "namespace": namespace}
    for key in ("labels", "annotations"):
        if meta.get(key):
            metadata[key] = meta[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@pytest.fixture(scope="module")
def enforcing() -> Iterator[Callable[[Level, int | None], str]]:
    """``enforcing(level, minor)``: a namespace labelled to enforce that level at that policy version."""
    assert KUBECONFIG
    made: dict[tuple[str, int | None], str] = {}
    run = uuid.uuid4().hex[:6]

    def get(level: Level, minor: int | None) -> str:
        if (level, minor) not in made:
            name = f"kt-pss-{run}-{level}-{'latest' if minor is None else f'v1-{minor}'}"
            labels = {
                "pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/enforce-version": "latest" if minor is None else f"v1.{minor}",
            }
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
            call(lambda client: client.create(ns))
            made[(level, minor)] = name
        return made[(level, minor)]

    yield get

    async def cleanup(client: Client) -> None:
        for name in made.values():
            try:
                await client.delete(r.NAMESPACE, name)
            except ApiError:
                pass

    call(cleanup)


async def verdict(request: Awaitable[Any]) -> tuple[str, str]:
    """("allowed" | "forbidden" | "invalid", the server's message) of a dry-run ``request``; other errors raise."""
    try:
        await request
    except Invalid as exc:
        return "invalid", exc.message
    except ApiError as exc:
        if exc.status == 403 and "violates PodSecurity" in exc.message:
            return "forbidden", exc.message
        raise
    return "allowed", ""


def dry_run(pod: dict[str, Any]) -> tuple[str, str]:
    """The verdict on creating ``pod``."""

    async def go(client: Client) -> tuple[str, str]:
        path = r.POD.path(pod["metadata"]["namespace"])
        return await verdict(client.session.request("POST", path, params={"dryRun": "All"}, body=pod))

    result: tuple[str, str] = call(go)
    return result


def reasons_in(message: str) -> set[str]:
    verdict = message.split("violates PodSecurity", 1)[1]
    return {reason for reason in set(REASONS.values()) if re.search(re.escape(reason) + r"s? \(", verdict)}


ALL = cases()

# Table cases whose pod the API server's own validation refuses, on create and on an ephemeral-container update
# alike, so no PodSecurity verdict exists for them: (case id, the server's reason).
NEVER_VALID = {
    "table/ephemeral ports are not defaulted": "ports: Forbidden: cannot be set for an Ephemeral Container",
    "table/Unmasked": "`hostUsers` must be false to use `Unmasked`",
}


def dry_run_ephemeral(pod: dict[str, Any]) -> tuple[str, str]:
    """The verdict on a pod with ephemeral containers: the pod is created without them (it must pass the
    namespace's level so), then they are added by a dry-run update of ``pods/ephemeralcontainers``."""
    ephemeral = pod["spec"]["ephemeralContainers"]
    base = copy.deepcopy(pod)
    del base["spec"]["ephemeralContainers"]
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

    async def go(client: Client) -> tuple[str, str]:
        current = await client.create(base)
        try:
            path = r.POD.path(ns, name, "ephemeralcontainers")
            while True:
                current["spec"]["ephemeralContainers"] = ephemeral
                try:
                    return await verdict(
                        client.session.request("PUT", path, params={"dryRun": "All"}, body=current)
                    )
                except Conflict:
                    # The scheduler or the kubelet changed the pod since it was read: read it again.
                    current = await client.get(r.POD, name, ns)
        finally:
            await client.delete(r.POD, name, ns, missing_ok=True)

    result: tuple[str, str] = call(go)
    return result


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_the_api_server_agrees_with_the_lint(case: PodCase, enforcing: Callable[[Level, int | None], str]) -> None:
    for level in ("baseline", "restricted"):
        expected = evaluate(case.template, level, case.minor)
        pod = _as_pod(case.template, enforcing(level, case.minor))
        verdict, message = dry_run(pod)
        if case.id in NEVER_VALID:
            assert verdict == "invalid" and NEVER_VALID[case.id] in message, (level, message)
            continue
        if verdict == "invalid" and pod["spec"].get("ephemeralContainers"):
            assert "spec.ephemeralContainers: Forbidden: cannot be set on create" in message, (level, message)
            verdict, message = dry_run_ephemeral(pod)
        assert verdict == ("forbidden" if expected else "allowed"), (level, message)
        if expected:
            assert reasons_in(message) == {REASONS[v.check] for v in expected}, (level, message)
