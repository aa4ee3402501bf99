"""A TrainJob's pods as gangs: which run at the same time (stages), what each stage needs, and what is said when
it can never fit this machine. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.local.plan import build_plan
from kubetrain.local.scheduling import gang
from kubetrain.local.scheduling.resources import Capacity, pod_requests

from ..fixtures import jobset


def rj(name: str, pods: int, cpu: str, depends: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    spec = {"containers": [{"name": "node", "command": ["true"], "resources": {"requests": {"cpu": cpu}}}]}
    out: dict[str, Any] = {
        "name": name,
        "replicas": 1,
        "template": {"spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}}},
    }
    if depends:
        out["dependsOn"] = [{"name": d, "status": s} for d, s in depends]
    return out


def stages_of(rjobs: list[dict[str, Any]], one_gang: bool = False, **spec: Any) -> list[gang.Stage]:
    plan = build_plan(jobset(rjobs, **spec))
    return gang.stages(plan, {p.short: pod_requests(p.spec) for p in plan.pods()}, one_gang=one_gang)


CASES = [
    pytest.param([rj("node", 2, "2")], False, {}, [(["node"], 4.0)], id="one-job"),
    pytest.param(
        [rj("init", 1, "2"), rj("node", 2, "1", [("init", "Complete")])], False, {},
        [(["init"], 2.0), (["node"], 2.0)], id="initializer-then-trainer",
    ),
    pytest.param(
        [rj("node", 2, "1"), rj("launcher", 1, "1", [("node", "Ready")])], False, {},
        [(["node", "launcher"], 3.0)], id="mpi-launcher-beside-its-nodes",
    ),
    pytest.param(
        [rj("a", 1, "1"), rj("b", 1, "1")], False, {"startupPolicy": {"startupPolicyOrder": "InOrder"}},
        [(["a", "b"], 2.0)], id="in-order-runs-side-by-side",
    ),
    pytest.param(
        [rj("init", 1, "2"), rj("node", 2, "1", [("init", "Complete")])], True, {},
        [(["init", "node"], 4.0)], id="podgroup-is-one-gang",
    ),
    pytest.param(
        [rj("d", 1, "1"), rj("m", 1, "1"), rj("node", 1, "1", [("d", "Complete"), ("m", "Complete")])], False, {},
        [(["d", "m"], 2.0), (["node"], 1.0)], id="two-initializers",
    ),
]


@pytest.mark.parametrize(("rjobs", "one_gang", "spec", "want"), CASES)
def test_stages(rjobs: list[dict[str, Any]], one_gang: bool, spec: dict[str, Any],
                want: list[tuple[list[str], float]]) -> None:  # fmt: skip
    got = stages_of(rjobs, one_gang, **spec)
    assert [(s.rjobs, s.total.get("cpu")) for s in got] == want


def test_never_fits_names_totals_per_replicated_job_and_the_fixes() -> None:
    stage = stages_of([rj("node", 3, "3")])[0]
    cap = Capacity({"cpu": 2, "memory": 2**34})
    assert gang.shortfalls(stage, cap) == ["cpu"]
    assert gang.shortfalls(stage, cap, overcommit=True) == []
    msg = gang.never_fits_message("default/nb", stage, cap, ["cpu"])
    assert msg.startswith(
        "trainjob default/nb can never run on this machine: it needs 9 cpu at once (node: 3 pods × 3 cpu), this "
        "machine has 2 cpu. Fix: lower spec.trainer.resourcesPerNode (or numNodes), or run it over-committed"
    ), msg
    assert gang.overcommitted(stage, cap) == ["9 cpu at once (node: 3 pods × 3 cpu) on 2 cpu"]


def test_devices_are_never_overcommitted() -> None:
    plan = build_plan(jobset([rj("node", 1, "1")]))
    stage = gang.stages(plan, {p.short: {"nvidia.com/gpu": 1.0} for p in plan.pods()})[0]
    cap = Capacity({"nvidia.com/gpu": 0.0})
    assert gang.shortfalls(stage, cap, overcommit=True) == ["nvidia.com/gpu"]
    assert "devices are never over-committed" in gang.never_fits_message("d/x", stage, cap, ["nvidia.com/gpu"])
