"""Every built-in runtime's framework trains for real on 2 nodes: `kubetrain run -f examples/<framework>/trainjob.yaml`
with the framework's pinned packages (pyproject extras) in the environment images.yaml maps the runtime's image to.

Each example prints the loss of every epoch (reduced over all ranks) and, per rank, a checksum of its parameters;
data parallelism is real when every rank ends with the same checksum and the loss fell.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kubetrain.runtimes import builtin_runtime
from tests.examples.envs import Env, framework_env
from tests.requirements import needs_local_sandbox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    # Building a framework's environment (first run only) and, for DeepSpeed, compiling its CPU op on first use
    # come on top of the training run on a busy 2-core machine.
    pytest.mark.timeout(1800),
    needs_local_sandbox,
]
needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI's mpirun (make system-deps)")


@dataclass(frozen=True)
class Case:
    extra: str
    ranks: int  # processes across the 2 nodes
    joined: str  # a line every rank prints once it is part of the group, with (rank) and (world)
    checksum: str  # a line every rank prints at the end, with (rank) and (checksum)
    loss: str = r"epoch (\d+)/\d+ loss ([0-9.]+)"


DEEPSPEED = Case("deepspeed", 4, r"training on (\d+) ranks with ZeRO stage (1)",
                 r"rank (\d)/4: parameter checksum (\S+)")
CASES = [
    pytest.param(DEEPSPEED, marks=needs_mpirun, id="deepspeed"),
    pytest.param(Case("jax", 2, r"process (\d)/(\d): 2 devices", r"process (\d): parameter checksum (\S+)"), id="jax"),
    pytest.param(
        Case("xgboost", 2, r"worker (\d)/(\d) connected", r"worker (\d): (\d+) trees",
             loss=r"round (\d+)/\d+ train-logloss ([0-9.]+)"),
        id="xgboost",
    ),
    pytest.param(Case("mlx", 4, r"rank (\d)/(\d) joined", r"rank (\d)/4: parameter checksum (\S+)"),
                 marks=needs_mpirun, id="mlx"),
    pytest.param(Case("tensorflow", 2, r"worker (\d)/(\d) joined", r"worker (\d): weight checksum (\S+)"),
                 id="tensorflow"),
]


def torch_extensions(env: Env) -> Path:
    """Where DeepSpeed's CPU ops are compiled to for ``env``: a directory of the environment, so that environments
    with the same torch (DeepSpeed over OpenMPI and over Intel MPI) do not rebuild each other's ops in the pod user's
    shared ~/.cache/torch_extensions, and a rebuilt environment starts afresh. Writable by the pods' uid 1000."""
    path = env.prefix / "torch-extensions"
    path.mkdir(exist_ok=True)
    path.chmod(0o1777)
    return path


def run_example(env: Env, home: Path, manifests: list[Path], extra_env: dict[str, str] | None = None) -> tuple[
        subprocess.CompletedProcess[str], float]:
    env.images_yaml(home)
    # A private TMPDIR, as a pod's own /tmp would be: MLX compiles kernels into $TMPDIR/mlx/<version>, which on
    # this machine's shared /tmp may belong to another user (the MPI runtimes' pods run as uid 1000).
    pod_tmp = Path(tempfile.mkdtemp(prefix="kubetrain-example-tmp-"))
    pod_tmp.chmod(0o1777)
    started = time.monotonic()
    files = [arg for m in manifests for arg in ("-f", str(m))]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "--timeout", "9m", *files],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "KUBETRAIN_HOME": str(home), "TMPDIR": str(pod_tmp),
                 "TORCH_EXTENSIONS_DIR": str(torch_extensions(env)), **(extra_env or {})},
        )
    finally:
        shutil.rmtree(pod_tmp, ignore_errors=True)
    return proc, time.monotonic() - started


def check_training(case: Case, env: Env, proc: subprocess.CompletedProcess[str], seconds: float) -> None:
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-3000:]
    assert "Complete" in proc.stderr

    joined = re.findall(case.joined, out)
    if case.extra == "deepspeed":  # rank 0 reports the world size and the ZeRO stage
        assert joined == [("4", "1")], out
    else:
        assert sorted(joined) == [(str(r), str(case.ranks)) for r in range(case.ranks)], out
    losses = [float(v) for _, v in re.findall(case.loss, out)]
    assert len(losses) >= 3 and losses[-1] < 0.7 * losses[0], out
    ends = dict(re.findall(case.checksum, out))
    assert sorted(ends) == [str(r) for r in range(case.ranks)], out
    assert len(set(ends.values())) == 1, f"ranks ended with different parameters: {ends}"
    print(
        f"\n{env.framework.extra}: {case.ranks} ranks on 2 nodes, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"end state {next(iter(ends.values()))} on every rank; run {seconds:.0f} s; environment "
        f"{'reused' if env.reused else 'built'} ({env.build_seconds:.0f} s to build) at {env.prefix}"
    )


@pytest.mark.parametrize("case", CASES)
def test_example_trains_on_2_nodes(case: Case, tmp_path: Path) -> None:
    env = framework_env(case.extra)
    manifest = ROOT / "examples" / env.framework.extra / "trainjob.yaml"
    proc, seconds = run_example(env, tmp_path / "home", [manifest])
    check_training(case, env, proc, seconds)


def test_deepspeed_trains_over_intel_mpi(tmp_path: Path) -> None:
    """examples/deepspeed on deepspeed-distributed with mpiImplementation: Intel: Intel MPI's Hydra starts the
    ranks, and DeepSpeed finds its world through mpi4py on Intel MPI."""
    env = framework_env("deepspeed-intel-mpi")
    runtime = builtin_runtime("deepspeed-distributed")
    assert runtime is not None
    wire = runtime.to_wire()
    wire["metadata"]["name"] = "deepspeed-intel-mpi"
    wire["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "Intel"
    job = yaml.safe_load((ROOT / "examples" / "deepspeed" / "trainjob.yaml").read_text())
    job["spec"]["runtimeRef"]["name"] = "deepspeed-intel-mpi"
    # Intel MPI says which library and fabric its ranks use.
    job["spec"]["trainer"]["env"].append({"name": "I_MPI_DEBUG", "value": "5"})
    work = tmp_path / "work"
    work.mkdir()
    for path in (tmp_path, work):
        path.chmod(0o755)  # the runtime's pods run as uid 1000
    shutil.copy(ROOT / "examples" / "deepspeed" / "train.py", work)
    (work / "runtime.yaml").write_text(yaml.safe_dump(wire))
    (work / "trainjob.yaml").write_text(yaml.safe_dump(job))
    proc, seconds = run_example(env, tmp_path / "home", [work / "runtime.yaml", work / "trainjob.yaml"])
    assert "MPI startup(): Intel(R) MPI Library, Version 2021.17" in proc.stdout, proc.stdout[-6000:]
    assert "MPI startup(): libfabric provider: tcp" in proc.stdout, proc.stdout[-6000:]
    check_training(DEEPSPEED, env, proc, seconds)
