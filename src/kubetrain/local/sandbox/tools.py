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
    libs = _libraries(exe)
    loader = next((p for p in libs if os.path.basename(p).startswith("ld-")), None)
    if loader is None:
        raise NamespaceError(f"could not find the dynamic loader of {exe} (ldd {exe})")
    root = paths.home() / "bin" / "sandbox-tools"
    for sub in ("bin", "lib"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for src, dest in [(exe, root / "bin" / "setpriv"), *[(p, root / "lib" / os.path.basename(p)) for p in libs]]:
        _copy(src, dest)
    prefix = (f"{MOUNT}/lib/{os.path.basename(loader)}", "--library-path", f"{MOUNT}/lib", f"{MOUNT}/bin/setpriv")
    return Bind(str(root), MOUNT, True), prefix


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
