"""The control rules both controllers follow (``kubetrain.compiler.optimization.plan``), table by table: what to
create next, which trial is best, and the status of a search at each point of its life."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.loader import parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.compiler.optimization import build_trial, plan, ranked, state_of
from tests.builders import optimizationjob

NOW = "2026-08-01T10:00:00Z"


def job(**spec: Any) -> OptimizationJob:
    doc = optimizationjob(**spec)
    doc["metadata"]["uid"] = "oj-uid"
    obj, result = parse_manifest(doc)
    assert isinstance(obj, OptimizationJob), result.errors
    return obj


def trial(oj: OptimizationJob, index: int, state: str = "Running", metrics: dict[str, str] | None = None,
          message: str = "") -> dict[str, Any]:
    tj = build_trial(oj, index)
    status: dict[str, Any] = {}
    if state in ("Complete", "Failed"):
        status["conditions"] = [{"type": state, "status": "True", "reason": "R", "message": message}]
    if metrics is not None:
        status["trainerStatus"] = {"metrics": [{"name": k, "value": v} for k, v in metrics.items()]}
    tj["status"] = status
    return tj


def conds(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_new_search_starts_parallel_trials() -> None:
    oj = job(numTrials=5, parallelTrials=2)
    p = plan(oj, [], now=NOW)
    assert p.create == [0, 1]
    assert conds(p.status) == {"Created": ("True", "OptimizationJobCreated"), "Running": ("True", "TrialsRunning")}
    assert "result" not in p.status and not p.finished


def test_a_finished_trial_makes_room_for_the_next() -> None:
    oj = job(numTrials=5, parallelTrials=2)
    p = plan(oj, [trial(oj, 0, "Complete", {"loss": "0.4"}), trial(oj, 1)], now=NOW)
    assert p.create == [2]
    assert p.status["result"]["trainJobName"] == "tune-0"
    assert p.best is not None and p.best.objective == 0.4


def test_trials_of_another_optimizationjob_are_not_counted() -> None:
    oj, other = job(numTrials=2, parallelTrials=2), job(numTrials=2, parallelTrials=2)
    other.metadata.uid = "someone-else"
    assert plan(oj, [trial(other, 0), trial(other, 1)], now=NOW).create == [0, 1]


@pytest.mark.parametrize(("direction", "best"), [("Minimize", "tune-1"), ("Maximize", "tune-2")])
def test_the_best_follows_the_direction_and_never_a_failed_or_unscored_trial(direction: str, best: str) -> None:
    oj = job(numTrials=6, parallelTrials=6, objectives=[{"metric": "loss", "direction": direction}])
    trials = [
        trial(oj, 0, "Failed", {"loss": "0.01"}, message="exit code 1"),  # the best number, but failed
        trial(oj, 1, "Complete", {"loss": "0.2"}),
        trial(oj, 2, "Complete", {"loss": "0.9"}),
        trial(oj, 3, "Complete", {"loss": "nan"}),
        trial(oj, 4, "Complete", {"accuracy": "0.1"}),
        trial(oj, 5, "Running", {"loss": "0.001"}),  # not finished: not yet a result
    ]
    p = plan(oj, trials, now=NOW)
    assert p.status["result"]["trainJobName"] == best
    ranks = ranked(p.trials, direction == "Maximize")
    assert [t.name for t in ranks][:2] == (["tune-1", "tune-2"] if direction == "Minimize" else ["tune-2", "tune-1"])
    notes = {t.name: t.note for t in p.trials}
    assert notes["tune-3"] == "reported loss='nan', not a number"
    assert notes["tune-4"] == "did not report loss (reported: accuracy)"
    assert notes["tune-0"] == "R: exit code 1"


def test_ties_go_to_the_earlier_trial() -> None:
    oj = job(numTrials=2, parallelTrials=2)
    p = plan(oj, [trial(oj, 1, "Complete", {"loss": "0.5"}), trial(oj, 0, "Complete", {"loss": "0.5"})], now=NOW)
    assert p.status["result"]["trainJobName"] == "tune-0"


def test_the_end_of_a_search() -> None:
    oj = job(numTrials=2, parallelTrials=2)
    p = plan(oj, [trial(oj, 0, "Complete", {"loss": "0.5"}), trial(oj, 1, "Failed")], now=NOW)
    assert conds(p.status) == {"Created": ("True", "OptimizationJobCreated"), "Running": ("False", "TrialsFinished"),
                               "Complete": ("True", "MaxTrialsReached")}
    assert p.create == [] and p.finished
    values = build_trial(oj, 0)["spec"]["trainer"]["env"]
    assert p.status["result"] == {"trainJobName": "tune-0", "parameters": [
        {"name": "lr", "value": values[0]["value"]}, {"name": "bs", "value": values[1]["value"]}]}
    assert state_of(p.status)[:2] == ("Complete", "MaxTrialsReached")


def test_a_grid_smaller_than_num_trials_is_exhausted() -> None:
    grid = [{"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}]
    oj = job(numTrials=5, parallelTrials=1, parameters=grid, searchAlgorithm={"grid": {}},
             trainJobTemplate={"spec": {"runtimeRef": {"name": "torch-distributed"}}})
    p = plan(oj, [trial(oj, 0, "Complete", {"loss": "1"}), trial(oj, 1, "Complete", {"loss": "2"})], now=NOW)
    assert conds(p.status)["Complete"] == ("True", "SearchSpaceExhausted")
    assert "the grid's 2 combinations finished (numTrials 5)" in p.status["conditions"][2]["message"]


def test_when_every_trial_fails() -> None:
    oj = job(numTrials=2, parallelTrials=1)
    p = plan(oj, [trial(oj, 0, "Failed", message="boom"), trial(oj, 1, "Failed")], now=NOW)
    assert conds(p.status)["Failed"] == ("True", "AllTrialsFailed")
    assert p.status["conditions"][2]["message"] == "all 2 trials failed; no result. First failure: tune-0: R: boom"
    assert "result" not in p.status and p.finished


def test_an_objective_nobody_reports_ends_the_search_after_three_completed_trials() -> None:
    oj = job(numTrials=10, parallelTrials=4)
    two = [trial(oj, i, "Complete", {"acc": "1"}) for i in range(2)]
    assert plan(oj, two, now=NOW).create == [2, 3, 4, 5]  # two trials without it: maybe a slow starter
    three = [*two, trial(oj, 2, "Complete", {"acc": "1"}), trial(oj, 3)]
    p = plan(oj, three, now=NOW)
    assert conds(p.status)["Failed"] == ("True", "ObjectiveNotReported") and p.create == []
    one_with_it = [*three[:2], trial(oj, 2, "Complete", {"loss": "3"})]
    assert "Failed" not in conds(plan(oj, one_with_it, now=NOW).status)


def test_a_finished_search_never_starts_a_trial_again() -> None:
    oj = job(numTrials=2, parallelTrials=1)
    done = plan(oj, [trial(oj, 0, "Complete", {"loss": "1"}), trial(oj, 1, "Complete", {"loss": "2"})], now=NOW)
    oj.status = type(oj).model_validate({**oj.to_wire(), "status": done.status}).status
    again = plan(oj, [trial(oj, 0, "Complete", {"loss": "1"})], now="2026-08-02T00:00:00Z")  # a trial deleted
    assert again.create == [] and again.finished
    assert conds(again.status)["Complete"] == ("True", "MaxTrialsReached")


def test_transition_times_move_only_when_a_condition_flips() -> None:
    oj = job(numTrials=3, parallelTrials=1)
    first = plan(oj, [trial(oj, 0)], now=NOW)
    oj.status = type(oj).model_validate({**oj.to_wire(), "status": first.status}).status
    later = plan(oj, [trial(oj, 0, "Complete", {"loss": "1"}), trial(oj, 1)], now="2026-08-01T11:00:00Z")
    times = {c["type"]: c["lastTransitionTime"] for c in later.status["conditions"]}
    assert times == {"Created": NOW, "Running": NOW}


def test_creation_errors_and_invalid_specs() -> None:
    oj = job()
    p = plan(oj, [], now=NOW, creation_error="trial 0 (tune-0) could not be created: quota")
    assert conds(p.status)["Created"] == ("False", "TrainJobsCreationFailed")
    bad = plan(oj, [], now=NOW, invalid="spec.parameters[0]: wrong")
    assert conds(bad.status)["Failed"] == ("True", "InvalidSpec") and bad.create == []
    assert state_of(bad.status) == ("Failed", "InvalidSpec", "spec.parameters[0]: wrong")
