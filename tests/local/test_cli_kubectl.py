"""kubectl habits on the local backend, as a user types them: logs with --tail/--since/--timestamps/-c and
progress bars, get with names/-l/--sort-by/--no-headers/-w, delete with several names/--all/-f, wait,
describe -o, run --timeout. (The same verbs on a cluster: ``tests/cli/test_cluster_verbs.py``.)"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import yaml

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob
from .test_cli import KUBETRAIN, kt, sleeper_files, write

pytestmark = needs_namespaces

PROGRESS = (
    "import sys, time\n"
    "print('start', flush=True)\n"
    "for i in range(3):\n"
    "    sys.stdout.write(f'\\r{(i + 1) * 33}%'); sys.stdout.flush(); time.sleep(0.2)\n"
    "print(flush=True)\n"
    "for i in range(5):\n"
    "    print('line', i, flush=True)\n"
    "time.sleep(0.6)\n"
    "print('late', flush=True)\n"
)


def test_logs_flags_and_progress_bars_as_written(kt_home: Path, tmp_path: Path) -> None:
    rt = runtime("bar", [rjob("node", [container(py(PROGRESS))], ancestor="trainer")])
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}
    kt("run", "-q", "-f", write(tmp_path / "bar.yaml", rt, trainjob("bar", "bar")))
    raw = subprocess.run([*KUBETRAIN, "logs", "bar"], capture_output=True, check=True, timeout=60).stdout
    # Piped: the bytes as the pod wrote them, carriage returns included.
    assert raw.startswith(b"start\n\r33%\r66%\r99%\nline 0\n")
    out = kt("logs", "bar").stdout  # (text mode reads \r as a line end)
    assert kt("logs", "bar", "--tail", "2").stdout == "line 4\nlate\n"
    stamped = kt("logs", "bar", "--tail", "2", "--timestamps").stdout.splitlines()
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (line 4|late)", s) for s in stamped), stamped
    t_line4, t_late = (s.split()[0] for s in stamped)
    assert t_late > t_line4  # written 0.6 s apart, told apart by the log's time index
    assert kt("logs", "bar", "--since-time", t_late).stdout == "late\n"
    assert kt("logs", "bar", "--since", "1h").stdout == out
    assert kt("logs", "bar", "-c", "node", "--step", "node").stdout == out
    r = kt("logs", "bar", "-c", "sidecar", check=False)
    assert r.returncode == 1 and "container 'sidecar' is not in step node-0-0 (containers: node)" in r.stderr
    r = kt("logs", "bar", "--since", "soon", check=False)
    assert r.returncode == 1 and "invalid duration 'soon'" in r.stderr

    d = json.loads(kt("describe", "trainjob", "bar", "-o", "json").stdout)
    assert d["state"]["state"] == "Complete" and d["steps"][0]["name"] == "node-0-0"
    rows = kt("get", "runtimes", "-A").stdout.splitlines()
    assert rows[0].split() == ["NAMESPACE", "KIND", "NAME", "FRAMEWORK", "NODES"]
    assert any(r.split() == ["ClusterTrainingRuntime", "bar", "torch", "-"] for r in rows), rows


def test_get_delete_and_wait_like_kubectl(kt_home: Path, tmp_path: Path) -> None:
    quick = runtime("quick", [rjob("node", [container(py("print('ok')"))], ancestor="trainer")])
    jobs = []
    for name, team in (("b", "x"), ("a", "y"), ("c", "x")):
        tj = trainjob(name, "quick")
        tj["metadata"]["labels"] = {"team": team}
        jobs.append(tj)
    f = write(tmp_path / "jobs.yaml", quick, *jobs)
    kt("apply", "-f", f)
    r = kt("wait", "trainjob", "a", "b", "c", "--for=condition=Complete", "--timeout=120s", timeout=180)
    assert sorted(r.stdout.splitlines()) == [f"trainjob.trainer.kubeflow.org/{n} condition met" for n in "abc"]

    r = kt("get", "tj", "a", "missing", "c", check=False)
    assert r.returncode == 1 and [x.split()[0] for x in r.stdout.splitlines()] == ["NAME", "a", "c"]
    assert 'trainjob "missing" not found' in r.stderr
    assert [x.split()[0] for x in kt("get", "tj", "-l", "team=x", "--no-headers").stdout.splitlines()] == ["b", "c"]
    names = kt("get", "tj", "--sort-by", "{.metadata.name}", "-o", "name").stdout.splitlines()
    assert names == [f"trainjob.trainer.kubeflow.org/{n}" for n in "abc"]

    r = kt("delete", "trainjob", "a", "missing", "b", check=False)
    assert r.returncode == 1
    assert [x.split(" (")[0] for x in r.stdout.splitlines()] == [
        'trainjob.trainer.kubeflow.org "a" deleted',
        'trainjob.trainer.kubeflow.org "b" deleted',
    ]
    r = kt("delete", "-f", f, check=False)  # the runtime and c; a and b are gone already: reported, exit 1
    assert r.returncode == 1
    assert r.stdout.splitlines()[1:] == ['clustertrainingruntime.trainer.kubeflow.org "quick" deleted']
    assert r.stdout.startswith('trainjob.trainer.kubeflow.org "c" deleted')
    assert r.stderr.count("not found") == 2
    r = kt("get", "runtimes", "quick", check=False)
    assert r.returncode == 1 and 'runtime "quick" not found' in r.stderr
    r = kt("delete", "clustertrainingruntime", "torch-distributed", check=False)
    assert r.returncode == 1 and "is built into kubetrain and cannot be deleted" in r.stderr
    r = kt("wait", "tj", "a", "--for=delete", "--timeout=5s")
    assert r.stdout == "trainjob.trainer.kubeflow.org/a condition met\n"


def test_get_watch_prints_each_change(kt_home: Path, tmp_path: Path) -> None:
    quick = runtime(
        "quick", [rjob("node", [container(py("import time; time.sleep(1); print('ok')"))], ancestor="trainer")]
    )
    watcher = subprocess.Popen(
        [*KUBETRAIN, "get", "tj", "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.5)
        kt("run", "-q", "-f", write(tmp_path / "w.yaml", quick, trainjob("w", "quick")))
        time.sleep(1.0)
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=30)
    states = [line.split()[2] for line in out.splitlines() if line.startswith("w ")]
    assert states[0] in ("Created", "Pending", "Running") and states[-1] == "Complete", out
    assert out.splitlines()[0].split()[:3] == ["NAME", "RUNTIME", "STATE"]


def test_run_timeout_stops_a_local_job_and_exits_124(kt_home: Path, tmp_path: Path) -> None:
    f = sleeper_files(tmp_path, "slow", f"kt-timeout-{time.time()}")
    r = kt("run", "-f", f, "--timeout", "3s", check=False, timeout=120)
    assert r.returncode == 124, r.stderr
    assert "timed out after 3s waiting for trainjob default/slow; state then: Running" in " ".join(r.stderr.split())
    tj = yaml.safe_load(kt("get", "tj", "slow", "-o", "yaml").stdout)
    assert tj["status"]["conditions"][-1]["type"] == "Failed"
