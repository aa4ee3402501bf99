"""The local scheduler: resources accounted across every TrainJob on the machine, one FIFO queue, gangs all or
nothing, each GPU to one pod, never-fitting requests rejected at once."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import pods
from kubetrain.local.scheduling.resources import Capacity, never_fits
from kubetrain.local.scheduling.scheduler import Owner, Scheduler
from kubetrain.local.store.db import Store

from ..conftest import condition, container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]
GPU = "nvidia.com/gpu"


def owner(store: Store, name: str, pid: int | None = None) -> Owner:
    """A TrainJob row whose supervisor is ``pid`` (this process by default, i.e. alive)."""
    pid = pid or os.getpid()
    tj = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {}}
    store.create_trainjob(tj, [], "/", (pid, pods.proc_start_time(pid)))
    return Owner("default", name, f"uid-{name}")


def sched(store: Store, name: str, cap: dict[str, float], pid: int | None = None) -> Scheduler:
    return Scheduler(store, Capacity(cap), owner(store, name, pid))


class TestBooks:
    def test_cpu_is_accounted_across_trainjobs_and_freed_on_release(self, kt_home: Path) -> None:
        store = Store()
        a, b = sched(store, "a", {"cpu": 2}), sched(store, "b", {"cpu": 2})
        assert a.admit("p", {"p": {"cpu": 2}}).admitted
        wait = b.admit("p", {"p": {"cpu": 1}})
        assert not wait.admitted and wait.reason == "Insufficient cpu"
        assert wait.message == (
            "Insufficient cpu: needs 1, 0 of 2 free; in use by default/a; position 1 in the local queue"
        )
        a.release(["p"])
        assert b.admit("p", {"p": {"cpu": 1}}).admitted

    def test_fifo_an_earlier_waiting_request_keeps_what_it_needs_reserved(self, kt_home: Path) -> None:
        store = Store()
        cap = {"cpu": 4, "memory": 8 * 2**30}
        a, b, c, d = (sched(store, n, cap) for n in "abcd")
        assert a.admit("p", {"p": {"cpu": 2}}).admitted
        assert not b.admit("p", {"p": {"cpu": 3}}).admitted  # 2 free: B waits first in line
        later = c.admit("p", {"p": {"cpu": 1}})
        assert not later.admitted, "C would fit now, but not without overtaking B"
        assert "position 2 in the local queue" in later.message
        assert "Insufficient cpu: needs 1, 2 of 4 free; in use by default/a; TrainJobs queued earlier wait for 3" in (
            later.message
        )
        assert d.admit("p", {"p": {"memory": 2**30}}).admitted, "a request that competes for nothing B waits for"
        a.release(["p"])
        assert c.admit("p", {"p": {"cpu": 1}}).admitted, "4 free: B's 3 stay reserved, C's 1 fits beside them"
        assert b.admit("p", {"p": {"cpu": 3}}).admitted

    def test_each_gpu_goes_to_exactly_one_pod(self, kt_home: Path) -> None:
        store = Store()
        cap = {GPU: 2}
        a, b, c = (sched(store, n, cap) for n in "abc")
        got_a = a.admit("p", {"p": {GPU: 1}})
        got_b = b.admit("p", {"p": {GPU: 1}})
        assert got_a.devices == {"p": [0]} and got_b.devices == {"p": [1]}
        assert not c.admit("p", {"p": {GPU: 1}}).admitted
        a.release(["p"])
        assert c.admit("p", {"p": {GPU: 1}}).devices == {"p": [0]}

    def test_only_an_overcommitted_trainjob_shares_gpus_and_only_among_its_own_pods(self, kt_home: Path) -> None:
        store = Store()
        cap = {GPU: 2}
        holder, plain, over = (sched(store, n, cap) for n in ("holder", "plain", "over"))
        three = {f"node-0-{i}": {GPU: 1} for i in range(3)}
        assert holder.admit("p", {"p": {GPU: 1}}).devices == {"p": [0]}
        waits = over.admit("gang", three, overcommit=True)
        assert not waits.admitted, "GPU 0 is another TrainJob's: never shared with it"
        assert waits.message.startswith("Insufficient nvidia.com/gpu: needs 2, 1 of 2 free; in use by default/holder")
        holder.release(["p"])
        got = over.admit("gang", three, overcommit=True)
        assert got.admitted and got.devices == {"node-0-0": [0], "node-0-1": [1], "node-0-2": [0]}
        assert not plain.admit("p", {"p": {GPU: 1}}).admitted, "both GPUs are held, shared or not"
        over.release(list(three))
        assert plain.admit("p", {"p": {GPU: 1}}).devices == {"p": [0]}

    def test_a_pod_asking_more_gpus_than_the_machine_has_gets_each_once(self, kt_home: Path) -> None:
        got = sched(Store(), "big", {GPU: 2}).admit("p", {"p": {GPU: 4}}, overcommit=True)
        assert got.admitted and got.devices == {"p": [0, 1]}

    def test_a_gang_is_admitted_whole_or_not_at_all(self, kt_home: Path) -> None:
        store = Store()
        cap = {"cpu": 2, GPU: 2}
        other, gang = sched(store, "other", cap), sched(store, "gang", cap)
        assert other.admit("p", {"p": {"cpu": 1}}).admitted
        pods_ = {"node-0-0": {"cpu": 1, GPU: 1}, "node-0-1": {"cpu": 1, GPU: 1}}
        assert not gang.admit("gang", pods_).admitted
        held = store._read("SELECT count(*) FROM sched_allocations WHERE trainjob='gang'")[0][0]
        assert held == 0, "no pod of a waiting gang holds anything"
        other.release(["p"])
        got = gang.admit("gang", pods_)
        assert got.admitted and got.devices == {"node-0-0": [0], "node-0-1": [1]}

    def test_extended_resources_are_accounted_too(self, kt_home: Path) -> None:
        store = Store()
        cap = {"example.com/fpga": 1}
        a, b = sched(store, "a", cap), sched(store, "b", cap)
        assert a.admit("p", {"p": {"example.com/fpga": 1}}).admitted
        assert b.admit("p", {"p": {"example.com/fpga": 1}}).reason == "Insufficient example.com/fpga"

    def test_what_a_dead_supervisor_held_is_freed(self, kt_home: Path) -> None:
        store = Store()
        gone = subprocess.Popen(["true"])
        gone.wait()
        dead = Scheduler(store, Capacity({"cpu": 1}), owner(store, "dead", os.getpid()))
        assert dead.admit("p", {"p": {"cpu": 1}}).admitted
        store.set_supervisor("default", "dead", gone.pid, "0")  # its supervisor is gone now
        assert sched(store, "b", {"cpu": 1}).admit("p", {"p": {"cpu": 1}}).admitted

    def test_never_fits_names_the_resource(self) -> None:
        cap = Capacity({"cpu": 2, "memory": 2**30, GPU: 0})
        assert never_fits({"cpu": 2, "memory": 2**30}, cap) == []
        assert never_fits({GPU: 1, "cpu": 3}, cap) == [
            "cpu: requested 3, this machine has 2",
            "nvidia.com/gpu: requested 1, this machine has 0",
        ]
        assert "declared under `capacity:` in config.yaml" in never_fits({"example.com/x": 1}, cap)[0]


def _race(home: str, i: int, start: Any, results: Any) -> None:
    os.environ["KUBETRAIN_HOME"] = home
    store = Store()
    s = sched(store, f"r{i}", {"cpu": 1})
    start.wait()
    results.put((i, s.admit("p", {"p": {"cpu": 1}}).admitted))
    time.sleep(2)  # stay alive (the owner) until every racer has decided


def test_concurrent_supervisors_never_both_admit_into_the_same_cpu(kt_home: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(kt_home), i, start, results)) for i in range(8)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    assert sum(1 for _, admitted in got if admitted) == 1, got


def configure(home: Path, capacity: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"capacity": capacity}))


@needs_namespaces
def test_two_gang_jobs_of_two_cpus_on_two_cpus_run_one_after_the_other(
    kt_home: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    configure(kt_home, {"cpu": 2})
    log, release = tmp_path / "times", tmp_path / "release"
    request.addfinalizer(release.touch)  # a failing assertion must not leave the pods waiting
    code = (
        f"import time, os\nopen({str(log)!r}, 'a').write(f\"{{os.environ['JOB']}} start {{time.time()}}\\n\")\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.05)\n"  # the test says when, not a clock
        f"open({str(log)!r}, 'a').write(f\"{{os.environ['JOB']}} end {{time.time()}}\\n\")\n"
    )

    def files(name: str) -> str:
        node = container(py(code), resources={"requests": {"cpu": "1"}}, env=[{"name": "JOB", "value": name}])
        rt = runtime(f"g-{name}", [rjob("node", [node], ancestor="trainer", parallelism=2)],
                     pod_group={"coscheduling": {}})
        f = tmp_path / f"{name}.yaml"
        f.write_text(yaml.safe_dump_all([rt, trainjob(name, f"g-{name}")]))
        return str(f)

    fa, fb = files("first"), files("second")
    subprocess.run([*KUBETRAIN, "apply", "-f", fa], check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while "first start" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    subprocess.run([*KUBETRAIN, "apply", "-f", fb], check=True, capture_output=True)
    queued = ""
    while time.monotonic() < deadline:
        queued = subprocess.run([*KUBETRAIN, "get", "trainjobs", "-o", "wide"], capture_output=True, text=True).stdout
        if any(line.split()[:3] == ["second", "g-second", "Queued"] for line in queued.splitlines()):
            break
        time.sleep(0.05)
    row = next(line.split() for line in queued.splitlines() if line.startswith("second"))
    assert row[:3] == ["second", "g-second", "Queued"] and "Insufficient" in row and "cpu" in row, queued
    desc = subprocess.run([*KUBETRAIN, "describe", "trainjob", "second"], capture_output=True, text=True).stdout
    assert "Queued" in desc, desc
    assert "Insufficient cpu: needs 2, 0 of 2 free; in use by default/first" in " ".join(desc.split()), desc
    release.touch()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = json.loads(
            subprocess.run([*KUBETRAIN, "get", "trainjobs", "-o", "json"], capture_output=True, text=True).stdout
        )
        done = [((i.get("status") or {}).get("conditions") or [{}])[-1].get("type") for i in states["items"]]
        if done == ["Complete", "Complete"]:
            break
        time.sleep(0.2)
    events = {}
    for line in log.read_text().splitlines():
        job, what, t = line.split()
        events.setdefault(job, {}).setdefault(what, []).append(float(t))
    assert len(events["first"]["end"]) == 2 and len(events["second"]["start"]) == 2
    assert max(events["first"]["end"]) <= min(events["second"]["start"]), "the second gang waited for the first"


@needs_namespaces
def test_gpu_request_without_gpus_fails_at_once_as_unschedulable(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "0")
    gpu = container(py("print('never')"), resources={"limits": {"nvidia.com/gpu": 1}})
    started = time.monotonic()
    rt = runtime("gpu", [rjob("node", [gpu], ancestor="trainer")])
    st = run_to_end(backend, [rt, trainjob("g", "gpu")], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "Unschedulable"
    assert failed["message"] == (
        "trainjob default/g can never run on this machine: it needs 1 nvidia.com/gpu at once (node: 1 pod × 1 "
        "nvidia.com/gpu), this machine has 0 nvidia.com/gpu. Fix: lower spec.trainer.resourcesPerNode (or numNodes), "
        "or run it on a cluster that has them (`--context`); devices are never over-committed"
    )
    assert time.monotonic() - started < 20
    assert "Unschedulable" in [e.reason for e in backend.describe_trainjob("g", "default").events]


@needs_namespaces
def test_two_trainjobs_never_get_the_same_gpu(
    kt_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "2")  # pretend two GPUs; nothing here touches a device
    code = "import os, time\nprint('gpu=' + os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\ntime.sleep(5)"
    gpu = container(py(code), resources={"limits": {"nvidia.com/gpu": 1}})
    names = ["ga", "gb"]
    for n in names:
        f = tmp_path / f"{n}.yaml"
        rt = runtime(f"rt-{n}", [rjob("node", [gpu], ancestor="trainer")])
        f.write_text(yaml.safe_dump_all([rt, trainjob(n, f"rt-{n}")]))
        subprocess.run([*KUBETRAIN, "apply", "-f", str(f)], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    running: list[str] = []
    while len(running) < 2 and time.monotonic() < deadline:  # both hold their GPU at the same time
        b = LocalBackend(Store())
        running = [n for n in names if any(s.state == "Running" for s in b.describe_trainjob(n, "default").steps)]
        time.sleep(0.05)
    assert len(running) == 2
    seen = []
    for n in names:
        out = subprocess.run([*KUBETRAIN, "logs", n, "-f"], capture_output=True, text=True, timeout=120).stdout
        seen.append(out.strip())
    assert sorted(seen) == ["gpu=0", "gpu=1"]


@needs_namespaces
def test_a_finished_gang_member_gives_its_resources_back(kt_home: Path, tmp_path: Path) -> None:
    configure(kt_home, {"cpu": 2})
    init = container(py("print('initialized')"), name="dataset-initializer", resources={"requests": {"cpu": "1"}})
    waiter = py("import time; time.sleep(600)")
    node = container(waiter, resources={"requests": {"cpu": "1"}})
    rt = runtime(
        "gang-init",
        [
            rjob("dataset-initializer", [init], ancestor="dataset-initializer"),
            rjob("node", [node], ancestor="trainer", depends_on=[("dataset-initializer", "Complete")]),
        ],
        pod_group={"coscheduling": {}},
    )
    f = tmp_path / "g.yaml"
    f.write_text(yaml.safe_dump_all([rt, trainjob("gi", "gang-init")]))
    subprocess.run([*KUBETRAIN, "apply", "-f", str(f)], check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 60
        steps: dict[str, str] = {}
        while time.monotonic() < deadline and steps.get("node-0-0") != "Running":
            steps = {s.name: s.state for s in LocalBackend().describe_trainjob("gi", "default").steps}
            time.sleep(0.1)
        assert steps == {"dataset-initializer-0-0": "Succeeded", "node-0-0": "Running"}, steps
        other = Scheduler(Store(), Capacity({"cpu": 2}), owner(Store(), "other"))
        assert other.admit("p", {"p": {"cpu": 1}}).admitted, "the finished initializer's CPU is free again"
        assert not other.admit("q", {"q": {"cpu": 1}}).admitted, "the running trainer's is not"
    finally:
        subprocess.run([*KUBETRAIN, "delete", "trainjob", "gi"], capture_output=True)


def _states(name: str) -> dict[str, str]:
    return {s.name: s.state for s in LocalBackend(Store()).describe_trainjob(name, "default").steps}


@needs_namespaces
def test_a_trainjob_larger_than_the_machine_is_unschedulable_at_once_with_its_totals(
    backend: LocalBackend, kt_home: Path, tmp_path: Path
) -> None:
    # What laptop users meet first: 2 nodes × 2 cpu on a 2-core machine. Neither node starts.
    configure(kt_home, {"cpu": 2})
    started = tmp_path / "started"
    node = container(py(f"open({str(started)!r}, 'a').write('x')"), resources={"requests": {"cpu": "2"}})
    rt = runtime("big", [rjob("node", [node], ancestor="trainer", parallelism=2)])
    st = run_to_end(backend, [rt, trainjob("big", "big")], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "Unschedulable", st
    assert failed["message"].startswith(
        "trainjob default/big can never run on this machine: it needs 4 cpu at once (node: 2 pods × 2 cpu), this "
        "machine has 2 cpu. Fix: lower spec.trainer.resourcesPerNode (or numNodes), or run it over-committed with "
        "`kubetrain run --overcommit`"
    ), failed["message"]
    assert not started.exists(), "no pod of a gang that can never fit runs"


@needs_namespaces
def test_overcommit_runs_it_and_says_so(
    backend: LocalBackend, kt_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(kt_home, {"cpu": 2})
    monkeypatch.setenv("KUBETRAIN_OVERCOMMIT", "1")  # what `kubetrain run --overcommit` sets for its supervisor
    node = container(py("print('ran')"), resources={"requests": {"cpu": "2"}})
    rt = runtime("big", [rjob("node", [node], ancestor="trainer", parallelism=2)])
    st = run_to_end(backend, [rt, trainjob("big", "big")], tmp_path)
    assert condition(st, "Complete") is not None, st
    events = backend.describe_trainjob("big", "default").events
    said = [e.message for e in events if e.reason == "Overcommitted"]
    assert said == ["runs over-committed (--overcommit): 4 cpu at once (node: 2 pods × 2 cpu) on 2 cpu"], events


@needs_namespaces
def test_a_gang_that_fits_later_waits_as_a_whole(kt_home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    configure(kt_home, {"cpu": 3})
    release = tmp_path / "release"
    request.addfinalizer(release.touch)
    wait = py(f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)")
    holder = runtime("holder", [rjob("node", [container(wait, resources={"requests": {"cpu": "2"}})],
                                     ancestor="trainer")])  # fmt: skip
    pair = runtime("pair", [rjob("node", [container(py("print('both')"), resources={"requests": {"cpu": "1"}})],
                                 ancestor="trainer", parallelism=2)])  # fmt: skip
    subprocess.run([*KUBETRAIN, "apply", "-f", write(tmp_path / "h.yaml", holder, trainjob("h", "holder"))],
                   check=True, capture_output=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while _states("h").get("node-0-0") != "Running":
        assert time.monotonic() < deadline, _states("h")
        time.sleep(0.05)
    subprocess.run([*KUBETRAIN, "apply", "-f", write(tmp_path / "p.yaml", pair, trainjob("p", "pair"))],
                   check=True, capture_output=True)  # fmt: skip
    queued = ""
    while "Queued" not in queued:
        assert time.monotonic() < deadline, queued
        queued = subprocess.run([*KUBETRAIN, "get", "trainjobs", "p"], capture_output=True, text=True).stdout
        time.sleep(0.05)
    # One cpu is free, which would fit one of its two pods: neither may start (never half-started).
    assert set(_states("p").values()) <= {"Pending"}, _states("p")
    release.touch()
    out = subprocess.run([*KUBETRAIN, "logs", "p", "-f"], capture_output=True, text=True, timeout=120).stdout
    assert sorted(out.splitlines()) == ["[node-0/0] both", "[node-0/1] both"], out
    assert set(_states("p").values()) == {"Succeeded"}


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)
