from __future__ import annotations

import pytest

from kubetrain.local.images.reference import ReferenceError, default_pull_policy, familiar, normalize


@pytest.mark.parametrize(
    ("given", "normalized"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("pytorch/pytorch:2.13.0", "docker.io/pytorch/pytorch:2.13.0"),
        ("localhost/kubetrain-train:dev", "localhost/kubetrain-train:dev"),
        ("ghcr.io/kubeflow/trainer/dataset-initializer", "ghcr.io/kubeflow/trainer/dataset-initializer:latest"),
        ("127.0.0.1:5000/team/train:2", "127.0.0.1:5000/team/train:2"),
        ("index.docker.io/library/python:3.11", "docker.io/library/python:3.11"),
        ("x@sha256:" + "a" * 64, "docker.io/library/x@sha256:" + "a" * 64),
    ],
)
def test_references_are_normalized_as_the_kubelet_reads_them(given: str, normalized: str) -> None:
    assert normalize(given) == normalized


def test_familiar_names_are_the_short_ones_docker_shows() -> None:
    assert familiar("docker.io/library/busybox:1") == "busybox:1"
    assert familiar("docker.io/myorg/train:1.4") == "myorg/train:1.4"
    assert familiar("localhost/x:dev") == "localhost/x:dev"


@pytest.mark.parametrize("bad", ["", "UPPER/Case:1", "x:bad tag", "x@sha256:nothex"])
def test_bad_references_say_what_is_wrong(bad: str) -> None:
    with pytest.raises(ReferenceError, match=r"image|empty"):
        normalize(bad)


def test_default_pull_policy_is_the_api_servers() -> None:
    assert default_pull_policy("x") == "Always"
    assert default_pull_policy("x:latest") == "Always"
    assert default_pull_policy("x:1.4") == "IfNotPresent"
    assert default_pull_policy("x@sha256:" + "a" * 64) == "IfNotPresent"
