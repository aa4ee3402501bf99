"""Two nodes: TrainJobs whose pods run on two kubelets, checked by each pod's ``spec.nodeName``.

Needs a cluster with two Ready nodes. On the one-node bed, ``hack/bed/add-node.sh`` adds a second kubelet (its own
containerd, bridge and pod CIDR, in the same network namespace; ``--help`` there). That node carries the taint
``bed.kubetrain.io/extra-node:NoSchedule`` so that other users of a shared bed keep to the main node; the runtimes
here tolerate it, and place pods with a required pod anti-affinity on ``kubernetes.io/hostname`` scoped to each
test's own pods:

- a torch TrainJob (the README quickstart, DDP over gloo, 2 nodes x 2 processes) trains across the two nodes;
- JobSet's exclusive placement (``alpha.jobset.sigs.k8s.io/exclusive-topology: kubernetes.io/hostname``) gives each
  child Job a node of its own. kubetrain, like Kubeflow Trainer, runs a trainer as *one* Indexed Job of numNodes
  pods, so the annotation keeps a TrainJob's trainer pods together on one node and another TrainJob off it: one
  trainer per node, not one pod per node; a third such TrainJob stays Pending. Its anti-affinity spans all
  namespaces but only Jobs of one priority (the pods' ``jobset.sigs.k8s.io/priority`` label): the test runs at a
  PriorityClass of its own (never preempting), so it neither waits for other users' JobSet pods nor blocks them;
- an MPI TrainJob (``deepspeed-distributed``, OpenMPI over SSH) whose launcher starts ranks on a worker pod on the
  other node;
- the extra node dying mid-job (``hack/bed/remove-node.sh --crash``: its kubelet killed, its containers stopped,
  then ``add-node.sh`` to bring it back): a static job records its failed worker and ``kubetrain describe`` names
  the dead node (the job itself cannot end until that node's pod is gone: declared out of service, it fails), and
  an elastic one carries on with the node left, then grows back. These run only as root on the machine of the bed
  with the node added by ``hack/bed/add-node.sh``; ``KUBETRAIN_E2E_BED_LOCK`` names a lock file held (flock) while
  the node is crashed and restored;
- a Coscheduling gang (scheduler-plugins' scheduler, as ``test_coscheduling.py``) whose two pods each ask for just
  over half a node's CPU: placed together, one on each node.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.quantity import Quantity
from kubetrain.k8s.client import Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    IMAGE,
    NODE,
    REPO,
    SLEEP,
    DeployedOperator,
    call,
    conditions,
    describe_pods,
    finished,
    get,
    kubectl,
    kubetrain,
    list_of,
    pod_log,
    pod_spec,
    pods_of,
    ready_nodes,
    torch_runtime,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)
from tests.e2e.test_elastic import WORKER, elastic_runtime, world_sizes
from tests.e2e.test_training import allreduce_hosts, mpi_configmaps, mpi_patch

pytestmark = pytest.mark.e2e
EXAMPLES = REPO / "examples"
HOSTNAME = "kubernetes.io/hostname"
EXTRA = "bed.kubetrain.io/extra-node"  # the taint and label hack/bed/add-node.sh gives the node it adds
TOLERATION = {"key": EXTRA, "operator": "Exists", "effect": "NoSchedule"}
SPREAD = "e2e.kubetrain.io/spread"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
PRIORITY_CLASS = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
LOCK = os.environ.get("KUBETRAIN_E2E_BED_LOCK")


@pytest.fixture(scope="module")
def two_nodes(bed: str) -> list[str]:
    """The Ready nodes' names (at least two), the main node (no extra-node label) first."""
    nodes = ready_nodes()
    if len(nodes) < 2:
        pytest.skip(
            f"needs 2 Ready nodes, the cluster has {len(nodes)} ({', '.join(nodes) or 'none'}); on the bed, add one "
            "with hack/bed/add-node.sh"
        )
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in list_of(NODE, None)}
    return sorted(nodes, key=lambda n: EXTRA in labels.get(n, {}))


def placement(group: str, prefer: str | None = None) -> dict[str, Any]:
    """A pod template's ``metadata`` and ``spec`` fields: tolerate the extra node's taint, and at most one pod of
    ``group`` per node (a required anti-affinity on the hostname, within the pod's namespace). ``prefer`` adds a
    preferred node affinity: the Job controller creates index 0 first, so it lands there and index 1 elsewhere."""
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {SPREAD: group}}, "topologyKey": HOSTNAME}
            ]
        }
    }
    if prefer:
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [prefer]}]}
        preferred = [{"weight": 100, "preference": term}]
        affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
    return {"metadata": {"labels": {SPREAD: group}}, "spec": {"affinity": affinity, "tolerations": [TOLERATION]}}


def placement_patch(group: str, rjobs: list[str], prefer: str | None = None) -> dict[str, Any]:
    """A TrainJob runtimePatch that applies :func:`placement` to the pods of ``rjobs``."""
    place = placement(group, prefer)
    return {
        "manager": "e2e.kubetrain.io/placement",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": n, "template": {"spec": {"template": place}}} for n in rjobs]}
            }
        },
    }


def place_runtime(rt: dict[str, Any], group: str, prefer: str | None = None) -> dict[str, Any]:
    """``rt`` (from ``torch_runtime``) with :func:`placement` on its ``node`` pods."""
    place = placement(group, prefer)
    tmpl = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    tmpl.setdefault("metadata", {}).setdefault("labels", {}).update(place["metadata"]["labels"])
    tmpl["spec"].update(place["spec"])
    return rt


def node_of(pods: list[dict[str, Any]]) -> dict[str, str]:
    """pod name -> spec.nodeName."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


def test_a_torch_trainjob_trains_across_two_nodes(
    fresh_namespace: str, operator: DeployedOperator, two_nodes: list[str], tmp_path: Path
) -> None:
    ns = fresh_namespace
    kubectl("create", "configmap", "quickstart-code", f"--from-file={EXAMPLES / 'quickstart' / 'train.py'}", "-n", ns)
    tj = yaml.safe_load((EXAMPLES / "quickstart" / "cluster.yaml").read_text())
    tj["spec"]["trainer"]["image"] = IMAGE
    tj["spec"]["runtimePatches"].append(placement_patch(uniq("ddp"), ["node"]))
    path = tmp_path / "quickstart.yaml"
    path.write_text(yaml.safe_dump(tj))
    t0 = time.monotonic()
    done = kubetrain("run", "-f", str(path), "-n", ns, timeout=900, check=False)
    took = time.monotonic() - t0
    print(done.stdout, done.stderr)
    pods = pods_of("quickstart", ns)
    nodes = node_of(pods)
    print(f"nodeNames: {nodes}; kubetrain run took {took:.1f} s")
    assert done.returncode == 0, done.stderr
    assert "[node-0/0] training on 4 processes (2 nodes)" in done.stdout
    losses = [float(x) for x in re.findall(r"\[node-0/0\] epoch \d+/5 loss ([0-9.]+)", done.stdout)]
    assert len(losses) == 5, done.stdout
    assert losses[-1] < losses[0] / 5, losses  # it learns
    assert len(pods) == 2 and len(set(nodes.values())) == 2, nodes  # one pod on each node


def scheduling_events(ns: str) -> str:
    """The scheduler's FailedScheduling messages in ``ns`` (why a pod stays Pending)."""
    return "\n".join(
        f"{e['involvedObject'].get('name')}: {e.get('message')}"
        for e in list_of(r.EVENT, ns)
        if e.get("reason") == "FailedScheduling"
    )


@pytest.fixture
def priority_class() -> Iterator[str]:
    """A PriorityClass of this test's own (value 1000, never preempting). JobSet's exclusive placement only keeps
    apart Jobs of the same priority (its pods' ``jobset.sigs.k8s.io/priority`` label): at a priority of its own, the
    test neither waits for other users' JobSet pods to leave a node nor keeps theirs off its nodes."""
    name = uniq("kt-e2e-exclusive")
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": 1000, "preemptionPolicy": "Never", "globalDefault": False,
            "description": "kubetrain e2e: JobSet exclusive placement apart from other users' JobSets"}  # fmt: skip
    call(lambda c: c.create(body, resource=PRIORITY_CLASS))
    try:
        yield name
    finally:
        call(lambda c: c.delete(PRIORITY_CLASS, name, None))


def test_exclusive_placement_gives_each_trainer_job_a_node_of_its_own(
    fresh_namespace: str, operator: DeployedOperator, two_nodes: list[str], priority_class: str
) -> None:
    ns = fresh_namespace
    spec = pod_spec(tolerations=[TOLERATION], priorityClassName=priority_class)
    rt = torch_runtime(uniq("excl"), ns, spec=spec)
    rt["spec"]["template"]["metadata"] = {"annotations": {EXCLUSIVE: HOSTNAME}}
    call(lambda c: c.apply(rt))
    rt_name = rt["metadata"]["name"]
    pair, single = "pair", "single"
    call(lambda c: c.create(trainjob(pair, ns, rt_name, trainer={"command": ["sh", "-c", SLEEP], "numNodes": 2})))

    def running(name: str, count: int) -> list[dict[str, Any]]:
        pods = [p for p in pods_of(name, ns) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count else []

    def explain() -> str:
        nodes = {**node_of(pods_of(pair, ns)), **node_of(pods_of(single, ns))}
        return "\n".join([describe_pods(pair, ns), describe_pods(single, ns), f"nodes: {nodes}", scheduling_events(ns)])

    wait_until(lambda: running(pair, 2), 300, "the 2 pods of the first TrainJob Running", explain)
    call(lambda c: c.create(trainjob(single, ns, rt_name, trainer={"command": ["sh", "-c", SLEEP], "numNodes": 1})))
    wait_until(lambda: running(single, 1), 300, "the pod of the second TrainJob Running", explain)
    js = call(lambda c: c.get(r.JOBSET, pair, ns))
    assert js["metadata"]["annotations"][EXCLUSIVE] == HOSTNAME
    a, b = node_of(pods_of(pair, ns)), node_of(pods_of(single, ns))
    print(f"nodeNames: {pair}: {a}; {single}: {b}")
    # One Indexed Job per TrainJob trainer: its pods share a node, and the other TrainJob's Job gets the other one.
    assert len(set(a.values())) == 1 and len(set(b.values())) == 1, (a, b)
    assert set(a.values()) != set(b.values()), (a, b)
    leader = next(p for p in pods_of(pair, ns) if "-node-0-0-" in p["metadata"]["name"])
    anti = leader["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert any(t["topologyKey"] == HOSTNAME for t in anti), anti  # JobSet's webhook set it, not this test
    # A third exclusive trainer finds no node of its own: Pending, and the scheduler says why.
    call(lambda c: c.create(trainjob("third", ns, rt_name, trainer={"command": ["sh", "-c", SLEEP], "numNodes": 1})))
    why = wait_until(lambda: "third-node-0-0" in scheduling_events(ns) and scheduling_events(ns), 120,
                     "the scheduler to turn the third down", explain)  # fmt: skip
    print(why)
    assert not any(p["spec"].get("nodeName") for p in pods_of("third", ns))
    for name in (pair, single, "third"):
        call(lambda c, n=name: c.delete(r.TRAINJOB, n, ns))  # type: ignore[misc]


def test_an_mpi_launcher_reaches_a_worker_on_the_other_node_over_ssh(
    fresh_namespace: str, operator: DeployedOperator, two_nodes: list[str]
) -> None:
    ns = fresh_namespace
    mpi_configmaps(ns)
    tj = yaml.safe_load((EXAMPLES / "mpi" / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = ns
    tj["spec"]["runtimePatches"] = [mpi_patch(), placement_patch(uniq("mpi"), ["node", "launcher"])]
    call(lambda c: c.create(tj))
    name = tj["metadata"]["name"]

    def bound() -> dict[str, str]:
        """replicated job -> the node of its pod, once both are bound (the worker pod goes when the launcher ends)"""
        on = {p["metadata"]["labels"].get(RJOB): p["spec"].get("nodeName") for p in pods_of(name, ns)}
        return on if on.get("launcher") and on.get("node") else {}

    placed = wait_until(bound, 300, "the launcher and worker pods bound", lambda: describe_pods(name, ns))
    done = wait_finished(name, ns, 600)
    launcher = next(p for p in pods_of(name, ns) if p["metadata"]["labels"].get(RJOB) == "launcher")
    text = pod_log(launcher["metadata"]["name"], ns)
    print(text)
    print(f"nodeNames: {placed}")
    assert done["type"] == "Complete", (done, text)
    assert placed["launcher"] != placed["node"], placed
    # ranks on the worker pod (other node) were started by the launcher's mpirun over SSH
    hosts = allreduce_hosts(text)
    assert hosts == {f"{name}-launcher-0-0", f"{name}-node-0-0"}, hosts


# --- the extra node dies mid-job ---


def _bed_script(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(REPO / "hack" / "bed" / args[0]), *args[1:]]
    if LOCK:
        cmd = ["flock", "-w", "900", LOCK, *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    print(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture
def crashable(two_nodes: list[str]) -> Iterator[tuple[str, str, str]]:
    """(main node, extra node, its add-node.sh index) when this process can crash and restore the extra node:
    root, on the bed's machine, the node added by hack/bed/add-node.sh. Restores it (add-node.sh) afterwards."""
    extra = two_nodes[-1]
    index = (call(lambda c: c.get(NODE, extra, None))["metadata"].get("labels") or {}).get(EXTRA)
    if os.geteuid() != 0 or index is None:
        pytest.skip("crashing a node needs root on the bed's machine and a node added by hack/bed/add-node.sh")
    check = subprocess.run([str(REPO / "hack/bed/add-node.sh"), "--index", index, "--check"],
                           capture_output=True, text=True)  # fmt: skip
    if check.returncode != 0 or shutil.which("flock") is None:
        pytest.skip(f"node {extra} is not run by hack/bed/add-node.sh on this machine: {check.stdout}{check.stderr}")
    try:
        yield two_nodes[0], extra, index
    finally:
        _bed_script("add-node.sh", "--index", index)
        wait_until(lambda: extra in ready_nodes(), 300, f"node {extra} Ready again")


def _worker_runtime(ns: str, group: str, main: str, elastic: bool) -> str:
    name = uniq("crash")
    spec = pod_spec()
    spec["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    if elastic:
        rt = elastic_runtime(name, ns, max_nodes=2)
    else:  # one process per node, and the first failure fails the job (the Job's default backoffLimit is 6)
        rt = torch_runtime(name, ns, spec=spec, job={"backoffLimit": 0})
        rt["spec"]["mlPolicy"]["torch"] = {"numProcPerNode": 1}
    call(lambda c: c.apply(place_runtime(rt, group, prefer=main)))
    return name


def _start_pair(ns: str, rt: str, name: str, main: str, extra: str) -> dict[str, str]:
    """A 2-node worker job with both workers in a world of 2, index 0 (the rendezvous host) on ``main``."""
    trainer = {"command": ["torchrun", "--no-python", "python3", "-c", WORKER], "numNodes": 2}
    call(lambda c: c.create(trainjob(name, ns, rt, trainer=trainer)))
    wait_until(lambda: world_sizes(name, ns, set()).count(2) >= 2, 300, "both workers in a world of 2",
               lambda: describe_pods(name, ns))  # fmt: skip
    nodes = node_of(pods_of(name, ns))
    print(f"nodeNames before the crash: {nodes}")
    first = next(n for p, n in nodes.items() if "-node-0-0-" in p)
    assert set(nodes.values()) == {main, extra}, nodes
    if first != main:
        pytest.fail(f"pod index 0 (the rendezvous host) landed on {first}, not {main}: the test needs it on the node "
                    "that stays")  # fmt: skip
    return nodes


OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def test_a_node_that_dies_leaves_a_static_job_readable_and_fails_it_once_declared_out_of_service(
    fresh_namespace: str, operator: DeployedOperator, crashable: tuple[str, str, str]
) -> None:
    """The worker on the node that stays fails at once (its peer is gone) and the operator records it; the job
    cannot end while the Job controller waits for its pod on the dead node to terminate (it never does: no kubelet
    is left to confirm it), so it stays Running; describe says why once the node is NotReady. Declaring the node
    out of service (Kubernetes' non-graceful node shutdown taint) lets the pod garbage collector delete that pod,
    and the TrainJob fails with the recorded cause."""
    main, extra, index = crashable
    ns, name = fresh_namespace, uniq("static")
    rt = _worker_runtime(ns, uniq("static"), main, elastic=False)
    _start_pair(ns, rt, name, main, extra)
    t0 = time.monotonic()
    _bed_script("remove-node.sh", "--index", index, "--crash")

    def recorded() -> list[dict[str, Any]]:
        st = call(lambda c: c.get(r.TRAINJOB, name, ns)).get("status") or {}
        return list(st.get("podFailures") or [])

    failures = wait_until(recorded, 120, "the operator to record the failure", lambda: describe_pods(name, ns))
    print(f"status.podFailures {time.monotonic() - t0:.1f} s after the crash: {failures}")
    assert [f["step"] for f in failures] == ["node-0-0"], failures  # the worker that stayed lost its peer
    # Once the node controller has seen the kubelet go silent (node-monitor-grace-period, 50 s by default),
    # describe says why the other step never reports an end.
    wait_until(lambda: extra not in ready_nodes(), 180, f"node {extra} NotReady")
    print(f"node {extra} NotReady {time.monotonic() - t0:.1f} s after the crash")
    assert finished(name, ns) is None, conditions(name, ns)
    out = kubetrain("describe", "trainjob", name, "-n", ns).stdout
    print(out)
    assert failures[0]["pod"] in out, out
    assert f"NodeNotReady: node {extra} Ready=Unknown" in out, out
    assert f"{extra} (node-0-1, NotReady)" in out, out  # the "Nodes:" line

    kubectl("taint", "node", extra, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
    try:
        t1 = time.monotonic()
        cond = wait_finished(name, ns, 300)
        print(f"TrainJob {cond['type']} {time.monotonic() - t1:.1f} s after the out-of-service taint: "
              f"{cond.get('reason')}: {cond.get('message')}")  # fmt: skip
        assert cond["type"] == "Failed", cond
        assert "node-0-0" in cond.get("message", ""), cond  # the recorded cause, not only JobSet's words
        print(kubetrain("describe", "trainjob", name, "-n", ns).stdout)
    finally:
        kubectl("taint", "node", extra, f"{OUT_OF_SERVICE}-", check=False)


def test_an_elastic_job_carries_on_when_a_node_dies(
    fresh_namespace: str, operator: DeployedOperator, crashable: tuple[str, str, str]
) -> None:
    main, extra, index = crashable
    ns, name = fresh_namespace, uniq("elastic")
    rt = _worker_runtime(ns, uniq("elastic"), main, elastic=True)
    nodes = _start_pair(ns, rt, name, main, extra)
    survivor = next(p for p, n in nodes.items() if n == main)
    before = pod_log(survivor, ns).count("world size ")
    t0 = time.monotonic()
    _bed_script("remove-node.sh", "--index", index, "--crash")

    def alone() -> bool:
        lines = [x for x in pod_log(survivor, ns).splitlines() if x.startswith("world size ")]
        return len(lines) > before and lines[-1].startswith("world size 1 ")

    wait_until(alone, 300, "the worker on the node left in a world of 1", lambda: describe_pods(name, ns))
    print(f"world size 1 on {main} {time.monotonic() - t0:.1f} s after the crash")
    assert finished(name, ns) is None, conditions(name, ns)  # still running
    # The node comes back: the job grows to 2 nodes again.
    _bed_script("add-node.sh", "--index", index)
    t1 = time.monotonic()

    def together() -> bool:
        lines = [x for x in pod_log(survivor, ns).splitlines() if x.startswith("world size ")]
        return bool(lines) and lines[-1].startswith("world size 2 ")

    wait_until(together, 420, "the workers in a world of 2 again", lambda: describe_pods(name, ns))
    again = time.monotonic() - t1
    print(f"world size 2 again {again:.1f} s after add-node.sh; nodeNames: {node_of(pods_of(name, ns))}")
    assert finished(name, ns) is None, conditions(name, ns)
    call(lambda c: c.delete(r.TRAINJOB, name, ns))


# --- gang scheduling across the two nodes (issue 23, item 5) ---


def _millicpu(value: Any) -> int:
    return int(Quantity.parse(str(value)).value * 1000)


def _allocatable_millicpu(node: str) -> int:
    return _millicpu(call(lambda c: c.get(NODE, node, None))["status"]["allocatable"]["cpu"])


def _free_millicpu(node: str) -> int:
    """The node's allocatable CPU less the requests of the pods bound to it that have not ended."""
    alloc = _allocatable_millicpu(node)
    used = 0
    for pod in list_of(r.POD, None):
        if pod["spec"].get("nodeName") != node or pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for ct in pod["spec"].get("containers") or []:
            cpu = ((ct.get("resources") or {}).get("requests") or {}).get("cpu")
            used += _millicpu(cpu) if cpu else 0
    return alloc - used


def test_a_gang_that_fits_only_across_two_nodes_is_placed_on_both(
    fresh_namespace: str, operator: DeployedOperator, two_nodes: list[str]
) -> None:
    from tests.e2e.test_coscheduling import SCHEDULER, _missing, gang_runtime

    missing = _missing()
    if missing:
        pytest.skip(missing)
    ns = fresh_namespace
    nodes = two_nodes[:2]
    # Each pod asks for just over half a node's CPU: one fits on each node, two never fit on one.
    per_pod = min(_allocatable_millicpu(n) for n in nodes) // 2 + 50
    free = {n: _free_millicpu(n) for n in nodes}
    if any(f < per_pod for f in free.values()):
        pytest.skip(f"a node has less than {per_pod}m CPU free for a gang member (free: {free}); the bed is busy")
    runtime = gang_runtime(ns, 30, [TOLERATION])
    call(lambda c: c.apply(runtime))
    trainer = {
        "command": ["sh", "-c", "echo rank $PET_NODE_RANK on $(hostname); sleep 2"],
        "resourcesPerNode": {"requests": {"cpu": f"{per_pod}m", "memory": "32Mi"}},
    }
    call(lambda c: c.create(trainjob("wide", ns, "gang", trainer=trainer)))
    pg = wait_until(lambda: get(r.COSCHEDULING_PODGROUP, "wide", ns), 60, "the PodGroup")
    assert pg["spec"]["minMember"] == 2
    bound = wait_until(
        lambda: len(p := pods_of("wide", ns)) == 2 and all(x["spec"].get("nodeName") for x in p) and p,
        180,
        "both gang members bound",
        lambda: describe_pods("wide", ns) + "\n" + scheduling_events(ns),
    )
    placed = node_of(bound)
    print(f"{per_pod}m CPU per pod (free before: {free}); nodeNames: {placed}")
    assert set(placed.values()) == set(nodes), placed
    assert all(p["spec"]["schedulerName"] == SCHEDULER for p in bound)
    assert wait_finished("wide", ns, 180)["type"] == "Complete"
