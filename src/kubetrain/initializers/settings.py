"""What an initializer reads from its environment: upstream's variables, named after its configuration fields."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kubetrain.initializers import DATASET_DIR, MODEL_DIR
from kubetrain.initializers.errors import InitializerError

Step = Literal["dataset", "model"]

# Upstream's model initializers leave out framework formats other than safetensors unless told otherwise.
MODEL_IGNORE_PATTERNS = ("*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth")


@dataclass(frozen=True)
class Settings:
    step: Step
    storage_uri: str
    destination: str
    """``/workspace/dataset`` or ``/workspace/model``; ``OUTPUT_PATH`` (which the official SDK's container backend
    sets to the same paths) moves it, e.g. to run the program outside a pod."""
    access_token: str | None
    ignore_patterns: tuple[str, ...]


def from_env(step: Step, env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    uri = env.get("STORAGE_URI", "").strip()
    if not uri:
        raise InitializerError(
            "STORAGE_URI is not set: the initializer does not know what to fetch",
            f"set spec.initializer.{step}.storageUri in the TrainJob (or STORAGE_URI in the runtime's "
            f"{step}-initializer container)",
            permanent=True,
        )
    raw = env.get("IGNORE_PATTERNS")
    if raw is None:
        patterns: tuple[str, ...] = MODEL_IGNORE_PATTERNS if step == "model" else ()
    else:  # set but empty: ignore nothing
        patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    return Settings(
        step=step,
        storage_uri=uri,
        destination=env.get("OUTPUT_PATH") or (DATASET_DIR if step == "dataset" else MODEL_DIR),
        access_token=env.get("ACCESS_TOKEN") or None,
        ignore_patterns=patterns,
    )
