"""Elastic TrainJobs on the bed: `kubectl scale` through the TrainJob's scale subresource (judged by the installed
webhook), the operator resizing the real JobSet (in place when the JobSet controller allows it, else by re-creating
it), torch elastic workers in real pods seeing the new world size, and the HPA the operator creates from
elasticPolicy.metrics reading that subresource (kube-controller-manager's HPA controller).

The bed's JobSet (v0.8 development build) has no ElasticJobSet feature gate: its webhook keeps ``replicatedJobs``
immutable, so the operator re-creates the JobSet there; the test follows whichever way the operator reports in its
``Scaled`` event and checks what that way promises."""

from __future__ import annotations

import json
import os
import textwrap
from typing import Any

import pytest

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    SLEEP,
    DeployedOperator,
    call,
    describe_pods,
    events_of,
    finished,
    get,
    kubectl,
    kubetrain,
    pod_log,
    pod_spec,
    pods_of,
    sh,
    status,
    torch_runtime,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = pytest.mark.e2e
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}

# A torch elastic worker as users write one: rejoin, say the world size, keep all-reducing until stopped.
WORKER = textwrap.dedent(
    """
    import os, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    print(f"world size {dist.get_world_size()} rank {dist.get_rank()}", flush=True)
    while True:
        t = torch.ones(1)
        dist.all_reduce(t)
        time.sleep(0.5)
    """
)


# Training that ends: a small DDP model on synthetic data for a fixed number of steps after the world last formed
# (a new world restarts the workers, which start over, as code without a checkpoint does), then a clean exit.
TRAIN = textwrap.dedent(
    """
    import time, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    print(f"world size {world} rank {rank}", flush=True)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    for step in range(120):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.5)
    print(f"done in a world of {world} rank {rank}", flush=True)
    dist.destroy_process_group()
    """
)
REPEAT = int(os.environ.get("KUBETRAIN_E2E_ELASTIC_REPEAT", "1"))
"""How many times the 2 -> 3 -> 2 cycle runs (each on a TrainJob of its own): 10 shows it never loses the job."""


def elastic_runtime(name: str, namespace: str, max_nodes: int, metrics: list[dict[str, Any]] | None = None) -> dict:
    spec = pod_spec()
    spec["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    rt = torch_runtime(name, namespace, spec=spec)
    policy: dict[str, Any] = {"minNodes": 1, "maxNodes": max_nodes, "maxRestarts": 3}
    if metrics:
        policy["metrics"] = metrics
    rt["spec"]["mlPolicy"] = {"torch": {"numProcPerNode": 1, "elasticPolicy": policy}}
    return rt


def node_parallelism(name: str, namespace: str) -> int | None:
    js = get(r.JOBSET, name, namespace)
    if js is None:
        return None
    rj = next(x for x in js["spec"]["replicatedJobs"] if x["name"] == "node")
    value = rj["template"]["spec"].get("parallelism")
    return int(value) if value is not None else None


def world_sizes(name: str, ns: str, skip: set[str]) -> list[int]:
    """The world sizes the workers of pods not in ``skip`` (uids) printed."""
    sizes = []
    for pod in pods_of(name, ns):
        if pod["metadata"]["uid"] in skip or pod["status"].get("phase") != "Running":
            continue
        for line in pod_log(pod["metadata"]["name"], ns).splitlines():
            if line.startswith("world size "):
                sizes.append(int(line.split()[2]))
    return sizes


def scaled_event(name: str, ns: str, before: int, after: int) -> str | None:
    for e in events_of("TrainJob", name, ns, "Scaled"):
        if e["message"].startswith(f"trainer nodes {before} -> {after}: "):
            return str(e["message"])
    return None


def test_kubectl_scale_reaches_the_workers_and_out_of_range_is_refused(
    namespace: str, operator: DeployedOperator
) -> None:
    ns, rt, name = namespace, uniq("elastic"), uniq("scaled")
    call(lambda c: c.apply(elastic_runtime(rt, ns, max_nodes=8)))
    trainer = {"command": ["torchrun", "--no-python", "python3", "-c", WORKER], "numNodes": 2}
    call(lambda c: c.create(trainjob(name, ns, rt, trainer=trainer)))
    wait_until(lambda: world_sizes(name, ns, set()).count(2) >= 2, 300, "both workers in a world of 2",
               lambda: describe_pods(name, ns))  # fmt: skip
    first_js = get(r.JOBSET, name, ns)
    assert first_js is not None
    old_pods = {p["metadata"]["uid"] for p in pods_of(name, ns)}

    kubectl("scale", "trainjob/" + name, "-n", ns, "--replicas=3")
    assert (get(r.TRAINJOB, name, ns) or {})["spec"]["trainer"]["numNodes"] == 3
    message = wait_until(lambda: scaled_event(name, ns, 2, 3), 120, "the operator's Scaled event")
    print("Scaled:", message)
    wait_until(lambda: node_parallelism(name, ns) == 3, 120, "the JobSet with 3 nodes")
    js = get(r.JOBSET, name, ns) or {}
    if "re-creating the JobSet" in message:
        assert js["metadata"]["uid"] != first_js["metadata"]["uid"]
        assert status(name, ns)["scaling"]["recreations"] == 1
        skip = old_pods  # every pod is new
    else:
        assert message.endswith("JobSet resized in place"), message
        assert js["metadata"]["uid"] == first_js["metadata"]["uid"]
        skip = set()  # the old pods stay and their agents re-form the group
    explain = lambda: describe_pods(name, ns)  # noqa: E731
    wait_until(lambda: 3 in world_sizes(name, ns, skip), 300, "the workers in a world of 3", explain)

    st = wait_until(lambda: (s := status(name, ns)).get("numNodes") == 3 and s, 120, "status.numNodes 3")
    selector = f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=node"
    assert st["selector"] == selector
    scale = json.loads(kubectl("get", f"trainjob/{name}", "-n", ns, "--subresource=scale", "-o", "json").stdout)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": selector}

    refused = kubectl("scale", f"trainjob/{name}", "-n", ns, "--replicas=9", check=False)
    assert refused.returncode != 0
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in refused.stderr
    assert "spec.trainer.numNodes: must be between elasticPolicy minNodes (1) and maxNodes (8), got 9" in refused.stderr
    assert (get(r.TRAINJOB, name, ns) or {})["spec"]["trainer"]["numNodes"] == 3

    # kubetrain's own verb goes the same way, down.
    before = {p["metadata"]["uid"] for p in pods_of(name, ns)}
    out = kubetrain("scale", "trainjob", name, "--replicas", "2", "-n", ns)
    assert out.stdout == f"trainjob.trainer.kubeflow.org/{name} scaled\n", out.stderr
    wait_until(lambda: node_parallelism(name, ns) == 2, 120, "the JobSet resized to 2 nodes")
    down = scaled_event(name, ns, 3, 2) or ""
    wait_until(
        lambda: world_sizes(name, ns, before if "re-creating" in down else set()).count(2) >= 1,
        300,
        "the workers in a world of 2 again",
        lambda: describe_pods(name, ns),
    )
    call(lambda c: c.delete(r.TRAINJOB, name, ns))


def last_world_sizes(name: str, ns: str, skip: set[str]) -> list[int]:
    """Per pod not in ``skip`` (uids) and not being deleted: the world size its workers printed last."""
    out = []
    for pod in pods_of(name, ns):
        if pod["metadata"]["uid"] in skip or pod["metadata"].get("deletionTimestamp"):
            continue
        lines = pod_log(pod["metadata"]["name"], ns).splitlines()
        sizes = [int(line.split()[2]) for line in lines if line.startswith("world size ")]
        if sizes:
            out.append(sizes[-1])
    return out


def restarts_of(name: str, ns: str) -> dict[str, int]:
    """Container restarts per pod; the log of each restarted container's failed run is printed (why it failed)."""
    out = {}
    for p in pods_of(name, ns):
        pod = p["metadata"]["name"]
        out[pod] = sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or [])
        if out[pod]:
            previous = kubectl("logs", pod, "-n", ns, "--previous", "--tail=15", check=False)
            print(f"--- {pod} before its last restart:\n{previous.stdout}{previous.stderr}")
    return out


def scale_while_training(name: str, ns: str, before: int, after: int) -> bool:
    """``kubectl scale`` from ``before`` to ``after`` nodes, until the workers train in a world of ``after`` on
    ``after`` pods; returns whether the operator re-created the JobSet (else it resized it in place)."""
    old = {p["metadata"]["uid"] for p in pods_of(name, ns)}
    print(f"{name}: restarts before {before} -> {after}: {restarts_of(name, ns)}")
    kubectl("scale", f"trainjob/{name}", "-n", ns, f"--replicas={after}")
    message = wait_until(lambda: scaled_event(name, ns, before, after), 120, f"Scaled {before} -> {after}")
    print(f"{name}: {message[:120]}")
    recreated = "re-creating the JobSet" in message
    skip = old if recreated else set()  # re-created: every pod is new; in place: the old ones re-form too
    wait_until(lambda: last_world_sizes(name, ns, skip) == [after] * after, 300, f"the workers in a world of {after}",
               lambda: describe_pods(name, ns))  # fmt: skip
    assert finished(name, ns) is None, describe_pods(name, ns)  # still training: nothing lost the job on the way
    return recreated


@pytest.mark.parametrize("attempt", range(REPEAT))
def test_scaling_2_3_2_while_training_ends_complete(namespace: str, operator: DeployedOperator, attempt: int) -> None:
    """Real DDP training scaled up and down again: the workers reach each new world size and the job ends
    Complete, whether the JobSet is resized in place or re-created."""
    ns, rt, name = namespace, uniq("elastic"), uniq(f"cycle{attempt}")
    call(lambda c: c.apply(elastic_runtime(rt, ns, max_nodes=4)))
    trainer = {"command": ["torchrun", "--no-python", "python3", "-c", TRAIN], "numNodes": 2}
    call(lambda c: c.create(trainjob(name, ns, rt, trainer=trainer)))
    wait_until(lambda: last_world_sizes(name, ns, set()) == [2, 2], 300, "both workers in a world of 2",
               lambda: describe_pods(name, ns))  # fmt: skip
    recreated = sum([scale_while_training(name, ns, 2, 3), scale_while_training(name, ns, 3, 2)])
    cond = wait_finished(name, ns, timeout=300)
    st = status(name, ns)
    print(f"{name}: {cond['type']} scaling={st.get('scaling')} restarts={restarts_of(name, ns)}")
    assert cond["type"] == "Complete", f"{cond}\n{describe_pods(name, ns)}"
    for pod in pods_of(name, ns):
        assert "done in a world of 2" in pod_log(pod["metadata"]["name"], ns), describe_pods(name, ns)
    if recreated:
        assert st["scaling"]["recreations"] == recreated, st
    call(lambda c: c.delete(r.TRAINJOB, name, ns))


def test_a_static_trainjob_cannot_be_scaled(namespace: str, operator: DeployedOperator) -> None:
    ns, rt, name = namespace, uniq("static"), uniq("fixed")
    call(lambda c: c.apply(torch_runtime(rt, ns)))
    call(lambda c: c.create(trainjob(name, ns, rt, trainer=sh("true", numNodes=1))))
    refused = kubectl("scale", f"trainjob/{name}", "-n", ns, "--replicas=2", check=False)
    assert refused.returncode != 0
    assert (
        "numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, and TrainingRuntime "
        f'"{rt}" has none (numNodes 1 -> 2)'
    ) in refused.stderr


def test_the_hpa_is_created_owned_and_reads_the_scale_subresource(namespace: str, operator: DeployedOperator) -> None:
    ns, rt, name = namespace, uniq("auto"), uniq("auto")
    call(lambda c: c.apply(elastic_runtime(rt, ns, max_nodes=3, metrics=[CPU])))
    # No numNodes: the defaulter sets it (maxNodes), so the scale subresource can be read at all.
    tj = call(lambda c: c.create(trainjob(name, ns, rt, trainer=sh(SLEEP))))
    assert tj["spec"]["trainer"]["numNodes"] == 3
    hpa = wait_until(lambda: get(r.HPA, name, ns), 120, "the HPA")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                             "name": name}  # fmt: skip
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"], hpa["spec"]["metrics"]) == (1, 3, [CPU])
    owner = hpa["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob", name, tj["metadata"]["uid"], True)  # fmt: skip

    def able_to_scale() -> dict[str, Any] | None:
        live = get(r.HPA, name, ns) or {}
        conds = {c["type"]: c for c in (live.get("status") or {}).get("conditions") or []}
        return conds if "AbleToScale" in conds else None

    # kube-controller-manager's HPA controller syncs every 15 s; it reads the TrainJob's scale subresource.
    conds = wait_until(able_to_scale, 180, "the HPA controller to report AbleToScale")
    print(json.dumps(conds, indent=1))
    assert conds["AbleToScale"]["status"] == "True", conds
    assert conds["AbleToScale"]["reason"] in ("SucceededGetScale", "ReadyForNewScale", "SucceededRescale"), conds
    assert (get(r.HPA, name, ns) or {})["status"].get("currentReplicas") == 3  # status.numNodes via the subresource

    async def delete(client: Client) -> None:
        await client.delete(r.TRAINJOB, name, ns)

    call(delete)
    # ownerReference garbage collection (kube-controller-manager) takes the HPA with its TrainJob.
    wait_until(lambda: get(r.HPA, name, ns) is None, 180, "the HPA to be collected with its TrainJob")
