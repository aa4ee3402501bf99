"""MultiKueue across two real clusters: TrainJobs created on a manager cluster run on the bed (the worker).

The manager (``KUBETRAIN_E2E_MANAGER_KUBECONFIG``) is a control plane with no nodes, running kubetrain's operator and
Kueue with a ClusterQueue whose admission check is MultiKueue's; the worker (``KUBETRAIN_E2E_KUBECONFIG``, the bed)
runs its own Kueue and kubetrain's installed operator, with a ClusterQueue of the same name.
``hack/bed/multikueue.sh up`` sets all of that up on this machine (docs/kueue.md, "MultiKueue"). Both clusters get,
per test, a namespace of the same name with the same LocalQueue and TrainingRuntime, as MultiKueue expects.

What a user would try: a TrainJob created on the manager with the LocalQueue's label gets ``spec.managedBy:
kueue.x-k8s.io/multikueue`` from Kueue's webhook, runs on the worker with real pods, shows the worker's conditions
and jobsStatus on the manager, and ``kubetrain get``/``describe`` on the manager say which worker runs it; the
manager's operator builds no JobSet for it (while it does for a TrainJob of its own); deleting it on the manager
removes it from the worker. Skipped, with the reason, without a manager cluster or without the MultiKueue objects.
``KUBETRAIN_E2E_MULTIKUEUE_QUEUE`` names the ClusterQueue (default ``multikueue``, the script's).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import IMAGE, REPO, SA, call, uniq, wait_until

pytestmark = pytest.mark.e2e

MANAGER = os.environ.get("KUBETRAIN_E2E_MANAGER_KUBECONFIG")
WORKER = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
QUEUE = os.environ.get("KUBETRAIN_E2E_MULTIKUEUE_QUEUE", "multikueue")
MK = "kueue.x-k8s.io/multikueue"
KUEUE = "kueue.x-k8s.io"
CLUSTER_QUEUE = Resource(KUEUE, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUE = Resource(KUEUE, "v1beta2", "localqueues", "LocalQueue")
ADMISSION_CHECK = Resource(KUEUE, "v1beta2", "admissionchecks", "AdmissionCheck", namespaced=False)
MK_CONFIG = Resource(KUEUE, "v1beta2", "multikueueconfigs", "MultiKueueConfig", namespaced=False)
MK_CLUSTER = Resource(KUEUE, "v1beta2", "multikueueclusters", "MultiKueueCluster", namespaced=False)
WORKLOAD = Resource(KUEUE, "v1beta2", "workloads", "Workload")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"

NO_MANAGER = (
    "no MultiKueue manager cluster: set KUBETRAIN_E2E_MANAGER_KUBECONFIG "
    "(hack/bed/multikueue.sh up makes one on the bed's machine)"
)
if not MANAGER:
    pytestmark = [pytestmark, pytest.mark.skip(reason=NO_MANAGER)]


def on(kubeconfig: str | None, res: Resource, name: str, ns: str | None) -> dict[str, Any] | None:
    async def go(client: Client) -> dict[str, Any] | None:
        try:
            return await client.get(res, name, ns)
        except NotFound:
            return None

    result: dict[str, Any] | None = call(go, kubeconfig)
    return result


def listed(kubeconfig: str | None, res: Resource, ns: str | None, selector: str | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = call(lambda c: c.list(res, ns, label_selector=selector), kubeconfig)[0]
    return items


def conditions_of(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def active(kubeconfig: str | None, res: Resource, name: str) -> bool:
    return conditions_of(on(kubeconfig, res, name, None)).get("Active", {}).get("status") == "True"


def kubetrain_on_manager(*args: str) -> str:
    """The ``kubetrain`` CLI of this checkout against the manager."""
    assert MANAGER
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", *args, "--kubeconfig", MANAGER],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"},
    )  # fmt: skip
    assert done.returncode == 0, f"kubetrain {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def workers(bed: str) -> list[str]:
    """The worker clusters the manager's MultiKueue ClusterQueue dispatches to (after checking it is all there)."""
    assert MANAGER
    try:
        cq = on(MANAGER, CLUSTER_QUEUE, QUEUE, None)
    except ApiError as exc:  # unreachable, or no Kueue CRDs on it
        pytest.skip(f"the manager cluster ({MANAGER}) has no Kueue ClusterQueues to read: {exc}")
    if cq is None:
        pytest.skip(f"no ClusterQueue {QUEUE} on the manager: hack/bed/multikueue.sh up")
    checks = [c["name"] for c in ((cq["spec"].get("admissionChecksStrategy") or {}).get("admissionChecks") or [])]
    mk = [on(MANAGER, ADMISSION_CHECK, c, None) or {} for c in checks]
    mk = [c for c in mk if (c.get("spec") or {}).get("controllerName") == MK]
    if not mk:
        pytest.skip(f"ClusterQueue {QUEUE} on the manager has no MultiKueue admission check")
    config = on(MANAGER, MK_CONFIG, mk[0]["spec"]["parameters"]["name"], None) or {}
    clusters = list((config.get("spec") or {}).get("clusters") or [])
    for name in clusters:
        if not active(MANAGER, MK_CLUSTER, name):
            pytest.skip(f"MultiKueueCluster {name} is not connected (Active) on the manager")
    if on(WORKER, CLUSTER_QUEUE, QUEUE, None) is None:
        pytest.skip(f"no ClusterQueue {QUEUE} on the worker (the bed): hack/bed/multikueue.sh up")
    lease = on(MANAGER, r.LEASE, "kubetrain-operator", "kubeflow-system")
    if not (lease or {}).get("spec", {}).get("holderIdentity"):
        pytest.skip("no kubetrain operator holds its Lease on the manager (hack/bed/multikueue.sh starts one)")
    return clusters


def runtime(ns: str) -> dict[str, Any]:
    pod = {
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "node", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}],
    }
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": pod}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "sh", "namespace": ns, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


class Pair:
    """A namespace of the same name on both clusters, each with LocalQueue ``team`` on ClusterQueue ``QUEUE`` and
    TrainingRuntime ``sh`` (MultiKueue copies a TrainJob into the same namespace; its runtime must be there too)."""

    def __init__(self) -> None:
        self.ns = uniq("kt-mk")
        for kc in (MANAGER, WORKER):
            self._setup(kc)
        # Pods on the worker need its default ServiceAccount, which kube-controller-manager makes a moment later.
        wait_until(lambda: on(WORKER, SA, "default", self.ns), 60, f"the default ServiceAccount of {self.ns}")

    def _setup(self, kc: str | None) -> None:
        async def go(client: Client) -> None:
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
            lq = {"apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "team", "namespace": self.ns}, "spec": {"clusterQueue": QUEUE}}  # fmt: skip
            await client.create(lq, resource=LOCAL_QUEUE)
            await client.create(runtime(self.ns))

        call(go, kc)

    def trainjob(self, name: str, script: str, nodes: int = 1) -> None:
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": self.ns, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {
                "runtimeRef": {"name": "sh", "kind": "TrainingRuntime"},
                "trainer": {"numNodes": nodes, "command": ["sh", "-c", script],
                            "resourcesPerNode": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
            },
        }  # fmt: skip
        call(lambda c: c.create(body), MANAGER)

    def manager_job(self, name: str) -> dict[str, Any] | None:
        return on(MANAGER, r.TRAINJOB, name, self.ns)

    def worker_job(self, name: str) -> dict[str, Any] | None:
        return on(WORKER, r.TRAINJOB, name, self.ns)

    def worker_pods(self, name: str) -> list[dict[str, Any]]:
        return listed(WORKER, r.POD, self.ns, f"{JOBSET_NAME}={name}")

    def running(self, name: str, n: int) -> list[dict[str, Any]] | None:
        pods = [p for p in self.worker_pods(name) if p["status"].get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]  # fmt: skip
        return pods if len(pods) >= n else None

    def workload(self, name: str) -> dict[str, Any] | None:
        uid = (self.manager_job(name) or {}).get("metadata", {}).get("uid")
        found = listed(MANAGER, WORKLOAD, self.ns, f"kueue.x-k8s.io/job-uid={uid}") if uid else []
        return found[0] if found else None

    def explain(self, name: str) -> str:
        mj, wj = self.manager_job(name) or {}, self.worker_job(name) or {}
        pods = [(p["metadata"]["name"], p["status"].get("phase")) for p in self.worker_pods(name)]
        return "\n".join([
            f"manager TrainJob status: {mj.get('status')}",
            f"manager Workload status: {(self.workload(name) or {}).get('status')}",
            f"worker TrainJob: {wj.get('metadata', {}).get('labels')} {wj.get('status')}",
            f"worker pods: {pods}",
        ])  # fmt: skip

    def cleanup(self) -> None:
        for kc in (MANAGER, WORKER):

            async def go(client: Client) -> None:
                try:
                    await client.delete(r.NAMESPACE, self.ns)
                except ApiError:
                    pass

            call(go, kc)


@pytest.fixture
def pair(workers: list[str]) -> Iterator[Pair]:
    p = Pair()
    try:
        yield p
    finally:
        p.cleanup()


def test_a_trainjob_created_on_the_manager_runs_on_the_worker_and_shows_there_and_back(
    pair: Pair, workers: list[str]
) -> None:
    pair.trainjob("far", SLEEP, nodes=2)
    # Kueue's webhook on the manager hands it to MultiKueue.
    assert (pair.manager_job("far") or {})["spec"].get("managedBy") == MK
    # The worker gets a copy (no managedBy: its own operator runs it) and real pods.
    pods = wait_until(lambda: pair.running("far", 2), 180, "2 pods Running on the worker", lambda: pair.explain("far"))
    copy = pair.worker_job("far") or {}
    assert copy["spec"].get("managedBy") in (None, "trainer.kubeflow.org/trainjob-controller")
    assert "kueue.x-k8s.io/multikueue-origin" in copy["metadata"]["labels"]
    assert all(p["spec"].get("nodeName") for p in pods)
    # The manager's Workload names the worker, and Kueue copies the worker's status back to the manager.
    wl = wait_until(lambda: (pair.workload("far") or {}).get("status", {}).get("clusterName") and pair.workload("far"),
                    60, "the manager's Workload to name its worker", lambda: pair.explain("far"))  # fmt: skip
    cluster = wl["status"]["clusterName"]
    assert cluster in workers

    def mirrored() -> bool:
        # jobsStatus counts the worker JobSet's Jobs: one "node" Job with both pods, ready once they are.
        js = ((pair.manager_job("far") or {}).get("status") or {}).get("jobsStatus") or []
        worker_js = ((pair.worker_job("far") or {}).get("status") or {}).get("jobsStatus") or []
        return js == worker_js and any(j["name"] == "node" and j.get("ready") == 1 for j in js)

    wait_until(mirrored, 120, "the worker's jobsStatus (node ready) on the manager", lambda: pair.explain("far"))
    manager_conds = conditions_of(pair.manager_job("far"))
    worker_conds = conditions_of(pair.worker_job("far"))
    assert set(manager_conds) == set(worker_conds), (manager_conds, worker_conds)

    # kubetrain on the manager says where it runs.
    rows = [line.split() for line in kubetrain_on_manager("get", "trainjob", "far", "-n", pair.ns).splitlines()]
    assert rows[0][:4] == ["NAME", "RUNTIME", "STATE", "CLUSTER"], rows
    assert rows[1][:4] == ["far", "sh", "Running", cluster], rows
    described = kubetrain_on_manager("describe", "trainjob", "far", "-n", pair.ns)
    assert re.search(rf"Managed by:\s+{re.escape(MK)}", described), described
    assert re.search(rf"Worker cluster:\s+{re.escape(cluster)}\n", described), described
    assert f'on worker cluster "{cluster}"' in described

    # The manager's own operator builds no JobSet for it, while it does for a TrainJob of the manager's own
    # (created now, so the operator has seen the MultiKueue job and its many status changes before it).
    own = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "own", "namespace": pair.ns},
        "spec": {"runtimeRef": {"name": "sh", "kind": "TrainingRuntime"}, "trainer": {"command": ["true"]}},
    }
    call(lambda c: c.create(own), MANAGER)
    wait_until(lambda: on(MANAGER, r.JOBSET, "own", pair.ns), 60, "the manager operator's JobSet for its own job")
    assert on(MANAGER, r.JOBSET, "far", pair.ns) is None

    # Deleting it on the manager removes it, and its pods, from the worker.
    call(lambda c: c.delete(r.TRAINJOB, "far", pair.ns), MANAGER)
    wait_until(lambda: pair.worker_job("far") is None, 120, "the worker's copy deleted", lambda: pair.explain("far"))
    wait_until(lambda: not pair.worker_pods("far"), 120, "the worker's pods deleted")


def test_a_trainjob_that_finishes_on_the_worker_is_complete_on_the_manager(pair: Pair, workers: list[str]) -> None:
    pair.trainjob("short", "echo trained; sleep 1")

    def complete() -> dict[str, Any] | None:
        cond = conditions_of(pair.manager_job("short")).get("Complete")
        return cond if cond and cond["status"] == "True" else None

    cond = wait_until(complete, 240, "Complete on the manager", lambda: pair.explain("short"))
    # The JobSet controller's reason, as the worker's operator copied it from the worker's JobSet.
    assert cond["reason"] == "AllJobsCompleted", cond
    # Kueue marks the manager's Workload finished and then removes the worker's copy with its pods.
    wait_until(lambda: conditions_of(pair.workload("short")).get("Finished", {}).get("status") == "True", 60,
               "the manager's Workload Finished")  # fmt: skip
    wait_until(lambda: pair.worker_job("short") is None, 120, "the worker's copy removed")
    js = (pair.manager_job("short") or {})["status"]["jobsStatus"]
    assert [(j["name"], j["succeeded"]) for j in js] == [("node", 1)]
    rows = [line.split() for line in kubetrain_on_manager("get", "trainjobs", "-n", pair.ns).splitlines()]
    assert rows[1][:4] == ["short", "sh", "Complete", (pair.workload("short") or {})["status"]["clusterName"]]
    assert on(MANAGER, r.JOBSET, "short", pair.ns) is None
