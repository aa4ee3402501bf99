"""Each container of a local pod (init containers included) has its own log: ``logs -c``, ``--all-containers``
and the default container (annotation, ``node``, first) as kubectl picks them, with --tail/--timestamps/-f."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from .conftest import container, needs_namespaces, py, rjob, runtime, trainjob
from .test_cli import kt, write

pytestmark = needs_namespaces
Obj = dict[str, Any]


def two_container_runtime(name: str, *, fail_init: bool = False, annotate: str | None = None) -> Obj:
    code = 3 if fail_init else 0
    init = container(py(f"print('init says hi'); import sys; sys.exit({code})"), name="prep")
    main = container(py("import time\nfor i in range(3): print('main', i, flush=True)\ntime.sleep(0.3)"))
    side = container(py("print('sidecar line', flush=True)"), name="side")
    rt = runtime(name, [rjob("node", [main, side], ancestor="trainer", backoff_limit=0)])
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["initContainers"] = [init]
    if annotate:
        pod.setdefault("metadata", {})["annotations"] = {"kubectl.kubernetes.io/default-container": annotate}
    return rt


def test_logs_pick_one_container_or_all_of_them(kt_home: Path, tmp_path: Path) -> None:
    kt("run", "-q", "-f", write(tmp_path / "a.yaml", two_container_runtime("rt"), trainjob("two", "rt")))
    assert kt("logs", "two").stdout == "main 0\nmain 1\nmain 2\n"  # the default container: node
    assert kt("logs", "two", "-c", "side").stdout == "sidecar line\n"
    assert kt("logs", "two", "-c", "prep", "--step", "node-0-0").stdout == "init says hi\n"
    assert kt("logs", "two", "-c", "node", "--tail", "1").stdout == "main 2\n"
    stamped = kt("logs", "two", "-c", "side", "--timestamps").stdout
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z sidecar line\n", stamped), stamped
    assert kt("logs", "two", "--all-containers").stdout.splitlines() == [
        "[node-0/0/prep] init says hi",
        "[node-0/0/node] main 0",
        "[node-0/0/node] main 1",
        "[node-0/0/node] main 2",
        "[node-0/0/side] sidecar line",
    ]
    r = kt("logs", "two", "-c", "nope", check=False)
    assert r.returncode == 1 and "container 'nope' is not in step node-0-0 (containers: prep, node, side)" in r.stderr
    r = kt("logs", "two", "-c", "side", "--all-containers", check=False)
    assert r.returncode == 1 and "cannot be used together" in r.stderr
    r = kt("logs", "two", "--all-containers", "--context", "x", check=False)
    assert r.returncode == 1 and "on a cluster, show one container at a time with -c" in r.stderr
    # Deleting with --keep-logs keeps every container's log.
    out = kt("delete", "trainjob", "two", "--keep-logs").stdout
    logs = Path(out.split("logs kept in ")[1].rstrip(")\n"))
    assert {p.name for p in logs.glob("*.log")} == {"node-0-0.log", "node-0-0.prep.log", "node-0-0.side.log"}


def test_the_annotation_names_the_default_container_and_follow_ends(kt_home: Path, tmp_path: Path) -> None:
    rt = two_container_runtime("rt", annotate="side")
    kt("apply", "-f", write(tmp_path / "b.yaml", rt, trainjob("ann", "rt")))
    assert kt("logs", "ann", "-f", timeout=120).stdout == "sidecar line\n"
    assert kt("logs", "ann", "-c", "node", "-f").stdout == "main 0\nmain 1\nmain 2\n"


def test_a_failed_init_container_is_what_describe_shows(kt_home: Path, tmp_path: Path) -> None:
    rt = two_container_runtime("rt", fail_init=True)
    r = kt("run", "-q", "-f", write(tmp_path / "c.yaml", rt, trainjob("bad", "rt")), check=False)
    assert r.returncode == 1
    d = json.loads(kt("describe", "trainjob", "bad", "-o", "json").stdout)
    assert d["failureLogs"]["node-0-0"] == ["init says hi"], d["failureLogs"]
    assert kt("logs", "bad").stdout == ""  # the main container never ran
    assert kt("logs", "bad", "-c", "prep").stdout == "init says hi\n"


def test_progress_from_logs_reads_the_trainer_container(kt_home: Path, tmp_path: Path) -> None:
    code = "import sys, time\nfor i in range(1, 5):\n    print(f'Epoch {i}/4', flush=True); time.sleep(0.3)\n"
    noisy = container(py("print('Epoch 1/100', flush=True)"), name="side")
    rt = runtime("rt", [rjob("node", [container([sys.executable, "-c", code]), noisy], ancestor="trainer")])
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}
    kt("run", "-q", "-f", write(tmp_path / "d.yaml", rt, trainjob("prog", "rt")))
    status = json.loads(kt("get", "trainjob", "prog", "-o", "json").stdout)["status"]
    # The trainer container's "Epoch 4/4" (epoch 4 under way), not the sidecar's "Epoch 1/100".
    assert status["trainerStatus"]["progressPercentage"] == 75, status
    assert status["trainerStatus"]["metrics"] == [{"name": "epoch", "value": "4"}]
