"""The README quickstart: `kubetrain run -f examples/quickstart/trainjob.yaml` trains and ends Complete."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.requirements import needs_local_sandbox, needs_torch

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    needs_torch,
    needs_local_sandbox,
]


def test_quickstart_trains_2_nodes_x_2_procs_and_completes(tmp_path: Path) -> None:
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubetrain.cli.main",
            "run",
            "-f",
            str(ROOT / "examples/quickstart/trainjob.yaml"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the supervisor stops its pods and removes its network namespace
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"quickstart did not finish in 300 s:\n{out}\n{err}")
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "training on 4 processes (2 nodes)" in r.stdout
    losses = [float(x) for x in re.findall(r"epoch \d+/5 loss ([0-9.]+)", r.stdout)]
    assert len(losses) == 5 and losses[-1] < losses[0], r.stdout
    assert "Complete" in r.stderr
    # Rank 0 reported each epoch to the TrainJob's status: the progress and the loss a chart draws.
    shown = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "metrics", "quickstart", "-o", "json"],
        capture_output=True, text=True, env=env, check=True,
    )
    history = json.loads(shown.stdout)
    assert [p["trainerStatus"]["progressPercentage"] for p in history] == [20, 40, 60, 80, 100]
    reported = [float(m["value"]) for p in history for m in p["trainerStatus"]["metrics"] if m["name"] == "loss"]
    assert reported == losses
