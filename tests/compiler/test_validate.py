"""The one validation entry point: batches of runtimes and TrainJobs, no cascades, no duplicates."""

from __future__ import annotations

import pytest

from kubetrain.api import constants as c
from kubetrain.api.loader import Identity, load_text
from kubetrain.api.yamlio import dump_all
from kubetrain.compiler import Subject, validate_objects
from kubetrain.runtimes import builtin_runtimes
from tests.builders import RuntimeBuilder, TrainJobBuilder


def messages(result: object, severity: str = "errors") -> dict[str, str]:
    return {f.path: f.message for f in getattr(result, severity)}


def two_policies() -> RuntimeBuilder:
    return RuntimeBuilder("rt").ml(torch={}, mpi={}).trainer()


def test_an_invalid_runtime_in_the_batch_is_reported_once_and_does_not_cascade() -> None:
    rt, tj = two_policies().build(), TrainJobBuilder(runtime="rt").trainer(numNodes=2).build()
    rt_result, tj_result = validate_objects([Subject(rt), Subject(tj)])
    assert messages(rt_result) == {"spec.mlPolicy": "Only one of the policy can be configured (found torch, mpi)"}
    assert tj_result.errors == []
    assert messages(tj_result, "warnings") == {
        "spec.runtimeRef": 'not checked against ClusterTrainingRuntime "rt": that runtime is invalid (see its errors)'}


def test_a_runtime_that_failed_to_load_is_not_called_missing() -> None:
    tj = TrainJobBuilder(runtime="rt").build()
    (result,) = validate_objects([Subject(tj)], rejected=[Identity(c.KIND_CLUSTER_TRAINING_RUNTIME, "rt")])
    assert result.errors == []
    assert messages(result, "warnings")["spec.runtimeRef"] == (
        'not checked against ClusterTrainingRuntime "rt": that runtime failed to load (see its errors)')


def test_an_invalid_installed_runtime_is_an_error_on_the_trainjob() -> None:
    (result,) = validate_objects([Subject(TrainJobBuilder(runtime="rt").build())], installed=[two_policies().build()])
    assert messages(result) == {"spec.runtimeRef": 'ClusterTrainingRuntime "rt" is invalid: spec.mlPolicy: Only one '
                                                   "of the policy can be configured (found torch, mpi)"}


def test_every_phase_at_once() -> None:
    """One file, three kinds of mistakes: a field that does not load, a TrainJob rule and a rule that needs the
    runtime. All of them come out of one run (they used to take three)."""
    rt = RuntimeBuilder("rt").ml(torch={}).trainer().build().to_wire()
    tj = TrainJobBuilder(name="Bad_Name", runtime="rt").trainer(numNodes="two", env=[
        {"name": "PET_NNODES", "value": "1"}]).obj
    loaded = load_text(dump_all([rt, tj]), "all.yaml")
    subjects = [Subject(o) for o in loaded.objects] + [Subject(p.obj, p.pruned) for p in loaded.partial]
    results = validate_objects(subjects, rejected=loaded.rejected)
    found = {f.path for f in loaded.result.errors} | {f.path for r in results for f in r.errors}
    assert {"spec.trainer.numNodes", "metadata.name", "spec.trainer.env"} <= found


def test_findings_at_paths_that_failed_to_load_are_not_repeated() -> None:
    tj = TrainJobBuilder(runtime="torch-distributed").trainer(numProcPerNode=0).build()
    (result,) = validate_objects([Subject(tj, pruned=("spec.trainer.numProcPerNode",))], installed=builtin_runtimes())
    assert "spec.trainer.numProcPerNode" not in messages(result)


def test_duplicates_are_reported_once() -> None:
    rt = RuntimeBuilder("rt").ml(torch={"envInjection": {"targets": [{"jobName": "node", "containerNames": [
        "ghost"]}]}}).trainer().build()
    (_, result) = validate_objects([Subject(rt), Subject(TrainJobBuilder(runtime="rt").trainer().build())])
    texts = [f.message for f in result.errors]
    assert len(texts) == len(set(texts)) == 1


def test_the_same_object_twice_is_a_warning() -> None:
    tj = TrainJobBuilder(runtime="torch-distributed").build()
    first, second = validate_objects([Subject(tj), Subject(tj.model_copy())], installed=builtin_runtimes())
    assert first.warnings == []
    assert messages(second, "warnings")["metadata.name"] == (
        'TrainJob "test-job" appears more than once in the input; the last definition replaces the earlier ones')


@pytest.mark.parametrize(("local", "severity"), [("run", "errors"), ("check", "warnings"), (None, None)])
def test_trainjobs_another_controller_manages_do_not_run_here(local: str | None, severity: str | None) -> None:
    tj = TrainJobBuilder(runtime="torch-distributed").spec(managedBy=c.MANAGED_BY_MULTIKUEUE).build()
    (result,) = validate_objects([Subject(tj)], installed=builtin_runtimes(), local=local)  # type: ignore[arg-type]
    if severity is None:
        assert result.ok and not result.warnings
        return
    message = messages(result, severity)["spec.managedBy"]
    assert message.startswith("this TrainJob is managed by 'kueue.x-k8s.io/multikueue': on a cluster MultiKueue, "
                              "which dispatches it to a worker cluster runs it; this machine runs only TrainJobs "
                              "kubetrain manages")


def test_unreadable_installed_runtimes_degrade_to_a_warning() -> None:
    (result,) = validate_objects([Subject(TrainJobBuilder(runtime="mine").build())], installed=None)
    assert result.ok
    assert "the installed runtimes could not be read" in messages(result, "warnings")["spec.runtimeRef"]


def test_runtime_updates_do_not_repeat_the_deprecation_warning() -> None:
    rt = RuntimeBuilder("old").trainer().label(c.LABEL_SUPPORT, c.SUPPORT_DEPRECATED).build()
    (created,) = validate_objects([Subject(rt)])
    (updated,) = validate_objects([Subject(rt, old=rt.model_copy())])
    assert any("is deprecated" in w.message for w in created.warnings)
    assert not any("is deprecated" in w.message for w in updated.warnings)
