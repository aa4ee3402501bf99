"""The webhook and `kubetrain validate` give the same verdicts and messages for the same objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli.validate import validate_files
from kubetrain.k8s.webhook import names
from kubetrain.k8s.webhook.admission import error_text
from kubetrain.runtimes import builtin_runtime
from tests.k8s.webhook.conftest import Served, trainjob


def _bad_runtime() -> dict[str, Any]:
    rt = builtin_runtime("torch-distributed")
    assert rt is not None
    wire = rt.to_wire()
    wire["metadata"]["name"] = "two-replicas"
    wire["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2
    return wire


def _mpi_runtime(slots: int) -> dict[str, Any]:
    rt = builtin_runtime("deepspeed-distributed")
    assert rt is not None
    wire = rt.to_wire()
    wire["metadata"]["name"] = f"mpi-{slots}"
    wire["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] = slots
    return wire


# kubeflow/trainer#3809 (upstream main after v2.3.0, 8f6c5f067): the API server rejects trainer.numNodes < 0 (0 is
# allowed, as JobSet's replicas), trainer.numProcPerNode < 1 and mlPolicy.mpi.numProcPerNode < 1 at admission.
NODE_COUNTS = [
    ("numNodes -1", names.VALIDATE_TRAINJOB, trainjob(trainer={"numNodes": -1}), False),
    ("numNodes 0", names.VALIDATE_TRAINJOB, trainjob(trainer={"numNodes": 0}), True),
    ("numProcPerNode -5", names.VALIDATE_TRAINJOB, trainjob(trainer={"numProcPerNode": -5}), False),
    ("numProcPerNode 0", names.VALIDATE_TRAINJOB, trainjob(trainer={"numProcPerNode": 0}), False),
    ("numNodes 1 numProcPerNode 1", names.VALIDATE_TRAINJOB,
     trainjob(trainer={"numNodes": 1, "numProcPerNode": 1}), True),
    ("mpi numProcPerNode 0", names.VALIDATE_CLUSTER_TRAINING_RUNTIME, _mpi_runtime(0), False),
    ("mpi numProcPerNode 1", names.VALIDATE_CLUSTER_TRAINING_RUNTIME, _mpi_runtime(1), True),
]

CASES = [
    *((name, path, obj) for name, path, obj, _ in NODE_COUNTS),
    ("bad name", names.VALIDATE_TRAINJOB, trainjob(name="Job_1")),
    ("schema", names.VALIDATE_TRAINJOB, trainjob(trainer={"numNodes": -3})),
    ("schema and rules at once", names.VALIDATE_TRAINJOB,
     trainjob(name="Job_1", trainer={"numNodes": -3, "env": [{"name": "PET_NNODES", "value": "1"}]})),
    ("missing runtime", names.VALIDATE_TRAINJOB, trainjob(runtime="nowhere")),
    ("good", names.VALIDATE_TRAINJOB, trainjob(trainer={"numNodes": 4})),
    ("runtime replicas", names.VALIDATE_CLUSTER_TRAINING_RUNTIME, _bad_runtime()),
]


@pytest.mark.parametrize(("path", "obj"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_errors_as_kubetrain_validate(
    served: Served, tmp_path: Path, path: str, obj: dict[str, Any]
) -> None:
    file = tmp_path / "obj.yaml"
    file.write_text(yaml.safe_dump(obj))
    cli_result, _ = validate_files((str(file),), None)
    expected = [error_text(f) for f in cli_result.errors]
    namespace = None if obj["kind"] == "ClusterTrainingRuntime" else "default"
    resp = served.review(path, obj, namespace=namespace)
    assert resp["allowed"] is (not expected)
    if expected:
        message = resp["status"]["message"]
        if all(f.fix is None or "available:" not in f.fix for f in cli_result.errors):
            # The same errors; the CLI orders them by line in the file, the webhook has no lines to go by.
            assert all(e in message for e in expected), message
            assert len(message) == len(expected[0] if len(expected) == 1 else "[" + ", ".join(expected) + "]")
        else:
            # Only the fix hint may differ: the CLI lists the runtimes it knows, the webhook looked up one.
            cores = [f"{f.path}: {f.message} (fix: " for f in cli_result.errors]
            assert all(core in message for core in cores), message
    assert resp.get("warnings", []) == [f.message for f in cli_result.warnings]


@pytest.mark.parametrize(("path", "obj", "allowed"), [c[1:] for c in NODE_COUNTS], ids=[c[0] for c in NODE_COUNTS])
def test_node_counts_are_judged_as_upstream_main_judges_them(
    served: Served, tmp_path: Path, path: str, obj: dict[str, Any], allowed: bool
) -> None:
    """Each of upstream's #3809 cases gets upstream's verdict from the CRD schema and its CEL rules (what the API
    server checks before any webhook), from `kubetrain validate` and from the webhook."""
    from tests.api.test_crd import errors as schema_errors
    from tests.api.test_crd_cel import cel

    kind = obj["kind"]
    assert (not schema_errors(kind, obj) and not cel(kind, obj)) is allowed, (schema_errors(kind, obj), cel(kind, obj))
    file = tmp_path / "obj.yaml"
    file.write_text(yaml.safe_dump(obj))
    cli_result, _ = validate_files((str(file),), None)
    assert cli_result.ok is allowed, [error_text(f) for f in cli_result.errors]
    resp = served.review(path, obj, namespace=None if kind == "ClusterTrainingRuntime" else "default")
    assert resp["allowed"] is allowed, resp.get("status")
