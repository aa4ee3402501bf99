"""Typed API: TrainJob, TrainingRuntime, ClusterTrainingRuntime, loading and validation."""

from kubetrain.api.errors import CompileError, Finding, InvalidObjectError, KubetrainError, Result
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob

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
