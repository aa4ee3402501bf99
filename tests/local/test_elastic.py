"""Elastic TrainJobs on this machine: `kubetrain scale` adds and removes node pods of a running job, torch re-forms
its rendezvous with the new world size, and the supervisor autoscales from cpu usage or the trainer's metrics."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.local.backend import LocalBackend
from kubetrain.local.supervisor.controller import Supervisor
from tests.local.conftest import (
    condition,
    container,
    needs_namespaces,
    needs_torch,
    py,
    rjob,
    run_to_end,
    runtime,
    trainjob,
)

pytestmark = needs_namespaces

Obj = dict[str, Any]

# Runs until the stop file appears; spins while the busy file exists (for the cpu autoscaler).
NODE = """
import os, pathlib, time
stop, busy = pathlib.Path(os.environ["STOP"]), pathlib.Path(os.environ.get("BUSY", "/nonexistent"))
print("node", os.environ["PET_NODE_RANK"], "nnodes", os.environ["PET_NNODES"], flush=True)
while not stop.exists():
    t = time.monotonic()
    while busy.exists() and time.monotonic() - t < 0.2:
        pass
    time.sleep(0.05)
"""


def elastic_runtime(name: str = "elastic", *, metrics: list[Obj] | None = None, cpu: str | None = None,
                    lo: int = 1, hi: int = 3, command: list[str] | None = None) -> Obj:
    extra: Obj = {"resources": {"requests": {"cpu": cpu}}} if cpu else {}
    policy: Obj = {"minNodes": lo, "maxNodes": hi, "maxRestarts": 3}
    if metrics:
        policy["metrics"] = metrics
    return runtime(
        name,
        [rjob("node", [container(command or py(NODE), **extra)], ancestor="trainer")],
        ml={"torch": {"numProcPerNode": 1, "elasticPolicy": policy}},
    )


@pytest.fixture
def supervise(backend: LocalBackend, tmp_path: Path) -> Iterator[Callable[[list[Obj]], Supervisor]]:
    """Apply the manifests and run the TrainJob's supervisor in a thread; the test acts while it runs."""
    threads: list[tuple[Supervisor, threading.Thread]] = []

    def start(manifests: list[Obj]) -> Supervisor:
        names = backend.apply(manifests, namespace="default", workdir=str(tmp_path), detach=False)
        name = next(n.split("/", 1)[1].split()[0] for n in names if n.startswith("trainjob/"))
        sup = Supervisor(backend.store, "default", name)
        t = threading.Thread(target=sup.run, daemon=True)
        t.start()
        threads.append((sup, t))
        return sup

    yield start
    for sup, t in threads:
        sup.terminate("test over")
        t.join(60)


def wait_for(pred: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def pods(backend: LocalBackend, name: str) -> dict[str, tuple[str, int]]:
    return {p.name: (p.state, p.restarts) for p in backend.store.list_pods("default", name)}


def stored_status(backend: LocalBackend, name: str) -> Obj:
    row = backend.store.get_trainjob("default", name)
    assert row is not None
    return row.trainjob.get("status") or {}


def env_of(tmp_path: Path, **extra: str) -> list[Obj]:
    env = [{"name": "STOP", "value": str(tmp_path / "stop")}]
    return env + [{"name": k, "value": v} for k, v in extra.items()]


def test_scale_adds_and_removes_node_pods_of_a_running_job(
    backend: LocalBackend, supervise: Callable[[list[Obj]], Supervisor], tmp_path: Path
) -> None:
    tj = trainjob("el", "elastic", trainer={"numNodes": 1, "env": env_of(tmp_path)})
    sup = supervise([elastic_runtime(), tj])
    wait_for(lambda: pods(backend, "el").get("node-0-0", ("",))[0] == "Running", "node-0-0 running")
    first_address = sup.plan.pods()[0].address

    assert backend.scale_trainjob("el", "default", 3) == "configured"
    wait_for(lambda: [s for s, _ in pods(backend, "el").values()] == ["Running"] * 3, "three node pods")
    st = wait_for(lambda: stored_status(backend, "el") if stored_status(backend, "el").get("numNodes") == 3
                  else None, "status.numNodes 3")
    assert st["selector"] == "jobset.sigs.k8s.io/jobset-name=el,jobset.sigs.k8s.io/replicatedjob-name=node"
    # The running pod kept its address; the new ones resolve through the hosts file every pod sees.
    assert sup.plan.pods()[0].address == first_address
    hosts = (sup.dir / "hosts").read_text()
    assert all(f"el-node-0-{i}.el" in hosts for i in range(3))
    # Every node got the same elastic range: the count lives in the Job, not in the env.
    wait_for(lambda: "node 2 nnodes 1:3" in "\n".join(backend.logs("el", "default", step=None, follow=False)),
             "node 2 started")

    backend.scale_trainjob("el", "default", 1)
    wait_for(lambda: list(pods(backend, "el")) == ["node-0-0"], "scaled down to node-0-0")
    assert pods(backend, "el")["node-0-0"] == ("Running", 0)  # the survivor was never restarted
    wait_for(lambda: stored_status(backend, "el").get("numNodes") == 1, "status.numNodes 1")
    events = [(e.reason, e.message) for e in backend.store.list_events("default", "el")]
    assert ("Scaled", "trainer nodes 1 -> 3: starting node-0-1, node-0-2") in events
    assert ("Scaled", "trainer nodes 3 -> 1: stopping node-0-1, node-0-2") in events

    with pytest.raises(InvalidObjectError) as err:
        backend.scale_trainjob("el", "default", 9)
    assert str(err.value).startswith(
        "spec.trainer.numNodes: must be between elasticPolicy minNodes (1) and maxNodes (3), got 9"
    )
    (tmp_path / "stop").touch()
    wait_for(lambda: condition(stored_status(backend, "el"), "Complete"), "Complete")


def test_scale_is_refused_for_a_static_runtime_and_a_finished_job(
    backend: LocalBackend, supervise: Callable[[list[Obj]], Supervisor], tmp_path: Path
) -> None:
    static = runtime("static", [rjob("node", [container(py(NODE))], ancestor="trainer")],
                     ml={"numNodes": 1, "torch": {"numProcPerNode": 1}})
    supervise([static, trainjob("st", "static", trainer={"env": env_of(tmp_path)})])
    wait_for(lambda: pods(backend, "st").get("node-0-0", ("",))[0] == "Running", "node-0-0 running")
    with pytest.raises(InvalidObjectError, match='numNodes can change only when the runtime has mlPolicy.torch'
                       r'.elasticPolicy, and ClusterTrainingRuntime "static" has none \(numNodes unset -> 2\)'):
        backend.scale_trainjob("st", "default", 2)
    (tmp_path / "stop").touch()
    wait_for(lambda: condition(stored_status(backend, "st"), "Complete"), "Complete")
    with pytest.raises(KubetrainError, match=r'trainjob "st" has finished \(Complete\)'):
        backend.scale_trainjob("st", "default", 2)


def test_a_failed_elastic_job_stays_failed_with_its_restarts_spent(backend: LocalBackend, tmp_path: Path) -> None:
    """Upstream #3891 here: a TrainJob that failed after its JobSet's last restart is never run again, nor rebuilt
    for another node count: ``scale`` and ``apply`` of a new numNodes are refused, and what ran (its objects, its
    restart count) stays as it ended. ``run --replace`` is the way to run it again."""
    rt = runtime(
        "el-broken",
        [rjob("node", [container(py("raise SystemExit(1)"))], ancestor="trainer")],
        ml={"torch": {"numProcPerNode": 1, "elasticPolicy": {"minNodes": 1, "maxNodes": 3, "maxRestarts": 0}}},
        failurePolicy={"maxRestarts": 1},
    )
    tj = trainjob("elf", "el-broken", trainer={"numNodes": 1})
    st = run_to_end(backend, [rt, tj], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts", st
    row = backend.store.get_trainjob("default", "elf")
    assert row is not None and backend.restarts("elf", "default") == 1

    with pytest.raises(KubetrainError) as err:
        backend.apply([trainjob("elf", "el-broken", trainer={"numNodes": 2})], namespace="default",
                      workdir=str(tmp_path), detach=True)
    assert str(err.value) == (
        'TrainJob "elf" is invalid: spec.trainer.numNodes: the TrainJob has finished (Failed) and its JobSet never '
        "runs again (1 -> 2). Fix: `kubetrain run --replace` runs it again as a new TrainJob, or apply it under a "
        "new metadata.name"
    )
    with pytest.raises(KubetrainError, match=r'trainjob "elf" has finished \(Failed\)'):
        backend.scale_trainjob("elf", "default", 2)
    after = backend.store.get_trainjob("default", "elf")
    assert after is not None
    assert (after.objects, after.trainjob) == (row.objects, row.trainjob)
    assert backend.restarts("elf", "default") == 1
    # What does not rebuild its pods still applies to a finished TrainJob, as on a cluster.
    labelled = trainjob("elf", "el-broken", trainer={"numNodes": 1})
    labelled["metadata"]["labels"] = {"team": "a"}
    assert backend.apply([labelled], namespace="default", workdir=str(tmp_path), detach=True) == [
        "trainjob/elf configured"]
    assert condition(stored_status(backend, "elf"), "Failed") == failed


def test_cpu_autoscaling_scales_up_and_back_down(
    backend: LocalBackend, supervise: Callable[[list[Obj]], Supervisor], tmp_path: Path, kt_home: Path
) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text("autoscaling:\n  syncPeriod: 1s\n  scaleDownStabilization: 3s\n")
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                       "averageUtilization": 20}}}
    (tmp_path / "busy").touch()
    tj = trainjob("auto", "elastic", trainer={"numNodes": 1, "env": env_of(tmp_path, BUSY=str(tmp_path / "busy"))})
    supervise([elastic_runtime(metrics=[cpu], cpu="500m", hi=2), tj])
    wait_for(lambda: len(pods(backend, "auto")) == 2, "a second node started by the autoscaler")
    events = [(e.reason, e.message) for e in backend.store.list_events("default", "auto")]
    assert ("SuccessfulRescale", "New size: 2; reason: cpu resource utilization (percentage of request) above "
            "target") in events
    (tmp_path / "busy").unlink()  # idle: below target, and after the stabilization window it scales down
    wait_for(lambda: list(pods(backend, "auto")) == ["node-0-0"], "back to one node")
    (tmp_path / "stop").touch()
    wait_for(lambda: condition(stored_status(backend, "auto"), "Complete"), "Complete")


def test_autoscaling_on_a_metric_the_trainer_reports(
    backend: LocalBackend, supervise: Callable[[list[Obj]], Supervisor], tmp_path: Path, kt_home: Path
) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text("autoscaling:\n  syncPeriod: 1s\n")
    metric = {"type": "Pods", "pods": {"metric": {"name": "queue_per_node"},
                                       "target": {"type": "AverageValue", "averageValue": "100"}}}
    supervise([elastic_runtime(metrics=[metric]), trainjob("cm", "elastic", trainer={"numNodes": 1,
                                                                                      "env": env_of(tmp_path)})])
    wait_for(lambda: pods(backend, "cm").get("node-0-0", ("",))[0] == "Running", "node-0-0 running")
    wait_for(lambda: any(e.reason == "FailedGetMetric" for e in backend.store.list_events("default", "cm")),
             "a warning that the metric is not reported yet")

    def report() -> bool:
        # What the TrainJob status endpoint stores: status.trainerStatus (the trainer reports again and again).
        with backend.store.transaction():
            row = backend.store.get_trainjob("default", "cm")
            assert row is not None
            st = dict(row.trainjob.get("status") or {})
            st["trainerStatus"] = {"metrics": [{"name": "queue_per_node", "value": "250"}],
                                   "lastUpdatedTime": "2026-01-01T00:00:00Z"}
            backend.store.set_status("default", "cm", row.uid, st)
        return len(pods(backend, "cm")) == 3

    wait_for(report, "scaled to ceil(250 / 100) = 3 nodes")
    events = [(e.reason, e.message) for e in backend.store.list_events("default", "cm")]
    assert ("SuccessfulRescale", "New size: 3; reason: pods metric queue_per_node above target") in events
    warnings = [m for r, m in events if r == "FailedGetMetric"]
    assert warnings == ["pods metric queue_per_node: metric 'queue_per_node' is not among the trainer's reports "
                        "(status.trainerStatus.metrics: none yet)"]
    (tmp_path / "stop").touch()


WORLD = """
import os, pathlib, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
print(f"start rank={rank} world={world} restart={os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
stop = pathlib.Path(os.environ["STOP"])
while True:
    t = torch.ones(1)
    dist.all_reduce(t)
    done = torch.tensor([1.0 if stop.exists() else 0.0])
    dist.all_reduce(done)
    if done.item() > 0:
        break
    time.sleep(0.05)
print(f"finished rank={rank} world={world} sum={int(t.item())}", flush=True)
dist.destroy_process_group()
"""


@needs_torch
def test_torch_job_scaled_from_one_to_two_nodes_sees_world_size_two(
    backend: LocalBackend, supervise: Callable[[list[Obj]], Supervisor], tmp_path: Path
) -> None:
    (tmp_path / "world.py").write_text(WORLD)
    rt = elastic_runtime("torch-elastic", command=["torchrun", "world.py"], hi=2)
    supervise([rt, trainjob("tw", "torch-elastic", trainer={"numNodes": 1, "env": env_of(tmp_path)})])

    def text() -> str:
        return "\n".join(backend.logs("tw", "default", step=None, follow=False))

    wait_for(lambda: "start rank=0 world=1" in text(), "training on one node")
    backend.scale_trainjob("tw", "default", 2)
    wait_for(lambda: "start rank=1 world=2" in text(), "both nodes in a world of 2", timeout=120)
    (tmp_path / "stop").touch()
    st = wait_for(lambda: condition(stored_status(backend, "tw"), "Complete") and stored_status(backend, "tw"),
                  "Complete")
    out = text()
    assert sorted(re.findall(r"finished rank=(\d) world=2 sum=2", out)) == ["0", "1"], out
    # Node 0's agent restarted its workers for the new member (not counted as a failure); its pod kept running.
    assert "start rank=0 world=2 restart=0" in out
    assert pods(backend, "tw")["node-0-0"] == ("Succeeded", 0)
    assert st["numNodes"] == 2


def test_scale_cli(kt_home: Path, tmp_path: Path) -> None:
    """`kubetrain scale` as a user runs it against a detached TrainJob; errors name the field and the bounds."""
    import subprocess
    import sys

    import yaml

    kt = [sys.executable, "-m", "kubetrain.cli.main"]
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump_all([elastic_runtime(), trainjob("cli", "elastic", trainer={"env": env_of(tmp_path)})]))
    subprocess.run([*kt, "apply", "-f", str(f)], check=True, capture_output=True, cwd=tmp_path)
    try:
        ok = subprocess.run([*kt, "scale", "trainjob/cli", "--replicas", "2"], capture_output=True, text=True)
        assert (ok.returncode, ok.stdout) == (0, "trainjob.trainer.kubeflow.org/cli scaled\n"), ok.stderr
        bad = subprocess.run([*kt, "scale", "trainjob", "cli", "--replicas", "4"], capture_output=True, text=True)
        assert bad.returncode == 1
        assert "error: spec.trainer.numNodes: must be between elasticPolicy minNodes (1) and maxNodes (3), got 4" in (
            " ".join(bad.stderr.split())
        )
        assert "fix: scale within 1..3 (the runtime's elasticPolicy)" in " ".join(bad.stderr.split())
        wrong = subprocess.run([*kt, "scale", "deployment", "x", "--replicas", "1"], capture_output=True, text=True)
        assert wrong.returncode == 1 and "only TrainJobs scale" in wrong.stderr
        gone = subprocess.run([*kt, "scale", "tj", "nope", "--replicas", "1"], capture_output=True, text=True)
        assert gone.returncode == 1 and "not found" in gone.stderr
        backend = LocalBackend()
        wait_for(lambda: len(pods(backend, "cli")) == 2 and stored_status(backend, "cli").get("numNodes") == 2,
                 "two nodes")
        backend.store.close()
    finally:
        (tmp_path / "stop").touch()
        subprocess.run([*kt, "wait", "trainjob", "cli", "--for=condition=Complete", "--timeout=60s"],
                       capture_output=True)


def test_autoscaling_settings(kt_home: Path) -> None:
    from kubetrain.local.config import ConfigError, load

    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text("autoscaling: {syncPeriod: 5s, scaleDownStabilization: 1m, tolerance: 0.2}\n")
    got = load().autoscaling
    assert (got.sync_period, got.scale_down_stabilization, got.tolerance) == (5.0, 60.0, 0.2)
    for text, message in [
        ("autoscaling: {period: 5s}", "autoscaling: unknown key(s) period (known: syncPeriod, scaleDownStabilization"),
        ("autoscaling: {tolerance: 2}", "autoscaling.tolerance: expected a number from 0 to below 1, got 2"),
        ("autoscaling: {syncPeriod: 0}", "autoscaling.syncPeriod: must be more than 0 seconds"),
    ]:
        (kt_home / "config.yaml").write_text(text + "\n")
        with pytest.raises(ConfigError, match=re.escape(message)):
            load()
