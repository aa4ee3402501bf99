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

from tests.examples.envs import framework_env
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


CASES = [
    pytest.param(
        Case("deepspeed", 4, r"training on (\d+) ranks with ZeRO stage (1)", r"rank (\d)/4: parameter checksum (\S+)"),
        marks=needs_mpirun, id="deepspeed",
    ),
    pytest.param(Case("jax", 2, r"process (\d)/(\d): 2 devices", r"process (\d): parameter checksum (\S+)"), id="jax"),
    pytest.param(
        Case("xgboost", 2, r"worker (\d)/(\d) connected", r"worker (\d): (\d+) trees",
             loss=r"round (\d+)/\d+ train-logloss ([0-9.]+)"),
        id="xgboost",
    ),
    pytest.param(Case("mlx", 2, r"rank (\d)/(\d) joined", r"rank (\d)/2: parameter checksum (\S+)"),
                 marks=needs_mpirun, id="mlx"),
    pytest.param(Case("tensorflow", 2, r"worker (\d)/(\d) joined", r"worker (\d): weight checksum (\S+)"),
                 id="tensorflow"),
]


@pytest.mark.parametrize("case", CASES)
def test_example_trains_on_2_nodes(case: Case, tmp_path: Path) -> None:
    env = framework_env(case.extra)
    home = tmp_path / "home"
    env.images_yaml(home)
    # A private TMPDIR, as a pod's own /tmp would be: MLX compiles kernels into $TMPDIR/mlx/<version>, which on
    # this machine's shared /tmp may belong to another user (the MPI runtimes' pods run as uid 1000).
    pod_tmp = Path(tempfile.mkdtemp(prefix="kubetrain-example-tmp-"))
    pod_tmp.chmod(0o1777)
    manifest = ROOT / "examples" / env.framework.extra / "trainjob.yaml"
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "--timeout", "9m", "-f", str(manifest)],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "KUBETRAIN_HOME": str(home), "TMPDIR": str(pod_tmp)},
        )
    finally:
        shutil.rmtree(pod_tmp, ignore_errors=True)
    seconds = time.monotonic() - started
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
        f"\n{case.extra}: {case.ranks} ranks on 2 nodes, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"end state {next(iter(ends.values()))} on every rank; run {seconds:.0f} s; environment "
        f"{'reused' if env.reused else 'built'} ({env.build_seconds:.0f} s to build) at {env.prefix}"
    )
