"""MultiKueue's dispatch on this machine's two clusters (``hack/bed/multikueue.sh up``): a TrainJob created on the
manager, from its create to its pods Running on the worker (the bed), against the same TrainJob created directly on
the worker through the same-named LocalQueue (so both go through the worker's Kueue; the difference is the manager's
admission and MultiKueue's copy). ``--pairs`` pairs, alternating which goes first; target: median ratio <= 2.

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (the worker) and ``KUBETRAIN_E2E_MANAGER_KUBECONFIG`` (the manager); without them
it is skipped and says why. It creates one namespace of its own on both clusters and deletes it at the end.

    python bench/multikueue.py [--pairs 5] [--nodes 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402
from bed import runtime as bed_runtime  # noqa: E402

from kubetrain.k8s.client import ApiError, Client, Resource  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import from_kubeconfig  # noqa: E402

IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
QUEUE = os.environ.get("KUBETRAIN_E2E_MULTIKUEUE_QUEUE", "multikueue")
LOCAL_QUEUE = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
SA = Resource("", "v1", "serviceaccounts", "ServiceAccount")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"


def runtime(ns: str) -> dict[str, Any]:
    """The TrainingRuntime ``sh`` of ``bench/bed.py``."""
    return bed_runtime("sh", ns)


def trainjob(name: str, ns: str, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "runtimeRef": {"name": "sh", "kind": "TrainingRuntime"},
            "trainer": {
                "numNodes": nodes,
                "command": ["sh", "-c", SLEEP],
                "resourcesPerNode": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            },
        },
    }


async def setup(c: Client, ns: str) -> None:
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "team", "namespace": ns}, "spec": {"clusterQueue": QUEUE}}  # fmt: skip
    await c.create(lq, resource=LOCAL_QUEUE)
    await c.create(runtime(ns))


async def time_to_running(worker: Client, ns: str, name: str, expected: int, create: Any) -> float:
    """Seconds from just before ``create()`` to ``expected`` pods of ``name`` seen Running on the worker (watch)."""
    _, rv = await worker.list(r.POD, ns, label_selector=f"{JOBSET_NAME}={name}")
    running: set[str] = set()
    t0 = time.perf_counter()
    await create()
    while True:
        async for ev in worker.watch(r.POD, ns, resource_version=rv, label_selector=f"{JOBSET_NAME}={name}"):
            rv = ev.resource_version or rv
            if ev.type == "BOOKMARK":
                continue
            pod = ev.object["metadata"]["name"]
            if ev.type != "DELETED" and (ev.object.get("status") or {}).get("phase") == "Running":
                running.add(pod)
            else:
                running.discard(pod)
            if len(running) >= expected:
                return time.perf_counter() - t0


async def wait_gone(worker: Client, ns: str, timeout: float = 300) -> None:
    """Until the namespace has no pods (the last pair's are deleted), so each pair starts on a quiet node."""
    deadline = time.monotonic() + timeout
    while True:
        pods, rv = await worker.list(r.POD, ns)
        if not pods:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods of {ns} still there after {timeout:.0f}s")
        # Woken by the next pod change rather than a fixed pause.
        async for _ in worker.watch(r.POD, ns, resource_version=rv, timeout_seconds=10):
            break


async def measure(worker_kc: str, manager_kc: str, pairs: int, nodes: int) -> dict[str, Any]:
    ns = f"kt-mk-bench-{uuid.uuid4().hex[:5]}"
    async with Client(from_kubeconfig(worker_kc), qps=0) as worker, Client(from_kubeconfig(manager_kc), qps=0) as mgr:
        await setup(mgr, ns)
        await setup(worker, ns)

        async def has_sa() -> bool:
            try:
                await worker.get(SA, "default", ns)
                return True
            except ApiError:
                return False

        while not await has_sa():
            await asyncio.sleep(0.2)
        out: list[tuple[float, float]] = []
        try:
            for i in range(pairs):
                far, near = f"p{i}-manager", f"p{i}-worker"

                async def via_manager(name: str = far) -> None:
                    await mgr.create(trainjob(name, ns, nodes))

                async def direct(name: str = near) -> None:
                    await worker.create(trainjob(name, ns, nodes))

                if i % 2 == 0:
                    t_mk = await time_to_running(worker, ns, far, nodes, via_manager)
                    t_direct = await time_to_running(worker, ns, near, nodes, direct)
                else:
                    t_direct = await time_to_running(worker, ns, near, nodes, direct)
                    t_mk = await time_to_running(worker, ns, far, nodes, via_manager)
                out.append((t_mk, t_direct))
                print(f"pair {i + 1}: via the manager {t_mk:.2f} s, directly {t_direct:.2f} s", flush=True)
                await mgr.delete(r.TRAINJOB, far, ns)
                await worker.delete(r.TRAINJOB, near, ns)
                await wait_gone(worker, ns)
        finally:
            for c in (mgr, worker):
                try:
                    await c.delete(r.NAMESPACE, ns)
                except ApiError:
                    pass
        nodes_seen, _ = await worker.list(Resource("", "v1", "nodes", "Node", namespaced=False))
        return {"pairs": out, "load": os.getloadavg()[0], "worker_nodes": len(nodes_seen)}


def report(res: dict[str, Any], nodes: int) -> str:
    ratios = [mk / d for mk, d in res["pairs"]]
    med = statistics.median(ratios)
    rows = "\n".join(
        f"| {i} | {'manager' if i % 2 == 1 else 'worker'} | {mk:.2f} s | {d:.2f} s | {mk / d:.2f}× |"
        for i, (mk, d) in enumerate(res["pairs"], start=1)
    )
    verdict = "met" if med <= 2 else "**missed**"
    bed_nodes = f"{res['worker_nodes']} node" + ("s" if res["worker_nodes"] != 1 else "")
    return f"""## MultiKueue: manager → worker (`bench/multikueue.py`)

Two clusters on one machine (`hack/bed/multikueue.sh up`): a manager control plane with kubetrain's operator and
Kueue (MultiKueue admission check), and the bed ({bed_nodes}) as the worker with its own Kueue and kubetrain's
operator in a pod.
A TrainJob ({nodes} node{"s" if nodes != 1 else ""}, pods that sleep) created on the manager, from the create call
to the watch event showing its pod{"s" if nodes != 1 else ""} Running on the worker, against the same TrainJob created
directly on the worker through the same LocalQueue. Load average (1 min) at the end: {res["load"]:.1f} on
{os.cpu_count()} cores.

| pair | first | via the manager | directly on the worker | ratio |
|---|---|---:|---:|---:|
{rows}

Median of {len(ratios)} pairs: **{med:.2f}×** (target ≤ 2: {verdict}).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args(argv if argv is not None else [])
    worker, manager = os.environ.get("KUBETRAIN_E2E_KUBECONFIG"), os.environ.get("KUBETRAIN_E2E_MANAGER_KUBECONFIG")
    if not (worker and manager):
        print("bench/multikueue.py: skipped: set KUBETRAIN_E2E_KUBECONFIG (the worker) and "
              "KUBETRAIN_E2E_MANAGER_KUBECONFIG (the manager; hack/bed/multikueue.sh up)")  # fmt: skip
        return
    res = asyncio.run(measure(worker, manager, args.pairs, args.nodes))
    text = report(res, args.nodes)
    print(text)
    write_section("multikueue", text, after="bed")


if __name__ == "__main__":
    main(sys.argv[1:])
