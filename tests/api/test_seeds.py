"""Every YAML block of the seed documents: whole manifests load (or fail naming the problem), fragments are
recognised as fragments."""

from __future__ import annotations

import pytest

from kubetrain.api.loader import load_file
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import validate_runtime_object
from tests.conftest import shared_path

FRAGMENT = "not a whole manifest"
# file -> (kinds loaded, substring every error list must contain, or None when it loads cleanly)
EXPECTED: dict[str, tuple[list[str], str | None]] = {
    "seed000-00.yaml": ([], "`mlPolicy` is at the top level (and spec is empty); it belongs under `spec`"),
    "seed000-01.yaml": ([], "line 10 is '...', a placeholder from documentation"),
    "seed000-02.yaml": ([], "the fields of a list item must line up"),
    "seed000-03.yaml": ([], "line 10 is '...', a placeholder from documentation"),
    "seed000-04.yaml": ([], FRAGMENT),
    "seed000-05.yaml": ([], FRAGMENT),
    "seed001-00.yaml": (["ClusterTrainingRuntime"], None),
    "seed001-01.yaml": ([], "line 11 is '...'"),
    "seed001-02.yaml": ([], "`containers` does not belong here"),
    "seed001-03.yaml": ([], "line 11 is '...'"),
    "seed001-04.yaml": ([], FRAGMENT),
    "seed001-05.yaml": ([], "invalid YAML: mapping values are not allowed here"),
    "seed001-06.yaml": (["ClusterTrainingRuntime"], None),
    "seed003-00.yaml": (["TrainingRuntime"], None),
    "seed003-04.yaml": (["TrainingRuntime"], None),
    "seed003-05.yaml": (["TrainingRuntime"], None),
    "seed003-06.yaml": (["TrainingRuntime"], None),
    "seed003-12.yaml": (["ClusterTrainingRuntime"], None),
    "seed003-18.yaml": ([], None),  # an RBAC Role: skipped with a warning
    "seed004-00.yaml": (["ClusterTrainingRuntime"], None),
    "seed004-01.yaml": (["TrainJob"], None),
    "seed004-02.yaml": (["TrainingRuntime"], None),
    "seed004-03.yaml": (["TrainJob"], None),
    "seed004-04.yaml": ([], FRAGMENT),
    "seed004-05.yaml": ([], FRAGMENT),
}
for _i in (1, 2, 3, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 19):
    EXPECTED[f"seed003-{_i:02d}.yaml"] = ([], FRAGMENT)


def test_every_snippet_is_covered() -> None:
    files = sorted(p.name for p in shared_path("seeds", "snippets").glob("*.yaml"))
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_snippet(name: str) -> None:
    loaded = load_file(shared_path("seeds", "snippets", name))
    kinds, problem = EXPECTED[name]
    assert [o.kind for o in loaded.objects] == kinds
    messages = " | ".join(e.render() for e in loaded.result.errors)
    if problem is None:
        assert loaded.result.errors == []
    else:
        assert problem in messages
        assert all(e.source and ":" in e.source for e in loaded.result.errors), "every error names file:line"


def test_legacy_and_ome_conversions_warn() -> None:
    loaded = load_file(shared_path("seeds", "snippets", "seed003-05.yaml"))
    warnings = [w.message for w in loaded.result.warnings]
    assert "apiVersion ome.io/v1beta1 is not served; loaded as trainer.kubeflow.org/v1alpha1" in warnings
    assert any("replicated job 'worker'" in w and "using it as the trainer step" in w for w in warnings)
    rt = loaded.objects[0]
    assert isinstance(rt, TrainingRuntime)
    assert rt.spec.ml_policy is not None and rt.spec.ml_policy.torch is not None
    assert rt.spec.ml_policy.torch.elastic_policy is not None
    assert rt.spec.ml_policy.torch.elastic_policy.max_nodes == 8
    assert validate_runtime_object(rt).errors == []


def test_seed004_trainjob_references_builtin() -> None:
    from kubetrain.compiler import resolve_runtime, validate_trainjob
    from kubetrain.runtimes import builtin_runtimes

    tj = load_file(shared_path("seeds", "snippets", "seed004-01.yaml")).objects[0]
    assert isinstance(tj, TrainJob)
    runtime, result = resolve_runtime(tj, builtin_runtimes())
    assert isinstance(runtime, ClusterTrainingRuntime) and result.ok
    assert validate_trainjob(tj, runtime).ok


def test_seed004_team_runtime_namespace_rule() -> None:
    from kubetrain.compiler import resolve_runtime

    rt = load_file(shared_path("seeds", "snippets", "seed004-02.yaml")).objects[0]
    tj = load_file(shared_path("seeds", "snippets", "seed004-03.yaml")).objects[0]
    assert isinstance(tj, TrainJob) and isinstance(rt, TrainingRuntime)
    found, result = resolve_runtime(tj, [rt])
    assert found is rt and result.ok
    tj.metadata.namespace = "team-b"
    found, result = resolve_runtime(tj, [rt])
    assert found is None
    assert 'exists in namespace team-a, not in "team-b"' in result.errors[0].message
    assert "ClusterTrainingRuntime" in (result.errors[0].fix or "")
