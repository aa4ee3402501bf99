"""Pod-to-pod bandwidth of the local backend against the machine's own: a gloo all-reduce of 16 MiB tensors.

Cases, measured in the same run and interleaved (the order alternates every round, so machine noise and drift hit
both alike):
  * **pods**: ``kubetrain run`` of a 2-node TrainJob, one process per node: the two ranks talk over the pods'
    network (each pod's ``eth0``, a veth pair, the TrainJob's bridge).
  * **loopback**: one bare ``torchrun --nproc-per-node 2`` of the same script: the two ranks talk over ``lo``.

Each rank all-reduces a 16 MiB float32 tensor ``--iters`` times after three warm-up rounds; rank 0 prints the
bandwidth (tensor bytes x iterations / seconds). The figure is pods ÷ loopback (median of each case), target >= 0.9.

Usage: ``make bench`` or ``.venv/bin/python bench/run_all.py pod_network`` (writes its BENCHMARKS.md section);
``python bench/pod_network.py --rounds 5 --print-only`` only prints it. Runs as root or as an ordinary user (the
section says which). Needs bubblewrap and torch (``make install``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TENSOR_MIB = 16

SCRIPT = textwrap.dedent(f"""
    import fcntl, os, socket, struct, sys, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones({TENSOR_MIB} * 2**20 // 4)
    for _ in range(3):
        dist.all_reduce(t)
    iters = int(sys.argv[1])
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    elapsed = time.perf_counter() - start
    if dist.get_rank() == 0:
        try:  # SIOCGIFMTU: this network namespace's eth0 (the pod's /sys shows the machine's interfaces)
            req = fcntl.ioctl(socket.socket(), 0x8921, struct.pack("16si", b"eth0", 0))
            mtu = struct.unpack("16si", req)[1]
        except OSError:
            mtu = "-"
        print(f"BANDWIDTH {{iters * t.numel() * 4 / elapsed / 1e9:.4f}} GB/s eth0-mtu {{mtu}}", flush=True)
    dist.barrier()
    os._exit(0)  # skip gloo teardown, which can abort when peers have exited (see examples/quickstart)
""")

TRAINJOB = textwrap.dedent("""
    apiVersion: trainer.kubeflow.org/v1alpha1
    kind: TrainJob
    metadata: {{name: bench-pod-network}}
    spec:
      runtimeRef: {{name: torch-distributed}}
      trainer:
        numNodes: 2
        numProcPerNode: 1
        command: [torchrun, allreduce_bw.py, "{iters}"]
""")

_BANDWIDTH = re.compile(r"BANDWIDTH ([0-9.]+) GB/s eth0-mtu (\S+)")


def _bandwidth(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    found = _BANDWIDTH.search(r.stdout + r.stderr)
    if r.returncode != 0 or found is None:
        raise SystemExit(f"benchmark command failed ({r.returncode}): {' '.join(argv)}\n{r.stdout}\n{r.stderr}")
    return float(found.group(1)), found.group(2)


def main(argv: list[str] | None = None) -> None:
    """``run_all`` calls ``main()`` with its own argv in ``sys.argv``, so options come only from ``argv``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=30, help="timed all-reduces per run")
    parser.add_argument("--print-only", action="store_true", help="do not write BENCHMARKS.md")
    opts = parser.parse_args(argv or [])
    work = Path(tempfile.mkdtemp(prefix="kubetrain-bench-net-"))
    os.chmod(work, 0o755)
    (work / "allreduce_bw.py").write_text(SCRIPT)
    (work / "trainjob.yaml").write_text(TRAINJOB.format(iters=opts.iters))
    env = {**os.environ, "KUBETRAIN_HOME": str(work / "home"), "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    torchrun = str(Path(sys.executable).parent / "torchrun")
    cases = {
        "loopback": [torchrun, "--nproc-per-node=2", "allreduce_bw.py", str(opts.iters)],
        "pods": [sys.executable, "-m", "kubetrain.cli.main", "run", "--replace", "-f", "trainjob.yaml"],
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    mtu = "-"
    for argv_ in cases.values():  # warm-up: page cache, .pyc, the compile cache; not measured
        _bandwidth(argv_, env, work)
    for i in range(opts.rounds):
        order = list(cases) if i % 2 == 0 else list(reversed(cases))
        for name in order:
            value, seen_mtu = _bandwidth(cases[name], env, work)
            samples[name].append(value)
            if name == "pods":
                mtu = seen_mtu
        print(f"round {i + 1}/{opts.rounds}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in samples.items()),
              file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in samples.items()}
    # The figure pairs each pods run with the loopback run beside it (same round, similar load from the machine's
    # other work); the ratios of the medians and of the best runs (what each reaches undisturbed) are shown too.
    paired = statistics.median(p / lo for p, lo in zip(samples["pods"], samples["loopback"], strict=True))
    ratio = med["pods"] / med["loopback"]
    best = max(samples["pods"]) / max(samples["loopback"])
    load = os.getloadavg()[0]
    who = "root" if os.geteuid() == 0 else f"an ordinary user (uid {os.geteuid()})"
    lines = [
        "## Pod-to-pod bandwidth (`bench/pod_network.py`)",
        "",
        f"gloo all-reduce of a {TENSOR_MIB} MiB float32 tensor between 2 ranks, {opts.iters} timed all-reduces per "
        f"run, {opts.rounds} interleaved rounds; run as {who}, {os.cpu_count()} cores, load average (1 min) at the "
        f"end {load:.1f}. **pods**: `kubetrain run` of a 2-node x 1-process TrainJob (each pod's eth0, MTU {mtu}, "
        "through the TrainJob's bridge); **loopback**: one bare `torchrun --nproc-per-node 2` of the same script.",
        "",
        "| case | median (GB/s) | min | max |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {k} | {med[k]:.3f} | {min(v):.3f} | {max(v):.3f} |" for k, v in samples.items()]
    verdict = "met" if paired >= 0.9 else "NOT met"
    lines += [
        "",
        f"- pods ÷ loopback: **{paired:.2f}x** (median of the {opts.rounds} rounds' ratios; target >= 0.9x: "
        f"{verdict}); ratio of the medians {ratio:.2f}x, of the best runs {best:.2f}x",
    ]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if not opts.print_only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _report import write_section

        write_section("pod_network", text, after="local_launch")


if __name__ == "__main__":
    main(sys.argv[1:])
