"""``kubetrain get pods|events`` on this machine, over a real run: the pods carry the labels JobSet gives them (so
``-l jobset.sigs.k8s.io/jobset-name=JOB`` works as on a cluster), kubectl's columns, ``--field-selector``, and
``-o yaml|json|name|jsonpath|custom-columns``; and each state of a supervisor's pod row as kubectl would show that pod.
(The same verbs on a cluster: ``tests/cli/test_get_output.py``.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import PodRow, Store

from .conftest import container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

FLAKY_ONCE = (
    "import os, sys\n"
    "marker = os.path.join({tmp!r}, os.environ['HOSTNAME'])\n"
    "if os.environ['HOSTNAME'].endswith('-1') and not os.path.exists(marker):\n"
    "    open(marker, 'w').close(); sys.exit(3)\n"
    "print('ok')\n"
)


def kt(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def ran(kt_home: Path, tmp_path: Path) -> Iterator[LocalBackend]:
    """Two finished TrainJobs, ``flaky`` and ``other``, each with two pods of which the second failed once and was
    restarted (a Warning event), and a pod template label ``team`` of their own."""
    backend = LocalBackend(Store())
    rt = runtime("two", [rjob("node", [container(py(FLAKY_ONCE.format(tmp=str(tmp_path))))], parallelism=2)])
    for name in ("flaky", "other"):
        tj = trainjob(name, "two")
        tj["spec"]["podTemplateOverrides"] = [
            {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"team": "vision" if name == "flaky" else "nlp"}}}

        ]
        status = run_to_end(backend, [rt, tj] if name == "flaky" else [tj], tmp_path)
        assert status["conditions"][-1]["type"] == "Complete", status
    yield backend
    backend.store.close()


@needs_namespaces
def test_get_pods_and_events_of_a_real_run(ran: LocalBackend) -> None:
    rc, out, _ = kt("get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=flaky")
    rows = [line.split() for line in out.splitlines()]
    assert rc == 0 and rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [r[:4] for r in rows[1:]] == [
        ["flaky-node-0-0", "0/1", "Completed", "0"],
        ["flaky-node-0-1", "0/1", "Completed", "1"],
    ]
    rc, out, _ = kt("get", "pods", "-o", "wide", "--sort-by", ".metadata.name")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0][5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert [r[0] for r in rows[1:]] == ["flaky-node-0-0", "flaky-node-0-1", "other-node-0-0", "other-node-0-1"]
    assert {r[5] for r in rows[1:3]} == {"10.250.0.2", "10.250.0.3"} and {r[6] for r in rows[1:]} == {"localhost"}

    # The labels the JobSet and Job controllers give pods, and the pod template's own.
    rc, out, _ = kt("get", "pod", "flaky-node-0-1", "-o", "yaml")
    pod = yaml.safe_load(out)
    assert pod["kind"] == "Pod" and pod["metadata"]["namespace"] == "default"
    assert pod["metadata"]["labels"] == {
        "team": "vision",
        "jobset.sigs.k8s.io/jobset-name": "flaky",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "batch.kubernetes.io/job-name": "flaky-node-0",
        "batch.kubernetes.io/job-completion-index": "1",
    }
    assert pod["spec"]["hostname"] == "flaky-node-0-1" and pod["spec"]["subdomain"] == "flaky"
    assert pod["status"]["phase"] == "Succeeded" and pod["status"]["containerStatuses"][0]["restartCount"] == 1
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"] == {"exitCode": 0, "reason": "Completed"}

    rc, out, _ = kt("get", "pods", "-l", "team=nlp", "-o", "name")
    assert out.splitlines() == ["pod/other-node-0-0", "pod/other-node-0-1"]
    rc, out, _ = kt("get", "pods", "--field-selector", "metadata.name!=flaky-node-0-0,status.phase=Succeeded",
                    "-l", "jobset.sigs.k8s.io/jobset-name=flaky", "-o", "name")
    assert out == "pod/flaky-node-0-1\n"
    rc, out, _ = kt("get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{\"\\n\"}{end}",
                    "-l", "jobset.sigs.k8s.io/jobset-name=other")
    assert out == "other-node-0-0 10.250.0.2\nother-node-0-1 10.250.0.3\n"  # each TrainJob has its own pod network
    rc, out, _ = kt("get", "pods", "flaky-node-0-0", "-o", "custom-columns=POD:.metadata.name,JOB:.metadata.labels"
                    ".batch\\.kubernetes\\.io/job-name,RESTARTS:.status.containerStatuses[*].restartCount")
    assert [line.split() for line in out.splitlines()] == [["POD", "JOB", "RESTARTS"], ["flaky-node-0-0",
                                                                                        "flaky-node-0", "0"]]

    rc, out, _ = kt("get", "events", "--field-selector", "involvedObject.name=flaky,type=Warning")
    rows = out.splitlines()
    assert rows[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert len(rows) == 2 and rows[1].split()[1:4] == ["Warning", "BackOff", "trainjob/flaky"]
    assert "pod node-0-1 exited with code 3" in rows[1]
    rc, out, _ = kt("get", "events", "-o", "jsonpath={.items[*].reason}", "--field-selector",
                    "involvedObject.name=other")
    assert "Started Started" in out and out.endswith("AllJobsCompleted")
    rc, out, _ = kt("get", "events", "-A", "--field-selector", "reason=AllJobsCompleted")
    assert [line.split()[0] for line in out.splitlines()] == ["NAMESPACE", "default", "default"]
    rc, out, _ = kt("get", "events", "-o", "yaml", "--field-selector", "reason=BackOff,involvedObject.name=flaky")
    (event,) = list(yaml.safe_load_all(out))
    assert event["involvedObject"]["kind"] == "TrainJob" and event["involvedObject"]["name"] == "flaky"
    assert event["source"] == {"component": "kubetrain-local"} and event["count"] == 1


@needs_namespaces
def test_errors_say_what_is_there(ran: LocalBackend) -> None:
    rc, _, err = kt("get", "pods", "flaky-node-0-9")
    assert rc == 1 and 'pods "flaky-node-0-9" not found in namespace "default"' in err
    assert "did you mean" in err
    rc, _, err = kt("get", "pods", "--field-selector", "status.phase")
    assert rc == 1 and "cannot parse 'status.phase' (fix: use field=value" in err
    rc, _, err = kt("get", "events", "--field-selector", "involvedObject.nam=flaky")
    assert rc == 1 and "field label not supported for events: 'involvedObject.nam'" in err
    rc, _, err = kt("get", "pods", "-o", "jsonpath={.items[0].spec.containers[0].nope}",
                    "--allow-missing-template-keys=false")
    assert rc == 1 and 'error executing jsonpath "{.items[0].spec.containers[0].nope}": nope is not found' in err
    rc, _, err = kt("get", "pods", "-n", "elsewhere")
    assert rc == 0 and "No resources found in namespace elsewhere." in err
    rc, _, err = kt("get", "pods", "-w")
    assert rc == 1 and "--watch is available for trainjobs only" in err


@needs_namespaces
def test_a_running_pod_is_ready_once_its_probe_passes(kt_home: Path, tmp_path: Path) -> None:
    import threading
    import time

    from kubetrain.local.supervisor.controller import Supervisor

    started, probe_ok, stop = tmp_path / "started", tmp_path / "probe-ok", tmp_path / "stop"
    wait = (
        f"import os, time\nopen({str(started)!r}, 'w').close()\n"
        f"while not os.path.exists({str(stop)!r}): time.sleep(0.05)\n"
    )
    probe = {"exec": {"command": ["test", "-e", str(probe_ok)]}, "periodSeconds": 1}
    rt = runtime("probed", [rjob("node", [container(py(wait), readinessProbe=probe)])])
    backend = LocalBackend(Store())
    backend.apply([rt, trainjob("probed", "probed")], namespace="default", workdir=str(tmp_path), detach=False)
    supervisor = threading.Thread(target=Supervisor(backend.store, "default", "probed").run)
    supervisor.start()

    def pod_row() -> list[str]:
        return kt("get", "pods", "--no-headers")[1].split()[:4]

    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pod_row() == ["probed-node-0-0", "0/1", "Running", "0"]  # running, its probe has not passed
        probe_ok.touch()
        while pod_row()[1] != "1/1" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pod_row() == ["probed-node-0-0", "1/1", "Running", "0"]
    finally:
        stop.touch()
        supervisor.join(60)
        backend.store.close()
    rc, out, _ = kt("get", "pods", "-o", "custom-columns=PHASE:.status.phase,READY:.status.containerStatuses[0].ready")
    assert rc == 0 and out.split() == ["PHASE", "READY", "Succeeded", "false"]


@pytest.mark.parametrize(
    ("state", "exit_code", "restarts", "message", "status", "container_state"),
    [
        ("Pending", None, 0, None, "Pending", None),
        ("Pending", None, 0, "ContainerCreating: mounting volumes", "ContainerCreating", "waiting"),
        ("Pending", None, 2, "exit code 1; back-off 10s restarting failed container", "CrashLoopBackOff", "waiting"),
        ("Running", None, 0, None, "Running", "running"),
        ("Terminating", None, 0, None, "Terminating", "running"),
        ("Succeeded", 0, 0, None, "Completed", "terminated"),
        ("Failed", 3, 6, "exit code 3; job x-node-0 reached backoffLimit=6", "Error", "terminated"),
        ("Failed", None, 0, "its supervisor was lost", "Failed", None),
    ],
)
def test_a_pod_rows_status_as_kubectl_shows_it(
    state: str, exit_code: int | None, restarts: int, message: str | None, status: str, container_state: str | None
) -> None:
    from kubetrain.cli.core_objects import pod_status
    from kubetrain.local import pod_objects
    from kubetrain.local.plan import build_plan

    jobset = {"metadata": {"name": "x"}, "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
        "template": {"spec": {"containers": [{"name": "node", "image": "i"}, {"name": "side", "image": "i"}]}}}}}]}}
    (plan,) = build_plan(jobset).pods()
    p = PodRow("default", "x", "node-0-0", "node", state, None, None, exit_code, restarts, message, "/l")
    assert pod_objects.pod_status_column(p) == status
    pod = {"metadata": {"deletionTimestamp": "t"} if state == "Terminating" else {},
           "status": pod_objects._status(p, plan, "2026-01-01T00:00:00Z")}
    assert pod_status(pod) == status  # what `get pods` prints from the object, on both backends
    statuses = pod["status"]["containerStatuses"]
    assert [next(iter(cs["state"])) for cs in statuses] == ([container_state] * 2 if container_state else [])
    assert sum(cs["restartCount"] for cs in statuses) == (restarts if container_state else 0)


def test_a_pod_waiting_for_the_local_scheduler_reads_as_an_unschedulable_pod() -> None:
    """``kubectl``'s view of a pod no node can take: PodScheduled False, Unschedulable, kube-scheduler's words
    (read here by the same code that reads a cluster's pods)."""
    from kubetrain.k8s.pods.steps import _waiting_reason
    from kubetrain.local import pod_objects
    from kubetrain.local.plan import build_plan

    jobset = {"metadata": {"name": "x"}, "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
        "template": {"spec": {"containers": [{"name": "node", "image": "i"}]}}}}}]}}
    (plan,) = build_plan(jobset).pods()
    waiting = "Insufficient nvidia.com/gpu: needs 1, 0 of 1 free; in use by default/a; position 1 in the local queue"
    p = PodRow("default", "x", "node-0-0", "node", "Pending", None, None, None, 0, waiting, "/l")
    pod = {"metadata": {}, "spec": {}, "status": pod_objects._status(p, plan, "2026-01-01T00:00:00Z")}
    assert pod["status"]["phase"] == "Pending"
    expected = f"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. ({waiting})"
    assert _waiting_reason(pod) == ("Unschedulable", expected)
    running = PodRow("default", "x", "node-0-0", "node", "Running", None, None, None, 0, None, "/l")
    conditions = pod_objects._status(running, plan, "2026-01-01T00:00:00Z")["conditions"]
    assert {"type": "PodScheduled", "status": "True"} in conditions
