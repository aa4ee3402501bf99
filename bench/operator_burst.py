"""Operator burst benchmark: N TrainJobs at once -> TrainJob->JobSet latency, throughput, operator peak RSS.

The operator runs as a real ``kubetrain operator`` subprocess (so its RSS is its own), against the in-memory
fake API server over HTTP, or against a real API server with ``--kubeconfig`` (JobSet CRD required, no nodes).

Phases, all in one run:
  1. baseline: N sequential server-side applies of a small ConfigMap against the same server (no rate limit);
  2. idle: TrainJobs created one at a time, each waiting for its JobSet (latency without queueing);
  3. burst: N TrainJobs created as fast as the server accepts them; latency is from the create response to
     the JobSet's ADDED watch event; the burst time is compared with what the operator's QPS limit allows for
     the requests it actually sent (read from its /metrics).

    python bench/operator_burst.py                       # 1,000 TrainJobs against the fake
    python bench/operator_burst.py -n 200 --qps 50       # smaller
    python bench/operator_burst.py --kubeconfig kc.yaml  # a real API server
"""

from __future__ import annotations

import os
import sys

# This file is named like the stdlib ``operator`` module; run as a script, its directory is sys.path[0] and it
# would shadow the real one. Drop the directory before anything imports ``operator``.
if __name__ == "__main__":
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import asyncio
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))
from _report import write_section  # noqa: E402

from kubetrain.k8s.client import Client, NotFound  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import ClusterConfig, from_kubeconfig  # noqa: E402
from kubetrain.testing.fakeapi import FakeApiServer  # noqa: E402

API = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "bench-torch"


def runtime() -> dict[str, Any]:
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2"}]}}},
        },
    }
    return {
        "apiVersion": API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def trainjob(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"name": RUNTIME}, "trainer": {"numNodes": 2}},
    }


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))] if s else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def scrape(port: int, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        for line in (await resp.text()).splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return float("nan")


class JobSetWatcher:
    """Records when each JobSet's ADDED event arrives (the same clock as the creates)."""

    def __init__(self, client: Client, ns: str) -> None:
        self.client, self.ns = client, ns
        self.seen: dict[str, float] = {}
        self.changed = asyncio.Event()

    async def run(self) -> None:
        _, rv = await self.client.list(r.JOBSET, self.ns)
        while True:
            async for ev in self.client.watch(r.JOBSET, self.ns, resource_version=rv, timeout_seconds=600):
                rv = ev.resource_version or rv
                if ev.type == "ADDED":
                    self.seen.setdefault(ev.object["metadata"]["name"], time.perf_counter())
                    self.changed.set()

    async def wait(self, names: list[str], timeout: float) -> None:
        deadline = time.perf_counter() + timeout
        while not all(n in self.seen for n in names):
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                missing = sum(1 for n in names if n not in self.seen)
                raise TimeoutError(f"{missing} JobSets did not appear within {timeout:.0f}s")
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass


async def bench(args: argparse.Namespace) -> str:
    fake: FakeApiServer | None = None
    if args.kubeconfig:
        config = from_kubeconfig(args.kubeconfig, args.context)
        kubeconfig = args.kubeconfig
    else:
        fake = await FakeApiServer(history=max(50_000, args.n * 10)).start()
        fake.record = False
        config = ClusterConfig(server=fake.url)
        kubeconfig = os.path.join(tempfile.mkdtemp(prefix="kubetrain-bench-"), "kubeconfig")
        Path(kubeconfig).write_text(fake.kubeconfig())
    ns = args.namespace or ("default" if fake else f"bench-{uuid.uuid4().hex[:6]}")
    client = Client(config, qps=0)  # the load generator itself is not throttled
    if not fake:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await client.apply(runtime())

    # 1. Baseline: the raw cost of sequential applies against this server.
    t0 = time.perf_counter()
    for i in range(args.baseline):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"base-{i}", "namespace": ns}}
        cm["data"] = {"k": "v"}
        await client.apply(cm)
    per_apply = (time.perf_counter() - t0) / args.baseline

    port = free_port()
    cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", kubeconfig]
    cmd += ["--no-leader-elect", "--health-port", str(port), "--log-level", "warning"]
    # The progress endpoint on, as deployed, on a port of its own (other operators may run on this machine).
    status_port = free_port()
    cmd += ["--status-port", str(status_port), "--status-url", f"https://127.0.0.1:{status_port}"]
    cmd += ["--qps", str(args.qps), "--burst", str(args.burst), "--concurrency", str(args.concurrency)]
    if args.context:
        cmd += ["--context", args.context]
    op = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if args.quiet else None)
    watcher = JobSetWatcher(client, ns)
    watch_task = asyncio.create_task(watcher.run())
    try:
        for _ in range(200):  # wait for /readyz
            try:
                async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                    if resp.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)

        # 2. Idle latency.
        idle: list[float] = []
        for i in range(args.idle):
            name = f"idle-{i}"
            await client.create(trainjob(name, ns))
            created = time.perf_counter()
            await watcher.wait([name], 60)
            idle.append(watcher.seen[name] - created)

        # 3. Burst. First let the operator's token bucket refill after the idle phase: the QPS bound below
        # assumes the burst starts with a full bucket.
        if args.qps > 0:
            await asyncio.sleep(args.burst / args.qps + 0.5)
        requests_before = await scrape(port, "kubetrain_api_requests")
        names = [f"burst-{i}" for i in range(args.n)]
        created_at: dict[str, float] = {}
        sem = asyncio.Semaphore(32)

        async def create(name: str) -> None:
            async with sem:
                await client.create(trainjob(name, ns))
                created_at[name] = time.perf_counter()

        start = time.perf_counter()
        await asyncio.gather(*(create(n) for n in names))
        create_done = time.perf_counter()
        await watcher.wait(names, args.timeout)
        end = max(watcher.seen[n] for n in names)
        requests = await scrape(port, "kubetrain_api_requests") - requests_before
        rss = peak_rss_mib(op.pid)
        latencies = [watcher.seen[n] - created_at[n] for n in names]
    finally:
        watch_task.cancel()
        op.terminate()
        op.wait(30)
        if fake is None:
            try:
                await client.delete(r.NAMESPACE, ns)
            except NotFound:
                pass
        await client.close()
        if fake is not None:
            await fake.stop()

    burst_s = end - start
    allowed = max(0.0, (requests - args.burst) / args.qps) if args.qps > 0 else 0.0
    ratio = burst_s / allowed if allowed else float("nan")
    target = "fake API server (in-memory, HTTP on 127.0.0.1)" if fake else f"API server {config.server}"
    p99_idle_ms = pct(idle, 99) * 1000
    lines = [
        "## Operator (`bench/operator_burst.py`)" if fake else "### The same burst on a real API server",
        "",
        f"`kubetrain operator` as a subprocess against the {target}; {args.n:,} TrainJobs (torch, 2 nodes) created "
        f"with 32 in flight; operator QPS {args.qps:g} / burst {args.burst}, concurrency {args.concurrency}. "
        "Latency = create response -> JobSet ADDED watch event.",
        "",
        f"Baseline: one server-side apply of a ConfigMap, sequential, unthrottled = {per_apply * 1000:.2f} ms.",
        "",
        "| measure | p50 | p99 | × baseline (p50) |",
        "|---|---:|---:|---:|",
        f"| idle latency ({args.idle} jobs one at a time) | {pct(idle, 50) * 1000:.1f} ms | {p99_idle_ms:.1f} ms "
        f"| {pct(idle, 50) / per_apply:.1f}× |",
        f"| burst latency ({args.n:,} jobs) | {pct(latencies, 50):.2f} s | {pct(latencies, 99):.2f} s | – |",
        "",
        f"- Burst: creates done in {create_done - start:.2f} s; all JobSets in {burst_s:.2f} s "
        f"= {args.n / burst_s:.1f} TrainJobs/s; the operator sent {requests:.0f} API requests "
        f"({requests / args.n:.2f} per TrainJob).",
        f"- QPS bound for those requests: ({requests:.0f} − burst {args.burst}) / {args.qps:g} = {allowed:.2f} s; "
        f"burst took **{ratio:.3f}×** that (target ≤ 1.1×: {'met' if ratio <= 1.1 else 'missed'}).",
        f"- Idle p99 **{p99_idle_ms:.1f} ms** (target ≤ 500 ms: {'met' if p99_idle_ms <= 500 else 'missed'}).",
        f"- Operator peak RSS (VmHWM) **{rss:.1f} MiB** at {args.n + args.idle:,} TrainJobs "
        f"(target ≤ 150 MiB: {'met' if rss <= 150 else 'missed'}).",
        f"- Machine load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work "
        "on the machine slows the operator's compiles and the server alike; the QPS ratio assumes idle cores).",
    ]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=1000, help="TrainJobs in the burst")
    p.add_argument("--idle", type=int, default=30, help="TrainJobs for the idle-latency phase")
    p.add_argument("--baseline", type=int, default=200, help="sequential applies for the baseline")
    p.add_argument("--qps", type=float, default=50.0)
    p.add_argument("--burst", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--kubeconfig", default=None, help="measure against this real API server instead of the fake")
    p.add_argument("--context", default=None)
    p.add_argument("--namespace", default=None)
    p.add_argument("--quiet", action="store_true", help="hide the operator's log output")
    p.add_argument("--no-write", action="store_true", help="print the section, do not update BENCHMARKS.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    # bench/run_all.py calls main() with no arguments: use the defaults then, not run_all's own argv.
    args = parse(argv if argv is not None else [])
    section = asyncio.run(bench(args))
    print(section)
    if not args.no_write:
        if args.kubeconfig:
            write_section("operator_real", section, after="operator")
        else:
            write_section("operator", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
