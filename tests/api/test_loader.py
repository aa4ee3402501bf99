"""Loader diagnoses: misplaced fields, typos, YAML errors with lines, legacy conversions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.loader import load_text

TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: t
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
{trainer}
"""


def load(trainer: str) -> list[tuple[str | None, str, str | None, str | None]]:
    loaded = load_text(TRAINJOB.format(trainer=trainer), "job.yaml")
    return [(e.path, e.message, e.fix, e.source) for e in loaded.result.errors]


def test_typo_suggests_field() -> None:
    assert load("    numNode: 2") == [("spec.trainer.numNode", "unknown field 'numNode'", "did you mean 'numNodes'?",
                                       "job.yaml:9")]


def test_field_from_another_level() -> None:
    ((path, message, fix, source),) = load("    runtimeRef: {name: x}")
    assert (path, message, source) == ("spec.trainer.runtimeRef", "`runtimeRef` does not belong here", "job.yaml:9")
    assert fix == "it belongs under `spec`"


def test_wrong_types() -> None:
    ((path, message, _, source),) = load("    numProcPerNode: many")
    assert (path, message, source) == (
        "spec.trainer.numProcPerNode", "must have an int value or [auto cpu gpu], got 'many'", "job.yaml:9")
    ((path, message, _, _),) = load("    command: torchrun train.py")
    assert (path, message) == ("spec.trainer.command", "expected a list, got a string")


def test_missing_required() -> None:
    loaded = load_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {}\n")
    assert [(e.path, e.message) for e in loaded.result.errors] == [
        ("spec.runtimeRef", "required field `runtimeRef` is missing")]


def test_unknown_kind_typo() -> None:
    loaded = load_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJobs\n")
    assert [(e.path, e.fix) for e in loaded.result.errors] == [("kind", "did you mean 'TrainJob'?")]


def test_unserved_api_version() -> None:
    loaded = load_text("apiVersion: trainer.kubeflow.org/v9\nkind: TrainJob\n")
    assert loaded.result.errors[0].message == "apiVersion 'trainer.kubeflow.org/v9' is not served for TrainJob"


def test_tab_and_syntax_error_line() -> None:
    loaded = load_text("apiVersion: v1\nkind: TrainJob\nmetadata:\n\tname: x\n", "tabs.yaml")
    (err,) = loaded.result.errors
    assert err.source == "tabs.yaml:4" and err.fix == "indent with spaces, not tabs"


def test_multi_document_and_empty_documents() -> None:
    text = "---\n" + TRAINJOB.format(trainer="    numNodes: 1") + "---\n---\n" + TRAINJOB.format(
        trainer="    numNodes: 2").replace("name: t", "name: u")
    loaded = load_text(text, "m.yaml")
    assert [o.metadata.name for o in loaded.objects] == ["t", "u"]
    assert loaded.sources == ["m.yaml:2", "m.yaml:13"]


def test_legacy_group_in_runtime_ref_converted() -> None:
    text = TRAINJOB.format(trainer="    numNodes: 1").replace(
        "    name: torch-distributed", "    name: torch-distributed\n    apiGroup: kubeflow.org")
    loaded = load_text(text)
    assert loaded.result.ok
    assert loaded.objects[0].spec.runtime_ref.api_group == "trainer.kubeflow.org"
    assert "legacy group" in loaded.result.warnings[0].message


def test_empty_files_and_directories_are_errors(tmp_path: Path) -> None:
    from kubetrain.api.loader import load_file

    for name, text in (("empty.yaml", ""), ("comments.yaml", "# nothing here\n---\n")):
        (tmp_path / name).write_text(text)
        (err,) = load_file(tmp_path / name).result.errors
        assert (err.message, err.source) == ("no objects: the file is empty (or holds only comments)",
                                             str(tmp_path / name))
    empty_dir = tmp_path / "dir"
    empty_dir.mkdir()
    (err,) = load_file(empty_dir).result.errors
    assert err.message == "no manifests: the directory holds no *.yaml or *.yml file"


def test_a_broken_document_does_not_hide_the_others() -> None:
    text = TRAINJOB.format(trainer="    numNodes: 1") + "---\nkind: [unclosed\n---\n" + TRAINJOB.format(
        trainer="    numNodes: 2").replace("name: t\n", "name: u\n")
    loaded = load_text(text, "multi.yaml")
    assert [o.name for o in loaded.objects] == ["t", "u"]
    (err,) = loaded.result.errors
    assert err.source == "multi.yaml:12" and err.message.startswith("invalid YAML")


OME_RUNTIME = """\
apiVersion: ome.io/v1beta1
kind: ClusterTrainingRuntime
metadata: {{name: ome}}
spec:
  template:
    spec: {spec}
"""


@pytest.mark.parametrize(("spec", "path", "message"), [
    ('"not an object"', "spec.template.spec", "expected an object with fields, got a string"),
    ("{replicatedJobs: [1, two]}", "spec.template.spec.replicatedJobs[0]",
     "expected an object with fields, got an integer"),
    ("{replicatedJobs: [{name: a, template: oops}]}", "spec.template.spec.replicatedJobs[0].template",
     "expected an object with fields, got a string"),
    ("{replicatedJobs: [{name: a, template: {metadata: [x]}}]}",
     "spec.template.spec.replicatedJobs[0].template.metadata", "expected an object with fields, got a list"),
    ("[]", "spec.template.spec", "expected an object with fields, got a list"),
])
def test_legacy_ome_runtimes_of_any_shape_are_explained_not_crashed(spec: str, path: str, message: str) -> None:
    loaded = load_text(OME_RUNTIME.format(spec=spec), "ome.yaml")
    assert (path, message) in [(e.path, e.message) for e in loaded.result.errors]


def test_a_cluster_runtime_namespace_is_dropped_with_a_warning() -> None:
    text = OME_RUNTIME.format(spec="{}").replace("ome.io/v1beta1", "trainer.kubeflow.org/v1alpha1").replace(
        "{name: ome}", "{name: ome, namespace: team-a}")
    loaded = load_text(text, "ctr.yaml")
    assert loaded.objects[0].metadata.namespace is None
    (warning,) = [w for w in loaded.result.warnings if w.path == "metadata.namespace"]
    assert warning.message == ("a ClusterTrainingRuntime is cluster-scoped: namespace 'team-a' is ignored (the API "
                               "server drops it)")
    assert warning.fix == "remove metadata.namespace, or make it a TrainingRuntime to serve only that namespace"


def test_a_document_that_fails_to_load_still_says_what_it_is_and_what_is_left() -> None:
    loaded = load_text(TRAINJOB.format(trainer="    numNodes: two\n    numProcPerNode: 0"), "job.yaml")
    assert not loaded.objects
    (partial,) = loaded.partial
    assert partial.pruned == ("spec.trainer.numNodes",)
    assert partial.obj.spec.trainer is not None and partial.obj.spec.trainer.num_proc_per_node == 0
    (identity,) = loaded.rejected
    assert (identity.kind, identity.name) == ("TrainJob", "t")
    assert loaded.result.errors[0].obj == "TrainJob t"


@pytest.mark.parametrize(("doc", "path", "message", "fix"), [
    # pydantic's own words used to reach the user ("Input should be a valid boolean", "String should have at
    # least 1 character"); each type of error now says what was expected and how to write it.
    ({"spec": {"runtimeRef": {"name": "t"}, "suspend": [True]}}, "spec.suspend",
     "expected true or false, got [true]", "write true or false without quotes"),
    ({"spec": {"runtimeRef": {"name": ""}}}, "spec.runtimeRef.name", "must not be empty",
     "set spec.runtimeRef.name to a non-empty string"),
    ({"spec": {"runtimeRef": {"name": "t"}, "trainer": {"numNodes": "x"}}}, "spec.trainer.numNodes",
     "expected an integer, got 'x'", "write a whole number without quotes, e.g. 2"),
    ({"spec": {"runtimeRef": {"name": "t"}, "trainer": {"numNodes": -1}}}, "spec.trainer.numNodes",
     "must be greater than or equal to 0, got -1", "use a value >= 0"),
    # A union (int | float | str) reports each branch: one finding, in the words of quantities.
    ({"spec": {"runtimeRef": {"name": "t"}, "trainer": {"resourcesPerNode": {"limits": {"cpu": [1]}}}}},
     "spec.trainer.resourcesPerNode.limits.cpu", "expected a quantity, got a list [1]", None),
    ({"spec": {"runtimeRef": {"name": "t"}, "trainer": {"resourcesPerNode": {"requests": {"memory": None}}}}},
     "spec.trainer.resourcesPerNode.requests.memory", "expected a quantity, got nothing (an empty value)", None),
])
def test_every_type_error_is_explained_in_the_manifests_words(
    doc: dict[str, Any], path: str, message: str, fix: str | None
) -> None:
    from kubetrain.api.loader import parse_document

    parsed = parse_document({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                             "metadata": {"name": "t"}, **doc})
    found = {e.path: e for e in parsed.result.errors}
    assert found[path].message == message
    if fix is not None:
        assert found[path].fix == fix
    assert found[path].fix  # every one says how to fix it


@pytest.mark.parametrize(("doc", "message"), [
    (None, "expected a Kubernetes object (a mapping), got an empty document"),
    ([1, 2], "expected a Kubernetes object (a mapping), got a list"),
    ("text", "expected a Kubernetes object (a mapping), got a single value"),
])
def test_a_document_that_is_not_an_object_says_what_it_is(doc: Any, message: str) -> None:
    from kubetrain.api.loader import parse_document

    (error,) = parse_document(doc).result.errors
    assert error.message == message and "NoneType" not in error.message


def _alias_bomb(levels: int) -> str:
    """Each level is a list of ten aliases of the one before: 10^levels strings once expanded."""
    lines = ["apiVersion: trainer.kubeflow.org/v1alpha1", "kind: TrainJob", "metadata: {name: bomb}", "spec:",
             "  runtimeRef: {name: torch-distributed}", "  labels:", "    a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_excessive_aliasing_is_refused_before_anything_expands_it() -> None:
    """Nine levels are 10^9 nodes: walking them took all memory, then a MemoryError traceback."""
    loaded = load_text(_alias_bomb(9) + "---\n" + TRAINJOB.format(trainer="    numNodes: 1"), "bomb.yaml")
    (error,) = loaded.result.errors
    # (the nodes of the document itself, keys included, plus 10 + 100 + ... + 10^9 list items)
    assert error.message == "excessive aliasing: its aliases (*name) expand 45 written nodes to 1234567925"
    assert error.source == "bomb.yaml:1"
    assert error.fix == "write the repeated parts out, or nest fewer aliases"
    assert [o.name for o in loaded.objects] == ["t"]  # the other document still loads


def test_aliases_within_reason_still_load() -> None:
    text = TRAINJOB.format(trainer="    numNodes: 1\n    env: &env [{name: A, value: '1'}]") + (
        "  labels: &labels {team: ml}\n  annotations: *labels\n")
    loaded = load_text(text, "anchors.yaml")
    assert not loaded.result.errors, loaded.result.errors
    assert loaded.objects[0].spec.annotations == {"team": "ml"}
