"""The installed CRDs on the bed: accepted by the API server (size, CEL cost, structure) exactly as this checkout
generates them, what their schemas enforce before any webhook sees an object, and why `--server-side` is required.
Installing, upgrading and uninstalling for real: test_install_lifecycle.py."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from tests.api.celcost import PER_RULE_LIMIT, crd_rule_costs
from tests.e2e.conftest import (
    IMAGE,
    REPO,
    DeployedOperator,
    call,
    get,
    kubectl,
    setup_runtime,
    torch_runtime,
    trainjob,
    uniq,
)

pytestmark = pytest.mark.e2e


def test_crds_are_established_with_every_cel_rule(kubeconfig: str) -> None:
    for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        crd = get(r.CRD, f"{plural}.trainer.kubeflow.org", None)
        assert crd is not None
        conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conds.get("Established") == "True" and conds.get("NamesAccepted") == "True"
        assert "NonStructuralSchema" not in conds


def test_the_server_stores_the_crds_exactly_as_generated(kubeconfig: str) -> None:
    """The installed CRDs are this checkout's. If the API server normalised anything (an empty `properties` it
    drops, a default it adds), a second field manager's server-side apply of the same files would conflict on
    `spec.versions`, an atomic list."""
    from kubetrain.api.crd import generate_crds

    for crd in generate_crds():
        live = get(r.CRD, crd["metadata"]["name"], None)
        assert live is not None
        assert live["spec"]["versions"] == crd["spec"]["versions"], crd["metadata"]["name"]


def test_client_side_apply_of_the_crds_fails_as_the_docs_warn(kubeconfig: str) -> None:
    """Why the docs insist on --server-side: the last-applied annotation cannot hold a CRD this size."""
    out = kubectl(
        "apply",
        "--dry-run=server",
        "-f",
        str(REPO / "manifests" / "base" / "crds" / "trainer.kubeflow.org_trainjobs.yaml"),
        check=False,
    )
    assert out.returncode != 0 and "Too long" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("trainjob.spec.trainer.env.valueFrom.secretKeyRef", ["key", "name", "optional"]),
        (
            "clustertrainingruntime.spec.template.spec.replicatedJobs.template.spec.template.spec.containers.resources",
            ["claims", "limits", "requests"],
        ),
    ],
)
def test_kubectl_explain_documents_kubernetes_fields(kubeconfig: str, path: str, fields: list[str]) -> None:
    out = kubectl("explain", path).stdout
    assert "DESCRIPTION:" in out
    for field in fields:
        assert re.search(rf"^\s+{field}\s", out, re.M), out


def test_the_crd_schema_prunes_and_type_checks_pod_specs(namespace: str, operator: DeployedOperator) -> None:
    """The CRD schema, before any webhook: the API server drops a misspelt field while decoding and refuses a bad
    quantity with the field's path."""
    rt = setup_runtime(namespace)
    name = uniq("tj")
    patch = {
        # Not Kueue's manager: where Kueue's TrainJob integration runs, its webhook adds a patch of that name.
        "manager": "example.com/manager",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "template": {"spec": {"template": {"spec": {
                "nodeSelector": {"pool": "a"},
                "containers": [{"name": "node", "comand": ["python"], "resources": {"limits": {"cpu": "2"}}}],
            }}}},
        }]}}},
    }  # fmt: skip
    stored = call(lambda c: c.create(trainjob(name, namespace, rt, suspend=True, runtimePatches=[patch])))
    pod = stored["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"
    ]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "a"}
    assert pod["containers"] == [{"name": "node", "resources": {"limits": {"cpu": "2"}}}]  # "comand" pruned

    bad = trainjob(uniq("tj"), namespace, rt)
    bad["spec"]["trainer"] = {"resourcesPerNode": {"limits": {"cpu": "2 cores"}}}

    async def create_bad(client: Client) -> ApiError:
        try:
            await client.create(bad)
        except ApiError as exc:
            return exc
        raise AssertionError("the server accepted a malformed quantity")

    err = call(create_bad)
    if 'admission webhook "mtrainjob.kb.io"' in err.message:
        # Kueue's TrainJob integration decodes every TrainJob in its mutating webhook, which the API server calls
        # before the schema: a quantity Go cannot parse is refused there.
        assert err.status == 400 and "quantities must match" in err.message, err.message
    else:
        assert err.status == 422 and "spec.trainer.resourcesPerNode.limits.cpu" in err.message, err.message
    # Runtimes pass no other controller's webhook: the schema's own refusal, with the field's path.
    bad_rt = torch_runtime(uniq("rt"), namespace)
    pod = bad_rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {"cpu": "2 cores"}}

    async def apply_bad(client: Client) -> ApiError:
        try:
            await client.apply(bad_rt)
        except ApiError as exc:
            return exc
        raise AssertionError("the server accepted a malformed quantity in a runtime")

    err = call(apply_bad)
    assert err.status == 422, err.message
    assert "containers[0].resources.limits.cpu" in err.message, err.message


def test_cel_rules_run_on_the_server(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    trainer = {"numNodes": 1, "image": IMAGE, "command": ["true"]}
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=trainer)))

    async def change(client: Client) -> ApiError:
        try:
            # The image, not numNodes: numNodes may change for an elastic runtime, which only the webhook knows.
            await client.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"trainer": {"image": "localhost/other:1"}}})
        except ApiError as exc:
            return exc
        raise AssertionError("the trainer changed after creation")

    err = call(change)
    assert err.status == 422 and "spec.trainer: Invalid value" in err.message
    assert "field is immutable: image cannot change" in err.message

    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": uniq("rt"), "namespace": namespace},
        "spec": {"mlPolicy": {"torch": {}, "mpi": {}}, "template": {"spec": {"replicatedJobs": []}}},
    }

    async def two_policies(client: Client) -> ApiError:
        try:
            await client.create(runtime)
        except ApiError as exc:
            return exc
        raise AssertionError("two ML policies were accepted")

    assert "Only one of the policy can be configured" in call(two_policies).message


def _probe_crd(name: str, prop: dict[str, Any]) -> dict[str, Any]:
    plural = f"costprobe{name}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.e2e.kubetrain.dev"},
        "spec": {
            "group": "e2e.kubetrain.dev",
            "scope": "Namespaced",
            "names": {"kind": f"CostProbe{name}", "plural": plural},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": {"f": prop}}},
                        }
                    },
                }
            ],
        },
    }


COST_PROBES = {
    "matches": {
        "type": "array",
        "maxItems": 3000,
        "items": {"type": "string", "maxLength": 5000},
        "x-kubernetes-validations": [{"rule": "self.all(x, x.matches('^[a-z]+[0-9]*$'))"}],
    },
    "filter": {
        "type": "array",
        "maxItems": 200000,
        "items": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 400}}},
        "x-kubernetes-validations": [{"rule": "self.filter(x, has(x.a) && x.a.contains('zz')).size() < 3"}],
    },
    "nested": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "v": {
                    "type": "array",
                    "maxItems": 40,
                    "items": {"type": "string", "maxLength": 100},
                    "x-kubernetes-validations": [{"rule": "self.all(s, s != 'x' && size(s) < 50)"}],
                }
            },
        },
    },
}


@pytest.mark.parametrize("name", sorted(COST_PROBES))
def test_the_offline_cel_cost_estimate_agrees_with_the_server(kubeconfig: str, name: str) -> None:
    """tests/api/test_crd_cost.py relies on tests/api/celcost.py; here the API server checks its arithmetic on
    rules built to exceed the budget by a factor the server prints (1.5x-100x)."""
    crd = _probe_crd(name, COST_PROBES[name])
    (cost,) = crd_rule_costs(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    factor = cost.total / PER_RULE_LIMIT
    assert 1.5 < factor < 100
    out = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-", input=json.dumps(crd), check=False)
    reported = re.findall(r"estimated rule cost exceeds budget by factor of ([0-9.]+)x", out.stderr)
    assert reported, out.stderr
    assert float(reported[0]) == pytest.approx(factor, abs=0.051)
