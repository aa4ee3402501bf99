"""Run the plugins in their fixed phase order: TrainJob + runtime -> Kubernetes objects."""

from __future__ import annotations

from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import CompileError, Result
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import deprecation_warning, validate_trainjob_object
from kubetrain.compiler.framework import (
    BuildPlugin,
    MLPolicyPlugin,
    PodGroupPolicyPlugin,
    PreBuildPlugin,
    ValidatePlugin,
)
from kubetrain.compiler.hostnames import validate_hostnames
from kubetrain.compiler.info import Info, build_info
from kubetrain.compiler.keys import CurveKeyGen, KeyGen, uid_curve_keygen
from kubetrain.compiler.plugins.flux import Flux
from kubetrain.compiler.plugins.jobset import JobSet
from kubetrain.compiler.plugins.mpi import MPI
from kubetrain.compiler.plugins.podgroup import Coscheduling, Volcano
from kubetrain.compiler.plugins.simple import JAX, PlainML, XGBoost
from kubetrain.compiler.plugins.snapshot import Snapshot
from kubetrain.compiler.plugins.tensorflow import TensorFlow
from kubetrain.compiler.plugins.torch import Torch, elastic_policy_of
from kubetrain.compiler.plugins.trainer_status import StatusServer, TrainerStatus

# One instance of each plugin; phase lists below fix the order within a phase.
_TORCH, _MPI, _PLAIN, _JAX, _XGB, _TF = Torch(), MPI(), PlainML(), JAX(), XGBoost(), TensorFlow()
_FLUX = Flux()
_COSCHED, _VOLCANO, _JOBSET, _SNAPSHOT = Coscheduling(), Volcano(), JobSet(), Snapshot()

ML_POLICY: tuple[MLPolicyPlugin, ...] = (_TORCH, _MPI, _PLAIN, _JAX, _XGB, _TF, _FLUX)
POD_GROUP_POLICY: tuple[PodGroupPolicyPlugin, ...] = (_COSCHED, _VOLCANO)
PRE_BUILD: tuple[PreBuildPlugin, ...] = (_JOBSET,)
# Dependencies first, so a backend applying in order never starts a pod before its Secret/ConfigMap exists; the
# torch elastic autoscaler (an HPA targeting the TrainJob) last.
# The Flux ConfigMap and CURVE Secret sit with the MPI objects: what the pods mount, before the JobSet.
BUILD: tuple[BuildPlugin, ...] = (_SNAPSHOT, _MPI, _FLUX, _COSCHED, _VOLCANO, _JOBSET, _TORCH)
VALIDATE: tuple[ValidatePlugin, ...] = (_JOBSET, _TORCH, _MPI, _XGB, _TF, _FLUX, _VOLCANO)


def _check_supported(runtime: AnyRuntime) -> None:
    ml = runtime.spec.ml_policy
    if ml is not None and len(ml.frameworks()) > 1:
        raise CompileError(
            "spec.mlPolicy",
            "Only one of the policy can be configured",
            "keep one of torch, mpi, jax, xgboost, tensorflow, flux",
        )


def enforce(trainjob: TrainJob, runtime: AnyRuntime) -> Info:
    """Build the Info and run every phase up to (not including) build."""
    _check_supported(runtime)
    info = build_info(trainjob, runtime)
    for ml in ML_POLICY:
        ml.enforce_ml_policy(info)
    for pg in POD_GROUP_POLICY:
        pg.enforce_pod_group_policy(info)
    for pre in PRE_BUILD:
        pre.pre_build(info)
    return info


def compile_trainjob(
    trainjob: TrainJob,
    runtime: AnyRuntime,
    *,
    keygen: KeyGen,
    status_server: StatusServer | None = None,
    curve_keygen: CurveKeyGen = uid_curve_keygen,
) -> list[dict[str, Any]]:
    """The objects the cluster gets for this TrainJob, dependencies first (see ``kubetrain.compiler``).
    ``status_server``: wire every pod to that progress endpoint (upstream's ``TrainJobStatus`` feature).
    ``curve_keygen``: the Flux brokers' CURVE key pair for the TrainJob's uid; the default derives it as Kubeflow
    Trainer does, so a TrainJob compiles to the same Secret here and there."""
    info = enforce(trainjob, runtime)
    status = TrainerStatus(status_server) if status_server is not None else None
    if status is not None:
        status.enforce_pod_spec(info)
    if len(info.pod_sets) == 0:
        raise CompileError(
            "spec.template.spec.replicatedJobs",
            f'runtime "{runtime.name}" has no replicated jobs',
            "add at least one replicated job to the runtime template",
        )
    objects: list[dict[str, Any]] = []
    for builder in BUILD:
        if builder is _FLUX:
            builder = Flux(curve_keygen)
        if builder is _JOBSET and status is not None:
            objects.extend(status.build(info, keygen))  # the CA ConfigMap before the pods that mount it
        objects.extend(builder.build(info, keygen))
    return objects


def validate_trainjob(trainjob: TrainJob, runtime: AnyRuntime | None, *, old: TrainJob | None = None) -> Result:
    """The TrainJob's own rules plus, when ``runtime`` is given, every check that needs the runtime."""
    result = validate_trainjob_object(trainjob, old=old)
    if runtime is None:
        return result
    return result.extend(validate_against_runtime(trainjob, runtime, old=old))


def validate_against_runtime(trainjob: TrainJob, runtime: AnyRuntime, *, old: TrainJob | None = None) -> Result:
    """The checks that need the runtime: namespace, deprecation, and every plugin's Validate after enforcing."""
    result = Result()
    if runtime.kind == c.KIND_TRAINING_RUNTIME and (runtime.metadata.namespace or "default") != trainjob.namespace:
        result.error(
            "spec.runtimeRef",
            f'TrainingRuntime "{runtime.name}" is in namespace "{runtime.metadata.namespace}", but TrainJob '
            f'"{trainjob.name}" is in "{trainjob.namespace}"; a TrainingRuntime serves only its own namespace',
            "create the TrainJob in that namespace, or publish the runtime as a ClusterTrainingRuntime",
        )
    warning = deprecation_warning(runtime, referenced=True)
    if warning:
        result.warn("spec.runtimeRef", warning)
    try:
        info = enforce(trainjob, runtime)
    except CompileError as exc:
        result.errors.append(exc.finding)
        return result
    for plugin in VALIDATE:
        result.extend(plugin.validate(info, old))
    result.extend(validate_hostnames(info))
    if old is not None:
        _node_count_change(result, trainjob, old, runtime)
    return result


def _num_nodes(trainjob: TrainJob) -> int | None:
    return trainjob.spec.trainer.num_nodes if trainjob.spec.trainer is not None else None


def _node_count_change(result: Result, new: TrainJob, old: TrainJob, runtime: AnyRuntime) -> None:
    """numNodes of an existing TrainJob may change (kubectl scale, an HPA) only when torch elastic training can
    take a new world size; the torch plugin checks the new value against minNodes..maxNodes."""
    before, after = _num_nodes(old), _num_nodes(new)
    if before == after or elastic_policy_of(runtime) is not None:
        return
    def shown(n: int | None) -> str:
        return "unset" if n is None else str(n)

    result.error(
        "spec.trainer.numNodes",
        f"numNodes can change only when the runtime has mlPolicy.torch.elasticPolicy, and {runtime.kind} "
        f'"{runtime.name}" has none (numNodes {shown(before)} -> {shown(after)})',
        "delete and re-create the TrainJob with the new numNodes, or use a runtime with an elasticPolicy",
    )
