"""Built-in ClusterTrainingRuntimes shipped as package data (one YAML file each)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from kubetrain.api.loader import load_text
from kubetrain.api.runtime import ClusterTrainingRuntime


@cache
def _load() -> tuple[ClusterTrainingRuntime, ...]:
    out: list[ClusterTrainingRuntime] = []
    for entry in sorted(resources.files(__name__).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        loaded = load_text(entry.read_text(encoding="utf-8"), f"kubetrain/runtimes/{entry.name}")
        if not loaded.result.ok:  # a broken built-in is a packaging bug, not user input
            raise RuntimeError(f"built-in runtime {entry.name} is invalid: {loaded.result.errors}")
        out += [o for o in loaded.objects if isinstance(o, ClusterTrainingRuntime)]
    return tuple(out)


def builtin_runtimes() -> list[ClusterTrainingRuntime]:
    """Fresh copies, so callers may mutate them."""
    return [r.model_copy(deep=True) for r in _load()]


def builtin_runtime(name: str) -> ClusterTrainingRuntime | None:
    return next((r for r in builtin_runtimes() if r.name == name), None)


def builtin_yaml(name: str) -> str | None:
    path = resources.files(__name__) / f"{name}.yaml"
    return path.read_text(encoding="utf-8") if path.is_file() else None


__all__ = ["builtin_runtime", "builtin_runtimes", "builtin_yaml"]
