"""Many kubetrain processes at once: no lost TrainJob, no "database is locked", no job run twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import pods
from kubetrain.local.store.db import Store

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob

KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]
SUBMITS = 16


@needs_namespaces
def test_sixteen_simultaneous_submits_all_run_to_complete(kt_home: Path, tmp_path: Path) -> None:
    hello = container(py("print('hello', flush=True)"))
    rt = runtime("hello", [rjob("node", [hello], ancestor="trainer", parallelism=2)])
    rt_file = tmp_path / "rt.yaml"
    rt_file.write_text(yaml.safe_dump(rt))
    subprocess.run([*KUBETRAIN, "apply", "-f", str(rt_file)], check=True, capture_output=True)
    files = []
    for i in range(SUBMITS):
        f = tmp_path / f"tj{i}.yaml"
        f.write_text(yaml.safe_dump(trainjob(f"job-{i}", "hello")))
        files.append(f)
    # Three quarters detached (`apply`), the rest foreground (`run`), all started at once, with readers polling.
    procs = [
        subprocess.Popen(
            [*KUBETRAIN, "apply", "-f", str(f)] if i % 4 else [*KUBETRAIN, "run", "-q", "-f", str(f)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, f in enumerate(files)
    ]
    reader_errors: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            r = subprocess.run([*KUBETRAIN, "get", "trainjobs", "-o", "json"], capture_output=True, text=True)
            if r.returncode != 0 or "Traceback" in r.stderr:
                reader_errors.append(r.stderr)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        results.append((p.returncode, out, err))
    deadline = time.monotonic() + 300
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        r = subprocess.run(
            [*KUBETRAIN, "get", "trainjobs", "-o", "json"], capture_output=True, text=True, check=True
        )
        data = json.loads(r.stdout)
        items = data.get("items", [data]) if data.get("kind") == "List" else [data]
        states = {
            tj["metadata"]["name"]: (tj.get("status", {}).get("conditions") or [{}])[-1].get("type", "")
            for tj in items
        }
        if len(states) == SUBMITS and all(s in ("Complete", "Failed") for s in states.values()):
            break
        time.sleep(0.5)
    stop.set()
    for t in readers:
        t.join(60)
    for code, out, err in results:
        assert code == 0, (out, err)
        assert "locked" not in err and "Traceback" not in err, err
    assert reader_errors == []
    assert states == {f"job-{i}": "Complete" for i in range(SUBMITS)}, states
    b = LocalBackend(Store())
    for i in range(SUBMITS):
        # Each ran exactly once: two pods, one start each, no restart.
        d = b.describe_trainjob(f"job-{i}", "default")
        assert [(s.state, s.restarts) for s in d.steps] == [("Succeeded", 0), ("Succeeded", 0)]
        assert [e.reason for e in d.events].count("Started") == 2
        assert "\n".join(b.logs(f"job-{i}", "default", step=None, follow=False)).count("hello") == 2


def test_a_supervisor_whose_starter_died_before_handing_over_does_nothing(kt_home: Path) -> None:
    """The detached supervisor acts only after its starter recorded it; without that it exits untouched."""
    store = Store()
    owner = subprocess.Popen(["sleep", "30"])
    try:
        tj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "orphan", "namespace": "default", "uid": "u-1"},
            "spec": {"runtimeRef": {"name": "x"}},
        }
        store.create_trainjob(tj, [], "/", (owner.pid, pods.proc_start_time(owner.pid)))
        sup = subprocess.run(
            [sys.executable, "-m", "kubetrain.local.supervisor.controller", "default", "orphan"],
            stdin=subprocess.DEVNULL,  # the starter is gone: EOF instead of "go"
            capture_output=True,
            timeout=60,
        )
        assert sup.returncode == 0 and sup.stderr == b""
        row = store.get_trainjob("default", "orphan")
        assert row is not None and row.supervisor_pid == owner.pid and "status" not in row.trainjob
        # While its recorded owner lives, nobody records it as lost.
        assert LocalBackend(store).get_trainjob("orphan", "default").state == ""
    finally:
        owner.kill()
        owner.wait()
    # Once the owner is gone, the next reader does.
    tj2 = LocalBackend(store).get_trainjob("orphan", "default")
    assert tj2.state == "Failed" and tj2.condition("Failed").reason == "SupervisorLost"  # type: ignore[union-attr]


def test_concurrent_writers_in_threads_and_processes_never_see_locked(kt_home: Path, tmp_path: Path) -> None:
    """The store alone: 8 processes x 50 transactions each against one state.db, plus readers."""
    code = (
        "import sys, os\n"
        "from kubetrain.local.store.db import Store\n"
        "s = Store()\n"
        "i = int(sys.argv[1])\n"
        "for k in range(50):\n"
        "    tj = {'metadata': {'name': f'w{i}-{k}', 'namespace': 'default', 'uid': f'{i}-{k}'}, 'spec': {}}\n"
        "    s.create_trainjob(tj, [], '/', (os.getpid(), None))\n"
        "    s.set_status('default', f'w{i}-{k}', f'{i}-{k}', {'conditions': []})\n"
        "    s.add_event('default', f'w{i}-{k}', 'Normal', 'X', 'y')\n"
        "    s.list_trainjobs(None)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(i)], stderr=subprocess.PIPE, text=True) for i in range(8)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    assert len(Store().list_trainjobs("default")) == 400
