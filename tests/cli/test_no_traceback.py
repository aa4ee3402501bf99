"""Every crash the fuzzing found, as a table: each manifest through ``validate`` (text and JSON, at every Pod
Security level), ``render``, ``apply`` and ``run`` ends in an error naming the field, never a traceback.

Most of them came through the Pod Security lint of ``kubetrain validate``, which compiled runtimes (and
TrainJobs) that validation had already rejected: the compiler's input contract is a validated pair, and pod
specs are untyped dicts, so a ``containers: true`` reached ``for x in containers``. The lint now rates only what
validation accepted; the rest is "not rated" with its first error. One crash was in validation itself: a
TrainJob's invalid ``podTemplateOverrides`` were merged into the runtime's pods before the runtime checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from tests.builders import RuntimeBuilder, TrainJobBuilder
from tests.fuzzing import assert_clear

Obj = dict[str, Any]
POD = "spec.template.spec.replicatedJobs[0].template.spec.template.spec"


def runtime(name: str = "rt", **pod: Any) -> Obj:
    node = {"name": "node", "image": "img", **pod.pop("node", {})}
    return RuntimeBuilder(name).ml(numNodes=1, torch={}).rjob(
        "node", ancestor="trainer", containers=pod.pop("containers", [node]), pod=pod).obj


def trainjob(runtime_name: str = "rt", **spec: Any) -> Obj:
    return TrainJobBuilder(runtime=runtime_name).trainer(command=["torchrun", "train.py"]).spec(**spec).obj


CASES: list[tuple[str, list[Obj], str]] = [
    # (what crashed and where, the manifests, the error that explains it now)
    ("containers: true: 'bool' object is not iterable in compiler/info.py",
     [runtime(containers=True)], f"{POD}.containers: expected a list, got a boolean (true)"),
    ("containers as a string: AttributeError in compiler/info.py",
     [runtime(containers="node")], f"{POD}.containers: expected a list, got a string ('node')"),
    ("a container that is a list: AttributeError in compiler/info.py",
     [runtime(containers=[["node"]])], f'{POD}.containers[0]: expected an object, got a list (["node"])'),
    ("resources as a string: ValueError (dictionary update sequence) in compiler/info.py",
     [runtime(node={"resources": "2"})], f"{POD}.containers[0].resources: expected an object, got a string ('2')"),
    ("a runtime without a name: pydantic ValidationError for the lint's probe TrainJob's runtimeRef.name",
     [runtime("")], "metadata.name: a ClusterTrainingRuntime needs a name"),
    ("a TrainJob on a runtime validation rejected: TypeError compiling the pair",
     [runtime(containers=True), trainjob()], f"{POD}.containers: expected a list, got a boolean (true)"),
    ("a TrainJob whose override has containers: true: TypeError in validation's build of the pods",
     [trainjob("torch-distributed", podTemplateOverrides=[{"targetJobs": [{"name": "node"}],
                                                          "spec": {"containers": True}}])],
     "spec.podTemplateOverrides[0].spec.containers: expected a list, got a boolean (true)"),
    ("an empty list item in an override's volumeMounts: AttributeError in compiler/merge.py when compiling",
     [trainjob("deepspeed-distributed", podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {
         "containers": [{"name": "node", "volumeMounts": [{"name": "cfg", "mountPath": "/etc"}, None]}]}}])],
     "spec.podTemplateOverrides[0].spec.containers[0].volumeMounts[1]: expected an object, got an empty list item "
     "(null)"),
    # Not a traceback but worse: one pod name was made per node before anything was checked, so these took all
    # the memory there was (22 GB, then the OOM killer), in validation as in the webhook.
    ("numNodes: 2**40 in a TrainJob: all memory taken by the JobSet plugin's endpoint names",
     [trainjob("torch-distributed", trainer={"numNodes": 2**40, "command": ["torchrun", "t.py"]})],
     "spec.trainer.numNodes: must be at most 100000 (Kubernetes runs an Indexed Job of at most that many pods), got "
     "1099511627776"),
    ("numNodes: 2**40 in a runtime: all memory taken by the lint's probe TrainJob",
     [RuntimeBuilder("rt").ml(numNodes=2**40, torch={}).trainer().obj],
     "spec.mlPolicy.numNodes: must be at most 100000"),
    ("an elastic runtime with maxNodes: 2**40: all memory taken, the TrainJob getting maxNodes nodes",
     [RuntimeBuilder("rt").ml(torch={"elasticPolicy": {"minNodes": 1, "maxNodes": 2**40}}).trainer().obj,
      trainjob()],
     "spec.mlPolicy.torch.elasticPolicy.maxNodes: must be at most 100000"),
]  # fmt: skip
IDS = [c[0].split(":")[0] for c in CASES]


def write(tmp_path: Path, docs: list[Obj]) -> str:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def invoke(args: list[str], context: object) -> Any:
    with mock.patch.object(LocalBackend, "_spawn_supervisor", lambda *_: None):  # no pod starts
        result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert_clear(result.output, context)
    return result


@pytest.mark.parametrize(("why", "docs", "message"), CASES, ids=IDS)
@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_validate_explains_and_does_not_rate_what_it_rejects(
    tmp_path: Path, why: str, docs: list[Obj], message: str, level: str
) -> None:
    file = write(tmp_path, docs)
    text = invoke(["validate", "--pod-security", level, "-f", file], why)
    assert text.exit_code == 1 and message in text.output
    report = json.loads(invoke(["validate", "-o", "json", "--pod-security", level, "-f", file], why).stdout)
    assert any(message in f"{e['path']}: {e['message']}" for e in report["errors"]), report["errors"]
    for entry in report["podSecurity"]:  # nothing validation rejected is rated (nor compiled to rate it)
        assert entry["level"] is None and entry["error"].startswith("not rated: "), entry


@pytest.mark.parametrize(("why", "docs", "message"), CASES, ids=IDS)
@pytest.mark.parametrize("verb", [["render"], ["apply"], ["run", "--detach"]])
def test_every_other_path_stops_at_the_same_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str, docs: list[Obj], message: str, verb: list[str]
) -> None:
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path / "home"))
    result = invoke([*verb, "-f", write(tmp_path, docs)], why)
    assert result.exit_code == 1 and message in result.output
    store = Store()
    try:  # nothing half-applied: neither the TrainJob nor the runtime of a rejected batch is stored
        assert store.list_trainjobs(None) == []
        assert store.list_objects(("ClusterTrainingRuntime", "TrainingRuntime")) == []
    finally:
        store.close()
