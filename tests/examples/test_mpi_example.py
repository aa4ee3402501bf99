"""examples/mpi: mpirun across the local "nodes" of the deepspeed-distributed runtime, 4 ranks."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
        reason="needs OpenMPI's mpirun (make system-deps) and mpi4py (.[train])",
    ),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None,
        reason="needs root and bubblewrap for the local backend (make system-deps)",
    ),
]


def test_mpi_example_allreduces_over_4_ranks(tmp_path: Path) -> None:
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(ROOT / "examples/mpi/trainjob.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"the MPI example did not finish in 300 s:\n{out}\n{err}")
    assert proc.returncode == 0, out + err
    ranks = sorted(re.findall(r"rank (\d)/4 on \S+: sum of ranks = 6", out))
    assert ranks == ["0", "1", "2", "3"], out
