"""The TrainJob state both backends show: the SDK's answers (Complete/Failed by condition, Running when every
trainer pod runs, else not Running), with Created/Pending/Suspended split out and the reason why."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import TrainJob
from kubetrain.api.trainjob_state import expected_trainer_pods, trainjob_state
from kubetrain.api.views import StepView


def tj(*conditions: tuple[str, str, str, str]) -> TrainJob:
    status: dict[str, Any] = {}
    if conditions:
        status["conditions"] = [
            {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "2026-01-01T00:00:00Z"}
            for t, s, r, m in conditions
        ]
    return TrainJob.model_validate(
        {"metadata": {"name": "j"}, "spec": {"runtimeRef": {"name": "rt"}}, "status": status or None}
    )


def step(name: str, state: str, reason: str | None = None, message: str | None = None, exit_code: int | None = None):
    return StepView(name, name.rsplit("-", 2)[0], state, reason=reason, message=message, exit_code=exit_code)


CASES = [
    # (conditions, steps, expected pods, no-pods reason) -> (state, reason, message)
    ((), [], None, "no JobSet yet", ("Created", "NoPods", "no JobSet yet")),
    (
        (("ResourcesCreationFailed", "True", "BuildFailed", "runtime rt not found"),),
        [],
        None,
        "",
        ("Created", "BuildFailed", "runtime rt not found"),
    ),
    (
        (),
        [step("node-0-0", "Pending", "Unschedulable", "0/3 nodes are available")],
        1,
        "",
        ("Pending", "Unschedulable", "node-0-0 Pending: 0/3 nodes are available"),
    ),
    (
        (),
        [step("node-0-0", "Running"), step("node-1-0", "Pending", "ImagePullBackOff", 'pulling "x"')],
        2,
        "",
        ("Pending", "ImagePullBackOff", 'node-1-0 Pending: pulling "x"'),
    ),
    # All existing trainer pods run, but the JobSet makes two: not Running yet.
    ((), [step("node-0-0", "Running")], 2, "", ("Pending", "WaitingForPods", "1/2 trainer pods running")),
    (
        (),
        [step("dataset-initializer-0-0", "Running")],
        1,
        "",
        ("Pending", "WaitingForInitializers", "dataset-initializer-0-0 Running"),
    ),
    (
        (),
        [step("node-0-0", "Running"), step("node-1-0", "Succeeded")],
        2,
        "",
        ("Running", "", "2/2 trainer pods running"),
    ),
    (
        (("Suspended", "True", "Suspended", "TrainJob is suspended"),),
        [],
        None,
        "",
        ("Suspended", "Suspended", "TrainJob is suspended"),
    ),
    # Resumed (Suspended=False) is not Suspended: the SDK's "last condition" reading would have said so.
    (
        (("Suspended", "False", "Resumed", "TrainJob is resumed"),),
        [step("node-0-0", "Running")],
        1,
        "",
        ("Running", "", "1/1 trainer pods running"),
    ),
    (
        (("Complete", "True", "AllJobsCompleted", "done"),),
        [step("node-0-0", "Succeeded")],
        1,
        "",
        ("Complete", "AllJobsCompleted", "done"),
    ),
    (
        (("Failed", "True", "DeadlineExceeded", "too slow"), ("Suspended", "True", "x", "y")),
        [],
        None,
        "",
        ("Failed", "DeadlineExceeded", "too slow"),
    ),
    (
        (),
        [step("launcher-0-0", "Failed", "Error", None, 2), step("node-0-0", "Running")],
        None,
        "",
        ("Pending", "Error", "launcher-0-0 Failed: exit code 2"),
    ),
]


@pytest.mark.parametrize(("conds", "steps", "expected", "why", "want"), CASES)
def test_state(conds, steps, expected, why, want) -> None:  # type: ignore[no-untyped-def]
    got = trainjob_state(tj(*conds), steps, expected_trainer_pods=expected, no_pods_reason=why)
    assert (got.state, got.reason, got.message) == want


def test_pods_not_looked_at() -> None:
    assert trainjob_state(tj(), None).state == "Created"


def test_explain() -> None:
    got = trainjob_state(tj(), [step("node-0-0", "Pending", "Unschedulable", "no nodes")], expected_trainer_pods=1)
    assert got.explain() == "Pending (Unschedulable: node-0-0 Pending: no nodes)"


def test_expected_trainer_pods_counts_node_and_launcher() -> None:
    js = {
        "spec": {
            "replicatedJobs": [
                {"name": "dataset-initializer", "replicas": 1},
                {"name": "launcher", "replicas": 1, "template": {"spec": {"parallelism": 1}}},
                {"name": "node", "replicas": 3, "template": {"spec": {"parallelism": 2}}},
            ]
        }
    }
    assert expected_trainer_pods(js) == 7
    assert expected_trainer_pods(None) is None
