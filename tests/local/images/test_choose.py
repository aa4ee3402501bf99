"""The rule: images.yaml first (an environment, or `image`), else the real image when it is here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kubetrain.local.images import choose
from kubetrain.local.images.store import StoredImage


def test_a_loaded_image_runs_in_the_image_and_an_unknown_one_in_the_environment(loaded: StoredImage) -> None:
    assert choose.choose("localhost/kubetrain-test:1").stored is not None
    elsewhere = choose.choose("pytorch/pytorch:2.13.0")
    assert elsewhere.env == sys.prefix and not elsewhere.in_image
    assert "not loaded here" in elsewhere.says()
    said = choose.summary([choose.choose("localhost/kubetrain-test:1"), elsewhere])
    assert f"localhost/kubetrain-test:1: the image ({loaded.short_id}" in said and "pytorch/pytorch" in said


def test_images_yaml_maps_to_an_environment_or_forces_the_image(loaded: StoredImage, kt_home: Path) -> None:
    (kt_home / "images.yaml").write_text('"localhost/kubetrain-test:*": /opt/venvs/x\n"myorg/*": image\n')
    assert choose.choose("localhost/kubetrain-test:1").env == "/opt/venvs/x"  # the fast path wins
    forced = choose.choose("myorg/train:1.4")
    assert forced.forced and forced.in_image and forced.stored is None
    assert "pulled per imagePullPolicy" in forced.says()


def test_mpi_trainjobs_keep_the_environment_and_say_why(loaded: StoredImage, kt_home: Path) -> None:
    assert "MPI" in choose.choose("localhost/kubetrain-test:1", mpi=True).says()
    (kt_home / "images.yaml").write_text('"localhost/*": image\n')
    with pytest.raises(choose.MappingError, match=r"MPI.*Fix: map the image to a Python environment"):
        choose.choose("localhost/kubetrain-test:1", mpi=True)
