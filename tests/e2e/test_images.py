"""The same image on both backends: the manifests of ``tests/local/images/test_bed_image.py`` (the quickstart 2x2 in
the bed's training image, code from a ConfigMap, saying which Python runs it) on the bed, with the image the bed's
containerd imported. Locally that test runs them from the image loaded with ``kubetrain images load``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import IMAGE, REPO, DeployedOperator, kubetrain
from tests.local.images.testimage import quickstart_in_image

pytestmark = pytest.mark.e2e


def test_the_same_quickstart_manifests_train_on_the_bed(
    fresh_namespace: str, operator: DeployedOperator, tmp_path: Path
) -> None:
    ns = fresh_namespace
    path = tmp_path / "quickstart-in-image.yaml"
    path.write_text(yaml.safe_dump_all(quickstart_in_image(REPO, IMAGE)))
    done = kubetrain("run", "-f", str(path), "-n", ns, timeout=900, check=False)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    assert "python /opt/venv/bin/python torch 2.13.0" in done.stdout
    losses = [float(x) for x in re.findall(r"epoch \d+/5 loss ([0-9.]+)", done.stdout)]
    assert len(losses) == 5 and losses[-1] < losses[0], done.stdout
