"""All-reduce across two nodes of the bed, against the same on one node: a 2-node torch TrainJob (1 process per
node, gloo) all-reducing a 64 MiB float32 tensor, its pods on two nodes (a required pod anti-affinity on
``kubernetes.io/hostname``) and then both on one node (a nodeSelector), alternating which goes first. Each run's rank
0 times ``--iters`` all-reduces after 2 warm-up ones and prints them; the figure is the median's bandwidth
(bytes / seconds per all-reduce; for 2 ranks the bus bandwidth is the same). No target: the ratio says what the
path between two kubelets' pod networks costs (on the bed both bridges are in one network namespace, so it is one
routing hop between two Linux bridges instead of one bridge).

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (cluster-admin), a cluster with two Ready nodes (on the bed:
``hack/bed/add-node.sh``, whose node's ``bed.kubetrain.io/extra-node`` taint the pods tolerate) and kubetrain
installed; without them it is skipped and says why.

    python bench/bed_two_nodes.py [--rounds 2] [--iters 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import from_kubeconfig  # noqa: E402

IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
SA = Resource("", "v1", "serviceaccounts", "ServiceAccount")
EXTRA = "bed.kubetrain.io/extra-node"
HOSTNAME = "kubernetes.io/hostname"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
MIB = 64

SCRIPT = textwrap.dedent(
    """
    import json, os, time, torch, torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    t = torch.ones({n})
    for _ in range(2):
        dist.all_reduce(t)
    dist.barrier()
    times = []
    for _ in range({iters}):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print("BENCH " + json.dumps({{"bytes": t.numel() * 4, "times": times}}), flush=True)
    dist.barrier()
    os._exit(0)  # gloo may abort in destroy_process_group() when the peer has gone (shared/tools/k8s-node README)
    """
)


def runtime(name: str, ns: str, spread: bool, node: str) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "terminationGracePeriodSeconds": 2,
        "tolerations": [{"key": EXTRA, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "node", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
                        "env": [{"name": "OMP_NUM_THREADS", "value": "1"}]}],
    }  # fmt: skip
    meta: dict[str, Any] = {"labels": {"bench.kubetrain.io/group": name}}
    if spread:
        term = {"labelSelector": {"matchLabels": meta["labels"]}, "topologyKey": HOSTNAME}
        pod["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    else:
        pod["nodeSelector"] = {HOSTNAME: node}
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"metadata": meta, "spec": pod}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": ns, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 2, "torch": {"numProcPerNode": 1}},
                 "template": {"spec": {"replicatedJobs": [rjob]}}},
    }  # fmt: skip


def ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or [])


async def one_run(c: Client, ns: str, rt: str, name: str, iters: int) -> dict[str, Any]:
    script = SCRIPT.format(n=MIB * 1024 * 1024 // 4, iters=iters)
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": rt, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2, "command": ["torchrun", "--no-python", "python3", "-c", script]},
        },
    }
    t0 = time.perf_counter()
    await c.create(tj)
    deadline = time.monotonic() + 600
    while True:
        got = await c.get(r.TRAINJOB, name, ns)
        conds = {x["type"]: x for x in (got.get("status") or {}).get("conditions") or []}
        done = next((t for t in ("Complete", "Failed") if conds.get(t, {}).get("status") == "True"), None)
        if done:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"TrainJob {ns}/{name} did not finish in 600 s")
        await asyncio.sleep(1)
    wall = time.perf_counter() - t0
    pods, _ = await c.list(r.POD, ns, label_selector=f"{JOBSET_NAME}={name}")
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
    if done != "Complete":
        raise RuntimeError(f"TrainJob {name} {done}: {conds[done].get('message')}; pods on {nodes}")
    leader = next(p["metadata"]["name"] for p in pods if "-node-0-0-" in p["metadata"]["name"])
    text = "".join([line + "\n" async for line in c.pod_logs(leader, ns)])
    line = next(x for x in text.splitlines() if x.startswith("BENCH "))
    data = json.loads(line[len("BENCH ") :])
    med = statistics.median(data["times"])
    await c.delete(r.TRAINJOB, name, ns)
    return {"nodes": nodes, "median_s": med, "gib_s": data["bytes"] / med / 2**30, "times": data["times"], "wall": wall}


async def measure(kc: str, rounds: int, iters: int) -> dict[str, Any]:
    async with Client(from_kubeconfig(kc), qps=0) as c:
        nodes, _ = await c.list(NODE)
        up = [n for n in nodes if ready(n)]
        if len(up) < 2:
            raise SystemExit(f"bench/bed_two_nodes.py: skipped: needs 2 Ready nodes, the cluster has {len(up)} "
                             "(on the bed: hack/bed/add-node.sh)")  # fmt: skip
        extra = next((n for n in up if EXTRA in (n["metadata"].get("labels") or {})), up[-1])["metadata"]["name"]
        ns = f"kt-bench-{uuid.uuid4().hex[:5]}"
        await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        out: dict[str, Any] = {"two": [], "one": [], "one_node": extra}
        try:
            for _ in range(120):
                try:
                    await c.get(SA, "default", ns)
                    break
                except NotFound:
                    await asyncio.sleep(0.5)
            await c.apply(runtime("two", ns, True, extra))
            await c.apply(runtime("one", ns, False, extra))
            for i in range(rounds):
                for kind in ("two", "one") if i % 2 == 0 else ("one", "two"):
                    res = await one_run(c, ns, kind, f"{kind}-{i}", iters)
                    want = 2 if kind == "two" else 1
                    if len(set(res["nodes"].values())) != want:
                        raise RuntimeError(f"{kind}-{i}: pods on {res['nodes']}, wanted {want} node(s)")
                    print(f"{kind}-{i}: {res['gib_s']:.2f} GiB/s (median {res['median_s'] * 1000:.0f} ms per "
                          f"all-reduce) on {sorted(set(res['nodes'].values()))}", flush=True)  # fmt: skip
                    out[kind].append(res)
            out["load"] = os.getloadavg()[0]
        finally:
            try:
                await c.delete(r.NAMESPACE, ns)
            except ApiError:
                pass
    return out


def report(res: dict[str, Any], iters: int) -> str:
    two = statistics.median(x["gib_s"] for x in res["two"])
    one = statistics.median(x["gib_s"] for x in res["one"])
    rows = "\n".join(
        f"| {kind} | {', '.join(sorted(set(x['nodes'].values())))} | {x['median_s'] * 1000:.0f} ms | "
        f"{x['gib_s']:.2f} GiB/s |"
        for kind in ("two", "one")
        for x in res[kind]
    )
    return f"""## All-reduce across two nodes of the bed (`bench/bed_two_nodes.py`)

A 2-node torch TrainJob (1 process per node, gloo, `torch.set_num_threads(1)`) all-reducing a {MIB} MiB float32
tensor {iters} times after 2 warm-up all-reduces; rank 0's median per all-reduce. Pods on two nodes (the bed's
kubelet and the one `hack/bed/add-node.sh` adds: two containerds, bridges `cni0` and `cni1`, routed in one network
namespace) against both pods on one node ({res["one_node"]}), alternating which goes first. Both nodes share this
machine's {os.cpu_count()} cores; load average (1 min) at the end: {res["load"]:.1f}.

| pods on | nodes | median per all-reduce | bandwidth |
|---|---|---:|---:|
{rows}

Two nodes ÷ one node (bandwidth, medians of the runs): **{two / one:.2f}×** ({two:.2f} vs {one:.2f} GiB/s). No
target.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv if argv is not None else [])
    kc = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
    if not kc:
        print("bench/bed_two_nodes.py: skipped: set KUBETRAIN_E2E_KUBECONFIG to a cluster with two Ready nodes, "
              "JobSet and kubetrain installed (BENCHMARKS.md keeps its last figures)")  # fmt: skip
        return
    try:
        res = asyncio.run(measure(kc, args.rounds, args.iters))
    except SystemExit as exc:
        print(exc)
        return
    text = report(res, args.iters)
    print(text)
    write_section("bed-two-nodes", text, after="bed")


if __name__ == "__main__":
    main(sys.argv[1:])
