"""Operator at scale: 10,000 TrainJobs through their whole life, then a restart over all of them finished.

Phases, all in one run, against the in-memory fake API server or (``--kubeconfig``) a real one:
  1. baseline: sequential unthrottled GETs of one TrainJob (the cost of one round trip to this server);
  2. N TrainJobs created (64 in flight) while ``kubetrain operator`` runs (leader election on, as deployed);
     the bench plays the JobSet controller and marks every JobSet Completed, the operator marks every TrainJob
     Complete. The operator's peak RSS (VmHWM) covers all of it: N TrainJobs, JobSets and snapshot ConfigMaps
     in its caches;
  3. the operator is stopped (SIGTERM) and started again over the N finished TrainJobs: time to ``/readyz``
     (caches listed and synced, workers running), time until every relisted key has been reconciled, the API
     writes it made meanwhile (``kubetrain_api_writes_total``, Lease renewals excluded; target: none), and
     whether any object changed (resourceVersions compared before and after).

    python bench/operator_scale.py                              # 10,000 TrainJobs against the fake
    python bench/operator_scale.py -n 2000                      # smaller
    python bench/operator_scale.py --kubeconfig kc.yaml         # a real API server (JobSet CRD required)
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # see operator_burst.py: do not let bench/ shadow the stdlib ``operator``
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import asyncio
import signal
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
from operator_burst import free_port, peak_rss_mib, runtime, trainjob  # noqa: E402

from kubetrain.k8s.client import Client, NotFound  # noqa: E402
from kubetrain.k8s.client import resources as r  # noqa: E402
from kubetrain.k8s.client.config import ClusterConfig, from_kubeconfig  # noqa: E402
from kubetrain.testing.fakeapi import FakeApiServer  # noqa: E402

IN_FLIGHT = 64


async def metrics(port: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        for line in (await resp.text()).splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
    return out


def writes(m: dict[str, float]) -> dict[str, float]:
    prefix = 'kubetrain_api_writes_total{resource="'
    return {k[len(prefix) : -2]: v for k, v in m.items() if k.startswith(prefix)}


def reconciles(m: dict[str, float]) -> float:
    return sum(v for k, v in m.items() if k.startswith("kubetrain_reconcile_total{"))


async def gather_limited(coros: list[Any]) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def count(client: Client, res: r.Resource, ns: str, pred: Any = None) -> int:
    items, _ = await client.list(res, ns)
    return sum(1 for i in items if pred is None or pred(i))


def complete(obj: dict[str, Any]) -> bool:
    conds = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conds)


async def versions(client: Client, ns: str) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for res in (r.TRAINJOB, r.JOBSET, r.CONFIGMAP):
        items, _ = await client.list(res, ns)
        for i in items:
            out[(res.plural, i["metadata"]["name"])] = i["metadata"]["resourceVersion"]
    return out


class OperatorProc:
    def __init__(self, kubeconfig: str, ns: str, args: argparse.Namespace) -> None:
        self.port = free_port()
        self.cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", kubeconfig]
        self.cmd += ["--lease-namespace", ns, "--health-port", str(self.port), "--log-level", "warning"]
        # The progress endpoint on, as deployed, on a port of its own (other operators may run on this machine).
        status_port = free_port()
        self.cmd += ["--status-port", str(status_port), "--status-url", f"https://127.0.0.1:{status_port}"]
        self.cmd += ["--qps", str(args.qps), "--burst", str(args.burst), "--concurrency", str(args.concurrency)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL)

    async def wait_ready(self, timeout: float) -> float:
        deadline = time.perf_counter() + timeout
        async with aiohttp.ClientSession() as http:
            while time.perf_counter() < deadline:
                try:
                    async with http.get(f"http://127.0.0.1:{self.port}/readyz") as resp:
                        if resp.status == 200:
                            return time.perf_counter() - self.started
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
        raise TimeoutError(f"operator not ready within {timeout:.0f}s")

    async def stop(self) -> None:
        # Never block the loop: with the fake API server in this process, the operator's shutdown (releasing
        # the Lease) needs it to keep serving.
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            for _ in range(600):
                if self.proc.poll() is not None:
                    return
                await asyncio.sleep(0.1)
            self.proc.kill()

    @property
    def rss(self) -> float:
        assert self.proc is not None
        return peak_rss_mib(self.proc.pid)


async def until(what: str, check: Any, timeout: float, every: float = 2.0) -> None:
    deadline = time.perf_counter() + timeout
    while not await check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:.0f}s")
        await asyncio.sleep(every)


async def bench(args: argparse.Namespace) -> str:
    fake: FakeApiServer | None = None
    if args.kubeconfig:
        config = from_kubeconfig(args.kubeconfig, args.context)
        kubeconfig = args.kubeconfig
    else:
        fake = await FakeApiServer(history=max(50_000, args.n * 12)).start()
        fake.record = False
        config = ClusterConfig(server=fake.url)
        kubeconfig = os.path.join(tempfile.mkdtemp(prefix="kubetrain-bench-"), "kubeconfig")
        Path(kubeconfig).write_text(fake.kubeconfig())
    ns = args.namespace or f"scale-{uuid.uuid4().hex[:6]}"
    client = Client(config, qps=0)
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await client.apply(runtime())
    op = OperatorProc(kubeconfig, ns, args)
    try:
        names = [f"tj-{i}" for i in range(args.n)]
        await client.create(trainjob("probe", ns))
        t0 = time.perf_counter()
        for _ in range(args.baseline):
            await client.get(r.TRAINJOB, "probe", ns)
        per_get = (time.perf_counter() - t0) / args.baseline
        await client.delete(r.TRAINJOB, "probe", ns)

        # 2. A whole life for N TrainJobs.
        op.start()
        await op.wait_ready(120)
        t0 = time.perf_counter()
        await gather_limited([client.create(trainjob(n, ns)) for n in names])
        created = time.perf_counter() - t0
        # Progress from the operator's own counters: listing 10,000 objects every poll would load the server
        # more than the operator does.
        await until("all JobSets", lambda: _counter(op.port, "kubetrain_trainjobs_created_total", args.n), args.timeout)
        jobsets_done = time.perf_counter() - t0
        done = {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        await gather_limited([client.patch_status(r.JOBSET, n, ns, {"conditions": [done]}) for n in names])
        await until(
            "all TrainJobs Complete",
            lambda: _counter(op.port, "kubetrain_trainjobs_completed_total", args.n),
            args.timeout,
        )
        assert await count(client, r.TRAINJOB, ns, complete) == args.n
        lifecycle = time.perf_counter() - t0
        await asyncio.sleep(2)  # let the last status writes' events settle before the peak is read
        rss_first = op.rss
        writes_first = sum(writes(await metrics(op.port)).values())
        await op.stop()

        # 3. Restart over N finished TrainJobs.
        t0 = time.perf_counter()
        before = await versions(client, ns)
        list_all = time.perf_counter() - t0  # the restart's own baseline: one plain list of what it must list
        op.start()
        ready = await op.wait_ready(args.timeout)

        async def drained() -> bool:
            m = await metrics(op.port)
            idle = m.get("kubetrain_workqueue_depth", 1) == 0 and m.get("kubetrain_workqueue_processing", 1) == 0
            return idle and reconciles(m) >= args.n

        await until("restart drained", drained, args.timeout, every=0.25)
        settled = time.perf_counter() - op.started
        await asyncio.sleep(3)  # anything late (a delayed requeue) would write now
        m = await metrics(op.port)
        restart_writes = {k: v for k, v in writes(m).items() if k != "leases" and v}
        rss_restart = op.rss
        after = await versions(client, ns)
        changed = sum(1 for k, v in before.items() if after.get(k) != v)
        await op.stop()
    finally:
        await op.stop()
        try:
            await client.delete(r.NAMESPACE, ns)
        except NotFound:
            pass
        await client.close()
        if fake is not None:
            await fake.stop()

    target = "the in-memory fake API server" if fake else f"the API server at {config.server}"
    objects = len(before)
    w = ", ".join(f"{k} {v:.0f}" for k, v in sorted(restart_writes.items())) or "none"
    lines = [
        f"### {args.n:,} TrainJobs, then a restart ({'fake' if fake else 'real API server'})",
        "",
        f"`python bench/operator_scale.py{' --kubeconfig …' if not fake else ''}` against {target}; operator QPS "
        f"{args.qps:g} / burst {args.burst}, concurrency {args.concurrency}, leader election on. Baseline: one "
        f"unthrottled GET of a TrainJob = {per_get * 1000:.2f} ms.",
        "",
        "| measure | value | target |",
        "|---|---:|---|",
        f"| creates (64 in flight) | {created:.1f} s | – |",
        f"| all {args.n:,} JobSets created | {jobsets_done:.1f} s | – |",
        f"| all {args.n:,} TrainJobs Complete (JobSets completed by the bench) | {lifecycle:.1f} s | – |",
        f"| operator writes during that life | {writes_first:,.0f} | – |",
        f"| operator peak RSS over the life | **{rss_first:.1f} MiB** | ≤ 150 MiB: {_met(rss_first <= 150)} |",
        f"| restart baseline: the bench listing the same TrainJobs, JobSets and ConfigMaps once | {list_all:.1f} s "
        "| – |",
        f"| restart: process start → /readyz | **{ready:.1f} s** ({ready / list_all:.1f}× that list) "
        f"| ≤ 30 s: {_met(ready <= 30)} |",
        f"| restart: start → all {args.n:,} relisted keys reconciled | {settled:.1f} s | – |",
        f"| restart: writes (Lease renewals excluded) | **{w}** | none: {_met(not restart_writes)} |",
        f"| restart: objects changed (of {objects:,} TrainJobs, JobSets, ConfigMaps) | {changed} "
        f"| 0: {_met(changed == 0)} |",
        f"| restart: peak RSS | {rss_restart:.1f} MiB | ≤ 150 MiB: {_met(rss_restart <= 150)} |",
        "",
        "The restart is mostly listing: compare it with the plain list of the same objects above"
        + (" (the in-memory fake, pure Python in the bench's own process, lists far slower than kube-apiserver). "
           if fake else ". ")
        + "Objects per TrainJob: the TrainJob, its JobSet, its runtime snapshot and its progress endpoint's CA "
        "ConfigMap. "
        f"Machine load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
    ]
    return "\n".join(lines)


async def _counter(port: int, name: str, n: int) -> bool:
    return (await metrics(port)).get(name, 0) >= n


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=10_000, help="TrainJobs")
    p.add_argument("--baseline", type=int, default=200, help="sequential GETs for the baseline")
    p.add_argument("--qps", type=float, default=50.0)
    p.add_argument("--burst", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--kubeconfig", default=None, help="measure against this real API server instead of the fake")
    p.add_argument("--context", default=None)
    p.add_argument("--namespace", default=None)
    p.add_argument("--no-write", action="store_true", help="print the section, do not update BENCHMARKS.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv if argv is not None else [])
    section = asyncio.run(bench(args))
    print(section)
    if not args.no_write:
        if args.kubeconfig:
            write_section("operator_scale_real", section, after="operator_scale")
        else:
            write_section("operator_scale", section, after="operator_real")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
