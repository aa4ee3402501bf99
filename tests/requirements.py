"""Skip markers for tests that need something of this machine beyond the Python packages of ``make test``."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed (.[train])")

# The local backend as the examples run it: pods in bubblewrap sandboxes, as root so securityContext applies.
needs_local_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="needs root and bubblewrap for the local backend (make system-deps)",
)
