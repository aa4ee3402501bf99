"""``kubetrain get`` and ``describe`` on a MultiKueue manager cluster (the fake API server plays the manager): a
TrainJob with ``spec.managedBy: kueue.x-k8s.io/multikueue`` has no JobSet and no pods there, so where it runs and
how it does come from Kueue's Workload (``status.clusterName``, the admission check) and from the status Kueue
copies back from the worker. Against real clusters: ``tests/e2e/test_multikueue.py``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kubetrain.cli.main import cli
from kubetrain.k8s.backend.cluster import ClusterBackend
from tests.k8s.helpers import trainjob
from tests.k8s.kubelet import Kubelet
from tests.k8s.threaded import Background, background_api

MK = "kueue.x-k8s.io/multikueue"
KUEUE = "kueue.x-k8s.io"
TRAINER = "trainer.kubeflow.org"


def mk_trainjob(name: str) -> dict[str, Any]:
    # As Kueue's webhook leaves it on the manager: managedBy set, suspended until the ClusterQueue admits it.
    tj = trainjob(name, trainer={"numNodes": 2}, managedBy=MK, suspend=True)
    tj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    return tj


def put_workload(bg: Background, tj_name: str, status: dict[str, Any]) -> str:
    """Kueue's Workload for the TrainJob (label and controller reference, as Kueue makes it) with ``status``."""
    store = bg.api.store

    async def go() -> str:
        tj = store.get(TRAINER, "trainjobs", "default", tj_name)
        meta = tj["metadata"]
        wl = {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": f"trainjob-{tj_name}-1a2b3",
                "namespace": "default",
                "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                "ownerReferences": [{"apiVersion": f"{TRAINER}/v1alpha1", "kind": "TrainJob", "name": tj_name,
                                     "uid": meta["uid"], "controller": True}],
            },
            "spec": {"queueName": "team", "podSets": []},
        }  # fmt: skip
        created = store.create(KUEUE, "workloads", "default", wl, "kueue")
        created["status"] = status
        store.replace(KUEUE, "workloads", "default", created["metadata"]["name"], created, "kueue", "status")
        return str(created["metadata"]["name"])

    return str(bg.call(go()))


def copy_worker_status(bg: Background, name: str, status: dict[str, Any]) -> None:
    """What Kueue's TrainJob adapter does: the worker's TrainJob status, copied onto the manager's."""
    store = bg.api.store

    async def go() -> None:
        live = store.get(TRAINER, "trainjobs", "default", name)
        live["status"] = copy.deepcopy(status)
        store.replace(TRAINER, "trainjobs", "default", name, live, "kueue", "status")

    bg.call(go())


ADMITTED = {
    "clusterName": "worker-1",
    "admissionChecks": [
        {"name": "mk", "state": "Ready", "message": 'The workload was admitted on "worker-1"',
         "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ],
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
         "lastTransitionTime": "2026-01-01T00:00:00Z"},
    ],
}  # fmt: skip
RUNNING_ON_WORKER = {
    "conditions": [
        {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "resumed",
         "lastTransitionTime": "2026-01-01T00:00:01Z"}
    ],
    "jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}],
}  # fmt: skip


def test_a_multikueue_trainjob_is_queued_then_running_on_its_worker_with_no_pods_here(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([mk_trainjob("far"), trainjob("near")], namespace="default")
        Kubelet(bg).create_jobset("near")

        # No Workload yet (Kueue has not seen it): held by Kueue's webhook, not "no JobSet yet".
        far, near = (backend.get_trainjob(n, "default") for n in ("far", "near"))
        st = backend.states([far, near])
        assert (st[0].state, st[0].reason) == ("Suspended", "Queued")
        assert 'LocalQueue "team"' in st[0].message and st[0].cluster == ""
        assert (st[1].state, st[1].reason, st[1].cluster) == ("Created", "NoPods", "")

        # Dispatched: the manager's Workload names the worker before the worker has reported anything.
        put_workload(bg, "far", ADMITTED)
        st = backend.states([backend.get_trainjob("far", "default")])[0]
        assert (st.state, st.reason, st.cluster) == ("Created", "Dispatched", "worker-1")

        # The worker's status arrives: its trainer Job (both pods) ready there, so Running, though no pod is here.
        copy_worker_status(bg, "far", RUNNING_ON_WORKER)
        st = backend.states([backend.get_trainjob("far", "default")])[0]
        assert st.explain() == 'Running (on worker cluster "worker-1" (node: 1/1 Jobs ready))'
        assert st.cluster == "worker-1"

        d = backend.describe_trainjob("far", "default")
        assert d.extra["Managed by"].startswith(MK)
        assert d.extra["Worker cluster"] == "worker-1"
        assert d.extra["Kueue workload"] == "trainjob-far-1a2b3 (queue team; Admitted=True, QuotaReserved=True)"
        assert d.extra["Admission checks"] == 'mk: Ready (The workload was admitted on "worker-1")'
        assert d.extra["JobSet"].startswith("(none here")
        assert d.state is not None and d.state.state == "Running" and d.steps == []
        backend.close()


def test_the_cli_shows_the_worker_in_get_and_describe_and_keeps_plain_lists_as_they_were(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([mk_trainjob("far"), trainjob("near")], namespace="default")
        put_workload(bg, "far", ADMITTED)
        copy_worker_status(bg, "far", RUNNING_ON_WORKER)
        backend.close()

        def kt(*args: str) -> str:
            result = CliRunner().invoke(cli, [*args, "--kubeconfig", kubeconfig])
            assert result.exit_code == 0, result.output
            return result.stdout

        rows = [line.split() for line in kt("get", "trainjobs").splitlines()]
        assert rows[0] == ["NAME", "RUNTIME", "STATE", "CLUSTER", "PROGRESS", "NODES", "AGE"]
        assert rows[1][:4] == ["far", "torch-distributed", "Running", "worker-1"]
        assert rows[2][:4] == ["near", "torch-distributed", "Created", "-"]
        # Without a MultiKueue job in the list, the columns are kubectl's usual ones.
        assert kt("get", "trainjob", "near").split()[:6] == ["NAME", "RUNTIME", "STATE", "PROGRESS", "NODES", "AGE"]

        out = kt("describe", "trainjob", "far")
        assert "Managed by:" in out and "kueue.x-k8s.io/multikueue" in out
        assert "Worker cluster:" in out and "worker-1" in out
        assert 'The workload was admitted on "worker-1"' in out
        assert "Running (on worker cluster" in out


def test_finished_on_the_worker_stays_finished_here_and_says_where(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([mk_trainjob("far")], namespace="default")
        put_workload(bg, "far", ADMITTED)
        done = {
            "conditions": [{"type": "Complete", "status": "True", "reason": "JobSetCompleted",
                            "message": "jobset completed successfully", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
            "jobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}],
        }  # fmt: skip
        copy_worker_status(bg, "far", done)
        st = backend.states([backend.get_trainjob("far", "default")])[0]
        assert (st.state, st.reason, st.cluster) == ("Complete", "JobSetCompleted", "worker-1")
        backend.close()


def test_without_kueue_workloads_readable_the_state_still_comes_from_the_copied_status(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        bg.api.inject("GET", r"/apis/kueue\.x-k8s\.io/.*/workloads", 403, times=100, reason="Forbidden")
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([mk_trainjob("far")], namespace="default")
        copy_worker_status(bg, "far", RUNNING_ON_WORKER)
        st = backend.states([backend.get_trainjob("far", "default")])[0]
        assert (st.state, st.cluster) == ("Running", "")
        d = backend.describe_trainjob("far", "default")
        assert d.extra["Worker cluster"].startswith("(unknown")
        backend.close()


def test_a_watch_reads_the_workload_so_get_w_and_wait_say_where_too(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([mk_trainjob("far")], namespace="default")
        put_workload(bg, "far", ADMITTED)
        seen = []
        copied = False
        for item in backend.watch_trainjobs("default", names=["far"]):
            if item is None:
                if not copied:  # the initial list is out: now the worker's status arrives
                    copied = True
                    copy_worker_status(bg, "far", RUNNING_ON_WORKER)
                continue
            seen.append((item.state.state, item.state.cluster))
            if item.state.state == "Running":
                break
        assert seen[0] == ("Created", "worker-1")
        assert seen[-1] == ("Running", "worker-1")
        backend.close()
