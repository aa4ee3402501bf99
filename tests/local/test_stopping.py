"""Stopping pods like the kubelet: SIGTERM, terminationGracePeriodSeconds, SIGKILL; and the restart back-off."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import terminate
from kubetrain.local.supervisor import backoff
from kubetrain.local.supervisor.controller import Supervisor

from .conftest import condition, container, needs_namespaces, py, rjob, runtime, trainjob

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def checkpointer(done: Path, *, seconds: float = 1.0) -> list[str]:
    """A pod that, on SIGTERM, takes ``seconds`` to write a checkpoint, then exits 0."""
    return py(
        "import signal, sys, time, pathlib\n"
        f"done = pathlib.Path({str(done)!r})\n"
        "def on_term(*_):\n"
        "    print('SIGTERM: checkpointing', flush=True)\n"
        "    part = done.with_suffix('.part'); part.write_text('half')\n"
        f"    time.sleep({seconds}); part.write_text('complete'); part.rename(done)\n"
        "    print('checkpoint written', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )


STUBBORN = py(
    "import signal, time\nsignal.signal(signal.SIGTERM, lambda *_: print('ignoring SIGTERM', flush=True))\n"
    "print('ready', flush=True)\nwhile True: time.sleep(0.05)\n"
)


def start(
    backend: LocalBackend, manifests: list[dict[str, Any]], tmp_path: Path
) -> tuple[Supervisor, threading.Thread, dict[str, Any]]:
    names = backend.apply(manifests, namespace="default", workdir=str(tmp_path), detach=False)
    name = next(n.split("/", 1)[1].split()[0] for n in names if n.startswith("trainjob/"))
    sup = Supervisor(backend.store, "default", name)
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(sup.run()))
    t.start()
    return sup, t, result


def wait_log(backend: LocalBackend, name: str, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in "\n".join(backend.logs(name, "default", step=None, follow=False)):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in the logs of {name}")


class TestBackOff:
    def test_first_restart_is_immediate_then_10s_doubling_to_5min(self) -> None:
        b = backoff.CrashLoopBackOff()
        t, delays = 0.0, []
        for _ in range(9):
            d = b.next_delay(t)
            delays.append(d)
            t += d + 1  # restarted after the delay, crashed one second later
        assert delays == [0, 10, 20, 40, 80, 160, 300, 300, 300]

    def test_ten_minutes_of_running_resets_it(self) -> None:
        b = backoff.CrashLoopBackOff()
        assert [b.next_delay(t) for t in (0, 1, 12)] == [0, 10, 20]
        # Restarted at 32; runs for more than 10 minutes, then crashes: starts over.
        assert b.next_delay(32 + 601) == 0
        assert b.next_delay(32 + 602) == 10


def test_grace_period_comes_from_the_pod_spec() -> None:
    assert terminate.grace_of({}) == 30
    assert terminate.grace_of({"terminationGracePeriodSeconds": 5}) == 5
    assert terminate.grace_of({"terminationGracePeriodSeconds": 0}) == 0


@needs_namespaces
def test_delete_lets_the_sigterm_handler_finish_its_checkpoint(kt_home: Path, tmp_path: Path) -> None:
    done = tmp_path / "ckpt"
    rt = runtime("ckpt", [rjob("node", [container(checkpointer(done))], ancestor="trainer")])
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump_all([rt, trainjob("ckpt", "ckpt")]))
    subprocess.run([*KUBETRAIN, "apply", "-f", str(f)], check=True, capture_output=True)
    b = LocalBackend()
    wait_log(b, "ckpt", "ready")
    r = subprocess.run([*KUBETRAIN, "delete", "trainjob", "ckpt", "--keep-logs"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert done.read_text() == "complete", "the handler got its grace period"
    logs = Path(r.stdout.split("logs kept in ")[1].rstrip(")\n"))
    assert "checkpoint written" in (logs / "node-0-0.log").read_text()


@needs_namespaces
def test_a_pod_ignoring_sigterm_is_killed_after_its_grace_period(backend: LocalBackend, tmp_path: Path) -> None:
    pod = container(STUBBORN)
    r = rjob("node", [pod], ancestor="trainer")
    r["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    manifests = [runtime("stub", [r]), trainjob("stub", "stub", activeDeadlineSeconds=1)]
    _sup, t, result = start(backend, manifests, tmp_path)
    t.join(60)
    assert not t.is_alive()
    failed = condition(result, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    log = "\n".join(backend.logs("stub", "default", step=None, follow=False))
    assert "ignoring SIGTERM" in log, "SIGTERM came first"
    step = backend.describe_trainjob("stub", "default").steps[0]
    assert step.state == "Failed" and step.exit_code == 128 + signal.SIGKILL  # as the kubelet reports it: 137


@needs_namespaces
def test_deadline_stops_pods_gracefully(backend: LocalBackend, tmp_path: Path) -> None:
    done = tmp_path / "ckpt"
    rt = runtime("dl", [rjob("node", [container(checkpointer(done))], ancestor="trainer")])
    _sup, t, result = start(backend, [rt, trainjob("dl", "dl", activeDeadlineSeconds=2)], tmp_path)
    t.join(60)
    assert condition(result, "Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]
    assert done.read_text() == "complete"


@needs_namespaces
def test_suspend_stops_pods_gracefully(backend: LocalBackend, tmp_path: Path) -> None:
    done = tmp_path / "ckpt"
    rt = runtime("sus", [rjob("node", [container(checkpointer(done))], ancestor="trainer")])
    sup, t, _result = start(backend, [rt, trainjob("sus", "sus")], tmp_path)
    try:
        wait_log(backend, "sus", "ready")
        backend.apply([trainjob("sus", "sus", suspend=True)], namespace="default", workdir=str(tmp_path))
        deadline = time.monotonic() + 30
        while backend.get_trainjob("sus", "default").state != "Suspended" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done.read_text() == "complete"
        assert "checkpoint written" in "\n".join(backend.logs("sus", "default", step=None, follow=False))
    finally:
        sup.terminate("test cleanup")
        t.join(60)


@needs_namespaces
def test_jobset_restart_stops_the_other_pods_gracefully(backend: LocalBackend, tmp_path: Path) -> None:
    done = tmp_path / "ckpt"
    marker = tmp_path / "failed-once"
    flaky = py(
        f"import pathlib, sys, time\nm = pathlib.Path({str(marker)!r})\n"
        f"while not pathlib.Path({str(done)!r}).with_suffix('.ready').exists(): time.sleep(0.05)\n"
        "if not m.exists():\n    m.write_text('1'); sys.exit(3)\n"
    )
    saver = py(
        f"import pathlib\npathlib.Path({str(done)!r}).with_suffix('.ready').write_text('y')\n"
        + checkpointer(done)[2].replace("print('ready', flush=True)\n", "")
    )
    rt = runtime(
        "restart",
        [
            rjob("saver", [container(saver)]),
            rjob("node", [container(flaky)], ancestor="trainer", backoff_limit=0),
        ],
        failurePolicy={"maxRestarts": 1},
        successPolicy={"operator": "All", "targetReplicatedJobs": ["node"]},
    )
    _sup, t, result = start(backend, [rt, trainjob("rs", "restart")], tmp_path)
    t.join(120)
    assert condition(result, "Complete") is not None, result
    assert backend.restarts("rs", "default") == 1
    assert done.read_text() == "complete", "the saver got SIGTERM and its grace period before the restart"


@needs_namespaces
def test_a_crashing_container_waits_in_back_off_before_its_second_restart(
    backend: LocalBackend, tmp_path: Path
) -> None:
    crash = container(py("raise SystemExit(4)"))
    rt = runtime("crash", [rjob("node", [crash], ancestor="trainer", backoff_limit=5)])
    sup, t, _result = start(backend, [rt, trainjob("crash", "crash")], tmp_path)
    try:
        deadline = time.monotonic() + 60
        step = None
        while time.monotonic() < deadline:
            steps = backend.describe_trainjob("crash", "default").steps
            step = steps[0] if steps else None
            if step is not None and step.message and "back-off" in step.message:
                break
            time.sleep(0.05)
        assert step is not None and step.restarts == 2, step
        assert step.state == "Pending" and step.message == "exit code 4; back-off 10s restarting failed container"
        events = [e.message for e in backend.describe_trainjob("crash", "default").events if e.reason == "BackOff"]
        assert "restarting it now" in events[0] and "back-off 10s restarting failed container" in events[1]
    finally:
        sup.terminate("test cleanup")
        t.join(60)


@needs_namespaces
@pytest.mark.parametrize("second", [False, True])
def test_ctrl_c_of_run_stops_gracefully_exits_130_and_a_second_one_forces(
    kt_home: Path, tmp_path: Path, second: bool
) -> None:
    done = tmp_path / "ckpt"
    pod = container(STUBBORN if second else checkpointer(done))
    r = rjob("node", [pod], ancestor="trainer")
    r["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 600
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump_all([runtime("cc", [r]), trainjob("cc", "cc")]))
    proc = subprocess.Popen(
        [*KUBETRAIN, "run", "-f", str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "ready" in line:
            break
    proc.send_signal(signal.SIGINT)
    if second:
        time.sleep(1.0)
        assert proc.poll() is None, "the first Ctrl-C waits for the pod's grace period"
        proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopping: SIGTERM sent to every pod" in err
    if second:
        assert "killing the pods now" in err
    else:
        assert done.read_text() == "complete"
