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


CASES = [
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
