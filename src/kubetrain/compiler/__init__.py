"""The compiler: TrainJob + runtime -> the objects the cluster gets (JobSet, PodGroup, MPI objects, snapshot).

Pure and deterministic: no I/O, no clock and no randomness except through the injected ``keygen`` (and the Flux
CURVE keys, derived from the TrainJob's uid by the injected ``curve_keygen``).

Public contract (backends rely on it):

``compile_trainjob(trainjob, runtime, *, keygen, status_server=None, curve_keygen=...) -> list[dict]``
    Kubernetes objects as plain dicts, dependencies first: runtime snapshot ConfigMap, MPI SSH Secret,
    MPI hostfile ConfigMap, Flux entrypoint ConfigMap and CURVE Secret, PodGroup, status-endpoint CA ConfigMap,
    JobSet, and for a torch elasticPolicy with metrics a HorizontalPodAutoscaler targeting the TrainJob. Every object
    carries a controller ownerReference to the TrainJob. ``status_server`` (a ``StatusServer``: URL and CA) wires
    every pod to the progress endpoint (KEP-2779). ``curve_keygen`` gives the Flux brokers' CURVE keys for a uid
    (default: derived from it as Kubeflow Trainer does). Raises ``CompileError`` (a ``KubetrainError``) when the
    pair cannot be compiled.

``validate_trainjob(trainjob, runtime, *, old=None) -> Result``
    Schema-level checks of the TrainJob plus every check that needs the runtime (plugins' Validate, ancestor
    steps, deprecated-runtime warnings). This is what both ``kubetrain validate`` and the admission webhook call.

``resolve_runtime(trainjob, runtimes) -> tuple[runtime | None, Result]``
    Finds the runtime a TrainJob references among the given ones, with namespace rules.

``validate_objects(subjects, *, installed, rejected, local) -> list[Result]``
    The one validation entry point every path uses (CLI verbs on both backends, webhook, operator): a batch of
    TrainJobs and runtimes checked with every rule at once; see ``kubetrain.compiler.validate``.

``validate_batch(...) -> Validated``
    The same, plus which subjects may be compiled and the runtime each valid TrainJob was checked against: what
    compiles after validation (the Pod Security lint, ``render``) takes its pairs from here.
"""

from kubetrain.compiler.compile import compile_trainjob, validate_trainjob
from kubetrain.compiler.keys import (
    CurveKeyGen,
    CurveKeyPair,
    KeyGen,
    SSHKeyPair,
    ecdsa_keygen,
    fixed_curve_keygen,
    fixed_keygen,
    uid_curve_keygen,
)
from kubetrain.compiler.plugins.trainer_status import StatusServer
from kubetrain.compiler.resolve import resolve_runtime
from kubetrain.compiler.validate import Subject, Validated, validate_batch, validate_objects

__all__ = [
    "CurveKeyGen",
    "CurveKeyPair",
    "KeyGen",
    "SSHKeyPair",
    "StatusServer",
    "Subject",
    "Validated",
    "compile_trainjob",
    "ecdsa_keygen",
    "fixed_curve_keygen",
    "fixed_keygen",
    "resolve_runtime",
    "uid_curve_keygen",
    "validate_batch",
    "validate_objects",
    "validate_trainjob",
]
