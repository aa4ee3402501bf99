"""The bed's training image (``localhost/kubetrain-train:dev``, built by shared/tools/k8s-node/images.sh as a
docker-archive in ``$K8S_HOME/images/train.tar``) runs the quickstart 2x2 locally from the image's own Python
(``/opt/venv``), not this machine's and not the project's ``.venv``. ``tests/e2e/test_images.py`` runs the same
manifests on the bed. Skipped where the image has not been built."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from kubetrain.local.supervisor.controller import Supervisor

from ..conftest import condition, needs_namespaces
from .conftest import load
from .testimage import quickstart_in_image

REPO = Path(__file__).resolve().parents[3]
K8S_HOME = Path(os.environ.get("K8S_HOME") or Path.home() / "k8s-node")
ARCHIVE = next((p for p in (K8S_HOME / "images" / n for n in ("train.tar", "kubetrain-train.tar")) if p.exists()),
               K8S_HOME / "images" / "train.tar")
IMAGE = "localhost/kubetrain-train:dev"

pytestmark = [
    pytest.mark.slow,
    needs_namespaces,
    pytest.mark.skipif(not ARCHIVE.exists(), reason=f"the bed's training image is not built ({ARCHIVE})"),
]


@pytest.fixture(scope="module")
def bed_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image loaded once for the module (unpacking it takes a while), into a store the tests share."""
    home = tmp_path_factory.mktemp("bed-image-home")
    old = os.environ.get("KUBETRAIN_HOME")
    os.environ["KUBETRAIN_HOME"] = str(home)
    try:
        load(ARCHIVE)
    finally:
        if old is None:
            os.environ.pop("KUBETRAIN_HOME", None)
        else:
            os.environ["KUBETRAIN_HOME"] = old
    yield home / "images"


def test_the_quickstart_2x2_runs_from_the_images_own_python(bed_store: Path, kt_home: Path, tmp_path: Path) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "images").symlink_to(bed_store)
    backend = LocalBackend(Store())
    try:
        names = backend.apply(quickstart_in_image(REPO, IMAGE), namespace="default", workdir=str(tmp_path),
                              detach=False)
        assert "trainjob/quickstart created" in names
        status = Supervisor(backend.store, "default", "quickstart").run()
        out = "\n".join(backend.logs("quickstart", "default", step=None, follow=False))
    finally:
        backend.store.close()
    assert condition(status, "Complete"), (status, out[-3000:])
    assert "python /opt/venv/bin/python torch 2.13.0" in out, out[-3000:]
    assert "training on 4 processes (2 nodes)" in out
    losses = [float(x) for x in re.findall(r"epoch \d+/5 loss ([0-9.]+)", out)]
    assert len(losses) >= 5 and losses[-1] < losses[0], losses
