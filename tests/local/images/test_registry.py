"""Pulling from a real registry (Debian's docker-registry, the CNCF distribution registry) over TLS with
htpasswd credentials, through skopeo with the user's own auth file: `kubetrain images pull`, a pod that pulls
its image (IfNotPresent), Always finding the same digest, and refused credentials. Skipped without
docker-registry or skopeo (`apt-get install docker-registry skopeo`)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain import pki
from kubetrain.local.images.pulls import ERR_PULL, Puller, Waiting
from kubetrain.local.images.sources import PullError, pull
from kubetrain.local.images.store import ImageStore, StoredImage

from .testimage import SmallImage

pytestmark = pytest.mark.skipif(
    not (shutil.which("docker-registry") and shutil.which("skopeo")), reason="needs docker-registry and skopeo"
)


def _bcrypt(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

        return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kt_home: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = f"127.0.0.1:{port}"
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = pki.generate_ca(now)
    cert, key = pki.generate_serving_cert(ca, ca_key, ["127.0.0.1"], now)
    for name, data in (("ca.pem", ca), ("cert.pem", cert), ("key.pem", key)):
        (tmp_path / name).write_bytes(data)
    (tmp_path / "htpasswd").write_text(f"alice:{_bcrypt('s3cret')}\n")
    (tmp_path / "config.yml").write_text(
        f"version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {tmp_path / 'data'}}}}}\n"
        f"http: {{addr: '{host}', tls: {{certificate: {tmp_path / 'cert.pem'}, key: {tmp_path / 'key.pem'}}}}}\n"
        f"auth: {{htpasswd: {{realm: test, path: {tmp_path / 'htpasswd'}}}}}\n"
    )
    auth = {"auths": {host: {"auth": base64.b64encode(b"alice:s3cret").decode()}}}
    (tmp_path / "auth.json").write_text(json.dumps(auth))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))  # trusted as a user's CA bundle would be
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "auth.json"))  # what `podman login` writes
    # REGISTRY_* variables would override the registry's own configuration: it gets none of them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    with open(tmp_path / "registry.log", "w") as log:
        proc = subprocess.Popen(["docker-registry", "serve", str(tmp_path / "config.yml")], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield host
    finally:
        proc.terminate()
        proc.wait(10)


def _push(tmp_path: Path, host: str, marker: str) -> None:
    archive = SmallImage(marker=marker).docker_archive(tmp_path / f"{marker}.tar")
    done = subprocess.run(["skopeo", "copy", "-q", f"docker-archive:{archive}", f"docker://{host}/team/train:2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + (tmp_path / "registry.log").read_text()


def test_pull_with_the_users_credentials_and_always_checks_the_digest(
    registry: str, tmp_path: Path, kt_home: Path
) -> None:
    _push(tmp_path, registry, "v1")
    image = pull(ImageStore(), f"{registry}/team/train:2")
    assert image.names == [f"{registry}/team/train:2"] and image.digests
    events: list[tuple[str, str, str]] = []
    got = _until_done(Puller(ImageStore(), lambda *e: events.append(e)), f"{registry}/team/train:2", "Always")
    assert isinstance(got, StoredImage) and got.id == image.id
    assert "matches the registry's" in events[-1][2]
    _push(tmp_path, registry, "v2")  # a new image under the same tag: Always pulls it
    got = _until_done(Puller(ImageStore(), lambda *e: None), f"{registry}/team/train:2", "Always")
    assert isinstance(got, StoredImage) and got.id != image.id


def test_refused_credentials_are_err_image_pull_with_the_fix(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _push(tmp_path, registry, "v1")
    (tmp_path / "empty.json").write_text('{"auths": {}}')
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "empty.json"))
    with pytest.raises(PullError, match="unauthorized: authentication required"):
        pull(ImageStore(), f"{registry}/team/train:2")
    got = _until_done(Puller(ImageStore(), lambda *e: None), f"{registry}/team/train:2", "IfNotPresent")
    assert isinstance(got, Waiting) and got.reason == ERR_PULL and "log in to its registry" in got.message


def _until_done(puller: Puller, image: str, policy: str) -> StoredImage | Waiting:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = puller.get(image, policy)
        if not (isinstance(got, Waiting) and got.reason == "ContainerCreating"):
            return got
        time.sleep(0.05)
    raise AssertionError("the pull did not finish")
