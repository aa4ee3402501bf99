"""Finding the host programs local pods are made of (``bwrap``, ``nsenter``, ``setpriv``, ``slirp4netns``, ``mpirun``).
"""

from __future__ import annotations

import os


def which(program: str) -> str | None:
    """``shutil.which`` without importing shutil (and its compression modules) on every command's start."""
    for d in os.get_exec_path():
        path = os.path.join(d, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
