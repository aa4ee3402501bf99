"""How the operator and the CLI get in: the operator pod as its ServiceAccount with exactly the shipped RBAC, an
exec credential plugin, and a clear failure when the Lease namespace is missing."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import Client, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    KUBECONFIG,
    RBAC,
    REPO,
    SLEEP,
    DeployedOperator,
    OperatorProcess,
    call,
    conditions,
    get,
    running_pods,
    setup_runtime,
    sh,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = pytest.mark.e2e
PLUGIN = REPO / "tests" / "k8s" / "fake_exec_plugin.py"
SAR = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False)
OPERATOR_SA = "system:serviceaccount:kubeflow-system:kubetrain-operator"


def shipped(kind: str, name: str) -> dict[str, Any]:
    rbac = REPO / "manifests" / "base" / "rbac"
    docs = [d for p in sorted(rbac.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    return next(d for d in docs if d and d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_operator_pod_runs_a_trainjobs_life_with_exactly_the_shipped_rbac(
    namespace: str, operator: DeployedOperator
) -> None:
    """Everything a TrainJob's life needs (watch all namespaces, snapshot, JobSet, status, events, lease, suspend
    and resume, the deadline's JobSet delete, the legacy runtime finalizer), done by the operator pod as its
    ServiceAccount with the installed roles, which equal manifests/base/rbac."""
    for pod in operator.pods():
        assert pod["spec"]["serviceAccountName"] == "kubetrain-operator"
    role = get(RBAC["ClusterRole"], "kubetrain-operator", None)
    assert role is not None and role["rules"] == shipped("ClusterRole", "kubetrain-operator")["rules"]
    binding = get(RBAC["ClusterRoleBinding"], "kubetrain-operator", None)
    assert binding is not None
    assert binding["subjects"] == shipped("ClusterRoleBinding", "kubetrain-operator")["subjects"]

    ns = namespace
    rt = setup_runtime(ns)
    done = uniq("tj")
    call(lambda c: c.create(trainjob(done, ns, rt, trainer=sh("true"))))
    assert wait_finished(done, ns)["type"] == "Complete"

    paused = uniq("tj")
    call(lambda c: c.create(trainjob(paused, ns, rt, trainer=sh(SLEEP), suspend=True)))
    wait_until(lambda: conditions(paused, ns).get("Suspended"), 120, "Suspended")
    call(lambda c: c.merge_patch(r.TRAINJOB, paused, ns, {"spec": {"suspend": False}}))
    wait_until(lambda: conditions(paused, ns).get("Suspended", {}).get("reason") == "Resumed", 120, "resume")
    wait_until(lambda: running_pods(paused, ns), 180, "the resumed pod")
    call(lambda c: c.delete(r.TRAINJOB, paused, ns))

    late = uniq("tj")
    call(lambda c: c.create(trainjob(late, ns, rt, trainer=sh(SLEEP), activeDeadlineSeconds=5)))
    assert wait_finished(late, ns, 180)["reason"] == "DeadlineExceeded"
    wait_until(lambda: get(r.JOBSET, late, ns) is None, 120, "JobSet deleted by the deadline")

    legacy = setup_runtime(ns)
    patch = {"metadata": {"finalizers": ["trainer.kubeflow.org/resource-in-use"]}}
    call(lambda c: c.merge_patch(r.TRAINING_RUNTIME, legacy, ns, patch))
    wait_until(
        lambda: not ((get(r.TRAINING_RUNTIME, legacy, ns) or {}).get("metadata") or {}).get("finalizers"),
        120,
        "legacy finalizer removed",
    )
    for pod in operator.pods():
        log = operator.log(pod["metadata"]["name"])
        assert "forbidden" not in log.lower(), log[-4000:]


def can(verb: str, resource: str, group: str = "", namespace: str = "", subresource: str = "") -> bool:
    attrs = {"verb": verb, "group": group, "resource": resource, "subresource": subresource, "namespace": namespace}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": OPERATOR_SA, "groups": ["system:serviceaccounts"], "resourceAttributes": attrs},
    }

    async def go(client: Client) -> bool:
        return bool((await client.create(review, resource=SAR))["status"].get("allowed"))

    return bool(call(go))


def test_the_operators_service_account_may_do_no_more(operator: DeployedOperator) -> None:
    assert can("patch", "trainjobs", "trainer.kubeflow.org", "default", "status")
    assert can("delete", "jobsets", "jobset.x-k8s.io", "default")
    assert not can("delete", "namespaces")
    assert not can("create", "pods", namespace="default")
    assert not can("update", "trainjobs", "trainer.kubeflow.org", "default")
    assert not can("get", "secrets", namespace="default")  # list/watch only, and the data is dropped on arrival


def test_a_missing_lease_namespace_fails_at_start_and_says_what_to_do(kubeconfig: str) -> None:
    """The subject is the binary's start on a workstation (flags, error text), so it runs here, not in a pod; it
    stops before it reconciles anything."""
    missing = uniq("no-such-namespace")
    cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", kubeconfig, "--health-port", "-1"]
    out = subprocess.run([*cmd, "--lease-namespace", missing], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert f'Error: leader election cannot start: the Lease namespace "{missing}" does not exist' in out.stderr
    for fix in ("--lease-namespace", "--no-leader-elect", f"kubectl create namespace {missing}"):
        assert fix in out.stderr


def _exec_kubeconfig(tmp_path: Path) -> str:
    """The admin kubeconfig with its credential (client certificate or bearer token) handed out by an exec plugin
    instead of embedded."""
    assert KUBECONFIG
    doc = yaml.safe_load(Path(KUBECONFIG).read_text())
    ctx = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    user = next(u for u in doc["users"] if u["name"] == ctx["user"])["user"]
    plan: dict[str, Any] = {"ttl": 3600}
    if "client-certificate-data" in user:
        plan["cert"] = base64.b64decode(user["client-certificate-data"]).decode()
        plan["key"] = base64.b64decode(user["client-key-data"]).decode()
    elif "token" in user:
        plan["token"] = user["token"]
    else:
        pytest.skip("the e2e kubeconfig has no embedded client certificate or token to hand out through a plugin")
    state = tmp_path / "plugin"
    state.mkdir()
    (state / "plan.json").write_text(json.dumps(plan))
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(PLUGIN)],
            "env": [{"name": "FAKE_EXEC_DIR", "value": str(state)}],
            "interactiveMode": "Never",
            "provideClusterInfo": True,
        }
    }
    for u in doc["users"]:
        if u["name"] == ctx["user"]:
            u["user"] = exec_user
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_cli_and_operator_authenticate_through_an_exec_plugin(
    fresh_namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    """Exec plugins are for kubeconfigs on workstations (an operator in a pod uses its ServiceAccount), so the
    operator runs here. It is given a namespace with no TrainJobs (the installed operator owns those) and proves
    it got in by syncing its caches and taking its own Lease there."""
    ns = fresh_namespace
    via_exec = _exec_kubeconfig(tmp_path)
    rt = setup_runtime(ns)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, ns, rt, trainer=sh("true"))))
    cli = [sys.executable, "-m", "kubetrain.cli.main"]
    out = subprocess.run(
        [*cli, "get", "trainjobs", "-n", ns, "--kubeconfig", via_exec], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert name in out.stdout
    wait_finished(name, ns)
    call(lambda c: c.delete(r.TRAINJOB, name, ns))
    wait_until(lambda: get(r.TRAINJOB, name, ns) is None, 60, "the TrainJob gone")

    identity = uniq("exec-op")
    op = OperatorProcess(via_exec, ns, "--namespace", ns, "--no-pod-failures", identity=identity).start()
    try:
        lease = wait_until(
            lambda: (x := get(r.LEASE, "kubetrain-operator", ns)) and x["spec"].get("holderIdentity") == identity and x,
            60,
            "the exec-authenticated operator to take its Lease",
        )
        assert lease["spec"]["holderIdentity"] == identity
    finally:
        op.stop()
    calls = (tmp_path / "plugin" / "calls.jsonl").read_text().splitlines()
    assert len(calls) >= 2  # the CLI and the operator each ran it once (the credential is cached)
    assert json.loads(calls[0])["info"]["spec"]["cluster"]["server"].startswith("https://")
