"""Where the local backend keeps its state: ``$KUBETRAIN_HOME`` (default ``~/.kubetrain``)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    root = Path(os.environ.get("KUBETRAIN_HOME") or Path.home() / ".kubetrain").expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    return root


def db_path() -> Path:
    return home() / "state.db"


def trainjob_dir(namespace: str, name: str, uid: str) -> Path:
    """Per-TrainJob files (logs, pod scratch, materialised volumes). Keyed by uid so a re-created job with the
    same name never overwrites the logs of the previous one."""
    return home() / "trainjobs" / namespace / f"{name}-{uid[:8]}"


def claims_dir(namespace: str, name: str) -> Path:
    """PVCs of a TrainJob. Keyed by name (not uid) like a PVC outliving its pods: user data survives a delete."""
    return home() / "volumes" / namespace / name


def supervisor_log() -> Path:
    return home() / "supervisor.log"
