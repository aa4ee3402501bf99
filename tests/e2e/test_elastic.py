"""Elastic TrainJobs on a real API server: `kubectl scale` through the TrainJob's scale subresource (judged by the
webhook), the operator resizing the JobSet and reporting status.numNodes/selector, and the HPA it creates from
elasticPolicy.metrics being able to read that subresource (kube-controller-manager's HPA controller)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain import pki
from kubetrain.k8s.client import Client, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    KUBECTL,
    REPO,
    OperatorProcess,
    call,
    free_port,
    get,
    torch_runtime,
    trainjob,
    wait_until,
)

pytestmark = pytest.mark.e2e
certs = pytest.importorskip("kubetrain.k8s.certs", reason="webhook certificates module not installed")
names = pytest.importorskip("kubetrain.k8s.webhook.names", reason="webhook package not installed")

VWC = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", namespaced=False)
MWC = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "", namespaced=False)
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}


NUM_NODES_DEFAULT = (
    "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/mlPolicy/properties/numNodes/default"
)


def _trainjob_crd_with_scale(kubeconfig: str) -> None:
    """This checkout's TrainJob CRD (scale subresource, mutable numNodes), applied over whatever is installed; and
    no server-side numNodes default in the installed runtime CRDs (it clashes with elasticPolicy: older kubetrain
    CRDs had one)."""
    text = subprocess.run([sys.executable, "-m", "kubetrain.cli.main", "crds"], check=True, capture_output=True,
                          text=True, cwd=REPO).stdout
    crd = next(d for d in yaml.safe_load_all(text) if d and d["spec"]["names"]["kind"] == "TrainJob")
    call(lambda c: c.apply(crd))
    for plural in ("trainingruntimes", "clustertrainingruntimes"):
        name = f"{plural}.trainer.kubeflow.org"
        live = json.loads(kubectl("get", "crd", name, "-o", "json", quiet=True).stdout)
        ml = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["mlPolicy"]
        if "default" in ml["properties"]["numNodes"]:
            kubectl("patch", "crd", name, "--type=json", "-p",
                    json.dumps([{"op": "remove", "path": NUM_NODES_DEFAULT}]))

    def served() -> bool:
        live = get(r.CRD, crd["metadata"]["name"], None) or {}
        version = (live.get("spec") or {}).get("versions", [{}])[0]
        return "scale" in (version.get("subresources") or {})

    wait_until(served, 60, "the TrainJob CRD with its scale subresource")


@pytest.fixture
def elastic_env(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[str]:
    """The operator with its webhook, registered (URL clientConfig) for this namespace's TrainJobs, their scale
    subresource and the defaulter."""
    _trainjob_crd_with_scale(kubeconfig)
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = pki.generate_ca(now)
    cert, key = pki.generate_serving_cert(ca_cert, ca_key, ["127.0.0.1", "localhost"], now)
    bundle = certs.CertBundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)
    certs.write_cert_dir(bundle, tmp_path / "certs")
    port = free_port()
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace, "--webhook-port", str(port),
                         "--webhook-cert-dir", str(tmp_path / "certs")).start()
    config_name = f"kt-e2e-el-{uuid.uuid4().hex[:6]}"

    def hook(name: str, path: str, resources: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}",
                             "caBundle": base64.b64encode(bundle.ca_cert).decode()},
            "rules": [{"apiGroups": ["trainer.kubeflow.org"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"], "resources": resources}],
        }

    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [hook(names.WEBHOOK_VALIDATOR_TRAINJOB, names.VALIDATE_TRAINJOB, ["trainjobs", "trainjobs/scale"])],
    }
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": config_name},
        "webhooks": [hook(names.WEBHOOK_DEFAULTER_TRAINJOB, names.MUTATE_TRAINJOB, ["trainjobs"])],
    }
    call(lambda c: c.create(validating, resource=VWC))
    call(lambda c: c.create(mutating, resource=MWC))
    try:
        yield namespace
    finally:
        call(lambda c: c.delete(VWC, config_name, missing_ok=True))
        call(lambda c: c.delete(MWC, config_name, missing_ok=True))
        op.stop()


def elastic_runtime(name: str, namespace: str) -> dict[str, Any]:
    rt = torch_runtime(name, namespace=namespace)
    rt["spec"]["mlPolicy"] = {"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 8, "maxRestarts": 3,
                                                          "metrics": [CPU]}}}
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return rt


def kubectl(*args: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    if KUBECTL is None:
        pytest.skip("kubectl not found: put it on PATH or set KUBETRAIN_E2E_KUBECTL")
    env = dict(os.environ, KUBECONFIG=os.environ["KUBETRAIN_E2E_KUBECONFIG"])
    out = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env)
    if not quiet:  # shown with pytest -s: what a user would see
        print(f"$ kubectl {' '.join(args)}\n{out.stdout}{out.stderr}", end="")
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out


def node_parallelism(name: str, namespace: str) -> int | None:
    js = get(r.JOBSET, name, namespace)
    if js is None:
        return None
    rj = next(x for x in js["spec"]["replicatedJobs"] if x["name"] == "node")
    value = rj["template"]["spec"].get("parallelism")
    return int(value) if value is not None else None


def test_kubectl_scale_reaches_the_jobset_and_out_of_range_is_refused(elastic_env: str) -> None:
    ns = elastic_env
    call(lambda c: c.apply(elastic_runtime("elastic", ns)))
    call(lambda c: c.create(trainjob("scaled", ns, "elastic", trainer={"numNodes": 2})))
    wait_until(lambda: node_parallelism("scaled", ns) == 2, 60, "JobSet with 2 nodes")

    kubectl("scale", "trainjob/scaled", "-n", ns, "--replicas=3")
    assert get(r.TRAINJOB, "scaled", ns)["spec"]["trainer"]["numNodes"] == 3
    wait_until(lambda: node_parallelism("scaled", ns) == 3, 60, "the JobSet resized to 3 nodes")
    status = wait_until(lambda: (get(r.TRAINJOB, "scaled", ns) or {}).get("status", {}).get("numNodes") == 3
                        and get(r.TRAINJOB, "scaled", ns)["status"], 60, "status.numNodes 3")
    assert status["selector"] == "jobset.sigs.k8s.io/jobset-name=scaled,jobset.sigs.k8s.io/replicatedjob-name=node"
    scale = json.loads(kubectl("get", "trainjob/scaled", "-n", ns, "--subresource=scale", "-o", "json").stdout)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": status["selector"]}

    refused = kubectl("scale", "trainjob/scaled", "-n", ns, "--replicas=9", check=False)
    assert refused.returncode != 0
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in refused.stderr
    assert "spec.trainer.numNodes: must be between elasticPolicy minNodes (1) and maxNodes (8), got 9" in refused.stderr
    assert get(r.TRAINJOB, "scaled", ns)["spec"]["trainer"]["numNodes"] == 3

    # kubetrain's own verb goes the same way.
    out = subprocess.run([sys.executable, "-m", "kubetrain.cli.main", "scale", "trainjob", "scaled", "--replicas",
                          "2", "-n", ns, "--kubeconfig", os.environ["KUBETRAIN_E2E_KUBECONFIG"]],
                         capture_output=True, text=True, cwd=REPO)
    print(f"$ kubetrain scale trainjob scaled --replicas 2\n{out.stdout}{out.stderr}", end="")
    assert out.returncode == 0 and out.stdout == "trainjob.trainer.kubeflow.org/scaled scaled\n", out.stderr
    wait_until(lambda: node_parallelism("scaled", ns) == 2, 60, "the JobSet resized to 2 nodes")


def test_static_trainjob_cannot_be_scaled(elastic_env: str) -> None:
    ns = elastic_env
    call(lambda c: c.apply(torch_runtime("static", namespace=ns)))
    call(lambda c: c.create(trainjob("fixed", ns, "static", trainer={"numNodes": 1})))
    refused = kubectl("scale", "trainjob/fixed", "-n", ns, "--replicas=2", check=False)
    assert refused.returncode != 0
    assert ("numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, and TrainingRuntime "
            '"static" has none (numNodes 1 -> 2)') in refused.stderr


def test_hpa_is_created_owned_and_reads_the_scale_subresource(elastic_env: str) -> None:
    ns = elastic_env
    call(lambda c: c.apply(elastic_runtime("auto", ns)))
    # No numNodes: the defaulter sets it (maxNodes), so the scale subresource can be read at all.
    tj = call(lambda c: c.create(trainjob("auto", ns, "auto")))
    assert tj["spec"]["trainer"]["numNodes"] == 8
    hpa = wait_until(lambda: get(r.HPA, "auto", ns), 60, "the HPA")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                             "name": "auto"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"], hpa["spec"]["metrics"]) == (1, 8, [CPU])
    owner = hpa["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob", "auto", tj["metadata"]["uid"], True)

    def able_to_scale() -> dict[str, Any] | None:
        live = get(r.HPA, "auto", ns) or {}
        conds = {c["type"]: c for c in (live.get("status") or {}).get("conditions") or []}
        return conds if "AbleToScale" in conds else None

    # kube-controller-manager's HPA controller syncs every 15 s; it reads the TrainJob's scale subresource.
    conds = wait_until(able_to_scale, 120, "the HPA controller to report AbleToScale")
    print(json.dumps(conds, indent=1))
    assert conds["AbleToScale"]["status"] == "True", conds
    assert conds["AbleToScale"]["reason"] in ("SucceededGetScale", "ReadyForNewScale", "SucceededRescale"), conds
    status = get(r.HPA, "auto", ns)["status"]
    assert status.get("currentReplicas") == 8, status  # status.numNodes through the scale subresource

    async def delete(client: Client) -> None:
        await client.delete(r.TRAINJOB, "auto", ns)

    call(delete)
    # ownerReference garbage collection (kube-controller-manager) takes the HPA with its TrainJob.
    wait_until(lambda: get(r.HPA, "auto", ns) is None, 120, "the HPA to be collected with its TrainJob")
