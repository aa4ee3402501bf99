"""Images a Podman/Buildah store already holds (containers/storage), with real Podman: found without starting a
process, copied into kubetrain's store through skopeo when a pod first needs them. The Podman store here is the
test's own (CONTAINERS_STORAGE_CONF), never the machine's. Skipped without podman and skopeo."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kubetrain.local.images import choose, sources
from kubetrain.local.images.pulls import Puller, Waiting
from kubetrain.local.images.store import ImageStore, StoredImage

from .testimage import SmallImage

pytestmark = pytest.mark.skipif(not (shutil.which("podman") and shutil.which("skopeo")),
                                reason="needs podman and skopeo (apt-get install podman skopeo)")


@pytest.fixture
def podman_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{tmp_path / "graph"}"\nrunroot = "{tmp_path / "run"}"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
    return tmp_path / "graph"


def test_an_image_in_a_podman_store_is_used_and_copied_in(kt_home: Path, podman_store: Path, tmp_path: Path) -> None:
    archive = SmallImage(name="localhost/from-podman:3", marker="podman").docker_archive(tmp_path / "p.tar")
    done = subprocess.run(["podman", "load", "-i", str(archive)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sources.containers_storage_root() == podman_store
    assert sources.in_containers_storage("localhost/from-podman:3")
    choice = choose.choose("localhost/from-podman:3")
    assert choice.in_image and choice.in_podman and "from the Podman/Buildah store" in choice.says()
    events: list[tuple[str, str, str]] = []
    puller = Puller(ImageStore(), lambda *e: events.append(e))
    deadline = time.monotonic() + 60
    got = puller.get("localhost/from-podman:3", "Never", in_podman=True)
    while isinstance(got, Waiting) and got.reason == "ContainerCreating" and time.monotonic() < deadline:
        time.sleep(0.05)
        got = puller.get("localhost/from-podman:3", "Never", in_podman=True)
    assert isinstance(got, StoredImage), got
    assert got.names == ["localhost/from-podman:3"] and got.source.startswith("containers-storage:")
    assert events[0] == ("Normal", "Pulling", 'Copying image from the Podman store "localhost/from-podman:3"')
    assert not sources.in_containers_storage("localhost/other:1")
