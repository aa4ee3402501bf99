"""``Client.optimize``: a function tuned over a search space on this machine, values reaching it with their types,
the best trial read back; bad arguments refused with what to do."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kubetrain import GridSearch, Objective, RandomSearch, Search
from kubetrain.api import KubetrainError
from kubetrain.client import Client

from .conftest import container, needs_namespaces, rjob, runtime

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(importlib.util.find_spec("kubeflow") is None, reason="the kubeflow SDK is not installed"),
]


def quadratic(x: float, scale: int, tag: str) -> None:
    from kubeflow.trainer import update_trainjob_status

    print(f"x={x} {type(x).__name__} scale={scale} {type(scale).__name__} tag={tag}", flush=True)
    update_trainjob_status(metrics={"loss": (x - 0.3) ** 2 * scale})


def plain(client: Client) -> None:
    rt = runtime("plain", [rjob("node", [container([sys.executable, "-c", "pass"])], ancestor="trainer",
                                backoff_limit=0)])
    client._backend.apply([rt], namespace="default")


def test_optimize_a_function(kt_home: Path, tmp_path: Path) -> None:
    client = Client()
    plain(client)
    name = client.optimize(
        func=quadratic, func_args={"tag": "t"}, runtime="plain", name="fn",
        search_space={"x": Search.uniform(0, 1), "scale": Search.choice([1, 2])},
        objectives=Objective("loss", "minimize"), algorithm=RandomSearch(seed=3), num_trials=4, parallel_trials=2,
        workdir=str(tmp_path),
    )
    view = client.wait_for_optimization_job(name, timeout=300, poll=0.2)
    assert (view.state, view.reason) == ("Complete", "MaxTrialsReached")
    best = client.get_best_results(name)
    assert best is not None and best.name == view.trials[0].name
    assert best.objective == pytest.approx((float(best.parameters["x"]) - 0.3) ** 2 * int(best.parameters["scale"]))
    logs = "\n".join(client.logs(best.name))
    assert f"x={best.parameters['x']} float scale={best.parameters['scale']} int tag=t" in logs
    assert [j.name for j in client.list_optimization_jobs()] == ["fn"]
    client.delete_optimization_job(name)
    assert client.list_jobs() == []


def test_a_grid_of_commands(kt_home: Path, tmp_path: Path) -> None:
    client = Client()
    plain(client)
    (tmp_path / "t.py").write_text(
        "import sys\nfrom kubeflow.trainer import update_trainjob_status\n"
        "update_trainjob_status(metrics={'acc': float(sys.argv[1]) * float(sys.argv[2])})\n")
    name = client.optimize(  # b reaches the command as Kubernetes expands $(VAR) from the container's environment
        command=[sys.executable, "t.py", "{{.a}}", "$(KUBEFLOW_TRAINER_OPT_B)"], runtime="plain", workdir=str(tmp_path),
        search_space={"a": Search.choice([1, 2]), "b": Search.choice([3, 5])}, algorithm=GridSearch(),
        objectives=Objective("acc", "Maximize"), num_trials=10, parallel_trials=4,
    )
    view = client.wait_for_optimization_job(name, timeout=300, poll=0.2)
    assert (view.state, view.reason) == ("Complete", "SearchSpaceExhausted")
    assert [(t.parameters["a"], t.parameters["b"], t.objective) for t in view.trials] == [
        ("2", "5", 10.0), ("2", "3", 6.0), ("1", "5", 5.0), ("1", "3", 3.0)]


def test_bad_arguments_say_what_to_do(kt_home: Path) -> None:
    client = Client()
    with pytest.raises(KubetrainError, match="search_space is empty"):
        client.optimize(search_space={}, command=["true"])
    with pytest.raises(KubetrainError, match="expected 'Maximize' or 'Minimize'"):
        client.optimize(search_space={"x": Search.uniform(0, 1)}, objectives=Objective("loss", "down"),
                        command=["true", "{{.x}}"])
    with pytest.raises(KubetrainError, match=r"search_space\['x'\]: bounds must be finite numbers"):
        client.optimize(search_space={"x": Search.uniform(0, float("inf"))}, command=["true", "{{.x}}"])
    with pytest.raises(KubetrainError, match="min must be strictly less than max"):
        client.optimize(search_space={"x": Search.uniform(1, 0)}, command=["true", "{{.x}}"])
    with pytest.raises(KubetrainError, match="give either func or command"):
        client.optimize(search_space={"x": Search.uniform(0, 1)}, command=["true"], func=quadratic)
    assert client.list_optimization_jobs() == []
