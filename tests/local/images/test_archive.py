"""Reading images out of docker-archives, OCI archives and OCI layouts, and what is wrong with bad ones."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from kubetrain.local.images import archive
from kubetrain.local.images.archive import ArchiveError

from .testimage import SmallImage


@pytest.mark.parametrize("kind", ["docker_archive", "oci_archive", "oci_layout"])
def test_every_format_gives_the_image_with_its_name_and_layers(tmp_path: Path, kind: str) -> None:
    made = getattr(SmallImage(name="myorg/train:1.4"), kind)(tmp_path / "image.tar")
    found, files = archive.read(made)
    try:
        assert [f.names for f in found] == [["docker.io/myorg/train:1.4"]]
        assert len(found[0].layers) == 2 and found[0].config["config"]["WorkingDir"] == "/app"
    finally:
        files.close()


def test_an_image_for_another_cpu_is_refused_naming_both_platforms(tmp_path: Path) -> None:
    made = SmallImage(architecture="arm64").docker_archive(tmp_path / "arm.tar")
    with pytest.raises(ArchiveError, match=r"no image for this machine's platform linux/amd64 .*holds: linux/arm64"):
        archive.read(made)


def test_a_missing_layer_is_named(tmp_path: Path) -> None:
    made = SmallImage().docker_archive(tmp_path / "full.tar")
    cut = tmp_path / "cut.tar"
    with tarfile.open(made) as src, tarfile.open(cut, "w") as dst:
        members = src.getmembers()
        manifest = json.loads(src.extractfile("manifest.json").read())  # type: ignore[union-attr]
        missing = manifest[0]["Layers"][1]
        for m in members:
            if m.name != missing:
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    with pytest.raises(ArchiveError, match=f"layer {missing} is missing from the archive"):
        archive.read(cut)


def test_what_is_not_an_image_archive_says_how_to_make_one(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ArchiveError, match=r"not a readable image archive.*docker save"):
        archive.read(junk)
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    with pytest.raises(ArchiveError, match=r"neither manifest.json .* nor index.json"):
        archive.read(empty)


def test_an_oci_ref_name_that_is_only_a_tag_gives_no_name(tmp_path: Path) -> None:
    layout = SmallImage().oci_layout(tmp_path / "layout", ref_name="latest")
    found, files = archive.read(layout)
    files.close()
    assert found[0].names == []
