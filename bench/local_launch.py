"""Launch overhead of the local backend: the same script under plain ``torchrun`` and under ``kubetrain run``.

Cases (each run ``--runs`` times, interleaved so machine noise hits all cases alike; medians reported):
  * 1 node x 2 processes   vs ``torchrun --nproc-per-node=2``
  * 2 nodes x 2 processes  vs ``torchrun --nproc-per-node=4``
  * a trivial function through ``kubetrain.Client().train(func=...)`` vs the official Kubeflow SDK's local
    process backend (``kubeflow`` from PyPI in its own virtualenv, torch from the local wheel cache)

Usage: ``make bench`` or ``.venv/bin/python bench/run_all.py local_launch`` (writes its BENCHMARKS.md section);
standalone ``python -m bench.local_launch --runs 5 --no-kubeflow`` only prints it. Needs bubblewrap (root or
unprivileged user namespaces) and torch (``make install``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KUBEFLOW_VERSION = "0.5.0"
TORCH_VERSION = "2.13.0"

SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == dist.get_world_size()
    dist.barrier()
    os._exit(0)  # skip gloo teardown, which can abort when peers have exited (see examples/quickstart)
""")

FUNC_MODULE = textwrap.dedent("""
    def trivial():
        import os
        print("rank", os.environ.get("RANK"), "of", os.environ.get("WORLD_SIZE"))
""")

KUBEFLOW_DRIVER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from fn import trivial
    from kubeflow.trainer import CustomTrainer, LocalProcessBackendConfig, TrainerClient
    client = TrainerClient(backend_config=LocalProcessBackendConfig())
    t0 = time.perf_counter()
    name = client.train(runtime=client.get_runtime("torch-distributed"),
                        trainer=CustomTrainer(func=trivial, packages_to_install=["torch==TORCH_VERSION"]))
    job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=900, polling_interval=0.1)
    print(f"{job.status} {time.perf_counter() - t0:.3f}")
""".replace("TORCH_VERSION", TORCH_VERSION)
)


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(
            f"benchmark command failed ({r.returncode}): {' '.join(argv)}\n{r.stdout}\n{r.stderr}"
        )
    return elapsed


def timed_two_agents(torchrun: str, env: dict[str, str], cwd: Path) -> float:
    """Two torchrun agents x 2 processes with static rendezvous on loopback: what a 2-node job costs without
    kubetrain (each node is its own agent, as on a cluster)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                torchrun,
                "--nnodes=2",
                f"--node-rank={r}",
                "--nproc-per-node=2",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "allreduce.py",
            ],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in (0, 1)
    ]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - t0
    if any(codes):
        raise SystemExit(f"two-agent torchrun failed: exit codes {codes}")
    return elapsed


def trainjob_yaml(path: Path, name: str, nodes: int, procs: int, command: str = "[torchrun, allreduce.py]") -> None:
    path.write_text(
        textwrap.dedent(f"""
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {{name: {name}}}
        spec:
          runtimeRef: {{name: torch-distributed}}
          trainer: {{numNodes: {nodes}, numProcPerNode: {procs}, command: {command}}}
    """)
    )


def kubeflow_python(cache: Path) -> Path:
    """A separate virtualenv with the official SDK, so its dependencies never touch kubetrain's."""
    venv = cache / f"kubeflow-{KUBEFLOW_VERSION}"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"kubeflow=={KUBEFLOW_VERSION}"], check=True)
    return py


def main(argv: list[str] | None = None) -> None:
    """``run_all`` calls ``main()`` with its own argv in ``sys.argv``, so options come only from ``argv``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--print-only", action="store_true", help="do not write BENCHMARKS.md")
    parser.add_argument("--no-kubeflow", action="store_true", help="skip the Kubeflow SDK comparison")
    opts = parser.parse_args(argv or [])
    work = Path(tempfile.mkdtemp(prefix="kubetrain-bench-"))
    (work / "allreduce.py").write_text(SCRIPT)
    (work / "fn.py").write_text(FUNC_MODULE)
    (work / "kf_driver.py").write_text(KUBEFLOW_DRIVER)
    env = {**os.environ, "KUBETRAIN_HOME": str(work / "home"), "PYTHONWARNINGS": "ignore"}
    # Bytecode caching on, as on a user's machine: without it every case recompiles its imports from source each
    # run (kubetrain's CLI and supervisor far more than torchrun's agent), which is not what users pay.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    bindir = Path(sys.executable).parent
    torchrun = str(bindir / "torchrun")
    # --replace: each run replaces the previous (finished) one of the same name, as in an edit-and-rerun loop.
    kubetrain = [sys.executable, "-m", "kubetrain.cli.main", "run", "-q", "--replace"]
    no_cache = {**env, "KUBETRAIN_COMPILE_CACHE": "0"}
    trainjob_yaml(work / "tj-1x2.yaml", "bench-1x2", 1, 2)
    trainjob_yaml(work / "tj-2x2.yaml", "bench-2x2", 2, 2)
    # The same 2-node job with a no-op command: kubetrain's own share (CLI, compile, sandboxes, status).
    trainjob_yaml(work / "tj-noop.yaml", "bench-noop", 2, 2, command='["true"]')
    client_code = (
        f"import sys; sys.path.insert(0, {str(work)!r})\nfrom fn import trivial\nimport kubetrain.client as k\n"
        "c = k.Client(); n = c.train(func=trivial, num_nodes=1, num_proc_per_node=1)\n"
        "assert c.wait(n).state == 'Complete'\n"
    )
    cases: dict[str, Callable[[], float]] = {
        "torchrun 1x2": lambda: timed([torchrun, "--nproc-per-node=2", "allreduce.py"], env, work),
        "kubetrain run 1x2": lambda: timed([*kubetrain, "-f", "tj-1x2.yaml"], env, work),
        "torchrun 1x4": lambda: timed([torchrun, "--nproc-per-node=4", "allreduce.py"], env, work),
        "torchrun 2 agents x2": lambda: timed_two_agents(torchrun, env, work),
        "kubetrain run 2x2": lambda: timed([*kubetrain, "-f", "tj-2x2.yaml"], env, work),
        "kubetrain run 2 nodes, no-op": lambda: timed([*kubetrain, "-f", "tj-noop.yaml"], env, work),
        "kubetrain run 2 nodes, no-op, no compile cache": lambda: timed(
            [*kubetrain, "-f", "tj-noop.yaml"], no_cache, work
        ),
        "kubetrain Client func": lambda: timed([sys.executable, "-c", client_code], env, work),
    }
    if not opts.no_kubeflow:
        kf = kubeflow_python(ROOT / "bench" / ".cache")
        kf_env = {k: v for k, v in os.environ.items() if not k.startswith("KUBETRAIN")}
        cases["kubeflow SDK local func"] = lambda: timed([str(kf), "kf_driver.py", str(work)], kf_env, work)
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():  # warm-up: page cache, .pyc, pip cache; not measured
        fn()
    for i in range(opts.runs):
        for k, fn in cases.items():
            samples[k].append(fn())
        print(f"run {i + 1}/{opts.runs} done", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in samples.items()}
    lines = [
        "## Local backend launch overhead (`bench/local_launch.py`)",
        "",
        f"Median wall time of {opts.runs} interleaved runs each, after one warm-up; {os.cpu_count()} cores. "
        "The script initialises gloo, all-reduces one tensor and exits.",
        "",
        "| case | median (s) | min (s) | max (s) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {k} | {med[k]:.2f} | {min(v):.2f} | {max(v):.2f} |" for k, v in samples.items()]
    lines += [
        "",
        f"- overhead 1 node x 2 procs: **{med['kubetrain run 1x2'] - med['torchrun 1x2']:+.2f} s** (target <= 0.5 s)",
        f"- overhead 2 nodes x 2 procs vs one torchrun with 4 procs: "
        f"**{med['kubetrain run 2x2'] - med['torchrun 1x4']:+.2f} s** (target <= 0.5 s); vs two torchrun agents "
        f"(what 2 nodes cost without kubetrain): **{med['kubetrain run 2x2'] - med['torchrun 2 agents x2']:+.2f} s** "
        "(target <= 0.3 s)",
        f"- kubetrain's own share of a 2-node run (same job, command `true`: CLI start, its network namespace, "
        f"two sandboxes, status; re-run of a manifest, answered from the compile cache): "
        f"**{med['kubetrain run 2 nodes, no-op']:.2f} s** (target <= 0.25 s); the first run of a manifest "
        f"(validation and compilation, with pydantic): "
        f"**{med['kubetrain run 2 nodes, no-op, no compile cache']:.2f} s**. Against one torchrun with 4 processes, "
        "a 2-node job also pays for a second torchrun agent importing torch on this 2-core machine, as it would "
        "without kubetrain",
    ]
    if "kubeflow SDK local func" in med:
        lines.append(
            f"- trivial function, Kubeflow SDK {KUBEFLOW_VERSION} local process backend vs "
            f"`kubetrain.Client().train(func=...)`: "
            f"**{med['kubeflow SDK local func'] / med['kubetrain Client func']:.1f}x** faster with kubetrain "
            "(the SDK builds a virtualenv and pip-installs torch for every job)"
        )
    text = "\n".join(lines) + "\n"
    shutil.rmtree(work, ignore_errors=True)  # the scripts, manifests and the runs' KUBETRAIN_HOME
    sys.stdout.write(text)
    if not opts.print_only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _report import write_section

        write_section("local_launch", text)


if __name__ == "__main__":
    main(sys.argv[1:])
