"""A small image built offline for the tests, from this machine's own programs (dash, coreutils and the libraries
they load): written by Python alone as a docker-archive, an OCI layout or an OCI archive, as `docker save`,
`skopeo copy` and `podman save` write them. Two layers, so whiteouts and opaque directories are exercised."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRAMS = ("sh", "cat", "ls", "id", "env", "sleep", "echo", "touch", "rm", "mkdir", "pwd", "readlink", "test",
            "stat", "head", "df", "du", "kill", "true", "false")


def _libraries(exe: str) -> list[str]:
    out = subprocess.run(["ldd", exe], capture_output=True, text=True, check=False).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if len(parts) >= 3 and parts[1] == "=>" else parts[0] if parts else ""
        if path.startswith("/"):
            libs.append(path)
    return libs


def _info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, size: int = 0, uid: int = 0) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.mtime, ti.uid, ti.gid = kind, mode, size, 1_700_000_000, uid, uid
    return ti


def _tar(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti, data in entries:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes, mode: int = 0o644, uid: int = 0) -> tuple[tarfile.TarInfo, bytes]:
    return _info(name, mode=mode, size=len(data), uid=uid), data


def _dir(name: str, mode: int = 0o755, uid: int = 0) -> tuple[tarfile.TarInfo, None]:
    return _info(name, tarfile.DIRTYPE, mode, uid=uid), None


def base_layer() -> bytes:
    entries: list[tuple[tarfile.TarInfo, bytes | None]] = [_dir("bin"), _dir("etc"), _dir("tmp", 0o1777),
                                                            _dir("opt"), _dir("opt/old"), _dir("home"),
                                                            _dir("home/trainer", 0o755, 1000)]
    seen: set[str] = {ti.name for ti, _ in entries}
    files: list[tuple[str, str]] = []
    for prog in PROGRAMS:
        exe = shutil.which(prog, path="/bin:/usr/bin")
        assert exe is not None, prog
        files.append((os.path.realpath(exe), f"bin/{prog}"))
        for lib in _libraries(exe):
            files.append((os.path.realpath(lib), lib.lstrip("/")))
    for src, dest in files:
        if dest in seen:
            continue
        seen.add(dest)
        parent = os.path.dirname(dest)
        parts = parent.split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in seen:
                seen.add(d)
                entries.append(_dir(d))
        entries.append(_file(dest, Path(src).read_bytes(), 0o755))
    passwd = b"root:x:0:0:root:/root:/bin/sh\ntrainer:x:1000:1000:trainer:/home/trainer:/bin/sh\n"
    group = b"root:x:0:\ntrainer:x:1000:\nstaff:x:50:trainer\n"
    entries += [
        _file("etc/passwd", passwd), _file("etc/group", group), _file("etc/removed", b"gone in layer 2\n"),
        _file("opt/old/a", b"a\n"), _file("opt/old/b", b"b\n"), _file("etc/hostname", b"image-hostname\n"),
        _file("etc/hosts", b"127.0.0.1 image-hosts-file\n"),
    ]
    return _tar(entries)


def top_layer(marker: str) -> bytes:
    return _tar([
        _dir("etc"), (_info("etc/.wh.removed"), b""), _dir("opt"), _dir("opt/old"),
        (_info("opt/old/.wh..wh..opq"), b""),
        _file("opt/old/c", b"c\n"), _dir("app"),
        _file("app/hello.sh", b'#!/bin/sh\necho "hello from the image: $GREETING"\n', 0o755),
        _file("app/marker", marker.encode()),
    ])


@dataclass
class SmallImage:
    name: str = "localhost/kubetrain-test:1"
    marker: str = "v1"
    config: dict[str, Any] = field(default_factory=dict)
    architecture: str = "amd64"

    def parts(self) -> tuple[list[bytes], bytes]:
        layers = [base_layer(), top_layer(self.marker)]
        run = {
            "Env": ["PATH=/bin", "GREETING=from-image"],
            "WorkingDir": "/app",
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["echo default-cmd"],
            **self.config,
        }
        config = {
            "architecture": self.architecture, "os": "linux", "config": run,
            "rootfs": {"type": "layers", "diff_ids": [_digest(x) for x in layers]},
        }
        return layers, json.dumps(config, sort_keys=True).encode()

    def docker_archive(self, path: Path) -> Path:
        layers, config = self.parts()
        chex = _digest(config).split(":")[1]
        entries = [_file(f"{chex}.json", config)]
        names = []
        for layer in layers:
            lhex = _digest(layer).split(":")[1]
            entries += [_dir(lhex), _file(f"{lhex}/layer.tar", layer)]
            names.append(f"{lhex}/layer.tar")
        manifest = [{"Config": f"{chex}.json", "RepoTags": [self.name], "Layers": names}]
        entries.append(_file("manifest.json", json.dumps(manifest).encode()))
        path.write_bytes(_tar(entries))
        return path

    def oci_layout(self, path: Path, *, ref_name: str | None = None) -> Path:
        layers, config = self.parts()
        blobs = path / "blobs" / "sha256"
        blobs.mkdir(parents=True, exist_ok=True)
        descs = []
        for layer in layers:
            gz = gzip.compress(layer, mtime=0)
            (blobs / _digest(gz).split(":")[1]).write_bytes(gz)
            descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": _digest(gz),
                          "size": len(gz)})
        (blobs / _digest(config).split(":")[1]).write_bytes(config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(config),
                       "size": len(config)},
            "layers": descs,
        }).encode()
        (blobs / _digest(manifest).split(":")[1]).write_bytes(manifest)
        index = {"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _digest(manifest),
            "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": ref_name or self.name},
        }]}
        (path / "index.json").write_text(json.dumps(index))
        (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        return path

    def oci_archive(self, path: Path) -> Path:
        layout = path.with_suffix(".layout")
        self.oci_layout(layout)
        with tarfile.open(path, "w") as tf:
            for p in sorted(layout.rglob("*")):
                tf.add(p, arcname=str(p.relative_to(layout)), recursive=False)
        shutil.rmtree(layout)
        return path


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def quickstart_in_image(repo: Path, image: str) -> list[dict[str, Any]]:
    """The quickstart as a cluster runs it (examples/quickstart/cluster.yaml: train.py from a ConfigMap) in
    ``image``, saying first which Python runs it: the same manifests go to both backends."""
    import yaml

    code = (repo / "examples" / "quickstart" / "train.py").read_text()
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quickstart-code"},
                 "data": {"train.py": code}}
    tj = yaml.safe_load((repo / "examples" / "quickstart" / "cluster.yaml").read_text())
    tj["spec"]["trainer"]["image"] = image
    tj["spec"]["trainer"]["command"] = [
        "sh", "-c",
        'python -c "import sys, torch; print(\'python\', sys.executable, \'torch\', torch.__version__)"; '
        "exec torchrun train.py",
    ]
    return [configmap, tj]
