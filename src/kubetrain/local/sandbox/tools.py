"""Host programs a pod running in an image needs inside it: ``setpriv`` (which sets the container's ids, groups and
capabilities right before its command), with the dynamic loader and libraries it was built against, copied once
into ``$KUBETRAIN_HOME/bin/sandbox-tools`` and bound read-only at ``/.kubetrain`` in the pod. It is started through
that loader, so it never uses the image's own libc (which may be older, or musl); the command it then executes is
the image's, with the image's libraries."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from kubetrain.local import paths
from kubetrain.local.sandbox.namespaces import Bind, NamespaceError
from kubetrain.local.sandbox.programs import which

MOUNT = "/.kubetrain"


def _libraries(exe: str) -> list[str]:
    """The loader and shared libraries ``exe`` loads, from ``ldd``."""
    done = subprocess.run(["ldd", exe], capture_output=True, text=True, check=False)
    out = []
    for line in done.stdout.splitlines():
        parts = line.split()
        path = parts[2] if len(parts) >= 3 and parts[1] == "=>" else parts[0] if parts else ""
        if path.startswith("/"):
            out.append(path)
    return out


@functools.lru_cache(maxsize=1)
def setpriv() -> tuple[Bind, tuple[str, ...]]:
    """The bind that brings the tools into a pod, and the command prefix that starts ``setpriv`` inside it."""
    exe = which("setpriv")
    if exe is None:
        raise NamespaceError("pods in an image need setpriv (util-linux): `apt-get install util-linux`")
    root = paths.home() / "bin" / "sandbox-tools"
    libs = _cached_libraries(exe, root)
    loader = next((p for p in libs if os.path.basename(p).startswith("ld-")), None)
    if loader is None:
        raise NamespaceError(f"could not find the dynamic loader of {exe} (ldd {exe})")
    for sub in ("bin", "lib"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for src, dest in [(exe, root / "bin" / "setpriv"), *[(p, root / "lib" / os.path.basename(p)) for p in libs]]:
        _copy(src, dest)
    prefix = (f"{MOUNT}/lib/{os.path.basename(loader)}", "--library-path", f"{MOUNT}/lib", f"{MOUNT}/bin/setpriv")
    return Bind(str(root), MOUNT, True), prefix


def _cached_libraries(exe: str, root: Path) -> list[str]:
    """``_libraries``, remembered beside the copies for as long as ``exe`` is the same file (``ldd`` on every
    supervisor start would cost more than the rest of this module)."""
    st = os.stat(exe)
    stamp = f"{exe} {st.st_size} {int(st.st_mtime)}"
    cache = root / "libraries"
    try:
        first, *libs = cache.read_text().splitlines()
        if first == stamp and libs:
            return libs
    except (OSError, ValueError):
        pass
    libs = _libraries(exe)
    root.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f".libraries.{os.getpid()}")
    tmp.write_text("\n".join([stamp, *libs]) + "\n")
    tmp.replace(cache)
    return libs


def _copy(src: str, dest: Path) -> None:
    st = os.stat(src)
    try:
        have = dest.stat()
        if have.st_size == st.st_size and int(have.st_mtime) == int(st.st_mtime):
            return
    except OSError:
        pass
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    shutil.copy2(src, tmp)
    tmp.replace(dest)
