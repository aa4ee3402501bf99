"""kubectl's semantics locally: apply says created/configured/unchanged and follows upstream's mutability rules;
``run --detach``; ``run --nohup``; exit codes 127/126/129/130."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import KubetrainError
from kubetrain.local.backend import LocalBackend

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob

pytestmark = needs_namespaces
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def kt(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KUBETRAIN, *args], capture_output=True, text=True, timeout=timeout, check=False)


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def wait_state(name: str, want: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if want in kt("get", "trainjob", name).stdout:
            return
        time.sleep(0.1)
    raise AssertionError(f"{name} never reached {want}: {kt('describe', 'trainjob', name).stdout}")


QUICK = runtime("quick", [rjob("node", [container(py("print('ran', flush=True)"))], ancestor="trainer")])


def test_reapplying_a_finished_trainjob_unchanged_says_so_and_keeps_it(kt_home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "tj.yaml", QUICK, trainjob("once", "quick"))
    assert kt("apply", "-f", f).stdout.splitlines() == [
        "clustertrainingruntime.trainer.kubeflow.org/quick created",
        "trainjob.trainer.kubeflow.org/once created",
    ]
    wait_state("once", "Complete")
    before = LocalBackend().get_trainjob("once", "default")
    r = kt("apply", "-f", f)
    assert r.stdout.splitlines() == [
        "clustertrainingruntime.trainer.kubeflow.org/quick unchanged",
        "trainjob.trainer.kubeflow.org/once unchanged",
    ]
    after = LocalBackend().get_trainjob("once", "default")
    assert after.metadata.uid == before.metadata.uid and after.status == before.status
    assert kt("logs", "once").stdout.strip() == "ran", "the logs of the run are still there, not re-run"


def test_changing_an_immutable_field_names_it(kt_home: Path, tmp_path: Path) -> None:
    sleeper = runtime("sleepy", [rjob("node", [container(py("import time; time.sleep(600)"))], ancestor="trainer")])
    f = write(tmp_path / "tj.yaml", sleeper, trainjob("imm", "sleepy", trainer={"numNodes": 1}))
    kt("apply", "-f", f)
    try:
        g = write(tmp_path / "tj2.yaml", trainjob("imm", "sleepy", trainer={"numNodes": 1, "image": "x:2"}))
        r = kt("apply", "-f", g)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        text = " ".join(r.stderr.split())
        assert (
            "TrainJob \"imm\" is invalid: spec.trainer: field is immutable (spec.trainer.image: unset -> 'x:2')"
        ) in text
        assert "kubetrain delete trainjob imm" in text
        # numNodes may change only for an elastic runtime (tests/local/test_elastic.py); this one is not.
        r = kt("apply", "-f", write(tmp_path / "tj2b.yaml", trainjob("imm", "sleepy", trainer={"numNodes": 2})))
        assert r.returncode == 1
        assert ('spec.trainer.numNodes: numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, '
                'and ClusterTrainingRuntime "sleepy" has none (numNodes 1 -> 2)') in " ".join(r.stderr.split())
        h = write(tmp_path / "tj3.yaml", trainjob("imm", "torch-distributed", trainer={"numNodes": 1}))
        assert "spec.runtimeRef: field is immutable (spec.runtimeRef.name: 'sleepy' -> 'torch-distributed')" in (
            " ".join(kt("apply", "-f", h).stderr.split())
        )
        labelled = trainjob("imm", "sleepy", trainer={"numNodes": 1})
        labelled["metadata"]["labels"] = {"team": "a"}
        assert kt("apply", "-f", write(tmp_path / "tj4.yaml", labelled)).stdout.strip() == (
            "trainjob.trainer.kubeflow.org/imm configured"
        )
        assert LocalBackend().get_trainjob("imm", "default").metadata.labels == {"team": "a"}
    finally:
        kt("delete", "trainjob", "imm")


def test_runtime_patches_change_only_around_a_suspension(backend: LocalBackend, tmp_path: Path) -> None:
    labelled = {"name": "node", "template": {"metadata": {"labels": {"v": "2"}}}}
    patch = {
        "manager": "acme.io/tuner",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [labelled]}}},
    }
    # Recorded but not started (detach=False and nobody supervises it): "running" as far as the rules go.
    backend.apply([QUICK, trainjob("rp", "quick")], namespace="default", workdir=str(tmp_path), detach=False)
    backend.store.set_supervisor("default", "rp", None, None)
    running = trainjob("rp", "quick", runtimePatches=[patch])
    with pytest.raises(KubetrainError, match="RuntimePatches can only be modified when the TrainJob is suspended"):
        backend.apply([running], namespace="default", workdir=str(tmp_path))
    suspended = trainjob("rp", "quick", runtimePatches=[patch], suspend=True)
    assert backend.apply([suspended], namespace="default", workdir=str(tmp_path)) == ["trainjob/rp configured"]
    jobset = next(o for o in backend.store.get_trainjob("default", "rp").objects if o["kind"] == "JobSet")  # type: ignore[union-attr]
    assert jobset["spec"]["replicatedJobs"][0]["template"]["metadata"]["labels"]["v"] == "2", "recompiled"
    backend.delete_trainjob("rp", "default")


def test_generate_name_gives_a_new_trainjob_each_time(backend: LocalBackend, tmp_path: Path) -> None:
    tj = trainjob("", "quick", suspend=True)
    del tj["metadata"]["name"]
    tj["metadata"]["generateName"] = "gen-"
    a = backend.apply([QUICK, tj], namespace="default", workdir=str(tmp_path))[1]
    b = backend.apply([tj], namespace="default", workdir=str(tmp_path))[0]
    assert a != b and a.startswith("trainjob/gen-") and a.endswith(" created") and len(a.split()[0]) == len(
        "trainjob/gen-12345"
    )
    for name in (a, b):
        backend.delete_trainjob(name.split()[0].split("/")[1], "default")


def test_run_refuses_an_existing_name_and_replace_replaces_a_finished_one(kt_home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "tj.yaml", QUICK, trainjob("again", "quick"))
    assert kt("run", "-f", f).returncode == 0
    first = LocalBackend().get_trainjob("again", "default").metadata.uid
    r = kt("run", "-f", f)
    assert r.returncode == 1
    text = " ".join(r.stderr.split())
    assert 'trainjob "again" already exists in namespace "default" (Complete); `kubetrain run --replace`' in text
    r = kt("run", "--replace", "-f", f)
    assert r.returncode == 0 and "replaced the finished run" in " ".join(r.stderr.split())
    assert LocalBackend().get_trainjob("again", "default").metadata.uid != first


def test_run_detach_returns_at_once_and_the_job_runs(kt_home: Path, tmp_path: Path) -> None:
    sleep = container(py("import time; time.sleep(1); print('done')"))
    slow = runtime("slow", [rjob("node", [sleep], ancestor="trainer")])
    r = kt("run", "--detach", "-f", write(tmp_path / "tj.yaml", slow, trainjob("bg", "slow")))
    assert r.returncode == 0 and "trainjob.trainer.kubeflow.org/bg created" in r.stdout
    assert "kubetrain logs bg -f" in r.stderr
    assert kt("logs", "bg", "-f").stdout.strip() == "done"
    wait_state("bg", "Complete")


@pytest.mark.parametrize("nohup", [True, False])
def test_sighup_stops_a_foreground_run_unless_nohup(kt_home: Path, tmp_path: Path, nohup: bool) -> None:
    code = "import time\nprint('up', flush=True)\ntime.sleep(2)\nprint('finished', flush=True)"
    rt = runtime("hup", [rjob("node", [container(py(code))], ancestor="trainer")])
    f = write(tmp_path / "tj.yaml", rt, trainjob("hup", "hup"))
    proc = subprocess.Popen(
        [*KUBETRAIN, "run", *(["--nohup"] if nohup else []), "-f", f],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "[node-0/0] up":
            break
    proc.send_signal(signal.SIGHUP)
    proc.communicate(timeout=60)
    tj = LocalBackend().get_trainjob("hup", "default")
    if nohup:
        assert proc.returncode == 0 and tj.state == "Complete"
        assert "finished" in kt("logs", "hup").stdout, "the logs kept being written"
    else:
        assert proc.returncode == 128 + signal.SIGHUP and tj.state == "Failed"


@pytest.mark.parametrize(
    ("command", "code", "says"),
    [
        (["no-such-command-kt"], 127, 'exec: "no-such-command-kt": executable file not found in $PATH'),
        (["./not-executable.sh"], 126, 'exec: "./not-executable.sh": permission denied'),
    ],
)
def test_a_command_that_cannot_be_executed_exits_like_a_shell(
    kt_home: Path, tmp_path: Path, command: list[str], code: int, says: str
) -> None:
    (tmp_path / "not-executable.sh").write_text("#!/bin/sh\necho hi\n")
    rt = runtime("bad", [rjob("node", [container(["true"])], ancestor="trainer")])
    f = write(tmp_path / "tj.yaml", rt, trainjob("bad", "bad", trainer={"command": command}))
    start = time.monotonic()
    r = kt("run", "-f", f)
    assert r.returncode == code, r.stderr
    assert time.monotonic() - start < 30, "no crash loop: retrying cannot help"
    assert says in r.stdout, "the reason shows in the logs stream"
    step = LocalBackend().describe_trainjob("bad", "default").steps[0]
    assert step.exit_code == code and step.state == "Failed" and step.restarts == 0
    assert step.message is not None and step.message.startswith("StartError: ") and says in step.message
