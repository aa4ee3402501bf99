"""Gang scheduling for real: a runtime with ``podGroupPolicy.coscheduling`` and pods handed to scheduler-plugins'
Coscheduling scheduler, running as a second scheduler (docs/install.md, "Gang scheduling").

Needs a cluster with real pods, kubetrain's operator installed (``manifests/overlays``, docs/install.md),
the PodGroup CRD (``scheduling.x-k8s.io``) and scheduler-plugins' scheduler named ``SCHEDULER`` holding its
leader-election Lease (how the tests know it runs). Skipped with the reason when one is missing.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kubetrain.api.quantity import Quantity
from kubetrain.k8s.client import Client, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import call, delete_namespace, get, uniq, wait_until

pytestmark = pytest.mark.e2e

IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
SCHEDULER = os.environ.get("KUBETRAIN_E2E_GANG_SCHEDULER", "scheduler-plugins-scheduler")
SCHEDULER_NAMESPACE = os.environ.get("KUBETRAIN_E2E_GANG_SCHEDULER_NAMESPACE", "scheduler-plugins")
LEASE = r.LEASE
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
TIMEOUT = 15  # the runtime's scheduleTimeoutSeconds


def _missing() -> str | None:
    if get(r.CRD, "podgroups.scheduling.x-k8s.io", None) is None:
        return "the PodGroup CRD (scheduling.x-k8s.io, scheduler-plugins) is not installed"
    lease = get(LEASE, SCHEDULER, SCHEDULER_NAMESPACE) or {}
    renewed = (lease.get("spec") or {}).get("renewTime")
    if not renewed:
        return f"no scheduler {SCHEDULER!r} runs (no Lease {SCHEDULER_NAMESPACE}/{SCHEDULER}): see docs/install.md"
    age = dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(renewed.replace("Z", "+00:00"))
    if age > dt.timedelta(minutes=2):
        return f"scheduler {SCHEDULER!r} last renewed its Lease {int(age.total_seconds())} s ago: not running"
    operator = get(DEPLOYMENT, "kubetrain-operator", "kubeflow-system") or {}
    if not (operator.get("status") or {}).get("availableReplicas"):
        return "kubetrain's operator is not installed in the cluster (docs/install.md: manifests/overlays/manager)"
    return None


@pytest.fixture
def gang_ns(kubeconfig: str) -> Iterator[str]:
    missing = _missing()
    if missing:
        pytest.skip(missing)
    ns = uniq("kt-gang")

    async def setup(client: Client) -> None:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await client.apply(gang_runtime(ns, TIMEOUT))

    call(setup)
    try:
        yield ns
    finally:
        delete_namespace(ns)


def gang_runtime(ns: str, timeout: int, tolerations: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The TrainingRuntime ``gang``: two torch nodes that the coscheduling scheduler binds together or not at all."""
    pod: dict[str, Any] = {
        # The runtime names the gang scheduler (the coscheduling plugin sets none).
        "schedulerName": SCHEDULER,
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "node", "image": IMAGE}],
    }
    if tolerations:
        pod["tolerations"] = list(tolerations)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "gang", "namespace": ns, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": timeout}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": pod}},
                },
            }]}},
        },
    }  # fmt: skip


def _trainjob(ns: str, name: str, cpu: str, seconds: int = 2) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": "gang", "kind": "TrainingRuntime"},
            "trainer": {
                "command": ["sh", "-c", f"echo rank $PET_NODE_RANK; sleep {seconds}"],
                "resourcesPerNode": {"requests": {"cpu": cpu, "memory": "32Mi"}},
            },
        },
    }
    call(lambda c: c.create(body))


def _pods(ns: str, name: str) -> list[dict[str, Any]]:
    async def go(client: Client) -> list[dict[str, Any]]:
        items, _ = await client.list(r.POD, ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        return items

    result: list[dict[str, Any]] = call(go)
    return result


def _events(ns: str, pod: str) -> list[dict[str, Any]]:
    async def go(client: Client) -> list[dict[str, Any]]:
        items, _ = await client.list(r.EVENT, ns, field_selector=f"involvedObject.name={pod}")
        return items

    result: list[dict[str, Any]] = call(go)
    return result


def _finished(ns: str, name: str) -> str | None:
    tj = get(r.TRAINJOB, name, ns) or {}
    for c in (tj.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return str(c["type"])
    return None


def _node_cpu() -> Quantity:
    async def go(client: Client) -> str:
        items, _ = await client.list(NODE)
        return str(items[0]["status"]["allocatable"]["cpu"])

    return Quantity.parse(call(go))


def test_a_gang_that_fits_is_scheduled_together_by_the_gang_scheduler_and_runs(gang_ns: str) -> None:
    _trainjob(gang_ns, "fits", cpu="100m")
    pg = wait_until(lambda: get(r.COSCHEDULING_PODGROUP, "fits", gang_ns), 60, "PodGroup")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["scheduleTimeoutSeconds"] == TIMEOUT
    pods = wait_until(lambda: (p := _pods(gang_ns, "fits")) and all(x["spec"].get("nodeName") for x in p) and p,
                      120, "both pods bound")  # fmt: skip
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["schedulerName"] == SCHEDULER
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "fits"
        scheduled = [e for e in _events(gang_ns, pod["metadata"]["name"]) if e.get("reason") == "Scheduled"]
        assert scheduled and all(
            (e.get("reportingComponent") or (e.get("source") or {}).get("component")) == SCHEDULER for e in scheduled
        ), scheduled
    assert wait_until(lambda: _finished(gang_ns, "fits"), 180, "Complete") == "Complete"
    # scheduler-plugins' PodGroup controller saw the gang through.
    phase = wait_until(lambda: ((get(r.COSCHEDULING_PODGROUP, "fits", gang_ns) or {}).get("status") or {}).get("phase")
                       in ("Running", "Finished") and True, 60, "PodGroup Running/Finished")  # fmt: skip
    assert phase


def test_a_gang_that_does_not_fit_stays_wholly_pending(gang_ns: str) -> None:
    # Each pod asks for more than half the node: one would fit alone, the pair never does.
    cpu = _node_cpu()
    per_pod = f"{int(cpu.value * 1000 * 0.6)}m"
    _trainjob(gang_ns, "too-big", cpu=per_pod)
    wait_until(lambda: len(_pods(gang_ns, "too-big")) == 2, 60, "both pods created")

    def rejected() -> list[dict[str, Any]]:
        out = []
        for pod in _pods(gang_ns, "too-big"):
            conds = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
            sched = conds.get("PodScheduled")
            if sched and sched["status"] == "False" and sched.get("reason") == "Unschedulable":
                out.append(pod)
        return out if len(out) == 2 else []

    pods = wait_until(rejected, 120, "the gang scheduler to reject both pods")
    # The gang scheduler turned them down as a group; the default scheduler would have placed one of them.
    for pod in pods:
        assert not pod["spec"].get("nodeName")
        failed = [e for e in _events(gang_ns, pod["metadata"]["name"]) if e.get("reason") == "FailedScheduling"]
        # Coscheduling's PreFilter: the gang's minResources (kubetrain sums the pods' requests) exceed what the
        # cluster has free, or a sibling was turned down with it.
        messages = " ".join(e.get("message") or "" for e in failed)
        assert "resource gap" in messages or "PodGroup" in messages, messages
    # A gang that fits still runs to completion meanwhile (the waiting one blocks nobody); the big one has no pod
    # bound after it, and its PodGroup never ran.
    _trainjob(gang_ns, "small", cpu="100m")
    assert wait_until(lambda: _finished(gang_ns, "small"), 180, "the small gang Complete") == "Complete"
    assert not any(p["spec"].get("nodeName") for p in _pods(gang_ns, "too-big"))
    assert _finished(gang_ns, "too-big") is None
    pg_status = (get(r.COSCHEDULING_PODGROUP, "too-big", gang_ns) or {}).get("status") or {}
    # The controller has it as Pending or Scheduling (pods exist, none bound), never Scheduled or Running.
    assert pg_status.get("phase") in (None, "Pending", "Scheduling"), pg_status
    assert not pg_status.get("scheduled") and not pg_status.get("running"), pg_status

