"""The scale subresource through the webhook: `kubectl scale` and an HPA are judged like an update of numNodes, and
the defaulter fills numNodes in for elastic runtimes so the subresource can be read at all."""

from __future__ import annotations

import base64
import copy
import json
import uuid
from typing import Any

from kubetrain.k8s.webhook import names
from kubetrain.runtimes import builtin_runtime
from tests.k8s.webhook.conftest import Served, trainjob

V, M = names.VALIDATE_TRAINJOB, names.MUTATE_TRAINJOB


def elastic(served: Served, name: str = "torch-elastic", **policy: Any) -> None:
    rt = builtin_runtime("torch-distributed")
    assert rt is not None
    wire = rt.to_wire()
    wire["metadata"]["name"] = name
    wire["spec"]["mlPolicy"] = {"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 8, **policy}}}
    served.cluster.runtimes[("ClusterTrainingRuntime", name, None)] = wire


def scale(served: Served, name: str, replicas: int, namespace: str = "default") -> dict[str, Any]:
    obj = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": namespace},
           "spec": {"replicas": replicas}}
    old = copy.deepcopy(obj)
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
        "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": "trainjobs"},
        "subResource": "scale",
        "operation": "UPDATE",
        "namespace": namespace,
        "name": name,
        "object": obj,
        "oldObject": old,
    }
    status, raw = served.post(V, json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                             "request": request}))
    assert status == 200, raw
    out: dict[str, Any] = json.loads(raw)["response"]
    return out


def test_scale_within_bounds_is_allowed_and_outside_is_refused_with_the_bounds(served: Served) -> None:
    elastic(served)
    served.cluster.trainjobs[("el", "default")] = trainjob("el", "torch-elastic", trainer={"numNodes": 2})
    assert scale(served, "el", 8)["allowed"] is True
    refused = scale(served, "el", 9)
    assert refused["allowed"] is False
    assert refused["status"]["code"] == 403
    assert refused["status"]["message"] == (
        "spec.trainer.numNodes: must be between elasticPolicy minNodes (1) and maxNodes (8), got 9 "
        "(fix: scale within 1..8 (the runtime's elasticPolicy))"
    )


def test_scale_of_a_static_runtime_is_refused(served: Served) -> None:
    served.cluster.trainjobs[("st", "default")] = trainjob("st", trainer={"numNodes": 2})
    refused = scale(served, "st", 3)
    assert refused["allowed"] is False
    assert refused["status"]["message"].startswith(
        "spec.trainer.numNodes: numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, and "
        'ClusterTrainingRuntime "torch-distributed" has none (numNodes 2 -> 3)'
    )


def test_scale_of_a_missing_trainjob_is_left_to_the_api_server(served: Served) -> None:
    assert scale(served, "nope", 3)["allowed"] is True


def test_direct_num_nodes_update_is_judged_the_same(served: Served) -> None:
    elastic(served)
    old = trainjob("el", "torch-elastic", trainer={"numNodes": 2})
    ok = served.review(V, trainjob("el", "torch-elastic", trainer={"numNodes": 3}), old=old, operation="UPDATE")
    assert ok["allowed"] is True
    bad = served.review(V, trainjob("el", "torch-elastic", trainer={"numNodes": 0}), old=old, operation="UPDATE")
    assert "must be between elasticPolicy minNodes (1) and maxNodes (8), got 0" in bad["status"]["message"]


def decoded(resp: dict[str, Any]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    return ops


def test_defaulter_sets_num_nodes_for_elastic_runtimes_only(served: Served) -> None:
    elastic(served, "torch-elastic-4", maxNodes=4)
    resp = served.review(M, trainjob("a", "torch-elastic-4"))
    assert decoded(resp) == [{"op": "add", "path": "/spec/trainer", "value": {"numNodes": 4}}]
    resp = served.review(M, trainjob("b", "torch-elastic-4", trainer={"command": ["torchrun", "t.py"]}))
    assert decoded(resp) == [{"op": "add", "path": "/spec/trainer/numNodes", "value": 4}]
    assert "patch" not in served.review(M, trainjob("c", "torch-elastic-4", trainer={"numNodes": 2}))
    assert "patch" not in served.review(M, trainjob("d"))  # torch-distributed is not elastic
    assert "patch" not in served.review(M, trainjob("e", "no-such-runtime"))  # the validator reports that
    old = trainjob("a", "torch-elastic-4")
    assert "patch" not in served.review(M, copy.deepcopy(old), old=old, operation="UPDATE")
