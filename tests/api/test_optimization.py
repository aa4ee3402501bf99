"""OptimizationJob, upstream's API (kubeflow/trainer main, pkg/apis/trainer/v1alpha1/optimizationjob_types.go):
manifests written for upstream's CRD load unchanged; the CRD has upstream's fields, defaults and CEL rules; and the
rules every entry point runs in Python agree with those CEL rules (property test)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api.crd import generate_crds
from kubetrain.api.loader import load_text, parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.optimization_checks import validate_optimizationjob_object
from tests.api.test_crd_cel import cel
from tests.api.test_crd_coverage import field_paths, root
from tests.builders import optimizationjob

CRD = next(c for c in generate_crds() if c["spec"]["names"]["kind"] == "OptimizationJob")
SPEC = root(CRD)["properties"]["spec"]

# The example of upstream's design (proposals/2605-optimization-job-crd), with the one fix its CRD needs
# (direction is the enum Minimize, not "minimize").
UPSTREAM_SAMPLE = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: OptimizationJob
metadata:
  name: random-tuning-mvp
spec:
  objectives:
    - metric: "val_loss"
      direction: "Minimize"
  searchAlgorithm:
    random: {}
  parameters:
    - name: "learning_rate"
      searchSpace:
        logUniform:
          min: "0.0001"
          max: "0.1"
    - name: "batch_size"
      searchSpace:
        categorical:
          choices: ["16", "32", "64"]
  numTrials: 20
  parallelTrials: 4
  trainJobTemplate:
    spec:
      runtimeRef:
        name: torch-distributed
        apiGroup: trainer.kubeflow.org
        kind: ClusterTrainingRuntime
      trainer:
        image: docker.io/my-org/bert-tuner:latest
        command:
          - "python"
          - "train.py"
status:
  conditions:
    - type: "Complete"
      status: "True"
      reason: "MaxTrialsReached"
      message: "done"
      lastTransitionTime: "2026-08-01T00:00:00Z"
  result:
    trainJobName: "random-tuning-mvp-trial-ab12c"
    parameters:
      - name: "learning_rate"
        value: "0.0021"
      - name: "batch_size"
        value: "32"
"""

# Every field path of upstream's OptimizationJob CRD outside the embedded TrainJobSpec (which the TrainJob CRD's
# coverage test compares), as `kubectl explain` walks them.
UPSTREAM_PATHS = (
    "apiVersion", "kind", "metadata", "spec", "spec.numTrials", "spec.objectives", "spec.objectives.direction",
    "spec.objectives.metric", "spec.parallelTrials", "spec.parameters", "spec.parameters.name",
    "spec.parameters.searchSpace", "spec.parameters.searchSpace.categorical",
    "spec.parameters.searchSpace.categorical.choices", "spec.parameters.searchSpace.logUniform",
    "spec.parameters.searchSpace.logUniform.max", "spec.parameters.searchSpace.logUniform.min",
    "spec.parameters.searchSpace.logUniform.type", "spec.parameters.searchSpace.uniform",
    "spec.parameters.searchSpace.uniform.max", "spec.parameters.searchSpace.uniform.min",
    "spec.parameters.searchSpace.uniform.type", "spec.searchAlgorithm", "spec.searchAlgorithm.grid",
    "spec.searchAlgorithm.random", "spec.searchAlgorithm.random.seed", "spec.trainJobTemplate",
    "spec.trainJobTemplate.metadata", "spec.trainJobTemplate.metadata.annotations",
    "spec.trainJobTemplate.metadata.finalizers", "spec.trainJobTemplate.metadata.labels",
    "spec.trainJobTemplate.metadata.name", "spec.trainJobTemplate.metadata.namespace", "spec.trainJobTemplate.spec",
    "status", "status.conditions", "status.conditions.lastTransitionTime", "status.conditions.message",
    "status.conditions.observedGeneration", "status.conditions.reason", "status.conditions.status",
    "status.conditions.type", "status.result", "status.result.parameters", "status.result.parameters.name",
    "status.result.parameters.value", "status.result.trainJobName",
)


def test_a_manifest_written_for_upstream_loads_unchanged() -> None:
    loaded = load_text(UPSTREAM_SAMPLE, "sample.yaml")
    assert loaded.result.errors == []
    (oj,) = loaded.objects
    assert isinstance(oj, OptimizationJob)
    assert oj.to_wire() == yaml.safe_load(UPSTREAM_SAMPLE)
    assert oj.spec.objective.metric == "val_loss"
    assert oj.status is not None and oj.status.result is not None
    assert [(p.name, p.value) for p in oj.status.result.parameters or []] == [
        ("learning_rate", "0.0021"), ("batch_size", "32")]
    assert validate_optimizationjob_object(oj).errors == []


def test_every_upstream_field_path_is_in_our_crd() -> None:
    ours = set(field_paths(root(CRD)))
    assert sorted(set(UPSTREAM_PATHS) - ours) == []
    prefix = "spec.trainJobTemplate.spec."
    embedded = {p.removeprefix(prefix) for p in ours if p.startswith(prefix)}
    trainjob = next(c for c in generate_crds() if c["spec"]["names"]["kind"] == "TrainJob")
    assert embedded == {p.removeprefix("spec.") for p in field_paths(root(trainjob)) if p.startswith("spec.")}


def test_defaults_and_bounds_are_upstreams() -> None:
    props = SPEC["properties"]
    assert props["searchAlgorithm"]["default"] == {"random": {}}
    for field in ("numTrials", "parallelTrials"):
        assert (props[field]["default"], props[field]["minimum"], props[field]["maximum"],
                props[field]["format"]) == (1, 1, 100, "int32")
    objective = props["objectives"]
    assert (objective["minItems"], objective["maxItems"], objective["x-kubernetes-list-map-keys"]) == (1, 1, ["metric"])
    assert objective["items"]["properties"]["direction"]["default"] == "Minimize"
    assert objective["items"]["properties"]["direction"]["enum"] == ["Maximize", "Minimize"]
    parameters = props["parameters"]
    assert (parameters["minItems"], parameters["maxItems"], parameters["x-kubernetes-list-map-keys"]) == (1, 100,
                                                                                                          ["name"])
    space = parameters["items"]["properties"]["searchSpace"]["properties"]
    for kind in ("uniform", "logUniform"):
        bound = space[kind]["properties"]["min"]
        assert (bound["type"], bound["minLength"], bound["maxLength"], bound["pattern"]) == (
            "string", 1, 64, r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$")
        assert space[kind]["properties"]["type"]["default"] == "Float"
        assert space[kind]["properties"]["type"]["enum"] == ["Int", "Float"]
    choices = space["categorical"]["properties"]["choices"]
    assert (choices["minItems"], choices["maxItems"], choices["items"]["maxLength"],
            choices["x-kubernetes-list-type"]) == (1, 100, 64, "set")
    seed = props["searchAlgorithm"]["properties"]["random"]["properties"]["seed"]
    assert seed == {"description": seed["description"], "type": "integer", "format": "int64"}  # no bounds, as upstream
    assert sorted(SPEC["required"]) == ["objectives", "parameters", "trainJobTemplate"]
    assert root(CRD)["required"] == ["spec"]
    assert CRD["spec"]["versions"][0]["subresources"] == {"status": {}}
    result = root(CRD)["properties"]["status"]["properties"]["result"]
    assert result["properties"]["trainJobName"]["maxLength"] == 63


def test_cel_rules_are_upstreams() -> None:
    assert [(r["rule"], r["message"]) for r in SPEC["x-kubernetes-validations"]] == [
        ("self == oldSelf", "OptimizationJobSpec is immutable and cannot be updated after creation"),
        ("self.parallelTrials <= self.numTrials", "parallelTrials cannot exceed numTrials"),
        ("!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",
         "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."),
    ]
    meta = SPEC["properties"]["trainJobTemplate"]["properties"]["metadata"]
    assert meta["x-kubernetes-validations"] == [
        {"rule": "!has(self.name) && !has(self.namespace)",
         "message": "name and namespace cannot be set in a template."}
    ]


def _defaulted(doc: dict[str, Any]) -> dict[str, Any]:
    """What the API server applies before CEL runs: the schema's defaults."""
    out = copy.deepcopy(doc)
    spec = out["spec"]
    spec.setdefault("numTrials", 1)
    spec.setdefault("parallelTrials", 1)
    spec.setdefault("searchAlgorithm", {"random": {}})
    return out


def _python(doc: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    obj, parsed = parse_manifest(doc)
    assert isinstance(obj, OptimizationJob), parsed.errors
    before = parse_manifest(old)[0] if old is not None else None
    assert before is None or isinstance(before, OptimizationJob)
    return [f"{f.path}: {f.message}" for f in validate_optimizationjob_object(obj, old=before).errors]


CEL_MESSAGES = (
    "parallelTrials cannot exceed numTrials",
    "Grid search requires all parameters to be Categorical",
    "exactly one of the fields in [random grid] must be set",
    "exactly one of the fields in [uniform logUniform categorical] must be set",
    "min must be strictly less than max",
    "min must be strictly greater than 0",
    "name and namespace cannot be set in a template.",
    "OptimizationJobSpec is immutable",
)


def _verdicts(messages: list[str]) -> set[str]:
    """Which CEL rules a list of findings (CEL's or ours) says are broken."""
    return {m for m in CEL_MESSAGES for text in messages if m in text}


@pytest.mark.parametrize(("change", "path", "message"), [
    ({"parallelTrials": 5}, "spec.parallelTrials", "parallelTrials cannot exceed numTrials (5 > 4)"),
    ({"searchAlgorithm": {"grid": {}}}, "spec.parameters[0].searchSpace",
     "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."),
    ({"searchAlgorithm": {"grid": {}, "random": {}}}, "spec.searchAlgorithm",
     "exactly one of the fields in [random grid] must be set (found random and grid)"),
    ({"searchAlgorithm": {}}, "spec.searchAlgorithm", "exactly one of the fields in [random grid] must be set"),
    ({"parameters": [{"name": "lr", "searchSpace": {}}]}, "spec.parameters[0].searchSpace",
     "exactly one of the fields in [uniform logUniform categorical] must be set"),
    ({"parameters": [{"name": "lr", "searchSpace": {"uniform": {"min": "1", "max": "1"}}}]},
     "spec.parameters[0].searchSpace.uniform", "min must be strictly less than max (min 1, max 1)"),
    ({"parameters": [{"name": "lr", "searchSpace": {"logUniform": {"min": "-1", "max": "1"}}}]},
     "spec.parameters[0].searchSpace.logUniform.min", "min must be strictly greater than 0 (got -1)"),
    ({"parameters": [{"name": "n", "searchSpace": {"uniform": {"min": "0.2", "max": "0.8", "type": "Int"}}}]},
     "spec.parameters[0].searchSpace.uniform",
     "no integer lies between min 0.2 and max 0.8 (type Int), so no trial can get a value"),
    ({"parameters": [{"name": "lr", "searchSpace": {"categorical": {"choices": ["a", "a"]}}},
                     {"name": "lr", "searchSpace": {"categorical": {"choices": ["b"]}}}]},
     "spec.parameters[1].name", "Duplicate value: name 'lr' appears more than once"),
    ({"trainJobTemplate": {"metadata": {"name": "x"}, "spec": {"runtimeRef": {"name": "torch-distributed"}}}},
     "spec.trainJobTemplate.metadata", "name and namespace cannot be set in a template."),
])
def test_rules_name_the_field_and_match_the_crd(change: dict[str, Any], path: str, message: str) -> None:
    doc = optimizationjob()
    doc["spec"].update(change)
    found = _python(doc)
    assert f"{path}: {message}" in found
    if any(m in message for m in CEL_MESSAGES):
        assert _verdicts(cel("OptimizationJob", _defaulted(doc))) == _verdicts(found)


def test_every_finding_has_a_fix() -> None:
    doc = optimizationjob(parallelTrials=9, searchAlgorithm={"grid": {}})
    obj = parse_manifest(doc)[0]
    assert isinstance(obj, OptimizationJob)
    result = validate_optimizationjob_object(obj)
    assert result.errors and all(f.fix for f in result.errors + result.warnings)


def test_the_spec_is_immutable() -> None:
    old = optimizationjob()
    new = copy.deepcopy(old)
    new["spec"]["numTrials"] = 8
    assert _python(new, old) == ["spec: OptimizationJobSpec is immutable and cannot be updated after creation"]
    assert cel("OptimizationJob", _defaulted(new), _defaulted(old)) == [
        ".spec: OptimizationJobSpec is immutable and cannot be updated after creation"]
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert _python(relabelled, old) == []


def test_grid_size_warnings() -> None:
    grid = [{"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32"]}}}]
    for trials, text in ((4, "the grid has 2 combinations, so only 2 of the 4 trials will run"),
                         (1, "the grid has 2 combinations; numTrials 1 runs only the first 1")):
        doc = optimizationjob(parameters=grid, searchAlgorithm={"grid": {}}, numTrials=trials, parallelTrials=1)
        obj = parse_manifest(doc)[0]
        assert isinstance(obj, OptimizationJob)
        assert [w.message for w in validate_optimizationjob_object(obj).warnings] == [text]


@pytest.mark.parametrize(("doc_change", "where", "words"), [
    ({"direction": "minimize"}, "spec.objectives[0].direction", "'Maximize' or 'Minimize'"),
    ({"numTrial": 3}, "spec.numTrial", "numTrials"),
])
def test_loader_diagnoses_typos(doc_change: dict[str, Any], where: str, words: str) -> None:
    doc = optimizationjob()
    if "direction" in doc_change:
        doc["spec"]["objectives"][0].update(doc_change)
    else:
        doc["spec"].update(doc_change)
    obj, result = parse_manifest(doc)
    assert obj is None
    assert any(f.path == where and (words in f.message or words in (f.fix or "")) for f in result.errors), result.errors


def test_a_bound_that_is_not_a_number_is_refused_at_load() -> None:
    doc = optimizationjob(parameters=[{"name": "lr", "searchSpace": {"uniform": {"min": "1e-3", "max": ".5"}}}])
    obj, result = parse_manifest(doc)
    assert obj is None
    assert [f.path for f in result.errors] == ["spec.parameters[0].searchSpace.uniform.max"]


# --- property: the Python rules and the CRD's CEL rules agree ---

NUMBERS = st.sampled_from(["-1", "0", "0.001", "0.5", "1", "2", "10", "1e-4", "3.5"])
SPACES = st.one_of(
    st.builds(lambda lo, hi, t: {"uniform": {"min": lo, "max": hi, "type": t}}, NUMBERS, NUMBERS,
              st.sampled_from(["Int", "Float"])),
    st.builds(lambda lo, hi: {"logUniform": {"min": lo, "max": hi}}, NUMBERS, NUMBERS),
    st.builds(lambda n: {"categorical": {"choices": [str(i) for i in range(n)]}}, st.integers(1, 3)),
    st.just({}),
    st.just({"uniform": {"min": "0", "max": "1"}, "categorical": {"choices": ["a"]}}),
)


@settings(max_examples=150, deadline=None)
@given(
    spaces=st.lists(SPACES, min_size=1, max_size=3),
    trials=st.integers(1, 100),
    parallel=st.integers(1, 100),
    algorithm=st.sampled_from([{"random": {}}, {"grid": {}}, {"random": {"seed": 3}}, {}, {"random": {}, "grid": {}}]),
    template_name=st.booleans(),
)
def test_python_rules_agree_with_the_cel_rules(
    spaces: list[dict[str, Any]], trials: int, parallel: int, algorithm: dict[str, Any], template_name: bool
) -> None:
    parameters = [{"name": f"p{i}", "searchSpace": s} for i, s in enumerate(spaces)]
    doc = optimizationjob(parameters=parameters, numTrials=trials, parallelTrials=parallel, searchAlgorithm=algorithm)
    if template_name:
        doc["spec"]["trainJobTemplate"]["metadata"] = {"namespace": "other"}
    assert _verdicts(cel("OptimizationJob", _defaulted(doc))) == _verdicts(_python(doc))
