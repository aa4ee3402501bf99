"""OptimizationJob trials, pure: suggestions (seeded random, grid), placeholders, trial TrainJobs, the checks that
need them, and golden files of the trials made from sample OptimizationJobs.

Regenerate the golden files with ``KUBETRAIN_UPDATE_GOLDEN=1`` and read the diff.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api.loader import load_file, parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.yamlio import dump_all
from kubetrain.compiler import Subject, validate_objects
from kubetrain.compiler.optimization import (
    build_trial,
    build_trials,
    check_optimizationjob,
    env_name,
    seed_of,
    suggestion,
    suggestions,
    trial_count,
    trial_parameters,
)
from kubetrain.compiler.optimization.suggest import grid_combinations, unit
from kubetrain.runtimes import builtin_runtimes
from tests.builders import optimizationjob

GOLDEN = Path(__file__).parent / "golden" / "optimization"
CASES = sorted(p.name.removesuffix(".input.yaml") for p in GOLDEN.glob("*.input.yaml"))


def oj(doc: dict[str, Any] | None = None, **spec: Any) -> OptimizationJob:
    obj, result = parse_manifest(doc if doc is not None else optimizationjob(**spec))
    assert isinstance(obj, OptimizationJob), result.errors
    return obj


# --- suggestions ---


def test_a_seed_gives_the_same_trials_every_time_and_another_seed_others() -> None:
    job = oj(numTrials=20, parallelTrials=2)
    first = suggestions(job.spec, 7)
    assert first == suggestions(oj(numTrials=20, parallelTrials=2).spec, 7)
    assert first != suggestions(job.spec, 8)
    # Pinned: the values are part of the contract (a restarted controller, the other backend, next year's Python).
    assert first[:2] == [{"lr": "0.015993564", "bs": "16"}, {"lr": "0.0041631149", "bs": "16"}]


def test_a_trial_is_known_on_its_own() -> None:
    """Counter mode: trial 7 needs no replay of trials 0..6 (both controllers are stateless)."""
    job = oj(numTrials=20, parallelTrials=2)
    assert suggestion(job.spec, 7, 7) == suggestions(job.spec, 7)[7]


def test_without_a_seed_the_uid_decides() -> None:
    job = oj(searchAlgorithm={"random": {}})
    assert seed_of(job.spec, "uid-1") == seed_of(job.spec, "uid-1") != seed_of(job.spec, "uid-2")
    assert seed_of(job.spec, None) == 0
    assert seed_of(oj().spec, "uid-1") == 7  # an explicit seed wins


def test_grid_walks_every_combination_in_product_order_up_to_num_trials() -> None:
    params = [
        {"name": "a", "searchSpace": {"categorical": {"choices": ["x", "y"]}}},
        {"name": "b", "searchSpace": {"categorical": {"choices": ["1", "2", "3"]}}},
    ]
    job = oj(parameters=params, searchAlgorithm={"grid": {}}, numTrials=100, parallelTrials=1,
             trainJobTemplate={"spec": {"runtimeRef": {"name": "torch-distributed"}}})
    assert trial_count(job.spec) == 6
    assert [tuple(s.values()) for s in suggestions(job.spec, 0)] == list(itertools.product(["x", "y"], ["1", "2", "3"]))
    assert grid_combinations(job.spec.parameters) == list(itertools.product(["x", "y"], ["1", "2", "3"]))
    four = oj(parameters=params, searchAlgorithm={"grid": {}}, numTrials=4, parallelTrials=1)
    assert [tuple(s.values()) for s in suggestions(four.spec, 0)] == [("x", "1"), ("x", "2"), ("x", "3"), ("y", "1")]


BOUNDS = st.sampled_from(["-5", "0", "0.001", "0.5", "1", "2", "7", "100", "1e-6", "2.5"])


@settings(max_examples=200, deadline=None)
@given(low=BOUNDS, high=BOUNDS, kind=st.sampled_from(["uniform", "logUniform"]), integer=st.booleans(),
       seed=st.integers(-(2**63), 2**63 - 1), index=st.integers(0, 99))
def test_every_value_lies_in_its_space(low: str, high: str, kind: str, integer: bool, seed: int, index: int) -> None:
    lo, hi = float(low), float(high)
    if lo >= hi or (kind == "logUniform" and lo <= 0) or (integer and math.ceil(lo) > math.floor(hi)):
        return  # validation refuses these spaces
    space = {kind: {"min": low, "max": high, "type": "Int" if integer else "Float"}}
    job = oj(parameters=[{"name": "p", "searchSpace": space}], trainer={"command": ["x", "{{.p}}"]})
    value = suggestion(job.spec, index, seed)["p"]
    assert lo <= float(value) <= hi
    if integer:
        assert str(int(value)) == value


def test_ints_cover_their_range_and_log_uniform_is_uniform_on_the_log_scale() -> None:
    job = oj(parameters=[
        {"name": "n", "searchSpace": {"uniform": {"min": "1", "max": "4", "type": "Int"}}},
        {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "1"}}},
    ], numTrials=100, parallelTrials=1, trainer={"command": ["x", "{{.n}}", "{{.lr}}"]})
    values = suggestions(job.spec, 1)
    assert {v["n"] for v in values} == {"1", "2", "3", "4"}
    decades = [math.floor(math.log10(float(v["lr"]))) for v in values]
    # 100 draws over four decades: every decade gets a share (a uniform draw would put 90 % in the top one).
    assert all(decades.count(d) >= 10 for d in (-4, -3, -2, -1)), decades


def test_unit_is_in_zero_one() -> None:
    draws = [unit(3, i, "p") for i in range(2000)]
    assert all(0.0 <= u < 1.0 for u in draws)
    assert 0.45 < sum(draws) / len(draws) < 0.55


# --- trials ---


def test_a_trial_is_the_template_with_its_values_everywhere() -> None:
    doc = optimizationjob(trainer={
        "command": ["python", "train.py", "--lr={{.lr}}", "--bs={{ .bs }}"],
        "env": [{"name": "BATCH", "value": "{{.bs}}"}, {"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "stale"}],
    })
    doc["metadata"]["uid"] = "uid-9"
    doc["spec"]["trainJobTemplate"]["metadata"] = {"labels": {"lr": "{{.lr}}"}, "annotations": {"note": "x"}}
    job = oj(doc)
    trial = build_trial(job, 3, {"lr": "0.01", "bs": "32"})
    assert trial["metadata"] == {
        "name": "tune-3",
        "namespace": "default",
        "labels": {"lr": "0.01", "kubetrain.dev/optimizationjob": "tune", "kubetrain.dev/trial-index": "3"},
        "annotations": {"note": "x", "kubetrain.dev/trial-parameters": '{"lr": "0.01", "bs": "32"}'},
        "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob", "name": "tune",
                             "uid": "uid-9", "controller": True, "blockOwnerDeletion": True}],
    }
    assert trial["spec"]["trainer"] == {
        "command": ["python", "train.py", "--lr=0.01", "--bs=32"],
        "env": [{"name": "BATCH", "value": "32"}, {"name": "KUBEFLOW_TRAINER_OPT_LR", "value": "0.01"},
                {"name": "KUBEFLOW_TRAINER_OPT_BS", "value": "32"}],
    }
    assert trial_parameters(trial) == {"lr": "0.01", "bs": "32"}
    assert TrainJob.model_validate(trial).name == "tune-3"
    # The OptimizationJob itself is not changed.
    assert job.spec.train_job_template.spec.trainer is not None
    assert job.spec.train_job_template.spec.trainer.command == ["python", "train.py", "--lr={{.lr}}", "--bs={{ .bs }}"]


def test_env_names() -> None:
    assert env_name("learning_rate") == "KUBEFLOW_TRAINER_OPT_LEARNING_RATE"
    assert env_name("batch-size") == "KUBEFLOW_TRAINER_OPT_BATCH_SIZE"


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    loaded = load_file(GOLDEN / f"{case}.input.yaml")
    assert loaded.result.ok, loaded.result.errors
    (job,) = loaded.objects
    assert isinstance(job, OptimizationJob)
    results = validate_objects([Subject(job)], installed=builtin_runtimes())
    assert results[0].ok, results[0].errors
    trials = build_trials(job)
    for trial in trials:  # every trial is a TrainJob the TrainJob rules accept
        tj = TrainJob.model_validate(trial)
        assert validate_objects([Subject(tj)], installed=builtin_runtimes())[0].ok
    text = dump_all(trials)
    golden = GOLDEN / f"{case}.golden.yaml"
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(text)
    assert text == golden.read_text(), f"trials of {case} changed; regenerate and review the diff"


# --- the checks that need trials ---


def _errors(doc: dict[str, Any]) -> list[str]:
    result, _ = check_optimizationjob(oj(doc))
    return [f"{f.path}: {f.message}" for f in result.errors]


def test_a_placeholder_naming_no_parameter_is_an_error_with_a_suggestion() -> None:
    doc = optimizationjob(trainer={"command": ["python", "t.py", "--lr={{.lrr}}", "--bs={{.bs}}"]})
    result, trial = check_optimizationjob(oj(doc))
    assert trial is None
    (error,) = [f for f in result.errors if "lrr" in f.message]
    assert (error.path, error.message, error.fix) == (
        "spec.trainJobTemplate.spec.trainer.command[2]", "placeholder {{.lrr}} names no parameter (parameters: lr, bs)",
        "did you mean {{.lr}}?")


@pytest.mark.parametrize("text", ["{{lr}}", "${trialParameters.lr}", "{{ .lr | quote }}"])
def test_what_is_not_a_placeholder_is_an_error(text: str) -> None:
    doc = optimizationjob(trainer={"command": ["python", "t.py", text, "{{.bs}}"]})
    result, _ = check_optimizationjob(oj(doc))
    assert [(f.path, f.fix) for f in result.errors] == [("spec.trainJobTemplate.spec.trainer.command[2]",
                                                         "write {{.lr}}")]


def test_a_parameter_no_placeholder_uses_is_an_error_when_others_are_used() -> None:
    doc = optimizationjob(trainer={"command": ["python", "t.py", "--lr={{.lr}}"]})
    assert _errors(doc) == ["spec.parameters[1].name: parameter 'bs' is used by no placeholder, while the template "
                            "uses placeholders for the others: every trial would differ in a value nothing reads"]
    doc = optimizationjob(trainer={"command": ["python", "t.py", "--lr={{.lr}}", "--bs=$(KUBEFLOW_TRAINER_OPT_BS)"]})
    assert _errors(doc) == []


def test_upstreams_env_only_template_is_valid_with_warnings() -> None:
    result, trial = check_optimizationjob(oj(optimizationjob(trainer={"command": ["python", "train.py"]})))
    assert result.errors == [] and trial is not None
    assert [w.message for w in result.warnings] == [
        "no placeholder uses 'lr': trials get it only as the environment variable KUBEFLOW_TRAINER_OPT_LR of the "
        "trainer",
        "no placeholder uses 'bs': trials get it only as the environment variable KUBEFLOW_TRAINER_OPT_BS of the "
        "trainer",
    ]


@pytest.mark.parametrize(("name", "trials", "words"), [
    ("Tune", 4, "must match RFC 1035 DNS label format"),
    ("a" * 62, 10, "'" + "a" * 62 + "-9' has 64"),
    ("a.b", 4, "must match RFC 1035"),
])
def test_trial_names_must_be_trainjob_names(name: str, trials: int, words: str) -> None:
    doc = optimizationjob(name, numTrials=trials, parallelTrials=1)
    assert any(words in e for e in _errors(doc) if e.startswith("metadata.name")), _errors(doc)
    assert not [e for e in _errors(optimizationjob("a" * 61, numTrials=10, parallelTrials=1))
                if e.startswith("metadata.name")]


def test_two_parameters_may_not_share_a_variable() -> None:
    params = [{"name": "lr", "searchSpace": {"categorical": {"choices": ["1"]}}},
              {"name": "LR", "searchSpace": {"categorical": {"choices": ["2"]}}}]
    doc = optimizationjob(parameters=params, trainer={"command": ["{{.lr}}", "{{.LR}}"]})
    assert _errors(doc) == ["spec.parameters[1].name: parameters 'lr' and 'LR' both become KUBEFLOW_TRAINER_OPT_LR"]


def test_the_first_trial_is_checked_against_its_runtime_at_the_templates_paths() -> None:
    doc = optimizationjob(trainer={"command": ["{{.lr}}", "{{.bs}}"], "numProcPerNode": 0})
    results = validate_objects([Subject(oj(doc))], installed=builtin_runtimes())
    paths = [f.path for f in results[0].errors]
    assert paths == ["spec.trainJobTemplate.spec.trainer.numProcPerNode"], results[0].errors
    missing = validate_objects([Subject(oj(optimizationjob(runtime="torch-distributd")))], installed=builtin_runtimes())
    (error,) = missing[0].errors
    assert error.path == "spec.trainJobTemplate.spec.runtimeRef.name" and "torch-distributed" in (error.fix or "")


def test_a_value_that_breaks_a_label_is_found_before_submit() -> None:
    params = [{"name": "opt", "searchSpace": {"categorical": {"choices": ["adam w"]}}}]
    doc = optimizationjob(parameters=params, trainer={"command": ["x", "{{.opt}}"]})
    doc["spec"]["trainJobTemplate"]["metadata"] = {"labels": {"opt": "{{.opt}}"}}
    results = validate_objects([Subject(oj(doc))], installed=builtin_runtimes())
    assert any(f.path.startswith("spec.trainJobTemplate.metadata.labels") for f in results[0].errors), results


def test_values_are_what_the_annotation_says() -> None:
    job = oj()
    for trial in build_trials(job):
        assert json.loads(trial["metadata"]["annotations"]["kubetrain.dev/trial-parameters"]) == trial_parameters(
            trial)
    assert copy.deepcopy(build_trials(job)) == build_trials(job)


def test_other_double_braces_are_left_alone() -> None:
    """A script in the command may have its own braces (a Jinja template, a str.format escape)."""
    script = 'print(f"{{total}} items"); print("{{ name }}")'
    doc = optimizationjob(trainer={"command": ["python", "-c", script, "{{.lr}}", "{{.bs}}"]})
    assert _errors(doc) == []
    assert build_trial(oj(doc), 0, {"lr": "1", "bs": "2"})["spec"]["trainer"]["command"][2] == script
