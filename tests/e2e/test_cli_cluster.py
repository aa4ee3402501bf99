"""The CLI against the bed (issue #13): ``run`` waits, explains and streams the pods' real logs, ``get`` shows the
state with the scheduler's and kubelet's reasons, ``describe`` lists the events of every owned object, ``wait``
follows conditions, ``logs -f`` waits for pods and follows them to the end."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    SLEEP,
    DeployedOperator,
    call,
    get,
    kubetrain,
    pod_spec,
    pods_of,
    sh,
    torch_runtime,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = pytest.mark.e2e
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def write(tmp_path: Path, *docs: dict[str, Any]) -> str:
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def test_run_streams_the_pods_logs_and_ends_with_the_jobs_result(
    kubeconfig: str, namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    rt, name = uniq("rt"), uniq("tj")
    script = 'echo "hello from node $PET_NODE_RANK"; sleep 3; echo "node $PET_NODE_RANK done"'
    tj = trainjob(name, namespace, rt, trainer=sh(script, numNodes=2))
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), tj)
    done = kubetrain("run", "-f", f, "-n", namespace, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    title = f"trainjob {namespace}/{name}"
    assert f"{title}: Running (2/2 trainer pods running)" in done.stderr
    assert done.stderr.rstrip().endswith(f"{title}: Complete (AllJobsCompleted: jobset completed successfully)")
    for rank in (0, 1):
        # One Job (node-0) with a pod per node: the prefix is [job/completion index].
        assert f"[node-0/{rank}] hello from node {rank}\n" in done.stdout, done.stdout
        assert f"[node-0/{rank}] node {rank} done\n" in done.stdout, done.stdout
    waited = kubetrain("wait", "trainjob", name, "--for=condition=Complete", "--timeout=60s", "-n", namespace)
    assert "condition met" in waited.stdout


def test_run_explains_a_pod_the_kubelet_cannot_start(
    namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    rt, name = uniq("rt"), uniq("tj")
    spec = pod_spec()
    spec["containers"][0]["image"] = "localhost/kt-e2e-no-such-image:1"
    f = write(tmp_path, torch_runtime(rt, namespace=namespace, spec=spec), trainjob(name, namespace, rt))
    done = kubetrain("run", "-f", f, "-n", namespace, "--timeout", "90s", timeout=300, check=False)
    assert done.returncode == 124, done.stderr
    flat = " ".join(done.stderr.split())
    assert f"trainjob {namespace}/{name}: Pending (" in flat and "localhost/kt-e2e-no-such-image:1" in flat, flat
    assert "ErrImagePull" in flat or "ImagePullBackOff" in flat, flat
    assert f"timed out after 90s waiting for trainjob {namespace}/{name}; state then: Pending (" in flat, flat
    assert get(r.TRAINJOB, name, namespace) is not None  # on a cluster the job keeps running
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))


def test_run_names_the_missing_jobset_when_no_operator_acts(
    namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    """A TrainJob managed by another controller (MultiKueue) gets no JobSet from this operator: ``run`` says so."""
    rt, name = uniq("rt"), uniq("tj")
    tj = trainjob(name, namespace, rt, trainer=sh("true"), managedBy="kueue.x-k8s.io/multikueue")
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), tj)
    done = kubetrain("run", "-f", f, "-n", namespace, "--timeout", "45s", timeout=300, check=False)
    assert done.returncode == 124, done.stderr
    flat = " ".join(done.stderr.split())
    assert f"waiting for trainjob {namespace}/{name}; state then: Created (NoPods: no JobSet yet" in flat, flat
    assert "is the kubetrain or Kubeflow Trainer operator running?" in flat, flat
    again = kubetrain("run", "-f", f, "-n", namespace, "--timeout", "1s", "--delete-on-timeout", check=False)
    assert again.returncode == 124 and "deleted it (--delete-on-timeout)" in again.stderr
    wait_until(lambda: get(r.TRAINJOB, name, namespace) is None, 60, "TrainJob deleted")


def test_get_and_describe_say_why_a_pod_waits_for_the_scheduler(namespace: str, operator: DeployedOperator) -> None:
    rt, name = uniq("rt"), uniq("tj")
    call(lambda c: c.apply(torch_runtime(rt, namespace=namespace)))
    huge = sh(SLEEP, resourcesPerNode={"requests": {"cpu": "512"}})
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=huge)))

    def unschedulable() -> str | None:
        out = kubetrain("get", "trainjob", name, "-o", "wide", "-n", namespace).stdout
        return out if "Unschedulable" in out else None

    out = wait_until(unschedulable, 180, "the scheduler's verdict")
    assert "Pending" in out and "Insufficient cpu" in out, out
    desc = kubetrain("describe", "trainjob", name, "-n", namespace).stdout
    assert "FailedScheduling" in desc and "Insufficient cpu" in desc, desc
    assert "SuccessfulCreate" in desc, desc  # the Job controller's event on the JobSet's Job
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))


def test_logs_follow_waits_for_pods_and_ends_with_the_job(
    kubeconfig: str, namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    rt, name = uniq("rt"), uniq("tj")
    script = "for i in 1 2 3; do echo step $i; sleep 1; done"
    f = write(tmp_path, torch_runtime(rt, namespace=namespace), trainjob(name, namespace, rt, trainer=sh(script)))
    kubetrain("apply", "-f", f, "-n", namespace)
    # Started before the pod exists: it waits, then follows the pod to the job's end.
    follow = subprocess.Popen(
        [*KUBETRAIN, "logs", name, "-f", "--kubeconfig", kubeconfig, "-n", namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = follow.communicate(timeout=300)
    finally:
        if follow.poll() is None:
            follow.send_signal(signal.SIGINT)
            follow.communicate(timeout=30)
    assert follow.returncode == 0, err
    assert out == "step 1\nstep 2\nstep 3\n", out
    assert "Traceback" not in err


def test_wait_and_delete(kubeconfig: str, namespace: str, operator: DeployedOperator) -> None:
    rt, name = uniq("rt"), uniq("tj")
    call(lambda c: c.apply(torch_runtime(rt, namespace=namespace)))
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP))))
    wait_until(lambda: pods_of(name, namespace), 120, "a pod")
    timed_out = kubetrain("wait", "trainjob", name, "--for=condition=Complete", "--timeout=2s", "-n", namespace,
                          check=False)  # fmt: skip
    assert timed_out.returncode == 1 and f"timed out waiting for the condition on trainjobs/{name}" in timed_out.stderr
    waiter = subprocess.Popen(
        [*KUBETRAIN, "wait", "tj", name, "--for=delete", "--timeout=120s", "-n", namespace,
         "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    d = kubetrain("delete", "trainjob", name, "not-there", "-n", namespace, check=False)
    assert d.returncode == 1 and f'"{name}" deleted' in d.stdout and '"not-there" not found' in d.stderr
    wout, werr = waiter.communicate(timeout=180)
    assert waiter.returncode == 0, werr
    assert wout == f"trainjob.trainer.kubeflow.org/{name} condition met\n"
    wait_until(lambda: not pods_of(name, namespace), 120, "the pod gone with its TrainJob")


def test_a_finished_job_is_complete_for_wait(namespace: str, operator: DeployedOperator) -> None:
    rt, name = uniq("rt"), uniq("tj")
    call(lambda c: c.apply(torch_runtime(rt, namespace=namespace)))
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh("true"))))
    wait_finished(name, namespace)
    got = kubetrain("get", "trainjob", name, "-n", namespace).stdout
    assert "Complete" in got.splitlines()[1], got
