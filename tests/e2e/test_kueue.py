"""Kueue queueing TrainJobs on a real cluster, as a user sets it up (docs/kueue.md): a ResourceFlavor, a
ClusterQueue with a small cpu quota, a LocalQueue, TrainJobs labelled ``kueue.x-k8s.io/queue-name``.

Needs a cluster with real pods, the JobSet controller, kubetrain's operator installed (these tests use that
operator, none of their own) and a running Kueue (``hack/bed/kueue.sh`` builds and runs one from
kubernetes-sigs/kueue). Kueue sees a TrainJob one of two ways, and the tests follow whichever the cluster has:

- **trainjob** mode: Kueue's TrainJob integration (``trainer.kubeflow.org/trainjob``, Kueue v0.14+, on by default
  next to ``jobset.x-k8s.io/jobset``). Kueue suspends the TrainJob itself, owns its one Workload and writes its
  admission into a ``kueue.x-k8s.io/manager`` runtime patch;
- **jobset** mode: only Kueue's JobSet integration. Kueue queues the JobSet that kubetrain labels with the
  TrainJob's queue.

In both, a TrainJob has **exactly one** Workload: every test checks it. Skipped with the reason when something
is missing. Pods run ``KUBETRAIN_E2E_IMAGE`` (default ``localhost/kubetrain-train:dev``, any image with ``sh``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.k8s.client import ApiError, Client, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import call, get, kubetrain, ssa, uniq, wait_until

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
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
TOLERATION = {"key": "kubetrain.dev/e2e-kueue", "operator": "Equal", "value": "flavor", "effect": "NoSchedule"}
POOL_LABEL = "kubetrain.dev/e2e-pool"

# Each pod asks for 300m; the quota (400m) fits one TrainJob, never two.
POD_CPU = "300m"
QUOTA = "400m"


def _kueue_hooks() -> set[str]:
    """Names of the webhooks in Kueue's mutating configurations."""

    async def go(client: Client) -> set[str]:
        items, _ = await client.list(WEBHOOKS)
        return {
            hook.get("name", "")
            for cfg in items
            if "kueue" in cfg["metadata"]["name"]
            for hook in cfg.get("webhooks") or []
        }

    result: set[str] = call(go)
    return result


def _integrations() -> set[str]:
    """Kueue's enabled integrations, as its Configuration says (``hack/bed/kueue.sh`` writes it on this machine),
    else as its webhooks suggest."""
    home = os.environ.get("K8S_HOME") or os.path.expanduser("~/k8s-node")
    config = os.path.join(home, "bed", "kueue", "config.yaml")
    if os.path.exists(config):
        import yaml

        with open(config) as f:
            frameworks = ((yaml.safe_load(f) or {}).get("integrations") or {}).get("frameworks") or []
        return set(frameworks)
    hooks = _kueue_hooks()
    found = {"jobset.x-k8s.io/jobset"} if "mjobset.kb.io" in hooks else set()
    return found | ({"trainer.kubeflow.org/trainjob"} if "mtrainjob.kb.io" in hooks else set())


def _kueue_missing() -> str | None:
    if get(r.CRD, "clusterqueues.kueue.x-k8s.io", None) is None:
        return "Kueue is not installed (no clusterqueues.kueue.x-k8s.io CRD): hack/bed/kueue.sh, docs/kueue.md"
    if not _kueue_hooks():
        return "Kueue runs without its webhooks (no Kueue MutatingWebhookConfiguration)"
    if not _integrations() & {"jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"}:
        return "Kueue runs with neither its TrainJob nor its JobSet integration"
    operator = get(DEPLOYMENT, "kubetrain-operator", "kubeflow-system") or {}
    if not (operator.get("status") or {}).get("availableReplicas"):
        return "kubetrain's operator is not installed in the cluster (docs/install.md)"
    return None


@pytest.fixture(scope="module")
def kueue(kubeconfig: str) -> str:
    """``trainjob`` or ``jobset``: how Kueue sees a TrainJob here, once Kueue and the operator are known to be
    there."""
    missing = _kueue_missing()
    if missing:
        pytest.skip(missing)
    mode = "trainjob" if "trainer.kubeflow.org/trainjob" in _integrations() else "jobset"
    print(f"Kueue integrations: {sorted(_integrations())}; a TrainJob is queued in {mode} mode")
    return mode


def ready_nodes() -> list[str]:
    items: list[dict[str, Any]] = call(lambda c: c.list(NODE))[0]
    return sorted(
        n["metadata"]["name"]
        for n in items
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
        and not n["spec"].get("unschedulable")
    )


class Queues:
    """A namespace with a LocalQueue on its own ClusterQueue and ResourceFlavor (removed afterwards). The flavor
    selects one node by a label of this test's own (the last Ready node, so the second one on a two-node bed) and
    carries a toleration, as a platform admin's flavor for a dedicated pool would."""

    def __init__(self, mode: str, quota: str) -> None:
        self.mode = mode
        self.ns = uniq("kt-kueue")
        self.cq, self.lq, self.flavor = uniq("kt-cq"), "team", uniq("kt-flavor")
        self.node = ready_nodes()[-1]
        self.pool = self.ns  # the node label's value: this test's own
        # The flavor tolerates the node's own taints too (hack/bed/add-node.sh taints the second node so that only
        # pods meant for it land there): then the pods get there only through what Kueue adds.
        node = get(NODE, self.node, None) or {}
        self.tolerations = [TOLERATION] + [
            {"key": t["key"], "operator": "Equal", "value": t.get("value", ""), "effect": t["effect"]}
            for t in node.get("spec", {}).get("taints") or []
            if t.get("effect") in ("NoSchedule", "NoExecute")
        ]
        self.priorities: list[str] = []
        self.label_node(self.pool)
        self.apply(quota)

    def label_node(self, value: str | None) -> None:
        call(lambda c: c.merge_patch(NODE, self.node, None, {"metadata": {"labels": {POOL_LABEL: value}}}))

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
                # Kueue puts these on the admitted pods: a nodeSelector and a toleration.
                "spec": {"nodeLabels": {POOL_LABEL: self.pool}, "tolerations": self.tolerations},
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
                            "spec": {"template": {"spec": {
                                "terminationGracePeriodSeconds": 1,
                                "containers": [{"name": "node", "image": IMAGE,
                                                "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}],
                                # A checkpoint that outlives the pods (preemption resumes from it).
                                "volumes": [{"name": "ckpt", "hostPath": {
                                    "path": f"/tmp/kt-e2e-kueue/{self.ns}", "type": "DirectoryOrCreate"}}],
                            }}},
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

    def trainjob(self, name: str, seconds: int, priority: str | None = None, image: str | None = None) -> None:
        labels = {"kueue.x-k8s.io/queue-name": self.lq}
        if priority:
            labels["kueue.x-k8s.io/priority-class"] = priority
        # Counts to ``seconds`` one step a second, saving the step in the checkpoint volume, and starts from the
        # saved step: a pod that replaces a preempted one resumes where it stopped.
        script = (
            f"f=/ckpt/{name}; s=$(cat $f 2>/dev/null || echo 0); echo started at step $s; "
            f"while [ $s -lt {seconds} ]; do s=$((s+1)); echo $s > $f; sleep 1; done; echo done at step $s"
        )
        body: dict[str, Any] = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": {
                "runtimeRef": {"name": "sh", "kind": "TrainingRuntime"},
                "trainer": {
                    "command": ["sh", "-c", script],
                    "resourcesPerNode": {"requests": {"cpu": POD_CPU, "memory": "64Mi"}},
                },
            },
        }
        if image:
            body["spec"]["trainer"]["image"] = image
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
        self.label_node(None)

    # --- what a user looks at ---

    def get_trainjob(self, name: str) -> dict[str, Any]:
        return get(r.TRAINJOB, name, self.ns) or {}

    def jobset(self, name: str) -> dict[str, Any] | None:
        return get(r.JOBSET, name, self.ns)

    def held(self, name: str) -> bool:
        """Nothing of it runs: in trainjob mode Kueue suspended the TrainJob (and so its JobSet, if any), in jobset
        mode Kueue's webhook suspended the JobSet."""
        js = self.jobset(name)
        if self.mode == "trainjob":
            suspended = self.get_trainjob(name).get("spec", {}).get("suspend") is True
            return suspended and (js is None or js["spec"].get("suspend") is True)
        return js is not None and js["spec"].get("suspend") is True

    def suspended(self, name: str) -> dict[str, Any] | None:
        conds = (self.get_trainjob(name).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Suspended"), None)

    def resumed(self, name: str) -> bool:
        return (self.suspended(name) or {}).get("reason") == "Resumed"

    def finished(self, name: str) -> str | None:
        for c in (self.get_trainjob(name).get("status") or {}).get("conditions") or []:
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

    def log(self, pod: str) -> str:
        async def go(client: Client) -> str:
            return "".join([line + "\n" async for line in client.pod_logs(pod, self.ns)])

        return str(call(go))

    def workloads(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = call(lambda c: c.list(WORKLOAD, self.ns))[0]
        return items

    def workload(self, name: str) -> dict[str, Any] | None:
        """The TrainJob's one Workload. Whichever way Kueue sees it, the TrainJob never has two: in trainjob mode
        it is the TrainJob's and no JobSet of this namespace has one; in jobset mode it is its JobSet's."""
        uid = self.get_trainjob(name).get("metadata", {}).get("uid")
        js = self.jobset(name)
        owners = {uid, js["metadata"]["uid"] if js else None} - {None}
        mine = [
            wl for wl in self.workloads()
            if any(o.get("uid") in owners for o in wl["metadata"].get("ownerReferences") or [])
        ]  # fmt: skip
        assert len(mine) <= 1, f"TrainJob {name} has {len(mine)} Workloads: {[w['metadata']['name'] for w in mine]}"
        if self.mode == "trainjob":
            by_jobsets = [
                wl["metadata"]["name"]
                for wl in self.workloads()
                if any(o.get("kind") == "JobSet" for o in wl["metadata"].get("ownerReferences") or [])
            ]
            assert not by_jobsets, f"Kueue made Workloads for JobSets although it queues their TrainJobs: {by_jobsets}"
        if not mine:
            return None
        owner = mine[0]["metadata"]["ownerReferences"][0]
        assert owner["kind"] == ("TrainJob" if self.mode == "trainjob" else "JobSet"), owner
        return mine[0]

    def workload_condition(self, name: str, type_: str) -> dict[str, Any] | None:
        wl = self.workload(name) or {}
        return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)

    def queued(self, name: str) -> bool:
        """Kueue looked at it and has no quota for it: QuotaReserved False, nothing running."""
        quota = self.workload_condition(name, "QuotaReserved")
        return bool(quota and quota["status"] == "False" and self.held(name))


@pytest.fixture
def queues(kueue: str) -> Iterator[Queues]:
    q = Queues(kueue, quota="0")
    try:
        yield q
    finally:
        q.cleanup()


def test_a_queued_trainjob_waits_without_quota_then_runs_on_the_flavors_node(queues: Queues) -> None:
    queues.trainjob("first", seconds=3)
    # Kueue suspended it at create (the TrainJob in trainjob mode, the JobSet in jobset mode); no quota: it stays so.
    wait_until(lambda: queues.queued("first"), 60, "Kueue to find no quota")
    js = wait_until(lambda: queues.jobset("first"), 60, "JobSet")
    assert js["spec"]["suspend"] is True  # the operator did not start it behind Kueue's back
    cond = wait_until(lambda: queues.suspended("first"), 60, "the TrainJob's Suspended condition")
    assert cond["status"] == "True", cond
    if queues.mode == "jobset":
        assert cond["reason"] == "Queued" and 'LocalQueue "team"' in cond["message"], cond
    else:  # upstream's condition for a suspended TrainJob
        assert cond["reason"] == "Suspended", cond
    assert queues.pods("first") == []
    described = kubetrain("describe", "trainjob", "first", "-n", queues.ns).stdout
    assert "Suspended" in described

    # The admin gives the queue quota: Kueue admits it, the pods run on the flavor's node, it completes.
    queues.apply(QUOTA)
    wait_until(lambda: queues.resumed("first"), 120, "Resumed")
    pod = wait_until(lambda: queues.pods("first"), 60, "pods")[0]
    assert pod["spec"].get("nodeSelector", {}).get(POOL_LABEL) == queues.pool
    assert all(t in (pod["spec"].get("tolerations") or []) for t in queues.tolerations)
    if queues.mode == "trainjob":
        # Kueue's admission reached the pods through its runtime patch on the TrainJob.
        patches = queues.get_trainjob("first")["spec"].get("runtimePatches") or []
        assert [p["manager"] for p in patches] == [KUEUE_MANAGER], patches
    wait_until(lambda: (p := queues.pods("first")) and p[0]["spec"].get("nodeName"), 60, "the pod bound")
    assert queues.pods("first")[0]["spec"]["nodeName"] == queues.node
    assert wait_until(lambda: queues.finished("first"), 180, "Complete") == "Complete"
    wait_until(lambda: queues.workload_condition("first", "Finished"), 60, "the Workload Finished")


def test_a_second_trainjob_queues_behind_the_first(queues: Queues) -> None:
    queues.apply(QUOTA)
    queues.trainjob("one", seconds=15)
    wait_until(lambda: queues.running("one"), 120, "the first TrainJob's pod Running")
    queues.trainjob("two", seconds=3)
    wait_until(lambda: queues.queued("two"), 60, "the second TrainJob queued")
    assert queues.pods("two") == []
    assert queues.finished("one") is None  # it was queued while the first still ran
    assert wait_until(lambda: queues.finished("one"), 180, "first Complete") == "Complete"
    assert wait_until(lambda: queues.finished("two"), 180, "second Complete") == "Complete"
    assert queues.resumed("two")


def test_preemption_stops_a_running_trainjob_which_resumes_from_its_checkpoint(queues: Queues) -> None:
    queues.apply(QUOTA)
    low, high = queues.priority("low", 100), queues.priority("high", 1000)
    queues.trainjob("low", seconds=25, priority=low)
    first_pod = wait_until(lambda: queues.running("low"), 120, "low's pod Running")[0]
    # Let it make progress it can resume from.
    wait_until(lambda: "started at step 0" in queues.log(first_pod["metadata"]["name"]), 60, "low started")
    queues.trainjob("high", seconds=3, priority=high)
    # Kueue evicts low: suspended again, its pods go, it waits in the queue.
    wait_until(lambda: queues.workload_condition("low", "Evicted"), 60, "low evicted")
    wait_until(lambda: queues.held("low"), 60, "low suspended")
    wait_until(lambda: not queues.pods("low"), 120, "low's pods deleted")
    assert wait_until(lambda: queues.finished("high"), 180, "high Complete") == "Complete"
    # Readmitted: new pods, which resume from the checkpoint and run to the end.
    wait_until(lambda: queues.resumed("low"), 120, "low Resumed")
    pod = wait_until(lambda: queues.running("low"), 120, "low's new pod Running")[0]
    assert pod["metadata"]["uid"] != first_pod["metadata"]["uid"]
    assert wait_until(lambda: queues.finished("low"), 240, "low Complete") == "Complete"
    log = queues.log(pod["metadata"]["name"])
    resumed_at = int(log.split("started at step ", 1)[1].split()[0])
    assert resumed_at > 0, log
    assert "done at step 25" in log


def test_kueue_sees_the_pods_ready_from_the_trainjob_status(queues: Queues) -> None:
    """waitForPodsReady (on in hack/bed/kueue.sh): Kueue reads PodsReady from the TrainJob's ``jobsStatus`` in
    trainjob mode, from the JobSet's status in jobset mode."""
    queues.apply(QUOTA)
    queues.trainjob("ready", seconds=20)
    wait_until(lambda: queues.running("ready"), 120, "pod Running")
    cond = wait_until(
        lambda: (c := queues.workload_condition("ready", "PodsReady")) and c["status"] == "True" and c,
        120,
        "the Workload's PodsReady True",
    )
    assert cond["status"] == "True"
    if queues.mode == "trainjob":
        jobs = (queues.get_trainjob("ready").get("status") or {}).get("jobsStatus") or []
        assert any(j["name"] == "node" and (j.get("ready") or 0) + (j.get("succeeded") or 0) >= 1 for j in jobs), jobs


def test_pods_that_never_get_ready_are_evicted_by_waitforpodsready(queues: Queues) -> None:
    """An image that is on no node and in no registry the bed reaches: the kubelet cannot pull it, the pod never
    becomes ready, and Kueue evicts the workload once waitForPodsReady's timeout passes, suspending the TrainJob
    again."""
    timeout = _pods_ready_timeout()
    if timeout is None or timeout > 180:
        pytest.skip(f"Kueue's waitForPodsReady timeout is {timeout} s here; run hack/bed/kueue.sh with "
                    "KUEUE_PODS_READY_TIMEOUT=60s for this test")  # fmt: skip
    queues.apply(QUOTA)
    queues.trainjob("never", seconds=3, image="localhost/kubetrain-e2e-absent:never")
    wait_until(lambda: queues.pods("never"), 120, "the pod created")
    evicted = wait_until(
        lambda: (c := queues.workload_condition("never", "Evicted")) and c["status"] == "True" and c,
        timeout + 120,
        "Kueue to evict the workload whose pods never got ready",
    )
    assert evicted["reason"] == "PodsReadyTimeout", evicted
    wait_until(lambda: queues.held("never"), 60, "the TrainJob held again")


def _pods_ready_timeout() -> float | None:
    home = os.environ.get("K8S_HOME") or os.path.expanduser("~/k8s-node")
    config = os.path.join(home, "bed", "kueue", "config.yaml")
    if not os.path.exists(config):
        return None
    import yaml

    with open(config) as f:
        wfpr = (yaml.safe_load(f) or {}).get("waitForPodsReady") or {}
    text = str(wfpr.get("timeout") or "")
    units = {"s": 1, "m": 60, "h": 3600}
    if not text or text[-1] not in units:
        return None
    return float(text[:-1]) * units[text[-1]]


def test_deleting_a_queued_trainjob_removes_its_workload(queues: Queues) -> None:
    queues.trainjob("gone", seconds=3)
    wl = wait_until(lambda: queues.queued("gone") and queues.workload("gone"), 60, "queued with a Workload")
    call(lambda c: c.delete(r.TRAINJOB, "gone", queues.ns))
    wait_until(lambda: get(r.TRAINJOB, "gone", queues.ns) is None, 60, "the TrainJob deleted")
    wait_until(lambda: get(WORKLOAD, wl["metadata"]["name"], queues.ns) is None, 60, "its Workload deleted")
    assert queues.workloads() == []


def test_stopping_a_queued_trainjob_by_hand(queues: Queues) -> None:
    """jobset mode: ``spec.suspend: true`` on the TrainJob; the operator deactivates the JobSet's Workload, since
    Kueue would resume an admitted JobSet that is merely suspended. trainjob mode: Kueue owns the TrainJob's
    ``spec.suspend``, so a user stops it as any job Kueue manages, by deactivating its Workload
    (``spec.active: false``) and reactivating it later (docs/kueue.md)."""
    queues.apply(QUOTA)
    queues.trainjob("job", seconds=20)
    wait_until(lambda: queues.running("job"), 120, "pod Running")
    workload = (queues.workload("job") or {})["metadata"]["name"]

    def stop(value: bool) -> None:
        if queues.mode == "jobset":
            call(lambda c: c.merge_patch(r.TRAINJOB, "job", queues.ns, {"spec": {"suspend": value}}))
        else:
            call(lambda c: c.merge_patch(WORKLOAD, workload, queues.ns, {"spec": {"active": not value}}))

    stop(True)
    wait_until(lambda: (queues.workload("job") or {}).get("spec", {}).get("active") is False, 60, "Workload inactive")
    wait_until(lambda: not queues.pods("job"), 120, "pods deleted")
    assert queues.held("job")
    expected = "Suspended"
    assert (queues.suspended("job") or {}).get("reason") == expected
    # Kueue does not resume it behind the user's back: still held after Kueue processed the eviction.
    wait_until(lambda: queues.workload_condition("job", "QuotaReserved")["status"] == "False", 60, "quota released")
    assert queues.held("job")
    stop(False)
    wait_until(lambda: queues.resumed("job"), 120, "Resumed")
    assert wait_until(lambda: queues.finished("job"), 240, "Complete") == "Complete"
