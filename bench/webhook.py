"""Admission webhook latency: TrainJob reviews over real TLS on 127.0.0.1.

Starts the webhook server with a generated certificate and an in-memory runtime lookup, sends a bounded
number of AdmissionReview requests from a few concurrent HTTPS clients, and reports the server-side handling
time (parse + validate + respond, measured inside the server) and the client round trip. Target: server-side
p99 for a TrainJob review <= 20 ms. The server answers every review with ``Connection: close`` (see
docs/webhook.md#availability-why-admission-fails-closed-and-how-it-stays-up), so each review pays a TLS handshake
in the round trip, on both sides, as the API server's calls do.

    python bench/webhook.py [--requests 2000] [--concurrency 4] [--no-write]

Writes (or replaces) the "Admission webhook" section of BENCHMARKS.md.
"""

from __future__ import annotations

import sys

# `python bench/webhook.py` puts bench/ first on sys.path, where bench/operator.py would shadow the standard
# library's `operator` module (imported by argparse, asyncio, ...). Drop that entry before anything loads.
if sys.path and sys.path[0] == __file__.rpartition("/")[0]:
    del sys.path[0]

import argparse
import asyncio
import datetime as dt
import importlib.util
import json
import os
import platform
import ssl
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from kubetrain.k8s.certs import generate_bundle, write_cert_dir
from kubetrain.k8s.webhook import names, start
from kubetrain.k8s.webhook.server import LATENCIES
from kubetrain.runtimes import builtin_runtime

SERVICE, NAMESPACE = "kubetrain-operator", "kubeflow-system"
TARGET_P99_MS = 20.0

# bench/_report.py (shared by all benchmarks) writes the section; loaded by path: bench/ is not a package.
_spec = importlib.util.spec_from_file_location(
    "bench_report", Path(__file__).resolve().with_name("_report.py")
)
assert _spec and _spec.loader
_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_report)


def _review(i: int) -> bytes:
    obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": f"job-{i}", "namespace": "default"},
        "spec": {
            "runtimeRef": {
                "name": "torch-distributed",
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": {
                "image": "pytorch/pytorch:2.13.0",
                "command": ["torchrun", "train.py"],
                "numNodes": 2,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},
            },
        },
    }
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        "operation": "CREATE",
        "namespace": "default",
        "name": obj["metadata"]["name"],  # type: ignore[index]
        "object": obj,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def _pct(data: list[float], p: float) -> float:
    s = sorted(data)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def run(requests: int, concurrency: int) -> dict[str, Any]:
    runtime = builtin_runtime("torch-distributed")
    assert runtime is not None
    stored = runtime.to_wire()

    async def lookup(kind: str, name: str, namespace: str | None) -> Any:
        # A dict, as an informer cache hands it out: the runtime is parsed on every review (the slower path).
        if (kind, name) == ("ClusterTrainingRuntime", "torch-distributed"):
            return json.loads(json.dumps(stored))
        return None

    bundle = generate_bundle(SERVICE, NAMESPACE, dt.datetime.now(dt.UTC))
    with tempfile.TemporaryDirectory() as certs:
        write_cert_dir(bundle, certs)
        server = await start(lookup, cert_dir=certs, host="127.0.0.1", port=0)
        try:
            ctx = ssl.create_default_context(cadata=bundle.ca_cert.decode())
            url = f"https://127.0.0.1:{server.port}{names.VALIDATE_TRAINJOB}"
            bodies = [_review(i) for i in range(requests)]
            client: list[float] = []
            allowed = 0
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ctx, limit=concurrency)
            ) as session:

                async def one(body: bytes) -> None:
                    nonlocal allowed
                    t0 = time.perf_counter()
                    async with session.post(
                        url,
                        data=body,
                        headers={"Content-Type": "application/json"},
                        server_hostname=f"{SERVICE}.{NAMESPACE}.svc",
                    ) as resp:
                        out = await resp.json()
                    client.append(time.perf_counter() - t0)
                    allowed += bool(out["response"]["allowed"])

                for body in bodies[: min(50, requests)]:  # warm-up: imports, first TLS handshakes
                    await one(body)
                server.app[LATENCIES].samples.clear()
                client.clear()
                allowed = 0
                queue = list(bodies)
                started = time.perf_counter()

                async def worker() -> None:
                    while queue:
                        await one(queue.pop())

                await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), timeout=300)
                elapsed = time.perf_counter() - started
            server_side = list(server.app[LATENCIES].samples[names.VALIDATE_TRAINJOB])
        finally:
            await server.stop()
    return {
        "requests": requests,
        "concurrency": concurrency,
        "allowed": allowed,
        "throughput": requests / elapsed,
        "server_ms": {p: _pct(server_side, p) * 1000 for p in (50, 90, 99)},
        "server_mean_ms": statistics.mean(server_side) * 1000,
        "client_ms": {p: _pct(client, p) * 1000 for p in (50, 90, 99)},
    }


def section(r: dict[str, Any]) -> str:
    """The Markdown of the "webhook" section (``_report.write_section`` adds markers and a time stamp)."""
    s, c = r["server_ms"], r["client_ms"]
    verdict = "meets" if s[99] <= TARGET_P99_MS else "MISSES"
    return "\n".join(
        [
            "## Admission webhook (TrainJob validation)",
            "",
            f"`python bench/webhook.py`: {r['requests']} CREATE reviews of a 2-node torch TrainJob against "
            "the built-in `torch-distributed` runtime (looked up as a dict and parsed per review), HTTPS on "
            f"127.0.0.1, {r['concurrency']} concurrent clients, one TLS connection per review (the server closes "
            f"each, see docs/webhook.md), {platform.python_implementation()} "
            f"{platform.python_version()}, {_cores()} cores. Server-side time is measured in the request "
            "handler (read body, parse, look up, validate, rate the pods (Pod Security), encode); TLS and HTTP "
            "parsing count only in the round trip.",
            "",
            "| measure | p50 | p90 | p99 |",
            "|---|---|---|---|",
            f"| server-side (ms) | {s[50]:.2f} | {s[90]:.2f} | {s[99]:.2f} |",
            f"| client round trip (ms) | {c[50]:.2f} | {c[90]:.2f} | {c[99]:.2f} |",
            "",
            f"Throughput {r['throughput']:.0f} reviews/s; {r['allowed']}/{r['requests']} allowed. "
            f"Target server-side p99 <= {TARGET_P99_MS:.0f} ms: {verdict}.",
        ]
    )


def _cores() -> int:
    return os.cpu_count() or 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    # Called without arguments by bench/run_all.py, whose own argv names benchmarks, not our options.
    args = parser.parse_args(argv if argv is not None else [])
    result = asyncio.run(run(args.requests, args.concurrency))
    text = section(result)
    print(text)
    if not args.no_write:
        _report.write_section("webhook", text)
    return 0 if result["server_ms"][99] <= TARGET_P99_MS else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
