"""The CLI verbs against the local backend, as a user runs them (subprocesses, signals, a killed supervisor)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.sandbox import netns

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob

pytestmark = needs_namespaces
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def kt(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([*KUBETRAIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # never SIGKILL a supervisor: SIGTERM lets it stop its pods and clean up
        out, err = proc.communicate(timeout=60)
        raise AssertionError(f"kubetrain {' '.join(args)} timed out:\n{out}\n{err}") from None
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and r.returncode != 0:
        raise AssertionError(f"kubetrain {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def pids_with(marker: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


def wait_for(pred: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def holders() -> list[int]:
    """Network-namespace holder processes of this checkout (each TrainJob's network lives as long as its one)."""
    return pids_with(netns.HOLDER)


def get_json(name: str) -> dict[str, Any]:
    return dict(json.loads(kt("get", "trainjob", name, "-o", "json").stdout))


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def sleeper_files(tmp_path: Path, name: str, marker: str) -> str:
    code = f"import time\n# {marker}\nprint('started', flush=True)\ntime.sleep(600)"
    rt = runtime(f"rt-{name}", [rjob("node", [container(py(code))], ancestor="trainer", parallelism=2)])
    return write(tmp_path / f"{name}.yaml", rt, trainjob(name, f"rt-{name}"))


def test_run_streams_prefixed_logs_and_exits_with_the_job_result(kt_home: Path, tmp_path: Path) -> None:
    rt = runtime(
        "hello",
        [
            rjob(
                "node",
                [
                    container(
                        py("import os; print('hello from', os.environ['RANK_IDX'])"),
                        env=[
                            {
                                "name": "RANK_IDX",
                                "valueFrom": {
                                    "fieldRef": {
                                        "fieldPath": "metadata.annotations['batch.kubernetes.io/"
                                        "job-completion-index']"
                                    }
                                },
                            }
                        ],
                    )
                ],
                ancestor="trainer",
                parallelism=2,
            )
        ],
    )
    f = write(tmp_path / "hello.yaml", rt, trainjob("hello", "hello"))
    r = kt("run", "-f", f)
    assert "[node-0/0] hello from 0" in r.stdout and "[node-0/1] hello from 1" in r.stdout
    assert "Complete" in r.stderr
    listing = kt("get", "trainjobs").stdout
    assert listing.split()[:6] == ["NAME", "RUNTIME", "STATE", "PROGRESS", "NODES", "AGE"]
    assert "hello" in listing and "Complete" in listing
    desc = kt("describe", "trainjob", "hello").stdout
    assert "node-0-1" in desc and "AllJobsCompleted" in desc and "images are not loaded here" in desc
    assert kt("logs", "hello", "--step", "node-0-1").stdout.strip() == "hello from 1"
    failing = runtime(
        "bad", [rjob("node", [container(py("raise SystemExit(7)"))], ancestor="trainer", backoff_limit=0)]
    )
    r = kt("run", "-f", write(tmp_path / "bad.yaml", failing, trainjob("bad", "bad")), check=False)
    assert r.returncode == 1 and "Failed" in r.stderr and "Traceback" not in r.stderr


def test_run_ends_with_every_line_written_and_its_log_closed(kt_home: Path, tmp_path: Path) -> None:
    """`run` leaves without the interpreter's teardown (it would cost a quick job as much as its pods): whatever it
    printed to a pipe and logged to its files must still be complete."""
    code = "import sys\nfor i in range(20000): print(f'line {i:05d} ' + 'x' * 60)"
    rt = runtime("chatty", [rjob("node", [container(py(code))], ancestor="trainer", parallelism=2)])
    r = kt("run", "-f", write(tmp_path / "chatty.yaml", rt, trainjob("chatty", "chatty")))
    for pod in ("node-0/0", "node-0/1"):
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith(f"[{pod}] line ")]
        assert len(lines) == 20000 and lines[-1].startswith(f"[{pod}] line 19999 ")
    assert r.stderr.rstrip().endswith("Complete (AllJobsCompleted: jobset completed successfully)")
    log = (kt_home / "supervisor.log").read_text().splitlines()
    assert "supervisor exit trainjob=default/chatty state=Complete" in log[-1]
    assert get_json("chatty")["status"]["conditions"][-1]["type"] == "Complete"


def test_user_errors_are_one_clear_line_not_a_traceback(kt_home: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "tj.yaml", trainjob("x", "no-such-runtime"))
    r = kt("run", "-f", f, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "no-such-runtime" in r.stderr
    r = kt("logs", "missing", check=False)
    assert r.returncode == 1 and 'trainjob "missing" not found' in r.stderr
    r = kt("get", "trainjobs", "--context", "x", check=False, timeout=60)
    assert "Traceback" not in r.stderr


def test_sigterm_to_run_leaves_no_process_and_records_failed(kt_home: Path, tmp_path: Path) -> None:
    marker = f"kt-sigterm-{os.getpid()}"
    f = sleeper_files(tmp_path, "term", marker)
    proc = subprocess.Popen(
        [*KUBETRAIN, "run", "-f", f], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(lambda: len(pids_with(marker)) >= 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert pids_with(marker) == []
    tj = get_json("term")
    cond = tj["status"]["conditions"][-1]
    assert (cond["type"], cond["reason"]) == ("Failed", "SupervisorTerminated")
    assert holders() == []


def test_killed_supervisor_is_detected_and_cleaned_up_by_the_next_command(
    kt_home: Path, tmp_path: Path
) -> None:
    marker = f"kt-kill9-{os.getpid()}"
    f = sleeper_files(tmp_path, "k9", marker)
    kt("apply", "-f", f)
    wait_for(lambda: len(pids_with(marker)) >= 2)
    # Ours only: other test runs on this machine may have a supervisor of a "k9" too (their own KUBETRAIN_HOME).
    home = f"KUBETRAIN_HOME={kt_home}".encode()
    found = [
        p
        for p in pids_with("kubetrain.local.supervisor.controller")
        if b"k9" in Path(f"/proc/{p}/cmdline").read_bytes() and home in Path(f"/proc/{p}/environ").read_bytes()
    ]
    # Not a child the supervisor has just forked to start a process (its command line is the supervisor's until
    # it executes the new program; on a busy machine that moment can be caught).
    sup = [p for p in found if _ppid(p) not in found]
    assert len(sup) == 1
    os.kill(sup[0], signal.SIGKILL)
    wait_for(
        lambda: (
            not Path(f"/proc/{sup[0]}").exists()
            or Path(f"/proc/{sup[0]}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        )
    )
    listing = kt("get", "trainjobs").stdout
    assert "Failed" in listing and "SupervisorLost" not in listing
    assert "SupervisorLost" in kt("get", "trainjobs", "-o", "wide").stdout  # wide adds the reason
    # The pods die with their supervisor (their sandboxes' parent-death signal): within moments, not at once.
    wait_for(lambda: pids_with(marker) == [], timeout=10)
    tj = get_json("k9")
    cond = tj["status"]["conditions"][-1]
    assert (cond["type"], cond["reason"]) == ("Failed", "SupervisorLost")
    wait_for(lambda: holders() == [], timeout=10)
    desc = kt("describe", "trainjob", "k9").stdout
    assert "SupervisorLost" in desc


def test_apply_runs_detached_and_delete_stops_every_process_and_removes_its_logs(
    kt_home: Path, tmp_path: Path
) -> None:
    marker = f"kt-delete-{os.getpid()}"
    f = sleeper_files(tmp_path, "del", marker)
    out = kt("apply", "-f", f).stdout
    assert "trainjob.trainer.kubeflow.org/del created" in out
    wait_for(lambda: len(pids_with(marker)) >= 2)
    wait_for(lambda: "started" in kt("logs", "del").stdout)
    assert "[node-0/1] started" in kt("logs", "del").stdout
    logs_dir = Path(kt("describe", "trainjob", "del").stdout.split("Logs:")[1].split()[0])
    assert (logs_dir / "node-0-0.log").exists()
    r = kt("delete", "trainjob", "del")
    assert r.stdout.strip() == 'trainjob.trainer.kubeflow.org "del" deleted'
    assert pids_with(marker) == []
    assert kt("get", "trainjob", "del", check=False).returncode == 1
    assert not logs_dir.parent.exists(), "delete removes the TrainJob's logs and scratch files"


def test_delete_keep_logs_keeps_them_readable(kt_home: Path, tmp_path: Path) -> None:
    marker = f"kt-keep-{os.getpid()}"
    f = sleeper_files(tmp_path, "keep", marker)
    kt("apply", "-f", f)
    wait_for(lambda: "started" in kt("logs", "keep").stdout)
    r = kt("delete", "trainjob", "keep", "--keep-logs")
    assert "deleted (logs kept in" in r.stdout
    assert pids_with(marker) == []
    logs_dir = Path(r.stdout.split("logs kept in ")[1].rstrip(")\n"))
    assert (logs_dir / "node-0-0.log").read_text().startswith("started")
    assert sorted(p.name for p in logs_dir.parent.iterdir()) == ["logs"], "scratch directories are removed"


@pytest.mark.parametrize("verb", ["run", "apply", "get", "describe", "logs", "delete", "wait", "prune"])
def test_every_verb_has_help_with_an_example(verb: str) -> None:
    out = kt(verb, "--help").stdout
    assert "Examples:" in out and f"kubetrain {verb}" in out


def test_logs_follow_streams_until_the_trainjob_finishes(kt_home: Path, tmp_path: Path) -> None:
    code = "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.3)"
    rt = runtime("ticker", [rjob("node", [container(py(code))], ancestor="trainer")])
    kt("apply", "-f", write(tmp_path / "ticker.yaml", rt, trainjob("ticker", "ticker")))
    out = kt("logs", "ticker", "-f", timeout=60).stdout
    assert out.splitlines() == ["tick 0", "tick 1", "tick 2"]
    assert get_json("ticker")["status"]["conditions"][-1]["type"] == "Complete"


def test_banner_and_event_name_the_environments_images_map_to(kt_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "otherenv"
    (other / "bin").mkdir(parents=True)
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "images.yaml").write_text(yaml.safe_dump({"example.com/frameworks/*": str(other)}))
    mapped = container(py("import os; print('PATH0=' + os.environ['PATH'].split(':')[0])"), name="node")
    mapped["image"] = "example.com/frameworks/tf:2"
    plain = container(py("print('plain')"), name="side")
    rt = runtime("envs", [rjob("node", [mapped, plain], ancestor="trainer")])
    r = kt("run", "-f", write(tmp_path / "envs.yaml", rt, trainjob("envs", "envs")))
    said = (f"pods run in example.com/frameworks/tf:2: the Python environment {other} (images.yaml); python:3.11: "
            f"the Python environment {sys.prefix} (not loaded here)")
    assert said in " ".join(r.stderr.split()), r.stderr
    assert f"PATH0={other}/bin" in r.stdout, r.stdout
    desc = " ".join(kt("describe", "trainjob", "envs").stdout.split())
    assert said in desc, desc


def test_validate_warns_when_a_trainjob_cannot_fit_this_machine_and_run_overcommit_runs_it(
    kt_home: Path, tmp_path: Path
) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text(yaml.safe_dump({"capacity": {"cpu": 2}}))
    node = container(py("print('ran')"))
    rt = runtime("two-cpu", [rjob("node", [node], ancestor="trainer")])
    job = trainjob("nb", "two-cpu")
    job["spec"]["trainer"] = {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "2"}}}
    f = write(tmp_path / "nb.yaml", rt, job)
    r = kt("validate", "-f", f)
    said = " ".join(r.stderr.split())
    assert "warning:" in said and "spec.trainer.resourcesPerNode: trainjob default/nb can never run on this machine: " \
        "it needs 4 cpu at once (node: 2 pods × 2 cpu), this machine has 2 cpu" in said, r.stderr
    assert "--overcommit" in said, r.stderr
    assert kt("validate", "-f", f, "--strict", check=False).returncode == 1
    refused = kt("run", "-f", f, check=False)
    assert refused.returncode == 1 and "Unschedulable" in refused.stderr, refused.stderr
    ok = kt("run", "--replace", "--overcommit", "-f", f)
    assert sorted(line for line in ok.stdout.splitlines() if line.startswith("[")) == [
        "[node-0/0] ran", "[node-0/1] ran"
    ], ok.stdout
    assert "Overcommitted" in kt("describe", "trainjob", "nb").stdout
