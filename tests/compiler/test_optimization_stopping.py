"""Opt-in early stopping (``kubetrain.dev/early-stopping: median``): the median stopping rule, its annotations'
checks, and what the control rules do with a trial that falls behind and with one that was stopped."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.loader import parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.compiler.optimization import build_trial, check_optimizationjob, plan
from kubetrain.compiler.optimization.stopping import (
    ANNOTATION_STOPPED,
    Policy,
    check,
    median_stop,
    points,
    policy_of,
)
from tests.builders import optimizationjob

NOW = "2026-08-01T10:00:00Z"
POLICY = Policy(min_trials=3, start=10)


def test_a_trial_worse_than_the_median_of_completed_runs_stops() -> None:
    completed = [[(25, 1.0), (50, 0.6), (100, 0.3)], [(25, 1.2), (50, 0.8), (100, 0.5)], [(25, 0.9), (50, 0.5)]]
    # At 50 %: running averages 0.8, 1.0, 0.7 -> median 0.8. Best so far 1.1 is worse (minimizing).
    why = median_stop([(25, 1.3), (50, 1.1)], completed, maximize=False, policy=POLICY, metric="loss")
    assert why == ("median stopping: best loss 1.1 by 50 is worse than the median 0.8 of 3 completed trials' running "
                   "averages there")
    assert median_stop([(25, 1.3), (50, 0.75)], completed, maximize=False, policy=POLICY, metric="loss") is None
    # Maximizing, the same numbers read the other way.
    assert median_stop([(25, 0.2), (50, 0.3)], completed, maximize=True, policy=POLICY, metric="acc") is not None


@pytest.mark.parametrize(("trial", "completed", "policy"), [
    ([(5, 9.0)], [[(5, 1.0)]] * 3, POLICY),                        # before the start point
    ([(50, 9.0)], [[(50, 1.0)]] * 2, POLICY),                      # too few completed trials
    ([(50, 9.0)], [[(60, 1.0)]] * 3, POLICY),                      # nobody had reported by that point
    ([], [[(50, 1.0)]] * 3, POLICY),                               # the trial has not reported yet
])
def test_no_verdict_without_enough_to_judge(trial: list[tuple[float, float]], completed: Any, policy: Policy) -> None:
    assert median_stop(trial, completed, maximize=False, policy=policy, metric="loss") is None


def test_reports_become_points() -> None:
    reports = [
        {"progressPercentage": 20, "metrics": [{"name": "loss", "value": "0.9"}]},
        {"metrics": [{"name": "loss", "value": "nan"}]},           # not a number: skipped
        {"metrics": [{"name": "acc", "value": "0.1"}]},            # no objective: skipped
        {"progressPercentage": 60, "metrics": [{"name": "loss", "value": "0.5"}]},
    ]
    assert points(reports, "loss") == [(20.0, 0.9), (60.0, 0.5)]
    assert points([{"metrics": [{"name": "loss", "value": "1"}]}] * 2, "loss") == [(1.0, 1.0), (2.0, 1.0)]


def test_annotations_are_checked() -> None:
    assert policy_of({"kubetrain.dev/early-stopping": "median"}) == Policy()
    assert policy_of({"kubetrain.dev/early-stopping": "median", "kubetrain.dev/early-stopping-min-trials": "5",
                      "kubetrain.dev/early-stopping-start": "30"}) == Policy(5, 30.0)
    assert policy_of(None) is None
    found = check({"kubetrain.dev/early-stopping": "hyperband", "kubetrain.dev/early-stopping-start": "150"})
    assert [(f.path, f.message) for f in found.errors] == [
        ("metadata.annotations[kubetrain.dev/early-stopping]", "unknown early-stopping rule 'hyperband'"),
        ("metadata.annotations[kubetrain.dev/early-stopping-start]", "'150' is not a valid value"),
    ]
    alone = check({"kubetrain.dev/early-stopping-min-trials": "2"})
    assert alone.ok and [w.fix for w in alone.warnings] == ["add kubetrain.dev/early-stopping: median"]


def job(**annotations: str) -> OptimizationJob:
    doc = optimizationjob(numTrials=6, parallelTrials=2)
    doc["metadata"]["uid"] = "oj-uid"
    doc["metadata"]["annotations"] = annotations
    obj, result = parse_manifest(doc)
    assert isinstance(obj, OptimizationJob), result.errors
    return obj


def trial(oj: OptimizationJob, index: int, state: str, loss: str | None = None, **annotations: str) -> dict[str, Any]:
    tj = build_trial(oj, index)
    tj["metadata"]["annotations"].update(annotations)
    status: dict[str, Any] = {}
    if state != "Running":
        status["conditions"] = [{"type": state, "status": "True", "reason": "R", "message": ""}]
    if loss is not None:
        status["trainerStatus"] = {"metrics": [{"name": "loss", "value": loss}]}
    tj["status"] = status
    return tj


def test_the_plan_stops_a_trial_only_when_asked_and_counts_a_stopped_one_as_finished() -> None:
    histories = {f"tune-{i}": [(50.0, 0.5), (100.0, 0.4)] for i in range(3)}
    histories["tune-3"] = [(50.0, 2.0)]
    opted = job(**{"kubetrain.dev/early-stopping": "median"})
    trials = [trial(opted, i, "Complete", "0.4") for i in range(3)] + [trial(opted, 3, "Running", "2.0")]
    decided = plan(opted, trials, now=NOW, histories=histories)
    assert list(decided.stop) == ["tune-3"] and decided.create == [4]
    assert plan(job(), trials, now=NOW, histories=histories).stop == {}  # not opted in: never
    stopped = [*trials[:3], trial(opted, 3, "Running", "2.0", **{ANNOTATION_STOPPED: "median stopping: ..."})]
    after = plan(opted, stopped, now=NOW, histories=histories)
    (t3,) = [t for t in after.trials if t.name == "tune-3"]
    assert (t3.state, t3.note, t3.scored) == ("EarlyStopped", "median stopping: ...", False)
    assert after.create == [4, 5] and after.stop == {}
    assert "1 stopped early" in after.status["conditions"][1]["message"]


def test_validation_reports_bad_annotations_at_their_paths() -> None:
    result, _ = check_optimizationjob(job(**{"kubetrain.dev/early-stopping": "asha"}))
    assert [f.path for f in result.errors] == ["metadata.annotations[kubetrain.dev/early-stopping]"]
