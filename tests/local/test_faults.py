"""Nothing lost on faults: a killed supervisor, a full disk, an environment too large to exec, a bad home."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def kt(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KUBETRAIN, *args], capture_output=True, text=True, timeout=timeout, check=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


@needs_namespaces
def test_killed_supervisor_ends_logs_follow_with_the_reason_and_keeps_every_log(
    kt_home: Path, tmp_path: Path
) -> None:
    code = (
        "import sys, time\nprint('line 1', flush=True)\nsys.stdout.write('partial'); sys.stdout.flush()\n"
        "time.sleep(600)"
    )
    rt = runtime("k9", [rjob("node", [container(py(code))], ancestor="trainer", parallelism=2)])
    f = tmp_path / "k9.yaml"
    f.write_text(yaml.safe_dump_all([rt, trainjob("k9", "k9")]))
    assert kt("apply", "-f", str(f)).returncode == 0
    follow = subprocess.Popen(
        [*KUBETRAIN, "logs", "k9", "-f"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while "partial" not in kt("logs", "k9").stdout and time.monotonic() < deadline:
        time.sleep(0.1)
    sup = int(kt("describe", "trainjob", "k9").stdout.split("Supervisor:")[1].split()[1])
    os.kill(sup, signal.SIGKILL)
    killed = time.monotonic()
    out, err = follow.communicate(timeout=30)
    assert time.monotonic() - killed < 10, "logs -f notices a dead supervisor within seconds"
    assert "[node-0/0] line 1" in out and "[node-0/1] partial" in out, out
    assert "trainjob k9: Failed (SupervisorLost: the local supervisor (pid" in one_line(err), err
    r = kt("get", "trainjobs")
    assert r.stderr == "" and "Failed" in r.stdout, "no stray output; the state is already recorded"
    logs = kt("logs", "k9", "--step", "node-0-1")
    assert logs.returncode == 0 and logs.stdout.splitlines() == ["line 1", "partial"]
    desc = kt("describe", "trainjob", "k9").stdout
    assert "SupervisorLost" in desc and "stopped: the supervisor was lost" in desc


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d && umount $d && rmdir $d"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", probe], capture_output=True)
    return r.returncode == 0


@needs_namespaces
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="mounts a small tmpfs in a private mount namespace: needs root")
def test_full_disk_is_one_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        yaml.safe_dump(trainjob("a", "torch-distributed", trainer={"numNodes": 1, "command": ["true"]}))
    )
    (tmp_path / "b.yaml").write_text(
        yaml.safe_dump(trainjob("b", "torch-distributed", trainer={"numNodes": 1, "command": ["true"]}))
    )
    k = " ".join([sys.executable, "-m", "kubetrain.cli.main"])
    script = f"""
set -e
mount -t tmpfs -o size=2m tmpfs {tmp_path}/mnt
export KUBETRAIN_HOME={tmp_path}/mnt/home
cd {tmp_path}
{k} run -q -f a.yaml > /dev/null 2>&1
dd if=/dev/zero of={tmp_path}/mnt/fill bs=4k > /dev/null 2>&1 || true
set +e
{k} apply -f b.yaml; echo "apply-rc=$?"
{k} get trainjobs; echo "get-rc=$?"
{k} run -f b.yaml; echo "run-rc=$?"
rm {tmp_path}/mnt/fill
{k} run -q -f b.yaml; echo "after-rc=$?"
{k} get trainjobs
"""
    (tmp_path / "mnt").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KUBETRAIN_HOME"}
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    out, err = r.stdout, one_line(r.stderr)
    assert "apply-rc=1" in out and "run-rc=1" in out and "get-rc=0" in out, (out, r.stderr)
    assert "Traceback" not in r.stderr
    assert err.count("error: no space left on the disk holding kubetrain's state") == 2, r.stderr
    assert "Nothing was changed. Fix: free disk space (`kubetrain prune`" in err
    listings = [line.split()[:3] for line in out.splitlines() if line.startswith(("a ", "b "))]
    assert listings[0] == ["a", "torch-distributed", "Complete"] and listings[1][0] == "a", "b was never recorded"
    assert "after-rc=0" in out and ["b", "torch-distributed", "Complete"] in listings


@needs_namespaces
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="mounts a small tmpfs in a private mount namespace: needs root")
def test_disk_filling_up_during_a_run_still_ends_the_run_with_its_outcome(tmp_path: Path) -> None:
    """The job ends while nothing can be written: `run` must not wait for a state it will never see."""
    sleeper = ["python", "-c", "import time; time.sleep(4)"]
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump(trainjob("c", "torch-distributed", trainer={"numNodes": 1, "command": sleeper}))
    )
    k = " ".join([sys.executable, "-m", "kubetrain.cli.main"])
    script = f"""
mount -t tmpfs -o size=4m tmpfs {tmp_path}/mnt || exit 9
export KUBETRAIN_HOME={tmp_path}/mnt/home
cd {tmp_path}
( sleep 2; dd if=/dev/zero of={tmp_path}/mnt/fill bs=4k > /dev/null 2>&1 ) &
timeout -s KILL 90 {k} run -f c.yaml; echo "run-rc=$?"
wait
"""
    (tmp_path / "mnt").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KUBETRAIN_HOME"}
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    err = one_line(r.stderr)
    assert "run-rc=0" in r.stdout, (r.stdout, r.stderr)  # the job completed; run says so and did not hang
    assert "Traceback" not in r.stderr
    assert "trainjob default/c ended Complete (AllJobsCompleted" in err, r.stderr
    assert "but that could not be recorded: no space left on the disk holding kubetrain's state" in err, r.stderr


@needs_namespaces
@pytest.mark.parametrize(
    ("env", "named"),
    [
        ([{"name": "BIG", "value": "x" * 200_000}], "BIG (200005 bytes)"),
        ([{"name": f"V{i}", "value": "y" * 120_000} for i in range(20)], "V19 (120005 bytes)"),
    ],
)
def test_environment_too_large_to_exec_is_refused_before_anything_is_recorded(
    kt_home: Path, tmp_path: Path, env: list[dict[str, str]], named: str
) -> None:
    f = tmp_path / "big.yaml"
    f.write_text(yaml.safe_dump(trainjob("big", "torch-distributed", trainer={"command": ["true"], "env": env})))
    r = kt("apply", "-f", str(f))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    text = one_line(r.stderr)
    assert "exceed what Linux lets a process start with" in text and named in text, text
    assert "spec.replicatedJobs[node].template.spec.template.spec.containers[node]" in text
    assert "Fix: pass large values through a file" in text
    assert "No TrainJobs found" in kt("get", "trainjobs").stderr


def test_damaged_state_file_is_explained(kt_home: Path) -> None:
    kt_home.mkdir(parents=True)
    (kt_home / "state.db").write_bytes(b"this is not a database" * 100)
    r = kt("get", "trainjobs")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "is damaged" in one_line(r.stderr) and "move it away" in one_line(r.stderr)


def test_home_that_is_a_file_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "file"
    home.write_text("x")
    monkeypatch.setenv("KUBETRAIN_HOME", str(home))
    r = kt("get", "trainjobs")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"KUBETRAIN_HOME {home} cannot be created" in one_line(r.stderr) or "is not a directory" in r.stderr


@needs_namespaces
def test_a_pod_whose_exec_fails_at_start_is_recorded_not_a_traceback(kt_home: Path, tmp_path: Path) -> None:
    """The kernel refusing the exec itself (E2BIG at start, after submit) fails the TrainJob with the reason."""
    from kubetrain.local.sandbox import pods
    from kubetrain.local.sandbox.namespaces import Bind

    with pytest.raises(pods.PodError, match="exceed what Linux lets a process start with"):
        pods.check_exec_size(["true"], {"X": "z" * 200_000}, "containers[node]")
    with pytest.raises(pods.ExecError) as err:
        pods.check_program("no-such-program-xyz", "/usr/bin:/bin", "/", [], "containers[node]")
    assert err.value.code == 127 and 'exec: "no-such-program-xyz": executable file not found in $PATH' in str(err.value)
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(pods.ExecError) as err:
        pods.check_program("./run.sh", "/usr/bin", str(tmp_path), [], "containers[node]")
    assert err.value.code == 126 and "permission denied" in str(err.value)
    # A program inside a volume is looked up where the volume lives on the host.
    script.chmod(0o755)
    pods.check_program("/workspace/run.sh", "/usr/bin", "/", [Bind(str(tmp_path), "/workspace")], "c")
