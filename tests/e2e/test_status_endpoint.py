"""The status endpoint on a real API server: the official SDK's ``update_trainjob_status``, unchanged, writes
``status.trainerStatus`` through ``kubetrain operator``, and the auth rules hold with real TokenReviews.

There is no kubelet: the test creates the pods the JobSet would get (with its labels) and asks the TokenRequest
API for tokens bound to them (audience trainer.kubeflow.org), which is what the projected volume would hold. The
SDK then runs with the environment the operator put into the JobSet's pod template (the operator runs on this
machine with ``--status-url https://127.0.0.1:<port>``) and the CA from the ``<trainjob>-tls-config`` ConfigMap.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import progress as P
from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import OperatorProcess, call, get, torch_runtime, trainjob, wait_until

pytestmark = pytest.mark.e2e
pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed")


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def make_pod(ns: str, job: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-node-0-0-{uuid.uuid4().hex[:5]}",
            "namespace": ns,
            "labels": {"jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
        },
        "spec": {"containers": [{"name": "node", "image": "busybox:1.36"}]},
    }
    return dict(call(lambda c: c.create(pod)))


def bound_token(ns: str, pod: dict[str, Any] | None, audience: str = P.TOKEN_AUDIENCE) -> str:
    spec: dict[str, Any] = {"audiences": [audience], "expirationSeconds": 3600}
    if pod is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                  "uid": pod["metadata"]["uid"]}  # fmt: skip

    async def request(c: Client) -> str:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        answer = await c.session.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/default/token", body=body)
        return str(answer["status"]["token"])

    wait_until(lambda: get(r.Resource("", "v1", "serviceaccounts", "ServiceAccount"), "default", ns), 60,
               "the namespace's default ServiceAccount")  # fmt: skip
    return str(call(request))


def wired_env(ns: str, name: str) -> dict[str, str]:
    js = wait_until(lambda: get(r.JOBSET, name, ns), what="JobSet")
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return {e["name"]: e.get("value", "") for e in pod["containers"][0].get("env") or []}


def sdk(url: str, ca: Path, token: Path, pct: int) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from kubeflow.trainer import update_trainjob_status\n"
        f"ok = update_trainjob_status(progress_percent={pct}, estimated_remaining_seconds=120,"
        " metrics={'loss': 0.123, 'accuracy': 0.95})\n"
        "sys.exit(0 if ok else 3)\n"
    )
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update({P.ENV_URL: url, P.ENV_CA_CERT: str(ca), P.ENV_TOKEN: str(token)})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def post(url: str, ca: str, token: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ssl.create_default_context(cadata=ca), timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture
def status_operator(kubeconfig: str, namespace: str) -> Any:
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace).start()
    try:
        yield op
    finally:
        op.stop()


def test_official_sdk_sets_trainer_status_and_auth_rules_hold(
    namespace: str, status_operator: OperatorProcess, tmp_path: Path
) -> None:
    ns = namespace
    rt = uniq("rt")
    call(lambda c: c.apply(torch_runtime(rt, namespace=ns)))
    mine, other = uniq("tj"), uniq("tj")
    call(lambda c: c.create(trainjob(mine, ns, rt)))
    call(lambda c: c.create(trainjob(other, ns, rt)))
    env = wired_env(ns, mine)
    url = env[P.ENV_URL]
    assert url == f"https://127.0.0.1:{status_operator.status_port}{P.status_path(ns, mine)}"
    assert env[P.ENV_TOKEN] == f"{P.MOUNT_DIR}/token" and env[P.ENV_CA_CERT] == f"{P.MOUNT_DIR}/ca.crt"
    cm = wait_until(lambda: get(r.CONFIGMAP, f"{mine}-tls-config", ns), what="CA ConfigMap")
    ca = cm["data"]["ca.crt"]
    (tmp_path / "ca.crt").write_text(ca)

    pod = make_pod(ns, mine)
    token = bound_token(ns, pod)
    (tmp_path / "token").write_text(token)
    done = sdk(url, tmp_path / "ca.crt", tmp_path / "token", 42)
    assert done.returncode == 0, done.stdout + done.stderr
    ts = wait_until(lambda: ((get(r.TRAINJOB, mine, ns) or {}).get("status") or {}).get("trainerStatus"),
                    what="trainerStatus")  # fmt: skip
    print("status.trainerStatus on the API server:", json.dumps(ts))
    assert ts["progressPercentage"] == 42 and ts["estimatedRemainingSeconds"] == 120
    assert ts["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]

    report = {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 50}}
    outcomes = {
        "no token": post(url, ca, None, report),
        "garbage token": post(url, ca, "not-a-token", report),
        "API-server audience": post(url, ca, bound_token(ns, pod, "https://kubernetes.default.svc"), report),
        "other TrainJob's pod": post(
            f"https://127.0.0.1:{status_operator.status_port}{P.status_path(ns, mine)}",
            ca,
            bound_token(ns, make_pod(ns, other)),
            report,
        ),
        "token bound to no pod": post(url, ca, bound_token(ns, None), report),
    }
    print("refusals:", {k: (code, body.get("message")) for k, (code, body) in outcomes.items()})
    assert {k: code for k, (code, _) in outcomes.items()} == {
        "no token": 401,
        "garbage token": 401,
        "API-server audience": 401,
        "other TrainJob's pod": 403,
        "token bound to no pod": 403,
    }
    # Nothing refused reached the status.
    assert (get(r.TRAINJOB, mine, ns) or {})["status"]["trainerStatus"]["progressPercentage"] == 42
    # A deleted pod's token stops working (the API server invalidates bound tokens; our cache holds for 60 s,
    # so a fresh pod is used to show it end to end).
    gone = make_pod(ns, mine)
    gone_token = bound_token(ns, gone)
    call(lambda c: c.delete(r.POD, gone["metadata"]["name"], ns))
    code, body = post(url, ca, gone_token, report)
    assert code == 401, body
