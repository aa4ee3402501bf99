"""imagePullPolicy as a kubelet applies it, with the kubelet's waiting reasons; the pull itself is skopeo's (a
stand-in here that fails like an unreachable registry; tests/local/images/test_registry.py pulls for real)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kubetrain.local.images.pulls import BACKOFF, CREATING, ERR_PULL, NEVER_PULL, Puller, Waiting, policy_of
from kubetrain.local.images.store import ImageStore, StoredImage

from .conftest import load


@pytest.fixture
def unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "skopeo"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'pinging container registry myorg.example: dial tcp: no route to host' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")


def _until_done(puller: Puller, image: str, policy: str) -> StoredImage | Waiting:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = puller.get(image, policy)
        if not (isinstance(got, Waiting) and got.reason == CREATING):
            return got
        time.sleep(0.05)
    raise AssertionError("the pull did not finish")


def test_policies_default_as_the_api_server_sets_them() -> None:
    assert policy_of({"image": "x:1"}) == "IfNotPresent" and policy_of({"image": "x"}) == "Always"
    assert policy_of({"image": "x", "imagePullPolicy": "Never"}) == "Never"


def test_never_waits_with_err_image_never_pull_until_the_image_is_loaded(kt_home: Path, image_archive: Path) -> None:
    events: list[tuple[str, str, str]] = []
    puller = Puller(ImageStore(), lambda *e: events.append(e))
    got = puller.get("localhost/kubetrain-test:1", "Never")
    assert isinstance(got, Waiting) and got.reason == NEVER_PULL
    assert 'Container image "localhost/kubetrain-test:1" is not present with pull policy of Never' in got.message
    assert "kubetrain images load" in got.message
    load(image_archive)
    assert isinstance(puller.get("localhost/kubetrain-test:1", "Never"), StoredImage)
    assert events[-1] == ("Normal", "Pulled", 'Container image "localhost/kubetrain-test:1" already present on machine')


def test_a_failed_pull_is_err_image_pull_then_back_off(kt_home: Path, unreachable: None) -> None:
    events: list[tuple[str, str, str]] = []
    puller = Puller(ImageStore(), lambda *e: events.append(e))
    first = _until_done(puller, "myorg.example/train:1", "IfNotPresent")
    assert isinstance(first, Waiting) and first.reason == ERR_PULL
    assert "no route to host" in first.message and "podman login" in first.message
    again = puller.get("myorg.example/train:1", "IfNotPresent")
    assert isinstance(again, Waiting) and again.reason == BACKOFF
    assert again.message.startswith('Back-off pulling image "myorg.example/train:1"')
    reasons = [r for _, r, _ in events]
    assert reasons[:4] == ["Pulling", "Failed", "Failed", "BackOff"]


def test_always_with_an_unreachable_registry_does_not_use_the_local_copy(
    loaded: StoredImage, unreachable: None
) -> None:
    got = _until_done(Puller(ImageStore(), lambda *e: None), "localhost/kubetrain-test:1", "Always")
    assert isinstance(got, Waiting) and got.reason == ERR_PULL  # as a kubelet: the digest must be checked
