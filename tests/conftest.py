"""Shared test fixtures: where the steering repo's shared/ material lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KUBETRAIN_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found: the steering repo's shared/ must sit beside the repo (or set KUBETRAIN_SHARED)")
    return path
