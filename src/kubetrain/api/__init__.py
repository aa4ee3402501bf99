"""Typed API: TrainJob, TrainingRuntime, ClusterTrainingRuntime, loading and validation.

The models are imported on first use (PEP 562), so code that only needs ``kubetrain.api.errors`` or
``kubetrain.api.constants`` (the local supervisor, a CLI command answered from cache) does not pay for pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetrain.api.errors import CompileError, Finding, InvalidObjectError, KubetrainError, Result
    from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
    from kubetrain.api.trainjob import TrainJob

_WHERE = {
    "CompileError": "kubetrain.api.errors",
    "Finding": "kubetrain.api.errors",
    "InvalidObjectError": "kubetrain.api.errors",
    "KubetrainError": "kubetrain.api.errors",
    "Result": "kubetrain.api.errors",
    "AnyRuntime": "kubetrain.api.runtime",
    "ClusterTrainingRuntime": "kubetrain.api.runtime",
    "TrainingRuntime": "kubetrain.api.runtime",
    "TrainJob": "kubetrain.api.trainjob",
}

__all__ = [
    "AnyRuntime",
    "ClusterTrainingRuntime",
    "CompileError",
    "Finding",
    "InvalidObjectError",
    "KubetrainError",
    "Result",
    "TrainJob",
    "TrainingRuntime",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kubetrain.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
