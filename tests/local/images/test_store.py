"""The image store: layers shared by content, every change whole or not at all, and what prune and rm keep."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from kubetrain.local.images import archive
from kubetrain.local.images.layers import LayerError
from kubetrain.local.images.store import ImageStore

from .conftest import load
from .testimage import SmallImage


def test_two_images_share_their_common_layer(kt_home: Path, tmp_path: Path) -> None:
    a = load(SmallImage(name="localhost/a:1", marker="a").docker_archive(tmp_path / "a.tar"))
    b = load(SmallImage(name="localhost/b:1", marker="b").oci_archive(tmp_path / "b.tar"))
    assert a.layers[0] == b.layers[0] and a.layers[1] != b.layers[1]
    assert len(list((kt_home / "images" / "layers").glob("*/"))) == 3
    store = ImageStore()
    assert store.find("localhost/a:1").id == a.id  # type: ignore[union-attr]
    assert store.find(a.short_id).id == a.id  # type: ignore[union-attr]
    assert store.find("localhost/c:1") is None


def test_a_corrupt_layer_leaves_no_image_and_no_half_unpacked_state(kt_home: Path, tmp_path: Path) -> None:
    good = SmallImage().docker_archive(tmp_path / "good.tar")
    bad = tmp_path / "bad.tar"
    with tarfile.open(good) as src, tarfile.open(bad, "w") as dst:
        manifest = json.loads(src.extractfile("manifest.json").read())  # type: ignore[union-attr]
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            if m.name == manifest[0]["Layers"][0]:
                data = data[:-20000] + b"\0" * 20000  # type: ignore[index]  # same size, other content
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    found, files = archive.read(bad)
    with pytest.raises(LayerError, match="does not match the digest the image config gives it"):
        ImageStore().add(found[0], names=found[0].names, source="bad")
    files.close()
    assert ImageStore().images() == []
    assert list((kt_home / "images" / "tmp").iterdir()) == []
    assert load(good).names == ["localhost/kubetrain-test:1"]  # the next load is not in the way


def test_an_interrupted_load_is_cleared_by_the_next_one(kt_home: Path, image_archive: Path) -> None:
    stale = kt_home / "images" / "tmp" / "abc.123"
    (stale / "work" / "work").mkdir(parents=True)
    os.chmod(stale / "work" / "work", 0)
    load(image_archive)
    assert not stale.exists()


def test_rm_untags_and_prune_removes_unused_layers_but_not_an_image_in_use(kt_home: Path, tmp_path: Path) -> None:
    a = load(SmallImage(name="localhost/a:1", marker="a").docker_archive(tmp_path / "a.tar"))
    b = load(SmallImage(name="localhost/b:1", marker="b").docker_archive(tmp_path / "b.tar"))
    store = ImageStore()
    held = store.hold(b)
    try:
        said = store.remove(["localhost/a:1", "localhost/b:1"])
        assert "Untagged: localhost/a:1" in said and f"Deleted: {a.id}" in said
        assert any(line.startswith(f"Kept: {b.id}") for line in said)
        assert [i.id for i in store.images()] == [b.id]
        assert store.prune() == []  # b is in use
    finally:
        os.close(held)
    pruned = dict(store.prune())
    assert f"image {b.id}" in pruned and store.images() == []
    assert list((kt_home / "images" / "layers").glob("*/")) == []
