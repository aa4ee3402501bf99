"""``kubetrain run`` on a cluster as a user runs it (a real process, real signals): it waits for the JobSet and
pods with the reason, streams logs, exits by the final state; ``--timeout`` and Ctrl-C. The operator and the fake
API server run on a background thread; the test stands in for the kubelet."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import yaml

from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, pod_manifest, running, terminated
from tests.k8s.threaded import background_api

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def start(kubeconfig: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*KUBETRAIN, "run", *args, "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def files(tmp_path: Path, *docs: dict) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


class Lines:
    """A stream of the process read as it comes (so a test can wait for a line before acting)."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self.lines: list[str] = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True)
        self.thread.start()

    def text(self) -> str:
        return "".join(list(self.lines))

    def finish(self) -> str:
        self.thread.join(30)
        return self.text()


def until(pred, what: str, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_run_streams_every_pod_and_exits_0_when_complete(tmp_path: Path) -> None:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        proc = start(kubeconfig, "-f", files(tmp_path, torch_runtime(), trainjob("job", trainer={"numNodes": 2})))
        stdout, stderr = Lines(proc.stdout), Lines(proc.stderr)
        try:
            until(lambda: kubelet.has_jobset("job"), "the operator's JobSet")
            # The pods come once `run` has seen the job without them (a slow start would otherwise miss that state).
            until(lambda: "trainjob default/job: Created (NoPods:" in stderr.text(), "run to report Created", 60)
            pods = [kubelet.create_pod(pod_manifest("job", "node", i, suffix=f"p{i}"), running()) for i in range(2)]
            for i, pod in enumerate(pods):
                kubelet.log(pod, f"rank {i} epoch 0 loss 1.0\n")
            time.sleep(1.0)
            for i, pod in enumerate(pods):
                kubelet.log(pod, f"rank {i} done\n")
                kubelet.set_status(pod, terminated(0))
            kubelet.complete_jobset("job")
            proc.wait(60)
            out, err = stdout.finish(), stderr.finish()
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        assert "trainjob.trainer.kubeflow.org/job applied" in out
        for i in range(2):
            assert f"[node-{i}/0] rank {i} epoch 0 loss 1.0" in out and f"[node-{i}/0] rank {i} done" in out
        # Piped: every state the job went through is a line on stderr, with its reason.
        assert "trainjob default/job: Created (NoPods:" in err
        assert "trainjob default/job: Running (2/2 trainer pods running)" in err
        assert "step node-0-0: Succeeded (exit code 0)" in err
        # The operator copies the JobSet's condition; the last line says how the job ended, once.
        assert err.rstrip().endswith("trainjob default/job: Complete (AllJobsCompleted: jobset completed successfully)")
        assert err.count(": Complete") == 1


def test_run_exits_1_when_the_job_fails_and_points_at_describe(tmp_path: Path) -> None:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        proc = start(kubeconfig, "-q", "-f", files(tmp_path, torch_runtime(), trainjob("job")))
        try:
            until(lambda: kubelet.has_jobset("job"), "JobSet")
            pod = kubelet.create_pod(pod_manifest("job", "node", 0), running())
            kubelet.log(pod, "Traceback: boom\n")
            kubelet.set_status(pod, terminated(2))

            def recorded() -> bool:
                tj = bg.api.store.get("trainer.kubeflow.org", "trainjobs", "default", "job")
                return bool((tj.get("status") or {}).get("podFailures"))

            until(recorded, "the operator to record the failure")  # as the Job controller sees it before failing
            kubelet.complete_jobset("job", failed=True)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 1, err
        assert "Traceback" not in out  # -q: no logs
        assert "step node-0-0: Failed (exit code 2, Error)" in err
        # The operator's Failed message names the failure (the log lines in it are left to describe).
        assert (
            "trainjob default/job: Failed (FailedJobs: node-0-0 exited with code 2 (Error); "
            "jobset failed due to one or more job failures)\n"
        ) in err
        assert "details: kubetrain describe trainjob job" in err


def test_run_timeout_names_the_state_and_leaves_the_job_unless_asked(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):  # no operator: the JobSet never comes
        kubelet = Kubelet(bg)
        f = files(tmp_path, torch_runtime(), trainjob("job"))
        r = subprocess.run(
            [*KUBETRAIN, "run", "-f", f, "--kubeconfig", kubeconfig, "--timeout", "2s"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 124, r.stderr
        assert (
            "error: timed out after 2s waiting for trainjob default/job; state then: Created (NoPods: no JobSet yet); "
            "it keeps running; follow: kubetrain logs job -f --kubeconfig"
        ) in " ".join(r.stderr.split())
        assert kubelet._run(lambda: bg.api.store.list("trainer.kubeflow.org", "trainjobs", "default")[0])
        r = subprocess.run(
            [*KUBETRAIN, "run", "-f", f, "--kubeconfig", kubeconfig, "--timeout", "1s", "--delete-on-timeout"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 124 and "deleted it (--delete-on-timeout)" in r.stderr
        assert not kubelet._run(lambda: bg.api.store.list("trainer.kubeflow.org", "trainjobs", "default")[0])


def test_ctrl_c_detaches_and_says_how_to_follow_or_delete(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        proc = start(kubeconfig, "-f", files(tmp_path, torch_runtime(), trainjob("job")))
        try:
            until(
                lambda: kubelet._run(lambda: bg.api.store.list("trainer.kubeflow.org", "trainjobs", "default")[0]),
                "TrainJob applied",
            )
            time.sleep(1.0)  # waiting (no JobSet) by now
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "detached from trainjob default/job (Created (NoPods: no JobSet yet)); it keeps running" in err
        assert f"follow: kubetrain logs job -f --kubeconfig {kubeconfig}" in err
        assert f"delete: kubetrain delete trainjob job --kubeconfig {kubeconfig}" in err
        assert "Traceback" not in err
        assert kubelet._run(lambda: bg.api.store.list("trainer.kubeflow.org", "trainjobs", "default")[0])


def test_get_watch_prints_a_row_per_state_change(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        subprocess.run(
            [*KUBETRAIN, "apply", "-f", files(tmp_path, torch_runtime(), trainjob("job")), "--kubeconfig", kubeconfig],
            check=True,
            capture_output=True,
            timeout=60,
        )
        watcher = subprocess.Popen(
            [*KUBETRAIN, "get", "tj", "-w", "--kubeconfig", kubeconfig],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(2.0)
            pod = kubelet.create_pod(pod_manifest("job", "node", 0), running())
            time.sleep(1.0)
            kubelet.set_status(pod, terminated(0))
            kubelet.trainjob_condition("job", "Complete", "JobSetCompleted", "done")
            time.sleep(1.5)
        finally:
            watcher.send_signal(signal.SIGINT)
            out, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 130, err
        lines = out.splitlines()
        assert lines[0].split() == ["NAME", "RUNTIME", "STATE", "PROGRESS", "NODES", "AGE"]
        states = [line.split()[2] for line in lines[1:]]
        assert states[0] == "Created" and "Running" in states and states[-1] == "Complete", out
        assert states.count("Created") == 1  # the listed row is not repeated by the watch
        widths = {line.index("torch-distributed") for line in lines[1:]}
        assert len(widths) == 1  # rows printed later keep the list's columns
