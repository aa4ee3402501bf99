"""The OptimizationJob controller's overhead on the bed (a real cluster with kubetrain's operator in its pod): 20
trials of a no-op TrainJob (1 pod reporting the objective once), 4 in parallel, from the OptimizationJob's create to
its Complete condition, against the same 20 TrainJobs created by a script 4 at a time (the next as soon as one is
finished, statuses read every 200 ms). Both alternate, twice; medians. Target ≤ 1.1×.

Needs ``KUBETRAIN_E2E_KUBECONFIG`` (and kubetrain installed from this tree); without it, skipped saying why.

    python bench/bed_optimization.py [--repeats 2]
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

from kubetrain.api.loader import parse_manifest  # noqa: E402
from kubetrain.api.optimization import OptimizationJob  # noqa: E402
from kubetrain.compiler.optimization import build_trials  # noqa: E402
from kubetrain.k8s.client import Client, NotFound  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import from_kubeconfig  # noqa: E402
from kubetrain.testing.reports import REPORT_ONCE  # noqa: E402

IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
TRIALS, PARALLEL = 20, 4


def search(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "objectives": [{"metric": "loss"}], "searchAlgorithm": {"random": {"seed": 1}},
            "parameters": [{"name": "x", "searchSpace": {"uniform": {"min": "0", "max": "1"}}}],
            "numTrials": TRIALS, "parallelTrials": PARALLEL,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {
                "image": IMAGE, "numNodes": 1, "command": ["python3", "-c", REPORT_ONCE, "{{.x}}"]}}},
        },
    }


def _done(obj: dict[str, Any] | None) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


async def _get(client: Client, res: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return await client.get(res, name, ns)
    except NotFound:
        return None


async def by_hand(client: Client, ns: str, prefix: str) -> float:
    oj, _ = parse_manifest(search(prefix, ns))
    assert isinstance(oj, OptimizationJob)
    manifests = [{**t, "metadata": {"name": f"{prefix}-{i}", "namespace": ns}} for i, t in enumerate(build_trials(oj))]
    start = time.monotonic()
    running: list[str] = []
    while manifests or running:
        while manifests and len(running) < PARALLEL:
            m = manifests.pop(0)
            await client.create(m)
            running.append(m["metadata"]["name"])
        await asyncio.sleep(0.2)
        still = []
        for name in running:
            if not _done(await _get(client, r.TRAINJOB, name, ns)):
                still.append(name)
        running = still
    return time.monotonic() - start


async def searched(client: Client, ns: str, name: str) -> float:
    start = time.monotonic()
    await client.create(search(name, ns))
    while True:
        oj = await _get(client, r.OPTIMIZATIONJOB, name, ns)
        if _done(oj):
            break
        await asyncio.sleep(0.2)
    elapsed = time.monotonic() - start
    reason = (oj or {})["status"]["conditions"][-1]["reason"]
    assert reason == "MaxTrialsReached", reason
    return elapsed


async def run(kubeconfig: str, repeats: int) -> tuple[list[float], list[float]]:
    ns = f"kt-bench-oj-{uuid.uuid4().hex[:5]}"
    ns_res = r.NAMESPACE
    async with Client(from_kubeconfig(kubeconfig), qps=0) as client:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, resource=ns_res)
        try:
            hand, oj = [], []
            for i in range(repeats):
                hand.append(await by_hand(client, ns, f"hand{i}"))
                oj.append(await searched(client, ns, f"search{i}"))
            return hand, oj
        finally:
            await client.delete(ns_res, ns)


def _runs(xs: list[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in xs)


def main(argv: list[str] | None = None) -> str | None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv if argv is not None else [])
    kubeconfig = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
    if not kubeconfig:
        print("bench/bed_optimization.py: skipped: set KUBETRAIN_E2E_KUBECONFIG to the bed's kubeconfig")
        return None
    hand, oj = asyncio.run(run(kubeconfig, args.repeats))
    ratio = statistics.median(oj) / statistics.median(hand)
    load = os.getloadavg()[0]
    md = f"""### The same on the bed (`bench/bed_optimization.py`)

The operator in its pod on the one-node bed (docs/bed.md): {TRIALS} trials of a no-op TrainJob (1 pod on the
training image reporting the objective once through the operator's status endpoint), {PARALLEL} in parallel, from the
OptimizationJob's create to its Complete condition, against the same {TRIALS} TrainJobs created by a script
{PARALLEL} at a time (the next as soon as one finished, statuses read every 200 ms). Alternating, {args.repeats}
runs each, medians.

| run | wall (median) | runs | × baseline |
|---|---:|---|---:|
| by hand, {PARALLEL} at a time (baseline) | {statistics.median(hand):.1f} s | {_runs(hand)} | 1.000× |
| OptimizationJob, parallelTrials {PARALLEL} | {statistics.median(oj):.1f} s | {_runs(oj)} | **{ratio:.3f}×** |

- Target ≤ 1.1×: **{ratio:.3f}×** ({'met' if ratio <= 1.1 else 'missed'}). Load average (1 min) at the end: {load:.1f}
  on {os.cpu_count()} cores (the bed shares this machine with the other sessions' work).
"""
    write_section("optimization_bed", md, after="optimization")
    print(md)
    return md


if __name__ == "__main__":
    main(sys.argv[1:])
