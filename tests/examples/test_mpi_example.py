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

from tests.requirements import needs_local_sandbox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
        reason="needs OpenMPI's mpirun (make system-deps) and mpi4py (.[train])",
    ),
    needs_local_sandbox,
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


def test_a_session_directory_left_in_the_hosts_tmp_by_another_user_changes_nothing(tmp_path: Path) -> None:
    # On a node OpenMPI's session directory is in the container's own /tmp; locally the host's /tmp is shared,
    # and a run of the same TrainJob by another user (or uid mapping) leaves /tmp/ompi.<pod>.<uid> behind.
    left = Path("/tmp/ompi.mpi-allreduce-launcher-0-0.1000")
    if os.geteuid() != 0 or left.exists():
        pytest.skip("needs root to leave another user's session directory behind, and none there already")
    left.mkdir(mode=0o700)
    os.chown(left, 4242, 4242)
    try:
        env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
        r = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(ROOT / "examples/mpi/trainjob.yaml")],
            capture_output=True, text=True, env=env, timeout=300,
        )
    finally:
        left.rmdir()
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("sum of ranks = 6") == 4, r.stdout
