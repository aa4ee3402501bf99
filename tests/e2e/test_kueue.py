"""Kueue queueing TrainJobs on a real cluster, as a user sets it up (docs/kueue.md): a ResourceFlavor, a
ClusterQueue with a small cpu quota, a LocalQueue, TrainJobs labelled ``kueue.x-k8s.io/queue-name``.

Needs a cluster with real pods, the JobSet controller, kubetrain's operator installed (``manifests/overlays``,
docs/install.md; these tests use that operator, none of their own) and a running Kueue with its
JobSet integration (``jobset.x-k8s.io/jobset``). Skipped with the reason when one is missing. Pods run
``KUBETRAIN_E2E_IMAGE`` (default ``localhost/kubetrain-train:dev``, any image with ``sh``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import call, get, ssa, uniq, wait_until

pytestmark = pytest.mark.e2e

IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
KUEUE = "kueue.x-k8s.io"
CLUSTER_QUEUE = Resource(KUEUE, "v1beta1", "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUE = Resource(KUEUE, "v1beta1", "localqueues", "LocalQueue")
FLAVOR = Resource(KUEUE, "v1beta1", "resourceflavors", "ResourceFlavor", namespaced=False)
PRIORITY = Resource(KUEUE, "v1beta1", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False)
WORKLOAD = r.KUEUE_WORKLOAD
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "", namespaced=False)

# Each pod asks for 300m; the quota (400m) fits one TrainJob, never two.
POD_CPU = "300m"
QUOTA = "400m"


def _kueue_missing() -> str | None:
    if get(r.CRD, "clusterqueues.kueue.x-k8s.io", None) is None:
        return "Kueue is not installed (no clusterqueues.kueue.x-k8s.io CRD); docs/kueue.md says how"

    async def jobset_hook(client: Client) -> bool:
        items, _ = await client.list(WEBHOOKS)
        return any(
            "jobsets" in rule.get("resources", [])
            for cfg in items
            for hook in cfg.get("webhooks") or []
            if hook.get("name", "").startswith("mjobset") and "kueue" in cfg["metadata"]["name"]
            for rule in hook.get("rules") or []
        )

    if not call(jobset_hook):
        return "Kueue runs without its JobSet integration (no Kueue mutating webhook for jobsets)"
    operator = get(DEPLOYMENT, "kubetrain-operator", "kubeflow-system") or {}
    if not (operator.get("status") or {}).get("availableReplicas"):
        return "kubetrain's operator is not installed in the cluster (docs/install.md: manifests/overlays/manager)"
    return None


@pytest.fixture(scope="module")
def kueue(kubeconfig: str) -> str:
    """The node's name (ResourceFlavor nodeLabels), once Kueue and the operator are known to be there."""
    missing = _kueue_missing()
    if missing:
        pytest.skip(missing)

    async def node(client: Client) -> str:
        items, _ = await client.list(NODE)
        return str(items[0]["metadata"]["name"])

    return str(call(node))


class Queues:
    """A namespace with a LocalQueue on its own ClusterQueue and ResourceFlavor (removed afterwards)."""

    def __init__(self, node: str, quota: str) -> None:
        self.ns = uniq("kt-kueue")
        self.cq, self.lq, self.flavor = uniq("kt-cq"), "team", uniq("kt-flavor")
        self.node = node
        self.priorities: list[str] = []
        self.apply(quota)

    def cq_body(self, quota: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{KUEUE}/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": self.cq},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": self.flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": quota},
                                    {"name": "memory", "nominalQuota": "2Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }

    def apply(self, quota: str) -> None:
        async def go(client: Client) -> None:
            try:
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}})
            except ApiError as exc:
                if exc.status != 409:
                    raise
            flavor = {
                "apiVersion": f"{KUEUE}/v1beta1",
                "kind": "ResourceFlavor",
                "metadata": {"name": self.flavor},
                # Kueue puts these on the admitted pods as a nodeSelector.
                "spec": {"nodeLabels": {"kubernetes.io/hostname": self.node}},
            }
            await ssa(client, flavor, FLAVOR)
            await ssa(client, self.cq_body(quota), CLUSTER_QUEUE)
            lq = {
                "apiVersion": f"{KUEUE}/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": self.lq, "namespace": self.ns},
                "spec": {"clusterQueue": self.cq},
            }
            await ssa(client, lq, LOCAL_QUEUE)
            runtime = {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainingRuntime",
                "metadata": {"name": "sh", "namespace": self.ns, "labels": {"trainer.kubeflow.org/framework": "torch"}},
                "spec": {
                    "mlPolicy": {"numNodes": 1, "torch": {}},
                    "template": {"spec": {"replicatedJobs": [{
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                            "spec": {"template": {"spec": {"terminationGracePeriodSeconds": 1,
                                                           "containers": [{"name": "node", "image": IMAGE}]}}},
                        },
                    }]}},
                },
            }  # fmt: skip
            await client.apply(runtime)

        call(go)
        wait_until(lambda: self.queue_active(), 60, f"ClusterQueue {self.cq} active")

    def queue_active(self) -> bool:
        cq = get(CLUSTER_QUEUE, self.cq, None) or {}
        return any(
            c["type"] == "Active" and c["status"] == "True" for c in (cq.get("status") or {}).get("conditions") or []
        )

    def priority(self, name: str, value: int) -> str:
        full = uniq(f"kt-{name}")
        body = {"apiVersion": f"{KUEUE}/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": full},
                "value": value}  # fmt: skip
        call(lambda c: ssa(c, body, PRIORITY))
        self.priorities.append(full)
        return full

    def trainjob(self, name: str, seconds: int, priority: str | None = None, queue: str | None = None) -> None:
        labels = {"kueue.x-k8s.io/queue-name": queue or self.lq}
        if priority:
            labels["kueue.x-k8s.io/priority-class"] = priority
        body = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": {
                "runtimeRef": {"name": "sh", "kind": "TrainingRuntime"},
                "trainer": {
                    "command": ["sh", "-c", f"echo started; sleep {seconds}; echo done"],
                    "resourcesPerNode": {"requests": {"cpu": POD_CPU, "memory": "64Mi"}},
                },
            },
        }
        call(lambda c: c.create(body))

    def cleanup(self) -> None:
        async def go(client: Client) -> None:
            await client.delete(r.NAMESPACE, self.ns, missing_ok=True)
            # The ClusterQueue goes once its workloads are gone (Kueue's finalizer), then the flavor.
            await client.delete(CLUSTER_QUEUE, self.cq, missing_ok=True)
            for name in self.priorities:
                await client.delete(PRIORITY, name, missing_ok=True)

        call(go)
        wait_until(lambda: get(CLUSTER_QUEUE, self.cq, None) is None, 120, f"ClusterQueue {self.cq} deleted")
        call(lambda c: c.delete(FLAVOR, self.flavor, missing_ok=True))

    # --- what a user looks at ---

    def jobset(self, name: str) -> dict[str, Any] | None:
        return get(r.JOBSET, name, self.ns)

    def suspended(self, name: str) -> dict[str, Any] | None:
        tj = get(r.TRAINJOB, name, self.ns) or {}
        conds = (tj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Suspended"), None)

    def finished(self, name: str) -> str | None:
        tj = get(r.TRAINJOB, name, self.ns) or {}
        for c in (tj.get("status") or {}).get("conditions") or []:
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return str(c["type"])
        return None

    def pods(self, name: str) -> list[dict[str, Any]]:
        async def go(client: Client) -> list[dict[str, Any]]:
            items, _ = await client.list(r.POD, self.ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
            return [p for p in items if not (p.get("metadata") or {}).get("deletionTimestamp")]

        result: list[dict[str, Any]] = call(go)
        return result

    def running(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.pods(name) if (p.get("status") or {}).get("phase") == "Running"]

    def workload(self, name: str) -> dict[str, Any] | None:
        js = self.jobset(name)
        if js is None:
            return None
        uid = js["metadata"]["uid"]

        async def go(client: Client) -> list[dict[str, Any]]:
            try:
                items, _ = await client.list(WORKLOAD, self.ns, label_selector=f"kueue.x-k8s.io/job-uid={uid}")
            except NotFound:
                return []
            return items

        items: list[dict[str, Any]] = call(go)
        return items[0] if items else None

    def workload_condition(self, name: str, type_: str) -> dict[str, Any] | None:
        wl = self.workload(name) or {}
        return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)

    def queued(self, name: str) -> bool:
        """Kueue looked at it and has no quota for it: QuotaReserved False, the JobSet suspended."""
        quota = self.workload_condition(name, "QuotaReserved")
        js = self.jobset(name) or {}
        return bool(quota and quota["status"] == "False" and (js.get("spec") or {}).get("suspend") is True)


@pytest.fixture
def queues(kueue: str) -> Iterator[Queues]:
    q = Queues(kueue, quota="0")
    try:
        yield q
    finally:
        q.cleanup()


def test_a_queued_trainjob_waits_without_quota_then_runs_when_admitted(queues: Queues) -> None:
    queues.trainjob("first", seconds=3)
    # Kueue's webhook suspended the JobSet at create; with no quota it stays suspended, and so says the TrainJob.
    js = wait_until(lambda: queues.jobset("first"), 60, "JobSet")
    assert js["spec"]["suspend"] is True
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
    wait_until(lambda: queues.queued("first"), 60, "Kueue to find no quota")
    cond = wait_until(lambda: queues.suspended("first"), 60, "the TrainJob's Suspended condition")
    assert (cond["status"], cond["reason"]) == ("True", "Queued"), cond
    assert 'LocalQueue "team"' in cond["message"]
    assert queues.pods("first") == []
    assert (queues.jobset("first") or {})["spec"]["suspend"] is True  # the operator did not resume it
    # The admin gives the queue quota: Kueue admits, the JobSet runs on the flavor's node, the TrainJob completes.
    queues.apply(QUOTA)
    wait_until(lambda: (queues.suspended("first") or {}).get("reason") == "Resumed", 120, "Resumed")
    pod = wait_until(lambda: queues.pods("first"), 60, "pods")[0]
    assert pod["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname") == queues.node  # Kueue's podset info
    assert wait_until(lambda: queues.finished("first"), 180, "Complete") == "Complete"
    assert queues.workload_condition("first", "Finished")


def test_a_second_trainjob_queues_behind_the_first(queues: Queues) -> None:
    queues.apply(QUOTA)
    queues.trainjob("one", seconds=15)
    wait_until(lambda: queues.running("one"), 120, "the first TrainJob's pod Running")
    queues.trainjob("two", seconds=3)
    wait_until(lambda: queues.queued("two"), 60, "the second TrainJob queued")
    cond = wait_until(lambda: queues.suspended("two"), 60, "the second TrainJob's Suspended condition")
    assert cond["reason"] == "Queued"
    assert queues.pods("two") == []
    assert queues.finished("one") is None  # it was queued while the first still ran
    assert wait_until(lambda: queues.finished("one"), 180, "first Complete") == "Complete"
    assert wait_until(lambda: queues.finished("two"), 180, "second Complete") == "Complete"
    assert (queues.suspended("two") or {}).get("reason") == "Resumed"


def test_preemption_suspends_a_running_trainjob_and_it_resumes_cleanly(queues: Queues) -> None:
    queues.apply(QUOTA)
    low, high = queues.priority("low", 100), queues.priority("high", 1000)
    queues.trainjob("low", seconds=20, priority=low)
    first_pod = wait_until(lambda: queues.running("low"), 120, "low's pod Running")[0]
    queues.trainjob("high", seconds=3, priority=high)
    # Kueue evicts low: its JobSet is suspended, its pods go, the TrainJob shows it is queued again.
    wait_until(lambda: queues.workload_condition("low", "Evicted"), 60, "low evicted")
    wait_until(lambda: (queues.jobset("low") or {}).get("spec", {}).get("suspend") is True, 60, "low suspended")
    wait_until(lambda: (queues.suspended("low") or {}).get("reason") == "Queued", 60, "low Queued")
    wait_until(lambda: not queues.pods("low"), 120, "low's pods deleted")
    assert wait_until(lambda: queues.finished("high"), 180, "high Complete") == "Complete"
    # Readmitted: new pods, run to the end.
    wait_until(lambda: (queues.suspended("low") or {}).get("reason") == "Resumed", 120, "low Resumed")
    pods = wait_until(lambda: queues.pods("low"), 60, "low's new pods")
    assert pods[0]["metadata"]["uid"] != first_pod["metadata"]["uid"]
    assert wait_until(lambda: queues.finished("low"), 240, "low Complete") == "Complete"


def test_suspending_a_queued_trainjob_by_hand_deactivates_its_workload(queues: Queues) -> None:
    queues.apply(QUOTA)
    queues.trainjob("job", seconds=20)
    wait_until(lambda: queues.running("job"), 120, "pod Running")

    def set_suspend(value: bool) -> None:
        call(lambda c: c.merge_patch(r.TRAINJOB, "job", queues.ns, {"spec": {"suspend": value}}))

    set_suspend(True)
    wait_until(lambda: (queues.workload("job") or {}).get("spec", {}).get("active") is False, 60, "Workload inactive")
    wait_until(lambda: not queues.pods("job"), 120, "pods deleted")
    assert (queues.jobset("job") or {})["spec"]["suspend"] is True
    assert (queues.suspended("job") or {}).get("reason") == "Suspended"
    # Kueue does not resume it behind the user's back: still suspended after Kueue processed the eviction.
    wait_until(lambda: queues.workload_condition("job", "QuotaReserved")["status"] == "False", 60, "quota released")
    assert (queues.jobset("job") or {})["spec"]["suspend"] is True
    set_suspend(False)
    wait_until(lambda: (queues.suspended("job") or {}).get("reason") == "Resumed", 120, "Resumed")
    assert wait_until(lambda: queues.finished("job"), 240, "Complete") == "Complete"
