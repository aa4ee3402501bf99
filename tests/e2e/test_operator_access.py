"""How the operator and the CLI get in: exactly the shipped RBAC (impersonating the operator's service account),
an exec credential plugin, and a clear failure when the Lease namespace is missing."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    KUBECONFIG,
    REPO,
    OperatorProcess,
    call,
    complete_jobset,
    conditions,
    get,
    setup_runtime,
    start_webhook,
    stop_webhook,
    trainjob,
    uniq,
    wait_until,
)

pytestmark = pytest.mark.e2e
PLUGIN = REPO / "tests" / "k8s" / "fake_exec_plugin.py"


def test_the_operator_works_with_exactly_the_shipped_cluster_role(
    kubeconfig: str, fresh_namespace: str, operator_account: str, tmp_path: Path
) -> None:
    """Everything a TrainJob's life needs, done as system:serviceaccount:<ns>:kubetrain-operator with only the
    roles manifests/rbac binds to it: watch all namespaces, snapshot, JobSet, status, events, lease, the
    webhook's lookups, suspend/resume, the deadline's JobSet delete, and the legacy runtime finalizer."""
    ns = fresh_namespace
    as_operator = operator_account
    hook = start_webhook(as_operator, ns, tmp_path / "certs", all_namespaces=True)  # cluster-wide, as deployed
    try:
        rt = setup_runtime(ns)
        name = uniq("tj")
        call(lambda c: c.create(trainjob(name, ns, rt)))
        wait_until(lambda: get(r.JOBSET, name, ns), what="JobSet")
        assert get(r.CONFIGMAP, f"{name}-runtime-snapshot", ns) is not None
        complete_jobset(name, ns)
        wait_until(lambda: conditions(name, ns).get("Complete"), what="Complete")

        suspended = uniq("tj")
        call(lambda c: c.create(trainjob(suspended, ns, rt, suspend=True)))
        wait_until(lambda: conditions(suspended, ns).get("Suspended"), what="Suspended")
        call(lambda c: c.merge_patch(r.TRAINJOB, suspended, ns, {"spec": {"suspend": False}}))
        wait_until(lambda: conditions(suspended, ns).get("Suspended", {}).get("reason") == "Resumed", what="resume")

        late = uniq("tj")
        call(lambda c: c.create(trainjob(late, ns, rt, activeDeadlineSeconds=2)))
        wait_until(lambda: conditions(late, ns).get("Failed"), 60, "DeadlineExceeded")
        wait_until(lambda: get(r.JOBSET, late, ns) is None, what="JobSet deleted by the deadline")

        legacy = setup_runtime(ns)
        call(
            lambda c: c.merge_patch(
                r.TRAINING_RUNTIME, legacy, ns, {"metadata": {"finalizers": ["trainer.kubeflow.org/resource-in-use"]}}
            )
        )
        wait_until(
            lambda: not ((get(r.TRAINING_RUNTIME, legacy, ns) or {}).get("metadata") or {}).get("finalizers"),
            what="legacy finalizer removed",
        )
        log = hook.operator.log()
        assert "forbidden" not in log.lower(), log
    finally:
        stop_webhook(hook)


def test_a_missing_lease_namespace_fails_at_start_and_says_what_to_do(kubeconfig: str) -> None:
    missing = uniq("no-such-namespace")
    cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", kubeconfig, "--health-port", "-1"]
    out = subprocess.run([*cmd, "--lease-namespace", missing], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert f'Error: leader election cannot start: the Lease namespace "{missing}" does not exist' in out.stderr
    for fix in ("--lease-namespace", "--no-leader-elect", f"kubectl create namespace {missing}"):
        assert fix in out.stderr


def _exec_kubeconfig(tmp_path: Path) -> str:
    """The admin kubeconfig with its client certificate handed out by an exec plugin instead of embedded."""
    assert KUBECONFIG
    doc = yaml.safe_load(Path(KUBECONFIG).read_text())
    ctx = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    user = next(u for u in doc["users"] if u["name"] == ctx["user"])["user"]
    if "client-certificate-data" not in user:
        pytest.skip("the e2e kubeconfig has no embedded client certificate to hand out through a plugin")
    state = tmp_path / "plugin"
    state.mkdir()
    plan: dict[str, Any] = {
        "cert": base64.b64decode(user["client-certificate-data"]).decode(),
        "key": base64.b64decode(user["client-key-data"]).decode(),
        "ttl": 3600,
    }
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
    kubeconfig: str, fresh_namespace: str, tmp_path: Path
) -> None:
    ns = fresh_namespace
    via_exec = _exec_kubeconfig(tmp_path)
    rt = setup_runtime(ns)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, ns, rt)))
    cli = [sys.executable, "-m", "kubetrain.cli.main"]
    out = subprocess.run(
        [*cli, "get", "trainjobs", "-n", ns, "--kubeconfig", via_exec], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert name in out.stdout
    op = OperatorProcess(via_exec, ns, "--namespace", ns).start()
    try:
        wait_until(lambda: get(r.JOBSET, name, ns), what="JobSet from the exec-authenticated operator")
    finally:
        op.stop()
    calls = (tmp_path / "plugin" / "calls.jsonl").read_text().splitlines()
    assert len(calls) >= 2  # the CLI and the operator each ran it once (the certificate is cached)
    assert json.loads(calls[0])["info"]["spec"]["cluster"]["server"].startswith("https://")


def test_impersonation_is_really_restricted(kubeconfig: str, fresh_namespace: str, operator_account: str) -> None:
    """The RBAC test above only proves something if impersonation narrows what the admin may do."""
    from kubetrain.k8s.client import ApiError

    as_operator = operator_account

    async def delete_namespace(client: Client) -> ApiError:
        try:
            await client.delete(r.NAMESPACE, fresh_namespace)
        except ApiError as exc:
            return exc
        raise AssertionError("the operator's service account may delete namespaces")

    err = call(delete_namespace, as_operator)
    assert err.status == 403
