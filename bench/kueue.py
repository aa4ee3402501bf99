"""What Kueue's admission costs a TrainJob on the bed (``hack/bed/kueue.sh up``, Kueue's TrainJob integration): a
TrainJob labelled with a LocalQueue whose ClusterQueue has quota to spare, from its create to all its pods Running,
against the same TrainJob without the label (no queue: kubetrain's operator alone). ``--pairs`` pairs, alternating
which goes first; target: median ratio <= 1.3.

Needs ``KUBETRAIN_E2E_KUBECONFIG`` and Kueue running on that cluster; without them it is skipped and says why. It
makes a namespace, a ResourceFlavor and a ClusterQueue of its own and deletes them at the end.

    python bench/kueue.py [--pairs 5] [--nodes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402
from multikueue import runtime, time_to_running, trainjob, wait_gone  # noqa: E402

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import from_kubeconfig  # noqa: E402

KUEUE = "kueue.x-k8s.io"
CLUSTER_QUEUE = Resource(KUEUE, "v1beta1", "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUE = Resource(KUEUE, "v1beta1", "localqueues", "LocalQueue")
FLAVOR = Resource(KUEUE, "v1beta1", "resourceflavors", "ResourceFlavor", namespaced=False)
SA = Resource("", "v1", "serviceaccounts", "ServiceAccount")


async def setup(c: Client, ns: str, cq: str) -> None:
    await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await c.create({"apiVersion": f"{KUEUE}/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": cq}},
                   resource=FLAVOR)  # fmt: skip
    quota = [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "64Gi"}]
    await c.create({
        "apiVersion": f"{KUEUE}/v1beta1", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                     "flavors": [{"name": cq, "resources": quota}]}]},
    }, resource=CLUSTER_QUEUE)  # fmt: skip
    await c.create({"apiVersion": f"{KUEUE}/v1beta1", "kind": "LocalQueue",
                    "metadata": {"name": "team", "namespace": ns}, "spec": {"clusterQueue": cq}},
                   resource=LOCAL_QUEUE)  # fmt: skip
    await c.create(runtime(ns))
    while True:
        try:
            await c.get(SA, "default", ns)
            cq_obj = await c.get(CLUSTER_QUEUE, cq)
        except NotFound:
            await asyncio.sleep(0.2)
            continue
        if any(x["type"] == "Active" and x["status"] == "True" for x in (cq_obj.get("status") or {}).get("conditions")
               or []):  # fmt: skip
            return
        await asyncio.sleep(0.2)


async def measure(kubeconfig: str, pairs: int, nodes: int) -> dict[str, Any]:
    ns, cq = f"kt-kueue-bench-{uuid.uuid4().hex[:5]}", f"kt-bench-{uuid.uuid4().hex[:5]}"
    async with Client(from_kubeconfig(kubeconfig), qps=0) as c:
        await setup(c, ns, cq)
        out: list[tuple[float, float]] = []
        try:
            for i in range(pairs):
                queued, plain = f"p{i}-queued", f"p{i}-plain"

                async def via_kueue(name: str = queued) -> None:
                    await c.create(trainjob(name, ns, nodes))

                async def alone(name: str = plain) -> None:
                    body = trainjob(name, ns, nodes)
                    del body["metadata"]["labels"]
                    await c.create(body)

                if i % 2 == 0:
                    t_q = await time_to_running(c, ns, queued, nodes, via_kueue)
                    t_p = await time_to_running(c, ns, plain, nodes, alone)
                else:
                    t_p = await time_to_running(c, ns, plain, nodes, alone)
                    t_q = await time_to_running(c, ns, queued, nodes, via_kueue)
                out.append((t_q, t_p))
                print(f"pair {i + 1}: through Kueue {t_q:.2f} s, without a queue {t_p:.2f} s", flush=True)
                await c.delete(r.TRAINJOB, queued, ns)
                await c.delete(r.TRAINJOB, plain, ns)
                await wait_gone(c, ns)
        finally:
            for res, name, namespace in ((r.NAMESPACE, ns, None), (CLUSTER_QUEUE, cq, None), (FLAVOR, cq, None)):
                try:
                    await c.delete(res, name, namespace)
                except ApiError:
                    pass
        return {"pairs": out, "load": os.getloadavg()[0]}


def report(res: dict[str, Any], nodes: int) -> str:
    ratios = [q / p for q, p in res["pairs"]]
    med = statistics.median(ratios)
    rows = "\n".join(
        f"| {i} | {'queued' if i % 2 == 1 else 'plain'} | {q:.2f} s | {p:.2f} s | {q / p:.2f}× |"
        for i, (q, p) in enumerate(res["pairs"], start=1)
    )
    verdict = "met" if med <= 1.3 else "**missed**"
    return f"""## Kueue admission (`bench/kueue.py`)

On the bed with Kueue's TrainJob integration (`hack/bed/kueue.sh up`): a TrainJob ({nodes} node{"s" if nodes != 1
else ""}, pods that sleep) labelled with a LocalQueue whose ClusterQueue has quota to spare, from the create call to
the watch event showing all its pods Running, against the same TrainJob without a queue. The queued one goes through
Kueue's webhook (suspended at create), its Workload, admission, the `kueue.x-k8s.io/manager` runtime patch and the
unsuspend before the operator starts its JobSet. Load average (1 min) at the end: {res["load"]:.1f} on
{os.cpu_count()} cores.

| pair | first | through Kueue | without a queue | ratio |
|---|---|---:|---:|---:|
{rows}

Median of {len(ratios)} pairs: **{med:.2f}×** (target ≤ 1.3: {verdict}).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=2)
    args = parser.parse_args(argv if argv is not None else [])
    kubeconfig = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
    if not kubeconfig:
        print("bench/kueue.py: skipped: set KUBETRAIN_E2E_KUBECONFIG to a cluster with Kueue (hack/bed/kueue.sh up)")
        return
    res = asyncio.run(measure(kubeconfig, args.pairs, args.nodes))
    text = report(res, args.nodes)
    print(text)
    write_section("kueue", text, after="bed")


if __name__ == "__main__":
    main(sys.argv[1:])
