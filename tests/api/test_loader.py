"""Loader diagnoses: misplaced fields, typos, YAML errors with lines, legacy conversions."""

from __future__ import annotations

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
    assert (path, message) == ("spec.trainer.command", "expected a list, got str")


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
