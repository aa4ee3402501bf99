"""Pod Security at admission over real TLS: the findings as warnings (each within the API server's 120
characters), the namespace's enforce level applied to TrainJobs, its version honoured, lookups failing closed."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.compiler.podsecurity import lint_runtime
from kubetrain.k8s.webhook import names
from kubetrain.runtimes import builtin_runtime
from tests.builders import RuntimeBuilder
from tests.k8s.webhook.conftest import Served, trainjob

V, VR, VC = names.VALIDATE_TRAINJOB, names.VALIDATE_TRAINING_RUNTIME, names.VALIDATE_CLUSTER_TRAINING_RUNTIME
ENFORCE, WARN = "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/warn"
CTR = "ClusterTrainingRuntime"


def insecure() -> Any:
    return (
        RuntimeBuilder("psa-insecure")
        .ml(numNodes=1, torch={})
        .rjob(
            "node",
            ancestor="trainer",
            containers=[{"name": "node", "image": "img", "securityContext": {"privileged": True}}],
            pod={"hostPID": True},
        )
        .build()
    )


def userns_root() -> Any:
    """Restricted except for UID 0, which 1.35+ allows inside the pod's own user namespace."""
    rt = builtin_runtime("torch-distributed-restricted")
    assert rt is not None
    wire = rt.to_wire()
    wire["metadata"]["name"] = "psa-userns"
    pod = wire["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["hostUsers"] = False
    pod["securityContext"]["runAsUser"] = 0
    pod["securityContext"].pop("runAsNonRoot")
    return wire


@pytest.fixture
def cluster(served: Served) -> Iterator[Served]:
    c = served.cluster
    c.runtimes[(CTR, "psa-insecure", None)] = insecure()
    c.runtimes[(CTR, "torch-distributed-restricted", None)] = builtin_runtime("torch-distributed-restricted")
    c.runtimes[(CTR, "psa-userns", None)] = userns_root()
    yield served
    c.namespaces.clear()
    c.fail_lookups = False


def job(runtime: str, namespace: str) -> dict[str, Any]:
    obj = trainjob(runtime=runtime)
    obj["metadata"]["namespace"] = namespace
    return obj


RESTRICTED_OF_INSECURE = (
    'job node: would violate PodSecurity "restricted:latest": host namespaces (hostPID=true), '
    'privileged (container "node" must not set securityContext.privileged=true), '
    'allowPrivilegeEscalation != false (container "node" must set securityContext.allowPrivilegeEscalation=false), '
    'unrestricted capabilities (container "node" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "node" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "node" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost")'
)


def test_unlabelled_namespace_gets_the_findings_and_everything_restricted_refuses(cluster: Served) -> None:
    """One short line per baseline finding, then PodSecurity's own line for restricted: a privileged runtime's
    user learns what restricted also needs, not only the baseline part."""
    resp = cluster.review(V, job("psa-insecure", "plain"), namespace="plain")
    assert resp["allowed"] is True
    expected = [f.short() for f in lint_runtime(insecure()).violations("baseline")]
    assert resp["warnings"][:-1] == expected
    assert resp["warnings"][:-1] == [
        "PodSecurity baseline: job node: remove spec.hostPID",
        'PodSecurity baseline: job node, container "node": remove securityContext.privileged or set it to false',
    ]
    assert all(len(w) <= 120 for w in resp["warnings"][:-1])
    assert resp["warnings"][-1] == RESTRICTED_OF_INSECURE


def test_builtin_runtime_is_quiet_and_allowed_at_baseline(cluster: Served) -> None:
    cluster.cluster.namespaces["base"] = {ENFORCE: "baseline"}
    resp = cluster.review(V, job("torch-distributed", "base"), namespace="base")
    assert resp == {"uid": resp["uid"], "allowed": True}


def test_enforced_level_denies_before_any_pod_exists(cluster: Served) -> None:
    cluster.cluster.namespaces["base"] = {ENFORCE: "baseline"}
    resp = cluster.review(V, job("psa-insecure", "base"), namespace="base")
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    assert resp["status"]["message"] == (
        'pods of this TrainJob would violate PodSecurity "baseline:latest" enforced in namespace base: '
        "job node: hostNamespaces (remove spec.hostPID); "
        'job node: privileged (container "node": remove securityContext.privileged or set it to false)'
    )


def test_restricted_namespace_takes_the_restricted_variant_only(cluster: Served) -> None:
    cluster.cluster.namespaces["locked"] = {ENFORCE: "restricted"}
    denied = cluster.review(V, job("torch-distributed", "locked"), namespace="locked")
    assert denied["allowed"] is False
    message = denied["status"]["message"]
    assert message.startswith('pods of this TrainJob would violate PodSecurity "restricted:latest"')
    for check in ("allowPrivilegeEscalation", "capabilities_restricted", "runAsNonRoot", "seccompProfile_restricted"):
        assert f"job node: {check} (" in message
    ok = cluster.review(V, job("torch-distributed-restricted", "locked"), namespace="locked")
    assert ok == {"uid": ok["uid"], "allowed": True}


def test_warn_label_raises_the_warning_level(cluster: Served) -> None:
    cluster.cluster.namespaces["soft"] = {ENFORCE: "baseline", WARN: "restricted"}
    resp = cluster.review(V, job("torch-distributed", "soft"), namespace="soft")
    assert resp["allowed"] is True
    assert resp["warnings"][0] == (
        'PodSecurity restricted: job node, container "node": set securityContext.allowPrivilegeEscalation: false'
    )
    assert len(resp["warnings"]) == 4


def test_enforce_version_is_honoured(cluster: Served) -> None:
    cluster.cluster.namespaces["new"] = {ENFORCE: "restricted"}
    cluster.cluster.namespaces["old"] = {ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.34"}
    assert cluster.review(V, job("psa-userns", "new"), namespace="new")["allowed"] is True
    old = cluster.review(V, job("psa-userns", "old"), namespace="old")
    assert old["allowed"] is False
    assert 'PodSecurity "restricted:v1.34"' in old["status"]["message"]
    assert "runAsUser (set a non-zero runAsUser)" in old["status"]["message"]


def test_invalid_enforce_label_fails_closed(cluster: Served) -> None:
    cluster.cluster.namespaces["typo"] = {ENFORCE: "Restricted"}
    resp = cluster.review(V, job("torch-distributed", "typo"), namespace="typo")
    assert resp["allowed"] is False and '"restricted:latest"' in resp["status"]["message"]


def test_update_that_leaves_the_pods_alone_is_not_judged(cluster: Served) -> None:
    """A namespace labelled after the job was created must not block e.g. suspending it."""
    cluster.cluster.namespaces["late"] = {ENFORCE: "baseline"}
    old = job("psa-insecure", "late")
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    resp = cluster.review(V, new, old=old, operation="UPDATE", namespace="late")
    assert resp["allowed"] is True and "warnings" not in resp
    changed = copy.deepcopy(old)
    changed["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {"hostIPC": True}}]
    assert cluster.review(V, changed, old=old, operation="UPDATE", namespace="late")["allowed"] is False


def test_namespace_lookup_failure_is_an_internal_error(cluster: Served) -> None:
    cluster.cluster.fail_lookups = True
    resp = cluster.review(V, job("torch-distributed", "any"), namespace="any")
    assert resp["allowed"] is False and resp["status"]["code"] == 500


def test_cluster_runtime_gets_warnings_not_a_denial(cluster: Served) -> None:
    resp = cluster.review(VC, insecure().to_wire(), namespace=None)
    assert resp["allowed"] is True
    report = lint_runtime(insecure())
    assert resp["warnings"] == [f.short() for f in report.violations("baseline")] + report.summaries("baseline")
    assert resp["warnings"][-1] == RESTRICTED_OF_INSECURE


def test_training_runtime_in_an_enforcing_namespace_is_told_its_jobs_will_be_denied(cluster: Served) -> None:
    cluster.cluster.namespaces["team"] = {ENFORCE: "restricted"}
    rt = builtin_runtime("torch-distributed")
    assert rt is not None
    wire = rt.to_wire() | {"kind": "TrainingRuntime"}
    wire["metadata"]["namespace"] = "team"
    resp = cluster.review(VR, wire, namespace="team")
    assert resp["allowed"] is True
    assert resp["warnings"][0] == (
        'PodSecurity: namespace team enforces "restricted:latest"; TrainJobs using this baseline runtime will be denied'
    )
    assert len(resp["warnings"]) == 5 and all(len(w) <= 120 for w in resp["warnings"])


def test_same_findings_as_kubetrain_validate(cluster: Served, tmp_path: Any) -> None:
    import yaml

    from kubetrain.cli.validate import validate_files
    from kubetrain.compiler.podsecurity import PodSecurityReport

    file = tmp_path / "objs.yaml"
    file.write_text(yaml.safe_dump_all([insecure().to_wire(), job("psa-insecure", "plain")]))
    reports: list[PodSecurityReport] = []
    validate_files((str(file),), None, reports=reports)
    runtime_report, job_report = reports
    webhook = cluster.review(V, job("psa-insecure", "plain"), namespace="plain")["warnings"]
    assert webhook == [f.short() for f in job_report.violations("baseline")] + job_report.summaries("baseline")
    assert webhook == [f.short() for f in runtime_report.violations("baseline")] + runtime_report.summaries()
