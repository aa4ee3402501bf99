"""Build the operator image without a Docker daemon or a registry: ``make image``.

The result is a docker-archive tarball (``docker load``, ``podman load`` and ``ctr images import`` all read it)
holding the same image the Dockerfile describes: Debian 12 with its python3, the package and its pinned
dependencies in the virtual environment ``/opt/venv``, and the final stage's LABEL, ENV, USER, WORKDIR, EXPOSE,
ENTRYPOINT and CMD, read from the Dockerfile itself so the two cannot drift.

Tools, all Debian packages: ``debootstrap`` (the Debian root filesystems, from the mirror apt uses), ``umoci``
(the OCI image: layers and configuration) and ``skopeo`` (the OCI layout as a docker-archive). It needs root
(debootstrap and chroot); Python 3.11 runs pip to fetch the wheels for Debian 12's python3.11.

Like the Dockerfile's two stages: a *build* root filesystem (python3 + python3-venv) where ``/opt/venv`` is made and
the wheels are installed offline, and the *final* one (python3 only) that receives ``/opt/venv``. The image has two
layers: the final root filesystem, then ``/opt/venv``. Everything but the output lives in the cache directory
(``--cache``, default ``~/.cache/kubetrain/image``); the debootstrap results are kept there, keyed on suite,
mirror and packages, so a rebuild after a code change takes seconds plus the packing.

    python scripts/build_image.py                                   # dist/kubetrain-image-<version>.tar
    python scripts/build_image.py --output /tmp/op.tar --tag localhost/kubetrain:dev
    ctr -n k8s.io images import dist/kubetrain-image-0.1.0.tar      # or: docker load -i / podman load -i
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = "bookworm"  # Debian 12: python3.11, the ABI of the wheels pip fetches here
BUILD_PACKAGES = ("python3", "python3-venv")
FINAL_PACKAGES = ("python3",)
VENV = "/opt/venv"
# What Debian's slim images leave out, and what an image never needs.
STRIP = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt",
         "var/lib/apt/lists", "var/cache/debconf/templates.dat-old", "var/cache/debconf/config.dat-old")  # fmt: skip
TAR_OPTS = ["--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls"]


class BuildError(Exception):
    """Something the user must fix (a missing tool, no mirror); printed without a traceback."""


def log(msg: str) -> None:
    print(f"build_image: {msg}", flush=True)


def run(*cmd: str | Path, **kw: object) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([str(c) for c in cmd], check=True, text=True, **kw)  # type: ignore[call-overload]
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"{' '.join(str(c) for c in cmd[:3])} ... failed with exit code {exc.returncode}") from exc


# --- the Dockerfile's final stage -----------------------------------------------------------------------


def final_stage(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile's last stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            out = []
        out.append((word.upper(), rest.strip()))
    return out


def _pairs(args: str) -> dict[str, str]:
    """``KEY=value KEY2="quoted value"`` (LABEL and ENV)."""
    found = re.findall(r'([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|\S+)', args)
    return {k: (json.loads(v) if v.startswith('"') else v) for k, v in found}


def image_config(dockerfile: Path) -> dict[str, object]:
    """What the final stage says about the image's configuration, in the OCI config's terms."""
    env: dict[str, str] = {}
    labels: dict[str, str] = {}
    cfg: dict[str, object] = {}
    ports: list[str] = []
    for word, args in final_stage(dockerfile):
        if word == "ENV":
            env.update(_pairs(args))
        elif word == "LABEL":
            labels.update(_pairs(args))
        elif word == "USER":
            cfg["User"] = args
        elif word == "WORKDIR":
            cfg["WorkingDir"] = args
        elif word == "EXPOSE":
            ports += [p if "/" in p else f"{p}/tcp" for p in args.split()]
        elif word in ("ENTRYPOINT", "CMD"):
            cfg["Entrypoint" if word == "ENTRYPOINT" else "Cmd"] = json.loads(args)
    cfg.update(Env=env, Labels=labels, ExposedPorts=ports)
    return cfg


# --- root filesystems -----------------------------------------------------------------------------------


def debian_mirror() -> str:
    """The mirror apt uses for the suite (``KUBETRAIN_DEBIAN_MIRROR`` overrides): never a name in this repo."""
    if os.environ.get("KUBETRAIN_DEBIAN_MIRROR"):
        return os.environ["KUBETRAIN_DEBIAN_MIRROR"]
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in re.split(r"\n\s*\n", Path(path).read_text()):
            fields: dict[str, list[str]] = {}
            for line in stanza.splitlines():
                if line[:1] not in ("#", " ", "\t") and ":" in line:
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.split()
            if "deb" in fields.get("types", []) and SUITE in fields.get("suites", []) and fields.get("uris"):
                return fields["uris"][0]
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            words = re.sub(r"\[[^]]*\]", "", line).split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    raise BuildError(f"no apt source for Debian {SUITE} found: set KUBETRAIN_DEBIAN_MIRROR to a Debian mirror URL")


def rootfs(cache: Path, packages: tuple[str, ...], into: Path) -> None:
    """A minimal Debian root filesystem with ``packages`` in ``into``, from the cache when it was made before."""
    mirror = debian_mirror()
    key = hashlib.sha256("\n".join((SUITE, mirror, *packages)).encode()).hexdigest()[:12]
    tarball = cache / f"debootstrap-{SUITE}-{key}.tar"
    into.mkdir(parents=True)
    if not tarball.exists():
        started = time.monotonic()
        # Private to this build: two builds at once (two checkouts' test runs) must not debootstrap into one folder.
        scratch = Path(tempfile.mkdtemp(prefix=f"debootstrap-{key}-", dir=cache))
        scratch.chmod(0o755)  # it becomes the image's "/" (mkdtemp makes it 0700)
        run("debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, scratch, mirror,
            stdout=subprocess.DEVNULL)  # fmt: skip
        for sub in STRIP:
            for path in glob.glob(str(scratch / sub / "*")):
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        part = f"{scratch}.tar"
        run("tar", *TAR_OPTS, "-C", scratch, "-cf", part, ".")
        os.replace(part, tarball)  # the last of concurrent builds wins; each tarball is whole
        shutil.rmtree(scratch)
        log(f"debootstrap {SUITE} ({', '.join(packages)}) in {time.monotonic() - started:.0f} s, cached")
    run("tar", *TAR_OPTS, "-xpf", tarball, "-C", into)


def chroot(root: Path, *cmd: str) -> None:
    """Run ``cmd`` inside ``root`` (with /proc mounted, without the host's environment)."""
    proc = root / "proc"
    run("mount", "-t", "proc", "proc", proc)
    try:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
               "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # fmt: skip
        run("chroot", root, *cmd, env=env)
    finally:
        subprocess.run(["umount", str(proc)], check=False)


# --- the package --------------------------------------------------------------------------------------


def package_wheel(checkout: Path, out: Path) -> Path:
    """The project's wheel, built from the files a Docker build context would get (.dockerignore: pyproject.toml,
    README.md, src/), copied first so the build never writes into the checkout."""
    src = out / "context"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        if (checkout / name).exists():
            shutil.copy2(checkout / name, src / name)
    shutil.copytree(checkout / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    wheels = out / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, src)
    (wheel,) = wheels.glob("*.whl")
    return wheel


def requirements(wheel: Path) -> list[str]:
    """The wheel's runtime requirements (no extras): what the Dockerfile's pip install resolves."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Requires-Dist:") and "extra ==" not in ln]


def fetch_wheels(reqs: list[str], cache: Path) -> Path:
    """Binary wheels of the pinned requirements for python3.11 on Linux, cached across builds."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if reqs:
        run(sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", wheels, *reqs)
    return wheels


# --- packing ---------------------------------------------------------------------------------------------


def pack(final: Path, venv_layer: Path, config: dict[str, object], ref: str, output: Path, work: Path) -> None:
    layout = work / "oci"
    image = f"{layout}:build"
    run("umoci", "init", "--layout", layout)
    run("umoci", "new", "--image", image)
    for tarball, what in ((work / "base.tar", "Debian 12 (debootstrap --variant=minbase) + python3"),
                          (work / "venv.tar", f"{VENV}: the package and its pinned dependencies")):  # fmt: skip
        source = final if tarball.name == "base.tar" else venv_layer
        run("tar", *TAR_OPTS, "-C", source, "-cf", tarball,
            "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*", "--exclude=./run/*", "--exclude=./tmp/*",
            ".")  # fmt: skip
        run("umoci", "raw", "add-layer", "--image", image, "--history.created_by", f"scripts/build_image.py: {what}",
            tarball)  # fmt: skip
        tarball.unlink()
    args = ["--os", "linux", "--architecture", "amd64"]
    env = config["Env"]
    assert isinstance(env, dict)
    args += [a for k, v in env.items() for a in ("--config.env", f"{k}={v}")]
    labels = config["Labels"]
    assert isinstance(labels, dict)
    args += [a for k, v in labels.items() for a in ("--config.label", f"{k}={v}")]
    ports = config["ExposedPorts"]
    assert isinstance(ports, list)
    args += [a for p in ports for a in ("--config.exposedports", p)]
    for key, flag in (("User", "--config.user"), ("WorkingDir", "--config.workingdir")):
        if key in config:
            args += [flag, str(config[key])]
    for key, flag in (("Entrypoint", "--config.entrypoint"), ("Cmd", "--config.cmd")):
        value = config.get(key)
        assert value is None or isinstance(value, list)
        for item in value or []:
            args += [flag, str(item)]
    run("umoci", "config", "--image", image, *args)
    run("umoci", "gc", "--layout", layout)
    output.parent.mkdir(parents=True, exist_ok=True)
    part = output.with_name(output.name + ".part")
    part.unlink(missing_ok=True)
    run("skopeo", "copy", "--quiet", f"oci:{image}", f"docker-archive:{part}:{ref}")
    os.replace(part, output)


def build(checkout: Path, output: Path, tag: str, cache: Path) -> None:
    missing = [t for t in ("debootstrap", "umoci", "skopeo", "chroot", "tar") if shutil.which(t) is None]
    if missing:
        raise BuildError(
            f"missing {', '.join(missing)}: install the Debian packages debootstrap umoci skopeo "
            "(apt-get install debootstrap umoci skopeo), or build with `docker build` (see docs/install.md)"
        )
    if os.geteuid() != 0:
        raise BuildError("needs root (debootstrap and chroot): run `sudo make image`, or build with `docker build`")
    if sys.version_info[:2] != (3, 11):
        raise BuildError(f"needs Python 3.11 to fetch wheels for Debian 12's python3.11 (this is "
                         f"{sys.version_info[0]}.{sys.version_info[1]}): make image uses .venv's python")  # fmt: skip
    config = image_config(checkout / "Dockerfile")
    entry = config.get("Entrypoint")
    if not isinstance(entry, list) or not entry:
        raise BuildError("the Dockerfile's final stage has no ENTRYPOINT in exec form")
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as tmp:
        work = Path(tmp)
        wheel = package_wheel(checkout, work)
        wheels = fetch_wheels(requirements(wheel), cache)
        build_root, final_root = work / "build", work / "final"
        rootfs(cache, BUILD_PACKAGES, build_root)
        rootfs(cache, FINAL_PACKAGES, final_root)
        into = build_root / "tmp" / "wheels"
        shutil.copytree(wheels, into)
        shutil.copy2(wheel, into)
        name = wheel.name.split("-")[0]
        chroot(build_root, "python3", "-m", "venv", VENV)
        chroot(build_root, f"{VENV}/bin/pip", "install", "-q", "--no-index", "--find-links", "/tmp/wheels",
               f"/tmp/wheels/{wheel.name}")  # fmt: skip
        chroot(build_root, f"{VENV}/bin/pip", "check")
        # The entrypoint must resolve in the image, on the image's PATH.
        env = config["Env"]
        assert isinstance(env, dict)
        path = str(env.get("PATH", "/usr/local/bin:/usr/bin:/bin"))
        dirs = [build_root / p.lstrip("/") for p in path.split(":")]
        found = entry[0].startswith("/") or any((d / entry[0]).exists() for d in dirs)
        if not found:
            raise BuildError(f"the entrypoint {entry[0]!r} is not on the image's PATH ({path})")
        venv_layer = work / "venv-layer"
        (venv_layer / "opt").mkdir(parents=True)
        run("cp", "-a", build_root / VENV.lstrip("/"), venv_layer / "opt")
        shutil.rmtree(build_root)
        workdir = config.get("WorkingDir")
        if isinstance(workdir, str):
            (final_root / workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        pack(final_root, venv_layer, config, tag, output, work)
        log(f"{name} image {tag} -> {output} ({output.stat().st_size / 2**20:.0f} MiB) in "
            f"{time.monotonic() - started:.0f} s")  # fmt: skip


def default_tag(checkout: Path) -> str:
    version = tomllib.loads((checkout / "pyproject.toml").read_text())["project"].get("version")
    if version is None:
        from kubetrain import __version__ as version
    return f"ghcr.io/kubetrain/kubetrain:{version}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the project checkout (default: this one)")
    parser.add_argument("--output", type=Path, help="the archive (default: dist/kubetrain-image-<version>.tar)")
    parser.add_argument("--tag", default=None, help="the image's name (default: the one manifests/ use)")
    parser.add_argument("--cache", type=Path, help="scratch and cache (default: ~/.cache/kubetrain/image)")
    args = parser.parse_args(argv)
    tag = args.tag or default_tag(args.checkout)
    output = args.output or args.checkout / "dist" / f"kubetrain-image-{tag.rsplit(':', 1)[-1]}.tar"
    cache = args.cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubetrain" / "image"
    try:
        build(args.checkout.resolve(), output.resolve(), tag, cache)
    except BuildError as exc:
        print(f"build_image: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
