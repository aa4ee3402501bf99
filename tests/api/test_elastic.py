"""Elastic helpers on compiled objects (kubetrain.api.elastic): the trainer's replicated job, its node count and pod
selector, and telling a change of node count from any other change."""

from __future__ import annotations

from typing import Any

from kubetrain.api import elastic
from kubetrain.compiler import compile_trainjob, fixed_keygen
from tests.builders import RuntimeBuilder, TrainJobBuilder


def compiled(num_nodes: int | None, *, image: str | None = None, gang: bool = False) -> list[dict[str, Any]]:
    rt = RuntimeBuilder().ml(torch={"elasticPolicy": {"minNodes": 1, "maxNodes": 4}}).trainer()
    if gang:
        rt = rt.pod_group(coscheduling={"scheduleTimeoutSeconds": 30})
    tj = TrainJobBuilder().trainer(numNodes=num_nodes, **({"image": image} if image else {}))
    return compile_trainjob(tj.build(), rt.build(), keygen=fixed_keygen())


def test_node_count_and_selector() -> None:
    js = elastic.find(compiled(3), "JobSet")
    assert js is not None
    assert elastic.node_count(js) == 3
    assert elastic.pod_selector(js) == (
        "jobset.sigs.k8s.io/jobset-name=test-job,jobset.sigs.k8s.io/replicatedjob-name=node"
    )
    assert elastic.node_count(elastic.find(compiled(None), "JobSet") or {}) == 4  # maxNodes when unset
    assert elastic.trainer_replicated_job({"spec": {"replicatedJobs": [{"name": "launcher"}]}}) is None


def test_count_changes_only() -> None:
    assert elastic.count_changes_only(compiled(2), compiled(3))
    assert elastic.count_changes_only(compiled(2, gang=True), compiled(3, gang=True))  # PodGroup minMember too
    assert not elastic.count_changes_only(compiled(2), compiled(2, image="other:1"))
    assert not elastic.count_changes_only(compiled(2), compiled(2, gang=True))
