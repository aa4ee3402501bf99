"""``make image`` (scripts/build_image.py) builds what the Dockerfile describes: the final stage's configuration
(entrypoint, command, user, workdir, env, labels, ports) read independently of the builder's own parser, and
the same files (the package and exactly its pinned dependencies in /opt/venv, Debian's python3, no build-stage
tools). The build needs root, debootstrap, umoci, skopeo, Python 3.11 and a Debian mirror; without them the
tests are skipped with the reason. ``KUBETRAIN_IMAGE_ARCHIVE`` checks an archive built earlier instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

import kubetrain
from tests.k8s.manifests.conftest import ROOT
from tests.k8s.manifests.test_dockerfile import instructions

SCRIPT = ROOT / "scripts" / "build_image.py"


def _why_not() -> str | None:
    missing = [t for t in ("debootstrap", "umoci", "skopeo", "chroot") if shutil.which(t) is None]
    if missing:
        return f"image builder tools missing: {', '.join(missing)} (apt-get install debootstrap umoci skopeo)"
    if os.geteuid() != 0:
        return "building the image needs root (debootstrap, chroot)"
    if sys.version_info[:2] != (3, 11):
        return "building the image needs Python 3.11 (the wheels are for Debian 12's python3.11)"
    return None


def _load_script() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_image", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_builder_reads_the_final_stage_as_docker_does() -> None:
    """The builder's reading of the Dockerfile (which `make image` applies) against this test's own."""
    cfg = _load_script().image_config(ROOT / "Dockerfile")
    assert cfg["Entrypoint"] == ["kubetrain"] and cfg["Cmd"] == ["operator"]
    assert cfg["User"] == "65532:65532" and cfg["WorkingDir"] == "/tmp"
    assert cfg["Env"]["PATH"].startswith("/opt/venv/bin:")
    assert cfg["Labels"]["org.opencontainers.image.title"] == "kubetrain"
    assert sorted(cfg["ExposedPorts"]) == ["10443/tcp", "8081/tcp", "9443/tcp"]


def test_the_builder_refuses_clearly_what_it_cannot_do(tmp_path: Path) -> None:
    """A missing tool or mirror is a one-line error with the fix, never a traceback."""
    script = _load_script()
    env = dict(os.environ, PATH=str(tmp_path), KUBETRAIN_DEBIAN_MIRROR="")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tmp_path / "cache")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "missing debootstrap, umoci, skopeo" in proc.stderr and "docker build" in proc.stderr
    assert script.final_stage(ROOT / "Dockerfile")[0][0] == "FROM"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("KUBETRAIN_IMAGE_ARCHIVE")
    if given:
        return Path(given)
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("image") / "kubetrain.tar"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--output", str(out), "--tag", "localhost/kubetrain-test:dev"],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if proc.returncode != 0 and "no apt source" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def image(archive: Path) -> dict[str, Any]:
    """The archive's manifest, its configuration and every layer's member names (with symlink targets)."""
    with tarfile.open(archive) as tar:
        (manifest,) = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(manifest["Config"]))  # type: ignore[arg-type]
        files: dict[str, str] = {}
        for layer in manifest["Layers"]:
            with tarfile.open(fileobj=tar.extractfile(layer)) as inner:  # type: ignore[arg-type]
                for m in inner.getmembers():
                    files[str(PurePosixPath(m.name.lstrip("./")))] = m.linkname if m.issym() else ""
    return {"manifest": manifest, "config": config, "files": files}


def _final_stage() -> list[tuple[str, str]]:
    ins = instructions()
    last = max(i for i, (k, _) in enumerate(ins) if k == "FROM")
    return ins[last:]


@pytest.mark.slow
def test_the_configuration_is_the_dockerfiles_final_stage(image: dict[str, Any]) -> None:
    import shlex

    cfg = image["config"]["config"]
    stage = _final_stage()
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    for word, args in stage:
        target = env if word == "ENV" else labels if word == "LABEL" else None
        if target is not None:
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                target[key] = value
    got_env = dict(e.split("=", 1) for e in cfg["Env"])
    assert got_env == env  # nothing more, nothing less: a Debian base image sets only PATH, which ENV replaces
    assert cfg["Labels"] == labels
    single = {k: v for k, v in stage if k in ("USER", "WORKDIR", "ENTRYPOINT", "CMD", "EXPOSE")}
    assert cfg["User"] == single["USER"]
    assert cfg["WorkingDir"] == single["WORKDIR"]
    assert cfg["Entrypoint"] == json.loads(single["ENTRYPOINT"])
    assert cfg["Cmd"] == json.loads(single["CMD"])
    assert sorted(cfg["ExposedPorts"]) == sorted(f"{p}/tcp" for p in single["EXPOSE"].split())
    assert image["config"]["os"] == "linux" and image["config"]["architecture"] == "amd64"


@pytest.mark.slow
def test_the_files_are_the_package_and_its_pinned_dependencies(image: dict[str, Any]) -> None:
    files: dict[str, str] = image["files"]
    site = "opt/venv/lib/python3.11/site-packages/"
    dist_infos = {p[len(site):].split("/")[0] for p in files if p.startswith(site)}
    installed = {}
    for d in dist_infos:
        if d.endswith(".dist-info"):
            name, version = d.removesuffix(".dist-info").rsplit("-", 1)
            installed[name.lower().replace("_", "-")] = version
    assert installed["kubetrain"] == kubetrain.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        name, version = requirement.split("==")
        assert installed.get(name.lower().replace("_", "-")) == version, requirement
    # The entrypoint resolves on the image's PATH, and the venv's python is Debian's.
    assert "opt/venv/bin/kubetrain" in files
    assert files.get("opt/venv/bin/python3") or files.get("opt/venv/bin/python")
    assert "usr/bin/python3.11" in files
    assert "tmp" in files  # WORKDIR
    # Like the Dockerfile's final stage: python3 only, the build stage's venv tooling left behind.
    assert not [p for p in files if p.startswith("usr/lib/python3.11/ensurepip/")]
    assert not [p for p in files if p.startswith("usr/share/doc/") and p != "usr/share/doc"]
