"""The quickstart on the built-in `torch-distributed-restricted` runtime trains and ends Complete: the
restricted pod template (read-only root with an emptyDir /tmp, HOME=/tmp) is one a real job can run in."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.examples.test_quickstart import ROOT, pytestmark  # noqa: F401  (same markers and skips)


def test_quickstart_on_the_restricted_runtime(tmp_path: Path) -> None:
    job = yaml.safe_load((ROOT / "examples/quickstart/trainjob.yaml").read_text())
    job["metadata"]["name"] = "quickstart-restricted"
    job["spec"]["runtimeRef"]["name"] = "torch-distributed-restricted"
    # Locally a pod without workingDir starts in the manifest's directory: put train.py next to it, below /tmp on
    # purpose, which the runtime's emptyDir covers inside the pod (the directory stays visible on top of it).
    work = Path(tempfile.mkdtemp(prefix="restricted-quickstart-", dir="/tmp"))
    work.chmod(0o755)  # its pods run as uid 1000, which must read train.py like a file of the image
    shutil.copy(ROOT / "examples/quickstart/train.py", work / "train.py")
    manifest = work / "trainjob.yaml"
    manifest.write_text(yaml.safe_dump(job))
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
    try:
        r = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(manifest)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"did not finish in 300 s: {exc.stdout}\n{exc.stderr}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    losses = [float(x) for x in re.findall(r"epoch \d+/5 loss ([0-9.]+)", r.stdout)]
    assert len(losses) == 5 and losses[-1] < losses[0], r.stdout
    assert "Complete" in r.stderr
