"""OptimizationJob admission over real TLS: upstream's CEL rules (for API servers that skip them), placeholders,
and the first trial against the live runtime its template references."""

from __future__ import annotations

import copy

from kubetrain.k8s.webhook import names
from tests.builders import optimizationjob
from tests.k8s.webhook.conftest import Served

V = names.VALIDATE_OPTIMIZATIONJOB


def test_a_valid_optimizationjob_is_allowed(served: Served) -> None:
    served.cluster.calls.clear()
    resp = served.review(V, optimizationjob())
    assert resp == {"uid": resp["uid"], "allowed": True}
    assert served.cluster.calls == [("ClusterTrainingRuntime", "torch-distributed", None)]


def test_every_error_is_listed_with_its_field(served: Served) -> None:
    doc = optimizationjob(parallelTrials=9)
    doc["spec"]["trainJobTemplate"]["spec"]["trainer"]["command"].append("--wd={{.weight_decay}}")
    resp = served.review(V, doc)
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    message = resp["status"]["message"]
    assert "spec.parallelTrials: parallelTrials cannot exceed numTrials (9 > 4)" in message
    assert ("spec.trainJobTemplate.spec.trainer.command[4]: placeholder {{.weight_decay}} names no parameter "
            "(parameters: lr, bs)") in message


def test_the_template_runtime_is_checked_live(served: Served) -> None:
    resp = served.review(V, optimizationjob(runtime="nope"))
    assert resp["allowed"] is False
    assert resp["status"]["message"].startswith(
        'spec.trainJobTemplate.spec.runtimeRef.name: ClusterTrainingRuntime "nope" not found')


def test_the_spec_cannot_change_but_metadata_can(served: Served) -> None:
    old = optimizationjob()
    old["metadata"]["uid"] = "u-1"
    new = copy.deepcopy(old)
    new["spec"]["numTrials"] = 6
    resp = served.review(V, new, old=old, operation="UPDATE")
    assert resp["allowed"] is False
    assert "spec: OptimizationJobSpec is immutable and cannot be updated after creation" in resp["status"]["message"]
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "vision"}
    assert served.review(V, new, old=old, operation="UPDATE")["allowed"] is True


def test_env_only_parameters_are_allowed_with_a_warning(served: Served) -> None:
    doc = optimizationjob(trainer={"command": ["python", "train.py"]})
    resp = served.review(V, doc)
    assert resp["allowed"] is True
    assert any("KUBEFLOW_TRAINER_OPT_LR" in w for w in resp["warnings"])


def test_deletes_pass(served: Served) -> None:
    assert served.review(V, None, old=optimizationjob(), operation="DELETE")["allowed"] is True
