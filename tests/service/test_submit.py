"""``kubetrain.service.submit``: what the CLI's apply, the UI's form and ``Client.train`` hand to a backend."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api import KubetrainError
from kubetrain.service.sources import Source
from kubetrain.service.submit import submit, workdirs


class Recorder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[list[str], str, str | None]] = []
        self.applied: list[dict[str, Any]] = []
        self.fail_on = fail_on

    def apply(self, manifests: list[dict[str, Any]], *, namespace: str, workdir: str | None = None) -> list[str]:
        names = [m["metadata"]["name"] for m in manifests]
        if self.fail_on in names:
            raise KubetrainError(f"{self.fail_on} refused")
        self.calls.append((names, namespace, workdir))
        self.applied.extend(manifests)
        return [f"{m['kind'].lower()}/{m['metadata']['name']} created" for m in manifests]


def _obj(kind: str, name: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name}}


def test_a_cluster_gets_every_object_in_one_call() -> None:
    backend = Recorder()
    heard: list[list[str]] = []
    done = submit([_obj("TrainJob", "a"), _obj("TrainingRuntime", "r")], backend,  # type: ignore[arg-type]
                  namespace="ns", cluster=True, on_applied=heard.append)
    assert backend.calls == [(["a", "r"], "ns", None)]
    assert done == ["trainjob/a created", "trainingruntime/r created"]
    assert heard == [done]


def test_locally_runtimes_go_first_and_each_object_keeps_its_folder() -> None:
    backend = Recorder()
    manifests = [_obj("TrainJob", "job"), _obj("TrainingRuntime", "rt"), _obj("ConfigMap", "cm")]
    done = submit(manifests, backend, namespace="default", cluster=False,  # type: ignore[arg-type]
                  workdirs=["/jobs", "/runtimes", "/maps"])
    assert backend.calls == [(["rt"], "default", "/runtimes"), (["cm"], "default", "/maps"),
                             (["job"], "default", "/jobs")]
    assert done[-1] == "trainjob/job created"


def test_a_later_refusal_leaves_what_was_applied_heard() -> None:
    backend = Recorder(fail_on="job")
    heard: list[list[str]] = []
    with pytest.raises(KubetrainError, match="job refused"):
        submit([_obj("TrainJob", "job"), _obj("TrainingRuntime", "rt")], backend,  # type: ignore[arg-type]
               namespace="default", cluster=False, on_applied=heard.append)
    assert heard == [["trainingruntime/rt created"]]


def test_workdirs_are_the_files_folders_and_here_for_stdin(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "sub" / "job.yaml"
    sources = [Source("job.yaml:1", None, str(f)), Source("-:1", None, "-"), Source("<stdin>:3", None, "<stdin>")]
    assert workdirs(sources) == [str(tmp_path / "sub"), str(tmp_path), str(tmp_path)]


@pytest.mark.parametrize("cluster", [True, False])
def test_an_object_defined_twice_is_applied_once_as_last_defined(cluster: bool) -> None:
    """Validation warns that the last definition replaces the earlier ones; applying both reported the object
    twice (``created``, then ``unchanged``). Objects named by generateName are each their own."""
    backend = Recorder()
    first, last = _obj("TrainJob", "a"), _obj("TrainJob", "a")
    last["spec"] = {"suspend": True}
    other_ns = {"kind": "TrainJob", "metadata": {"name": "a", "namespace": "other"}}
    manifests = [first, other_ns, last, _obj("TrainingRuntime", "a")]
    done = submit(manifests, backend, namespace="ns", cluster=cluster)  # type: ignore[arg-type]
    assert sorted(done) == ["trainingruntime/a created", "trainjob/a created", "trainjob/a created"]
    assert [m for m in backend.applied if m["kind"] == "TrainJob"] == [other_ns, last]


def test_objects_named_by_generate_name_are_never_merged() -> None:
    from kubetrain.service.submit import _last_definitions

    generated = [{"kind": "TrainJob", "metadata": {"generateName": "g-"}} for _ in range(2)]
    kept, dirs = _last_definitions(generated, ["/a", "/b"], "ns")
    assert kept == generated and dirs == ["/a", "/b"]
