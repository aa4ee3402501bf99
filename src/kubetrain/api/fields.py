"""Where each field name may appear, derived from the models: powers "did you mean" and "belongs under"."""

from __future__ import annotations

import difflib
import types
import typing
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from kubetrain.api.core import ConfigMap, PersistentVolumeClaim, Secret
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob

# PodSpec and Container fields users most often misplace; pod specs themselves are not modelled.
POD_SPEC_FIELDS = (
    "containers", "initContainers", "volumes", "nodeSelector", "tolerations", "affinity", "restartPolicy",
    "serviceAccountName", "securityContext", "schedulerName", "priorityClassName", "imagePullSecrets",
    "hostNetwork", "runtimeClassName", "terminationGracePeriodSeconds", "schedulingGates",
)
CONTAINER_FIELDS = (
    "name", "image", "command", "args", "env", "envFrom", "resources", "volumeMounts", "ports",
    "readinessProbe", "livenessProbe", "workingDir", "imagePullPolicy", "securityContext",
)
POD_SPEC_PATH = "spec.template.spec.replicatedJobs[].template.spec.template.spec"


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model inside ``X | None`` / ``list[X]`` annotations, and whether it sits in a list."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            model, in_list = _model_of(arg)
            if model is not None:
                return model, in_list
        return None, False
    if origin is list:
        model, _ = _model_of(get_args(annotation)[0])
        return model, True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def aliases(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def child_model(model: type[BaseModel], alias: str) -> tuple[type[BaseModel] | None, bool]:
    for name, f in model.model_fields.items():
        if (f.alias or name) == alias:
            return _model_of(f.annotation)
    return None, False


@cache
def locations(kind: str) -> dict[str, tuple[str, ...]]:
    """field name -> every path (``spec.mlPolicy``) whose object accepts that field, for one kind."""
    roots: dict[str, type[BaseModel]] = {
        "TrainJob": TrainJob, "TrainingRuntime": TrainingRuntime, "ClusterTrainingRuntime": ClusterTrainingRuntime,
        "ConfigMap": ConfigMap, "Secret": Secret, "PersistentVolumeClaim": PersistentVolumeClaim,
        "OptimizationJob": OptimizationJob,
    }
    root = roots[kind]
    out: dict[str, list[str]] = {}

    def walk(model: type[BaseModel], path: str, depth: int) -> None:
        if depth > 12:
            return
        for alias in aliases(model):
            out.setdefault(alias, []).append(path)
            sub, in_list = child_model(model, alias)
            if sub is not None and alias != "metadata":
                walk(sub, f"{path}.{alias}{'[]' if in_list else ''}".lstrip("."), depth + 1)

    walk(root, "", 0)
    if kind != "TrainJob":
        for f in POD_SPEC_FIELDS:
            out.setdefault(f, []).append(POD_SPEC_PATH)
        for f in CONTAINER_FIELDS:
            out.setdefault(f, []).append(f"{POD_SPEC_PATH}.containers[]")
    return {k: tuple(v) for k, v in out.items()}


def suggest(word: str, choices: typing.Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if close:
        return close[0]
    lowered = {c.lower(): c for c in choices}
    return lowered.get(word.lower())
