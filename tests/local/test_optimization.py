"""OptimizationJobs on this machine, as a user runs them: ``kubetrain apply`` starts the search, trials are real
TrainJobs run through the local queue (each reports with the official SDK's ``update_trainjob_status``), at most
parallelTrials at once; ``get``/``describe`` show the trials best first; the controller survives being killed; and
``delete`` takes the trials with it."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.store import optimization as rows
from kubetrain.local.store.db import Store
from tests.builders import optimizationjob

from .conftest import container, needs_namespaces, rjob, runtime
from .test_cli import kt, pids_with, write

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(importlib.util.find_spec("kubeflow") is None, reason="the kubeflow SDK is not installed"),
]

# A trial: its loss is (x - 0.3)^2, reported the way the SDK's users report it; it records when it ran, and fails
# on purpose for x above FAIL_ABOVE.
TRIAL = """
import os, sys, time
from kubeflow.trainer import update_trainjob_status
x = float(sys.argv[1])
with open("runs.log", "a") as f:
    f.write(f"start {time.time()}\\n")
time.sleep(0.3)
with open("runs.log", "a") as f:
    f.write(f"end {time.time()}\\n")
if x > float(os.environ.get("FAIL_ABOVE", "2")):
    sys.exit(3)
if os.environ.get("REPORT", "1") == "1":
    update_trainjob_status(progress_percent=100, metrics={"loss": (x - 0.3) ** 2, "x": x})
"""


def controllers(home: Path) -> list[int]:
    """This test's OptimizationJob controllers (their $KUBETRAIN_HOME is the test's)."""
    mark = f"KUBETRAIN_HOME={home}".encode()
    out = []
    for pid in pids_with("kubetrain.local.optimizer"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    out.append(pid)
        except OSError:
            continue
    return out


@pytest.fixture(autouse=True)
def stop_leftovers(kt_home: Path) -> Iterator[None]:
    """A test that fails half-way leaves no search running behind it."""
    yield
    for pid in controllers(kt_home):
        os.kill(pid, signal.SIGTERM)
    kt("delete", "tj", "--all", check=False)


def search(name: str = "quad", trials: int = 4, parallel: int = 2, **extra: Any) -> dict[str, Any]:
    env = [{"name": k, "value": v} for k, v in extra.pop("env", {}).items()]
    parameters = extra.pop("parameters", [{"name": "x", "searchSpace": {"uniform": {"min": "0", "max": "1"}}}])
    doc = optimizationjob(
        name,
        parameters=parameters,
        trainer={"command": [sys.executable, "trial.py", "{{.x}}"], **({"env": env} if env else {})},
        runtime="plain",
        numTrials=trials,
        parallelTrials=parallel,
        **extra,
    )
    return doc


def plain_runtime() -> dict[str, Any]:
    return runtime("plain", [rjob("node", [container([sys.executable, "-c", "pass"])], ancestor="trainer",
                                  backoff_limit=0)])


def wait_state(name: str, states: tuple[str, ...], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        out = json.loads(kt("describe", "oj", name, "-o", "json").stdout)
        if out["state"]["state"] in states:
            return out  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} still {out['state']} after {timeout}s")
        time.sleep(0.2)


def max_overlap(log: Path) -> int:
    events = sorted((float(t), 1 if kind == "start" else -1) for kind, t in
                    (line.split() for line in log.read_text().splitlines()))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_a_search_runs_its_trials_and_names_the_best(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL)
    files = write(tmp_path / "oj.yaml", plain_runtime(), search(trials=5, parallel=2))
    out = kt("apply", "-f", files)
    assert out.stdout.splitlines() == ["clustertrainingruntime.trainer.kubeflow.org/plain created",
                                       "optimizationjob.trainer.kubeflow.org/quad created"]
    done = wait_state("quad", ("Complete", "Failed"))
    assert (done["state"]["state"], done["state"]["reason"]) == ("Complete", "MaxTrialsReached")
    trials = done["trials"]
    losses = [t["objective"] for t in trials]
    assert len(trials) == 5 and all(t["state"] == "Complete" for t in trials)
    assert losses == sorted(losses)  # best first
    assert done["best"] == trials[0]["name"]
    best_x = float(trials[0]["parameters"]["x"])
    assert abs(losses[0] - (best_x - 0.3) ** 2) < 1e-6
    result = done["optimizationJob"]["status"]["result"]
    best = trials[0]
    assert result == {"trainJobName": best["name"], "parameters": [{"name": "x", "value": best["parameters"]["x"]}]}
    assert max_overlap(tmp_path / "runs.log") <= 2  # parallelTrials
    table = kt("describe", "oj", "quad").stdout
    assert "Trials (best first; * best):" in table and f"{trials[0]['name']}*" in table
    assert "TRIAL" in table and "LOSS" in table and " X " in table
    listed = kt("get", "oj").stdout.splitlines()
    assert listed[0].split() == ["NAME", "STATE", "METRIC", "BEST", "TRIALS", "PARALLEL", "AGE"]
    assert listed[1].split()[:6] == ["quad", "Complete", "loss", trials[0]["name"], "5", "2"]
    labelled = kt("get", "tj", "-l", "kubetrain.dev/optimizationjob=quad", "-o", "name").stdout.split()
    assert sorted(labelled) == [f"trainjob.trainer.kubeflow.org/quad-{i}" for i in range(5)]
    # The controller has exited: nothing is left running for a finished search.
    assert not controllers(kt_home)
    # Trials go with their OptimizationJob, not with `prune` (the search would run a pruned trial again).
    kt("prune")
    assert len(kt("get", "tj", "-o", "name").stdout.split()) == 5


def test_failed_and_silent_trials_are_recorded_never_best(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL)
    files = write(tmp_path / "oj.yaml", plain_runtime(), search(trials=4, parallel=4, env={"FAIL_ABOVE": "0.5"}))
    kt("apply", "-f", files)
    done = wait_state("quad", ("Complete", "Failed"))
    failed = [t for t in done["trials"] if t["state"] == "Failed"]
    complete = [t for t in done["trials"] if t["state"] == "Complete"]
    assert failed and complete, done["trials"]  # seed 7 puts x on both sides of 0.5
    assert all(float(t["parameters"]["x"]) > 0.5 for t in failed)
    assert done["best"] in {t["name"] for t in complete}
    assert done["trials"][-len(failed):] == failed  # failed trials are listed after the scored ones


def test_a_metric_nobody_reports_fails_the_search_and_says_why(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL)
    doc = search(trials=3, parallel=3, env={"REPORT": "0"})
    kt("apply", "-f", write(tmp_path / "oj.yaml", plain_runtime(), doc))
    done = wait_state("quad", ("Complete", "Failed"))
    assert done["state"]["reason"] == "ObjectiveNotReported"
    assert "no trial reported the objective metric 'loss'" in done["state"]["message"]
    assert all(t["objective"] is None and "did not report loss" in t["note"] for t in done["trials"])


def test_bad_input_is_refused_before_anything_is_stored(kt_home: Path, tmp_path: Path) -> None:
    doc = search()
    doc["spec"]["trainJobTemplate"]["spec"]["trainer"]["command"].append("{{.y}}")
    r = kt("apply", "-f", write(tmp_path / "oj.yaml", plain_runtime(), doc), check=False)
    assert r.returncode == 1
    assert "spec.trainJobTemplate.spec.trainer.command[3]: placeholder {{.y}} names no parameter (parameters: x)" in (
        r.stderr)
    assert "No OptimizationJobs found" in kt("get", "oj").stderr


def test_a_killed_controller_is_restarted_and_the_trials_are_not_repeated(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL.replace("time.sleep(0.3)", "time.sleep(1.5)"))
    kt("apply", "-f", write(tmp_path / "oj.yaml", plain_runtime(), search(trials=4, parallel=2)))
    store = Store()
    deadline = time.monotonic() + 60

    def handed_over() -> bool:
        """Both first trials run under their own supervisors (killing the controller while it hands a trial over
        would lose that trial, as a lost supervisor loses a TrainJob: Failed/SupervisorLost)."""
        row = rows.get(store, "default", "quad")
        jobs = store.list_trainjobs("default")
        return row is not None and len(jobs) == 2 and all(
            j.supervisor_pid not in (None, row.controller_pid) for j in jobs)

    while not handed_over():
        assert time.monotonic() < deadline, "no trial started"
        time.sleep(0.05)
    row = rows.get(store, "default", "quad")
    assert row is not None and row.controller_pid is not None
    os.kill(row.controller_pid, signal.SIGKILL)
    done = wait_state("quad", ("Complete", "Failed"))  # `describe` notices and starts a new controller
    assert done["state"]["state"] == "Complete"
    assert sorted(t["name"] for t in done["trials"]) == [f"quad-{i}" for i in range(4)]
    assert (tmp_path / "runs.log").read_text().count("start") == 4


def test_delete_takes_the_trials_and_the_controller(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(TRIAL.replace("time.sleep(0.3)", "time.sleep(30)"))
    kt("apply", "-f", write(tmp_path / "oj.yaml", plain_runtime(), search(trials=4, parallel=2)))
    deadline = time.monotonic() + 60
    while len(kt("get", "tj", "-o", "name").stdout.split()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    out = kt("delete", "optimizationjob", "quad")
    assert out.stdout.strip() == 'optimizationjob.trainer.kubeflow.org "quad" deleted (and its trials)'
    assert "No TrainJobs found" in kt("get", "tj").stderr
    assert not controllers(kt_home)


# Reports three times (at 30, 60 and 100 %), straight to the endpoint as the SDK does (without its 5 s throttle);
# trial x is worse the further it is from 0.3, and a trial with x above 0.8 would be the worst by far.
STAGED = """
import datetime, json, os, ssl, sys, time, urllib.request
x = float(sys.argv[1])
def report(progress, loss):
    body = {"trainerStatus": {"progressPercentage": progress, "metrics": [{"name": "loss", "value": str(loss)}],
            "lastUpdatedTime": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("Authorization", "Bearer " + open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip())
    ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
    urllib.request.urlopen(req, context=ctx, timeout=10).close()
for progress in (30, 60, 100):
    report(progress, (x - 0.3) ** 2 + 1 / progress)
    with open("runs.log", "a") as f:
        f.write(f"{x} {progress}\\n")
    time.sleep(0.8 if x < 0.8 else 3)
"""


def test_early_stopping_stops_a_trial_that_falls_behind(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "trial.py").write_text(STAGED)
    grid = [{"name": "x", "searchSpace": {"categorical": {"choices": ["0.3", "0.35", "0.25", "0.9"]}}}]
    doc = search(trials=4, parallel=1, parameters=grid, searchAlgorithm={"grid": {}})
    doc["metadata"]["annotations"] = {"kubetrain.dev/early-stopping": "median"}
    kt("apply", "-f", write(tmp_path / "oj.yaml", plain_runtime(), doc))
    done = wait_state("quad", ("Complete", "Failed"))
    assert done["state"]["state"] == "Complete"
    by_x = {t["parameters"]["x"]: t for t in done["trials"]}
    assert by_x["0.9"]["state"] == "EarlyStopped"
    assert by_x["0.9"]["note"].startswith("median stopping: best loss")
    assert done["best"] == by_x["0.3"]["name"]
    lines = (tmp_path / "runs.log").read_text().split("\n")
    assert "0.9 30" in lines and "0.9 100" not in lines  # stopped before its last report
