"""Figures on the one-node bed (a real cluster with a node, JobSet and kubetrain installed), each against a baseline
measured in the same run:

1. **Start-up**: a TrainJob (2 nodes, pods that sleep) from its create to all its pods Running, against the same JobSet
   (the operator's, copied under another name) applied directly. First the first TrainJob after an install: kubetrain
   is uninstalled and installed again from ``manifests/overlays`` as docs/install.md says (only when the cluster holds
   no TrainJobs or runtimes of others, which an uninstall would delete; else after ``kubectl rollout restart``, and
   the report says so). Then ``--pairs`` pairs, alternating which goes first. Targets: median <= 1.1, first <= 1.5.
2. **Burst**: ``--burst`` TrainJobs (1 node, ``true``) created as fast as the server takes them, the leader's pod
   force-deleted when half are created; creates the API server refuses meanwhile are counted and retried, as a user's
   script would. Until every one is Complete, against the same JobSets applied directly. Targets: 0 lost, 0 refused.
3. **Memory**: the operator process's VmRSS/VmHWM (``/proc/1/status`` in its pod, through ``kubectl exec``): idle
   after the restart (the baseline), under the burst just before the kill, and the replacement's peak at the end.

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (cluster-admin) and kubectl (``KUBETRAIN_E2E_KUBECTL`` or PATH); without the
kubeconfig it is skipped and says why. It restarts and kills the installed operator: on a shared bed, hold its lock.

    python bench/bed.py [--pairs 5] [--burst 100]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import shutil
import statistics
import subprocess
import sys
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
OP_NS, OP_NAME = "kubeflow-system", "kubetrain-operator"
OP_SELECTOR = "app.kubernetes.io/name=kubetrain,app.kubernetes.io/component=operator"
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


def runtime(name: str, ns: str) -> dict[str, Any]:
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
        "metadata": {"name": name, "namespace": ns, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def trainjob(name: str, ns: str, rt: str, nodes: int, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runtimeRef": {"name": rt, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": nodes, "command": ["sh", "-c", script]},
        },
    }


def direct_copy(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    """The operator's JobSet as a user would apply it: same spec, its own name, no owner, no status."""
    out = copy.deepcopy(jobset)
    meta = out["metadata"]
    out["metadata"] = {"name": name, "namespace": meta["namespace"], "labels": meta.get("labels") or {}}
    out.pop("status", None)
    return out


def kubectl(*args: str) -> str:
    exe = os.environ.get("KUBETRAIN_E2E_KUBECTL") or shutil.which("kubectl")
    if exe is None:
        raise RuntimeError("kubectl not found: put it on PATH or set KUBETRAIN_E2E_KUBECTL")
    done = subprocess.run([exe, "--kubeconfig", os.environ["KUBETRAIN_E2E_KUBECONFIG"], *args],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


MANAGER = HERE.parent / "manifests" / "overlays" / "manager"
RUNTIMES = HERE.parent / "manifests" / "overlays" / "runtimes"
CRDS = [f"{p}.trainer.kubeflow.org" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]


async def foreign(c: Client) -> list[str]:
    """TrainJobs and runtimes an uninstall would delete that a bench or e2e run (namespaces ``kt-*``) did not make."""
    out = []
    try:
        for res in (r.TRAINJOB, r.TRAINING_RUNTIME):
            items, _ = await c.list(res)
            out += [f"{res.kind} {o['metadata']['namespace']}/{o['metadata']['name']}" for o in items
                    if not o["metadata"]["namespace"].startswith("kt-")]  # fmt: skip
        items, _ = await c.list(r.CLUSTER_TRAINING_RUNTIME)
        out += [f"ClusterTrainingRuntime {o['metadata']['name']}" for o in items
                if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of") != "kubetrain"]  # fmt: skip
    except NotFound:
        pass
    return out


async def reinstall(bed: Bed) -> None:
    """docs/install.md: ``kubectl delete -k`` the runtimes overlay, then the manager overlay; then the install:
    ``kubectl apply --server-side -k`` the manager overlay, ``kubectl wait`` for the ClusterTrainingRuntime CRD to
    be Established, the runtimes overlay; and the rollout."""
    for tree in (RUNTIMES, MANAGER):
        kubectl("delete", "-k", str(tree), "--ignore-not-found", "--wait=true", "--timeout=600s")

    async def namespace_gone() -> bool:
        try:
            await bed.c.get(r.NAMESPACE, OP_NS)
            return False
        except NotFound:
            return True

    await bed.wait("kubeflow-system to go", namespace_gone)
    kubectl("apply", "--server-side", "-k", str(MANAGER))
    kubectl("wait", "--for=condition=Established", "--timeout=120s", "crd/clustertrainingruntimes.trainer.kubeflow.org")
    kubectl("apply", "--server-side", "-k", str(RUNTIMES))


def memory_mib(pod: str) -> dict[str, float]:
    text = kubectl("exec", "-n", OP_NS, pod, "-c", "operator", "--", "cat", "/proc/1/status")
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


class Bed:
    def __init__(self, client: Client) -> None:
        self.c = client

    async def leader(self) -> str | None:
        try:
            lease = await self.c.get(r.LEASE, OP_NAME, OP_NS)
        except NotFound:
            return None
        holder = (lease.get("spec") or {}).get("holderIdentity")
        return str(holder).rsplit("_", 1)[0] if holder else None

    async def rolled_out(self) -> bool:
        try:
            dep = await self.c.get(DEPLOYMENT, OP_NAME, OP_NS)
        except NotFound:
            return False
        want, st = int(dep["spec"].get("replicas", 1)), dep.get("status") or {}
        if int(st.get("observedGeneration") or 0) < int(dep["metadata"]["generation"]):
            return False
        if any(int(st.get(k) or 0) != want for k in ("replicas", "updatedReplicas", "readyReplicas")):
            return False
        pods, _ = await self.c.list(r.POD, OP_NS, label_selector=OP_SELECTOR)
        ready = {
            p["metadata"]["name"]
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
        }
        return len(ready) == want and await self.leader() in ready

    async def wait(self, what: str, check: Any, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not await check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.sleep(0.5)

    async def kill(self, pod: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        await self.c.session.request("DELETE", r.POD.path(OP_NS, pod), body=body)

    async def time_to_running(self, ns: str, name: str, expected: int, create: Any) -> float:
        """Seconds from just before ``create()`` to ``expected`` pods of JobSet ``name`` seen Running (watch)."""
        _, rv = await self.c.list(r.POD, ns, label_selector=f"{JOBSET_NAME}={name}")
        running: set[str] = set()
        t0 = time.perf_counter()
        await create()
        while True:
            async for ev in self.c.watch(r.POD, ns, resource_version=rv, label_selector=f"{JOBSET_NAME}={name}"):
                if ev.type == "BOOKMARK":
                    rv = ev.resource_version or rv
                    continue
                rv = ev.resource_version or rv
                pod = ev.object["metadata"]["name"]
                if ev.type != "DELETED" and (ev.object.get("status") or {}).get("phase") == "Running":
                    running.add(pod)
                else:
                    running.discard(pod)
                if len(running) >= expected:
                    return time.perf_counter() - t0


async def startup_pair(
    bed: Bed, ns: str, rt: str, i: int, trainjob_first: bool, template: dict[str, Any] | None
) -> tuple[float, float, dict[str, Any]]:
    """(TrainJob seconds, JobSet seconds, the JobSet template). The direct JobSet copies ``template`` (the first
    TrainJob's JobSet, whose TrainJob stays so the ConfigMaps its pods mount stay too), else this TrainJob's."""
    tj, js = f"pair-{i}-tj", f"pair-{i}-js"

    async def create_tj() -> None:
        await bed.c.create(trainjob(tj, ns, rt, 2, SLEEP))

    async def create_js() -> None:
        assert template is not None
        await bed.c.create(direct_copy(template, js), resource=r.JOBSET)

    if trainjob_first:
        t_tj = await bed.time_to_running(ns, tj, 2, create_tj)
        if template is None:
            template = await bed.c.get(r.JOBSET, tj, ns)
        t_js = await bed.time_to_running(ns, js, 2, create_js)
    else:
        t_js = await bed.time_to_running(ns, js, 2, create_js)
        t_tj = await bed.time_to_running(ns, tj, 2, create_tj)
    return t_tj, t_js, template


async def pause(bed: Bed, ns: str, names: list[str]) -> None:
    """Stop the pods of a measured pair: suspend the TrainJob (it keeps its objects), delete the direct JobSet."""
    for n in names:
        if n.endswith("-tj"):
            await bed.c.merge_patch(r.TRAINJOB, n, ns, {"spec": {"suspend": True}})
        else:
            await bed.c.delete(r.JOBSET, n, ns, missing_ok=True)

    async def none_running() -> bool:
        pods, _ = await bed.c.list(r.POD, ns)
        return not pods

    await bed.wait("the pods of the last pair to stop", none_running, 300)


async def finished_count(c: Client, ns: str, res: Resource, prefix: str, done_type: str) -> tuple[int, int]:
    items, _ = await c.list(res, ns)
    mine = [o for o in items if o["metadata"]["name"].startswith(prefix)]
    conds = [(o.get("status") or {}).get("conditions") or [] for o in mine]
    done = sum(1 for cs in conds if any(x["type"] == done_type and x["status"] == "True" for x in cs))
    return len(mine), done


async def burst(bed: Bed, ns: str, rt: str, n: int, kill_at: int) -> dict[str, Any]:
    out: dict[str, Any] = {"refused": 0, "refusal_messages": set(), "refused_for": 0.0}
    names = [f"burst-{i:03d}" for i in range(n)]
    cfg = bed.c.config
    async with Client(cfg, qps=0) as raw:
        raw.session.max_retries = 0  # a refusal must be seen, not retried away
        t0 = time.perf_counter()
        first_refusal = last_refusal = None
        for i, name in enumerate(names):
            if i == kill_at:
                leader = await bed.leader()
                assert leader is not None
                try:
                    out["rss_before_kill"] = memory_mib(leader)
                except RuntimeError as exc:
                    out["rss_before_kill"] = {"error": str(exc)}
                await bed.kill(leader)
                out["killed"] = leader
                out["killed_at"] = time.perf_counter() - t0
            while True:
                try:
                    await raw.create(trainjob(name, ns, rt, 1, "true"))
                    break
                except ApiError as exc:
                    if exc.status == 409:  # a create whose answer was lost: it is there
                        break
                    now = time.perf_counter()
                    first_refusal = first_refusal or now
                    last_refusal = now
                    out["refused"] += 1
                    out["refusal_messages"].add(exc.message[:160])
                    await asyncio.sleep(0.2)
        out["creates"] = time.perf_counter() - t0
        if first_refusal is not None and last_refusal is not None:
            out["refused_for"] = last_refusal - first_refusal
    deadline = time.monotonic() + 900
    while True:
        total, done = await finished_count(bed.c, ns, r.TRAINJOB, "burst-", "Complete")
        if done == n or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    out["trainjobs_complete"] = time.perf_counter() - t0
    out["lost"] = n - done
    out["present"] = total
    await bed.wait("the operator to be rolled out again", bed.rolled_out, 600)
    leader = await bed.leader()
    try:
        out["rss_after"] = memory_mib(leader) if leader else {}
    except RuntimeError as exc:
        out["rss_after"] = {"error": str(exc)}
    out["new_leader"] = leader

    template = await bed.c.get(r.JOBSET, names[0], ns)
    t1 = time.perf_counter()
    for i in range(n):
        await bed.c.create(direct_copy(template, f"direct-{i:03d}"), resource=r.JOBSET)
    while True:
        _, done_js = await finished_count(bed.c, ns, r.JOBSET, "direct-", "Completed")
        if done_js == n or time.monotonic() > deadline + 900:
            break
        await asyncio.sleep(0.5)
    out["jobsets_complete"] = time.perf_counter() - t1
    out["jobsets_done"] = done_js
    return out


async def measure(kc: str, pairs: int, n: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with Client(from_kubeconfig(kc), qps=0) as client:
        bed = Bed(client)
        try:
            await client.get(DEPLOYMENT, OP_NAME, OP_NS)
        except NotFound as exc:
            raise RuntimeError(f"no Deployment {OP_NAME} in {OP_NS}: install kubetrain first") from exc
        ns = f"kt-bench-{uuid.uuid4().hex[:5]}"
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        try:
            for _ in range(120):
                try:
                    await client.get(Resource("", "v1", "serviceaccounts", "ServiceAccount"), "default", ns)
                    break
                except NotFound:
                    await asyncio.sleep(0.5)
            rt = "bench"
            others = await foreign(client)
            if others:
                results["first_after"] = "`kubectl rollout restart` (not reinstalled: the cluster holds " + \
                    ", ".join(others[:3]) + ")"  # fmt: skip
                kubectl("-n", OP_NS, "rollout", "restart", f"deployment/{OP_NAME}")
                await asyncio.sleep(1)  # the Deployment's generation moves with the restart annotation
            else:
                results["first_after"] = "an uninstall and install (`kubectl delete -k` / `kubectl apply -k`)"
                await reinstall(bed)
            await bed.wait("the operator to roll out and lead", bed.rolled_out)
            await client.apply(runtime(rt, ns))
            leader = await bed.leader()
            first_tj, first_js, template = await startup_pair(bed, ns, rt, 0, True, None)
            results["first"] = (first_tj, first_js)
            await pause(bed, ns, ["pair-0-tj", "pair-0-js"])
            assert leader is not None
            results["rss_idle"] = memory_mib(leader)
            results["pairs"] = []
            for i in range(1, pairs + 1):
                t_tj, t_js, _ = await startup_pair(bed, ns, rt, i, i % 2 == 1, template)
                results["pairs"].append((t_tj, t_js))
                await pause(bed, ns, [f"pair-{i}-tj", f"pair-{i}-js"])
            results["burst"] = await burst(bed, ns, rt, n, n // 2)
            results["load"] = os.getloadavg()[0]
        finally:
            try:
                await client.delete(r.NAMESPACE, ns)
            except ApiError:
                pass
    return results


def report(res: dict[str, Any], pairs: int, n: int) -> str:
    first_tj, first_js = res["first"]
    ratios = [tj / js for tj, js in res["pairs"]]
    med = statistics.median(ratios)
    b = res["burst"]
    idle, before, after = res["rss_idle"], b.get("rss_before_kill", {}), b.get("rss_after", {})
    burst_ratio = b["trainjobs_complete"] / b["jobsets_complete"]

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    def mib(d: dict[str, Any], key: str) -> str:
        return f"{d[key]:.1f} MiB" if key in d else "–"

    rows = "\n".join(
        f"| {i} | {'TrainJob' if i % 2 == 1 else 'JobSet'} | {tj:.2f} s | {js:.2f} s | {tj / js:.2f}× |"
        for i, (tj, js) in enumerate(res["pairs"], start=1)
    )
    refusals = "; ".join(sorted(b["refusal_messages"]))[:400]
    return f"""## On the one-node bed (`bench/bed.py`)

A real cluster: kube-apiserver, the scheduler, a kubelet with containerd, the JobSet controller, and kubetrain installed
from `manifests/overlays` with its operator in a pod. Times are from just before the create call to the watch event that
shows the last pod Running (or the job Complete); pods run the training image. Machine load average (1 min) at the
end: {res["load"]:.1f} on {os.cpu_count()} cores.

### TrainJob → all pods Running, against the same JobSet applied directly

| pair | first | TrainJob | JobSet | ratio |
|---|---|---:|---:|---:|
| first after the install | TrainJob | {first_tj:.2f} s | {first_js:.2f} s | {first_tj / first_js:.2f}× |
{rows}

- Median of {pairs} pairs: **{med:.2f}×** (target ≤ 1.1: {verdict(med <= 1.1)}).
- The first TrainJob after {res["first_after"]}: **{first_tj / first_js:.2f}×** (target ≤ 1.5:
  {verdict(first_tj / first_js <= 1.5)}).

### A burst of {n} TrainJobs, the operator pod force-deleted midway

{n} TrainJobs (1 node, `true`) created one after another as fast as the API server answered; after {n // 2} creates
the leader's pod ({b.get("killed", "?")}) was force-deleted ({b.get("killed_at", 0):.1f} s into the burst). Refused
creates were retried every 0.2 s.

| measure | value | target |
|---|---:|---|
| creates refused | **{b["refused"]}** (over {b["refused_for"]:.1f} s) | 0: {verdict(b["refused"] == 0)} |
| TrainJobs lost (not Complete) | **{b["lost"]}** of {n} | 0: {verdict(b["lost"] == 0)} |
| all {n} created | {b["creates"]:.1f} s | – |
| all {n} TrainJobs Complete | {b["trainjobs_complete"]:.1f} s | – |
| baseline: the same {n} JobSets applied directly, all Completed | {b["jobsets_complete"]:.1f} s | – |
| ratio | **{burst_ratio:.2f}×** | – |

{("Refusals: " + refusals) if refusals else "No create was refused."}

### The operator pod's memory (`/proc/1/status` in the pod)

| when | VmRSS | VmHWM |
|---|---:|---:|
| idle after the install (baseline) | {mib(idle, "VmRSS")} | {mib(idle, "VmHWM")} |
| under the burst, just before the kill | {mib(before, "VmRSS")} | {mib(before, "VmHWM")} |
| the replacement, after all {n} completed | {mib(after, "VmRSS")} | {mib(after, "VmHWM")} |

Peak ÷ idle: **{max(before.get("VmHWM", 0), after.get("VmHWM", 0)) / idle["VmRSS"]:.2f}×**.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--burst", type=int, default=100)
    args = parser.parse_args(argv if argv is not None else [])
    kc = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
    if not kc:
        print("bench/bed.py: skipped: set KUBETRAIN_E2E_KUBECONFIG to a cluster with a node, JobSet and kubetrain "
              "installed (BENCHMARKS.md keeps its last figures)")  # fmt: skip
        return
    res = asyncio.run(measure(kc, args.pairs, args.burst))
    text = report(res, args.pairs, args.burst)
    print(text)
    write_section("bed", text)


if __name__ == "__main__":
    main(sys.argv[1:])
