"""Where images come from besides ``kubetrain images load``: a local Podman/Buildah store (containers/storage) and
registries, both through skopeo.

Why skopeo (Debian's ``skopeo`` package) and not a Python OCI client: it is the tool of the containers/image
project that Podman, Buildah and CRI-O pull with, so a user's setup works unchanged — their credentials
(``$XDG_RUNTIME_DIR/containers/auth.json`` from ``podman login``/``skopeo login``, ``~/.docker/config.json`` from
``docker login``, credential helpers), ``registries.conf`` (mirrors, insecure registries, short-name aliases),
every manifest and compression format, and the containers-storage transport that reads Podman's store (with its
rootless user-namespace handling). The Python OCI clients we looked at cover the registry protocol but none of
that configuration. skopeo writes an OCI layout, which ``archive`` reads like any other."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import tomllib
from pathlib import Path

from kubetrain.api.errors import KubetrainError
from kubetrain.local.images import archive, reference
from kubetrain.local.images.store import ImageStore, Progress, StoredImage

SKOPEO_PACKAGE = "skopeo (`apt-get install skopeo`, or `make system-deps`)"


class PullError(KubetrainError):
    pass


def skopeo() -> str | None:
    for d in os.get_exec_path():
        path = os.path.join(d, "skopeo")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _storage_conf() -> dict[str, object]:
    candidates = [os.environ.get("CONTAINERS_STORAGE_CONF", "")]
    if os.geteuid() != 0:
        xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        candidates.append(f"{xdg}/containers/storage.conf")
    candidates += ["/etc/containers/storage.conf", "/usr/share/containers/storage.conf"]
    for c in candidates:
        if c and os.path.isfile(c):
            try:
                with open(c, "rb") as f:
                    return dict(tomllib.load(f).get("storage") or {})
            except (OSError, tomllib.TOMLDecodeError):
                return {}
    return {}


def containers_storage_root() -> Path:
    """Where Podman and Buildah keep this user's images (graphroot)."""
    conf = _storage_conf()
    if os.geteuid() == 0:
        return Path(str(conf.get("graphroot") or "/var/lib/containers/storage"))
    rootless = conf.get("rootless_storage_path")
    if rootless:
        return Path(str(rootless).replace("$HOME", str(Path.home())).replace("$UID", str(os.getuid())))
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "containers" / "storage"


def in_containers_storage(ref: str) -> bool:
    """Whether a Podman/Buildah store of this user holds an image of that name (read from its images.json: no
    process is started for the many images that are not there)."""
    want = reference.normalize(ref)
    root = containers_storage_root()
    for listing in root.glob("*-images/images.json"):
        try:
            entries = json.loads(listing.read_text())
        except (OSError, ValueError):
            continue
        for entry in entries if isinstance(entries, list) else []:
            for name in entry.get("names") or []:
                try:
                    if reference.normalize(str(name)) == want:
                        return True
                except KubetrainError:
                    continue
    return False


def _skopeo_error(stderr: str, code: int) -> str:
    """The reason in skopeo's last log line (``time=... level=fatal msg="..."``), without the image name it
    repeats."""
    import re

    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    if not lines:
        return f"skopeo exited with {code}"
    m = re.search(r'msg="((?:[^"\\]|\\.)*)"', lines[-1])
    text = json.loads(f'"{m.group(1)}"') if m else lines[-1]
    return re.sub(r'^(?:(?:Error parsing image name|initializing source) "?[^" ]*"?: )+', "", text)


def _copy(src: str, what: str, progress: Progress | None, extra: list[str]) -> Path:
    """skopeo's copy of ``src`` into a temporary OCI layout. Raises ``PullError`` with skopeo's reason (``what``
    says what was done, for the progress line and a missing skopeo)."""
    exe = skopeo()
    if exe is None:
        raise PullError(f"{what} needs {SKOPEO_PACKAGE}")
    out = Path(tempfile.mkdtemp(prefix="kubetrain-pull-"))
    arch = archive.machine_platform().split("/")[1]
    argv = [exe, "copy", "--override-os", "linux", "--override-arch", arch, *extra, src, f"oci:{out}:image"]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        from kubetrain.local.paths import remove_tree

        remove_tree(out)
        raise PullError(_skopeo_error(done.stderr or done.stdout, done.returncode))
    if progress is not None:
        progress(f"{what}: copied")
    return out


def _add(store: ImageStore, layout: Path, ref: str, source: str, progress: Progress | None,
         remote_digest: str | None = None) -> StoredImage:
    from kubetrain.local.paths import remove_tree

    try:
        images, files = archive.read(layout)
        try:
            return store.add(images[0], names=[ref], source=source, progress=progress, remote_digest=remote_digest)
        finally:
            files.close()
    finally:
        remove_tree(layout)


def import_containers_storage(store: ImageStore, ref: str, progress: Progress | None = None) -> StoredImage:
    name = reference.normalize(ref)
    layout = _copy(f"containers-storage:{name}", f"copying image {ref} from the Podman/Buildah store", progress, [])
    return _add(store, layout, name, f"containers-storage:{containers_storage_root()}", progress)


def remote_digest(ref: str, timeout: float = 30.0) -> str:
    """The digest of what the registry serves for ``ref`` now (``skopeo inspect --raw``). Raises ``PullError``."""
    exe = skopeo()
    if exe is None:
        raise PullError(f"checking image {ref} in its registry needs {SKOPEO_PACKAGE}")
    name = reference.normalize(ref)
    try:
        done = subprocess.run([exe, "inspect", "--raw", f"docker://{name}"], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PullError(f"checking image {ref} in its registry timed out after {timeout:g}s") from None
    if done.returncode != 0:
        raise PullError(_skopeo_error(done.stderr.decode(errors="replace"), done.returncode))
    return f"sha256:{hashlib.sha256(done.stdout).hexdigest()}"


def pull(store: ImageStore, ref: str, progress: Progress | None = None) -> StoredImage:
    """Pull ``ref`` from its registry with the user's credentials into the store. Raises ``PullError``."""
    name = reference.normalize(ref)
    digest = None
    if not reference.parse(name).digest:
        try:
            digest = remote_digest(name)
        except PullError:
            digest = None  # the copy below says what is wrong
    layout = _copy(f"docker://{name}", f"pulling image {ref}", progress, [])
    return _add(store, layout, name, f"docker://{name}", progress, remote_digest=digest)
