"""Progress reports from a real pod (docs/progress.md): the training code calls the official SDK's
``update_trainjob_status`` with the kubelet's projected service-account token (audience ``trainer.kubeflow.org``,
bound to the pod), the operator's status endpoint behind its Service checks it with a TokenReview and writes
``status.trainerStatus``; the same pod is refused without a token, with its API-server token, and for another
TrainJob.

The training image has no Kubeflow SDK (a user's image would ``pip install kubeflow``, and the bed's pods cannot reach
a package index), so this machine's copy is mounted read-only into the pod (hostPath): the node must be this machine,
as on the one-node bed.
"""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import progress as P
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    NODE,
    SLEEP,
    DeployedOperator,
    call,
    get,
    pod_log,
    pod_spec,
    pods_of,
    sh,
    status,
    torch_runtime,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = pytest.mark.e2e
kubeflow = pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed (pip install -e '.[dev]')")
SITE = Path(kubeflow.__file__).resolve().parents[2]  # .../site-packages

REPORTER = textwrap.dedent(
    """
    import base64, json, os, ssl, sys, urllib.error, urllib.request

    sys.path.append("/sdk")  # the official SDK, after the image's own packages
    from kubeflow.trainer import update_trainjob_status

    token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    print("token", json.dumps({"aud": claims["aud"], "pod": claims["kubernetes.io"]["pod"]["name"]}), flush=True)

    ok = update_trainjob_status(progress_percent=42, estimated_remaining_seconds=120,
                                metrics={"loss": 0.123, "accuracy": 0.95})
    print("sdk", ok, flush=True)

    url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
    tls = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])

    def post(target, bearer):
        body = json.dumps({"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 99}})
        req = urllib.request.Request(target, data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        if bearer:
            req.add_header("Authorization", "Bearer " + bearer)
        try:
            with urllib.request.urlopen(req, context=tls, timeout=30) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    api_token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
    other = url.replace("/trainjobs/" + os.environ["MINE"] + "/", "/trainjobs/" + os.environ["OTHER"] + "/")
    print("refusals", json.dumps({"no token": post(url, None), "API-server audience": post(url, api_token),
                                  "other TrainJob": post(other, token)}), flush=True)
    """
)


def node_is_this_machine(node: dict[str, Any]) -> bool:
    for addr in node["status"].get("addresses") or []:
        if addr.get("type") == "InternalIP":
            try:
                with socket.socket() as s:
                    s.bind((addr["address"], 0))
                return True
            except OSError:
                continue
    return False


def test_the_sdk_reports_progress_with_the_projected_token(
    bed: str, namespace: str, operator: DeployedOperator
) -> None:
    if not node_is_this_machine(get(NODE, bed, None) or {}):
        pytest.skip(f"node {bed} is not this machine: the SDK cannot be mounted from here (see the module's doc)")
    ns = namespace
    spec = pod_spec(volumes=[{"name": "sdk", "hostPath": {"path": str(SITE), "type": "Directory"}}])
    spec["containers"][0]["volumeMounts"] = [{"name": "sdk", "mountPath": "/sdk", "readOnly": True}]
    rt = uniq("rt")
    call(lambda c: c.apply(torch_runtime(rt, namespace=ns, spec=spec)))
    mine, other = uniq("tj"), uniq("tj")
    call(lambda c: c.create(trainjob(other, ns, rt, trainer=sh(SLEEP), suspend=True)))
    env = [{"name": "MINE", "value": mine}, {"name": "OTHER", "value": other}]
    reporter = {"command": ["python3", "-c", REPORTER], "env": env}
    call(lambda c: c.create(trainjob(mine, ns, rt, trainer=reporter)))
    done = wait_finished(mine, ns)
    (pod,) = pods_of(mine, ns)
    text = pod_log(pod["metadata"]["name"], ns)
    print(text)
    assert done["type"] == "Complete", text
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in text.splitlines() if " " in line}

    # The kubelet's token: projected for the endpoint's audience and bound to this pod.
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token")
    projected = next(s["serviceAccountToken"] for s in volume["projected"]["sources"] if "serviceAccountToken" in s)
    assert projected["audience"] == P.TOKEN_AUDIENCE
    assert json.loads(lines["token"]) == {"aud": [P.TOKEN_AUDIENCE], "pod": pod["metadata"]["name"]}

    assert lines["sdk"] == "True"
    ts = status(mine, ns)["trainerStatus"]
    print("status.trainerStatus:", json.dumps(ts))
    assert ts["progressPercentage"] == 42 and ts["estimatedRemainingSeconds"] == 120
    assert ts["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    assert json.loads(lines["refusals"]) == {"no token": 401, "API-server audience": 401, "other TrainJob": 403}
    assert "trainerStatus" not in status(other, ns)
    assert status(mine, ns)["trainerStatus"]["progressPercentage"] == 42  # nothing refused reached the status

    leader = operator.leader()
    assert leader is not None
    gauge = f'kubetrain_trainjob_progress_percent{{namespace="{ns}",trainjob="{mine}"}}'
    wait_until(lambda: operator.metrics(leader).get(gauge) == 42, 60, "the progress gauge on /metrics")
    call(lambda c: c.delete(r.TRAINJOB, other, ns))
