"""The first TrainJob after an install, and the next ones, against the same JobSet applied directly (real cluster).

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (cluster-admin on a cluster with nodes, JobSet, and the operator image
available to the kubelet) and kubectl (PATH or ``KUBETRAIN_E2E_KUBECTL``); without them the section says why it
was skipped. It re-installs kubetrain from the two overlays of ``manifests/`` (``--no-reinstall`` measures what is
installed):

1. uninstall (CRDs too, unless TrainJobs of others exist), install as docs/install.md says, wait for the rollout;
2. at once, a TrainJob (torch-distributed, 2 nodes, pods that sleep in the operator's own image): create -> every
   pod Running; then its JobSet, copied under another name, applied directly: create -> every pod Running;
3. ``--pairs`` more pairs, alternating which goes first.

    python bench/first_trainjob.py [--pairs 5] [--no-reinstall]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402

from kubetrain.k8s.client import Client, NotFound  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import from_kubeconfig  # noqa: E402
from kubetrain.testing import cluster  # noqa: E402

ROOT = HERE.parent
MANIFESTS = ROOT / "manifests"
NODES = 2
TITLE = "## First TrainJob after an install, on a real cluster (`bench/first_trainjob.py`)"


def operator_image() -> str:
    import yaml

    dep = yaml.safe_load((MANIFESTS / "base" / "operator" / "deployment.yaml").read_text())
    return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])


def direct_copy(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    """The operator's JobSet as a user would apply it: same spec, own name, no owner, no status."""
    out = copy.deepcopy(jobset)
    meta = out["metadata"]
    out["metadata"] = {"name": name, "namespace": meta["namespace"], "labels": meta.get("labels") or {}}
    out.pop("status", None)
    return out


async def wait_jobset(client: Client, name: str, ns: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await client.get(r.JOBSET, name, ns)
        except NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def measure(kc: str, ns: str, pairs: int, image: str) -> dict[str, Any]:
    out: dict[str, Any] = {"pairs": []}
    async with Client(from_kubeconfig(kc), qps=0) as client, cluster.PodsRunning(kc, ns) as pods:
        client.session.max_retries = 0

        async def trainjob() -> tuple[float, str, dict[str, Any]]:
            name = cluster.uniq("first")
            body = cluster.sleeper_trainjob(name, ns, runtime="torch-distributed", image=image, nodes=NODES)
            t0 = time.monotonic()
            await client.create(body)
            admitted = time.monotonic() - t0
            jobset = await wait_jobset(client, name, ns)
            jobset_at = time.monotonic() - t0
            running = await pods.wait(name, NODES) - t0
            return running, name, {"admitted": admitted, "jobset": jobset_at, "jobset_obj": jobset}

        async def direct(template: dict[str, Any]) -> float:
            name = cluster.uniq("direct")
            t0 = time.monotonic()
            await client.create(direct_copy(template, name))
            return await pods.wait(name, NODES) - t0

        keep: set[str] = set()

        async def cleanup() -> None:
            """Delete every TrainJob and JobSet but the first TrainJob's (its ConfigMaps back the direct
            copies' volumes), and wait until their pods are gone so the next pair starts on an idle node."""
            for res in (r.TRAINJOB, r.JOBSET):
                items, _ = await client.list(res, ns)
                for item in items:
                    if item["metadata"]["name"] not in keep:
                        await client.delete(res, item["metadata"]["name"], ns, missing_ok=True)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                items, _ = await client.list(r.POD, ns)
                owners = {(p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") for p in items}
                if owners <= keep:
                    return
                await asyncio.sleep(0.5)

        first, name, detail = await trainjob()
        out["first"] = {"trainjob": first, **{k: v for k, v in detail.items() if k != "jobset_obj"}}
        out["first"]["direct"] = await direct(detail["jobset_obj"])
        template = detail["jobset_obj"]
        keep.add(name)
        await cleanup()
        for i in range(pairs):
            if i % 2 == 0:
                tj, _, d = await trainjob()
                js = await direct(d["jobset_obj"])
            else:
                js = await direct(template)
                tj, _, d = await trainjob()
            out["pairs"].append({"trainjob": tj, "direct": js, "admitted": d["admitted"], "jobset": d["jobset"]})
            await cleanup()
    # In a namespace created a moment before (a new team, a CI run): what the namespace itself costs (its
    # ServiceAccount and CA ConfigMaps appear asynchronously, and pods wait for them), TrainJob or JobSet alike.
    out["fresh_namespace"] = await in_fresh_namespace(kc, image, template, ns)
    return out


def configmap_volumes(jobset: dict[str, Any]) -> set[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            cm = node.get("configMap")
            if isinstance(cm, dict) and cm.get("name"):
                names.add(cm["name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(jobset.get("spec"))
    return names


async def in_fresh_namespace(kc: str, image: str, template: dict[str, Any], source_ns: str) -> dict[str, float]:
    """A TrainJob, and separately the JobSet (with copies of the ConfigMaps it mounts), each created right after
    its own new namespace."""
    times: dict[str, float] = {}
    async with Client(from_kubeconfig(kc), qps=0) as client:
        for what in ("trainjob", "direct"):
            fresh = cluster.uniq("bench-first-new")
            async with cluster.PodsRunning(kc, fresh) as pods:
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fresh}})
                name = cluster.uniq(what)
                if what == "trainjob":
                    body = cluster.sleeper_trainjob(name, fresh, runtime="torch-distributed", image=image, nodes=NODES)
                else:
                    for cm_name in configmap_volumes(template):
                        cm = await client.get(r.CONFIGMAP, cm_name, source_ns)
                        cm["metadata"] = {"name": cm_name, "namespace": fresh}
                        await client.create(cm)
                    body = direct_copy(template, name)
                    body["metadata"]["namespace"] = fresh
                t0 = time.monotonic()
                await client.create(body)
                times[what] = await pods.wait(name, NODES) - t0
            await client.delete(r.NAMESPACE, fresh, missing_ok=True)
    return times


def run(args: argparse.Namespace) -> str:
    kc = cluster.kubeconfig_from_env()
    if not kc:
        return f"{TITLE}\n\nSkipped: set KUBETRAIN_E2E_KUBECONFIG to a cluster-admin kubeconfig of a cluster " \
               "with nodes.\n"  # fmt: skip
    if cluster.kubectl_path() is None:
        return f"{TITLE}\n\nSkipped: kubectl not found (PATH or KUBETRAIN_E2E_KUBECTL).\n"
    image = args.image or operator_image()
    install_s = None
    kept_crds = False
    if args.reinstall:
        others = cluster.kubectl(kc, "get", "trainjobs", "-A", "--no-headers", check=False).stdout.strip()
        kept_crds = bool(others)  # never delete other people's TrainJobs with their CRD
        cluster.uninstall(kc, args.manifests, crds=not kept_crds)
        t0 = time.monotonic()
        cluster.install(kc, args.manifests)
        install_s = time.monotonic() - t0
    ns = cluster.uniq("bench-first")
    cluster.kubectl(kc, "create", "namespace", ns)
    try:
        res = asyncio.run(measure(kc, ns, args.pairs, image))
    finally:
        cluster.kubectl(kc, "delete", "namespace", ns, "--wait=false", check=False)
    first = res["first"]
    pairs = res["pairs"]
    ratios = [p["trainjob"] / p["direct"] for p in pairs]
    lines = [
        TITLE,
        "",
        f"TrainJob (built-in `torch-distributed`, {NODES} nodes, pods sleeping in the operator image) created → "
        "every pod Running, against its JobSet copied under another name and applied directly, on the same "
        "one-node cluster, in one run. Times from the client's create call to the pod watch event.",
        "",
        "| | TrainJob | admitted | JobSet exists | same JobSet direct | ratio |",
        "|---|---:|---:|---:|---:|---:|",
        f"| first after {'a fresh install' if install_s is not None else 'the running install'} | "
        f"{first['trainjob']:.2f} s | {first['admitted'] * 1000:.0f} ms | {first['jobset']:.2f} s | "
        f"{first['direct']:.2f} s | **{first['trainjob'] / first['direct']:.2f}×** |",
    ]
    for i, p in enumerate(pairs, 1):
        lines.append(
            f"| pair {i} | {p['trainjob']:.2f} s | {p['admitted'] * 1000:.0f} ms | {p['jobset']:.2f} s | "
            f"{p['direct']:.2f} s | {p['trainjob'] / p['direct']:.2f}× |"
        )
    fresh = res["fresh_namespace"]
    lines.append(
        f"| each in a namespace created just before | {fresh['trainjob']:.2f} s | | | {fresh['direct']:.2f} s | "
        f"{fresh['trainjob'] / fresh['direct']:.2f}× |"
    )
    lines.append("")
    if install_s is not None:
        kept = " (the CRDs were kept: other TrainJobs exist on the cluster)" if kept_crds else " (CRDs included)"
        lines.append(
            "- Uninstall, then install (docs/install.md: manager overlay, CRD Established, runtimes overlay → "
            f"rollout complete): {install_s:.1f} s{kept}."
        )
    lines.append(f"- First TrainJob ÷ its JobSet: **{first['trainjob'] / first['direct']:.2f}×** (target ≤ 1.5×).")
    if ratios:
        lines.append(f"- Median of {len(ratios)} later pairs: **{statistics.median(ratios):.2f}×** (target ≤ 1.1×).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--image", default=None, help="pod image (default: the operator image of manifests/)")
    parser.add_argument("--no-reinstall", dest="reinstall", action="store_false")
    parser.add_argument(
        "--manifests", type=Path, default=MANIFESTS, help="the tree whose overlays/manager and runtimes to install"
    )
    args = parser.parse_args(argv if argv is not None else [])
    text = run(args)
    print(text)
    write_section("first_trainjob", text)


if __name__ == "__main__":
    main(sys.argv[1:])
