"""The one validation entry point: every object of a batch checked with every rule, all findings at once.

``kubetrain validate``, ``render``, ``apply`` and ``run`` (on both backends), the admission webhook and the
operator all call :func:`validate_objects`. They differ only in where the runtimes come from (the files, this
machine's store and built-ins, or the cluster) and in whether the TrainJobs are about to run on this machine.

Rules, in one pass per object:

- a runtime: its own rules (``validate_runtime_object``);
- a ConfigMap, Secret or PersistentVolumeClaim: the API server's rules for it (``validate_core_object``);
- a TrainJob: its own rules, then the runtime it references is resolved among the runtimes of the batch (the
  later definition of a name wins, as ``kubectl apply`` would leave it) and the installed ones, and every check
  that needs the runtime runs. A runtime that is itself invalid is not used: its errors are reported on it (or,
  when it is installed rather than in the batch, on the TrainJob), and the TrainJob says that its
  runtime-dependent checks were skipped instead of claiming the runtime does not exist;
- documents that failed to load take part as :class:`Subject` with ``pruned`` paths: the rules run on what is
  left, and findings at the pruned paths (already reported by the loader) are dropped.

Findings are de-duplicated per object (the same rule reached through two validators is reported once).

:func:`validate_batch` also says which runtime each TrainJob that passed was checked against, so that what runs
after validation (the Pod Security lint, rendering) compiles exactly the pairs validation accepted and never a
runtime it found broken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kubetrain.api import constants as c
from kubetrain.api.core import ConfigMap, PersistentVolumeClaim, Secret, validate_core_object
from kubetrain.api.errors import Finding, Result
from kubetrain.api.loader import Identity, Manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import deprecation_warning, validate_runtime_object, validate_trainjob_object
from kubetrain.compiler.compile import validate_against_runtime
from kubetrain.compiler.optimization.checks import check_optimizationjob, trial_path
from kubetrain.compiler.resolve import resolve_runtime

Local = Literal["run", "check"] | None
"""``"run"``: the TrainJobs are about to run on this machine; ``"check"``: they would if applied here (the rules
that only the local backend has become warnings); ``None``: a cluster runs them."""

Key = tuple[str, str | None, str]  # (kind, namespace or None for cluster-scoped, name)

# A TrainJob's fields that shape or size its pods: the overrides are merged into the runtime's pod templates as they
# are (untyped pod specs), numNodes makes one pod name each. With errors there, the checks that build the pods wait
# until they are fixed (they would build pods that are not Kubernetes-shaped, or too many).
SHAPES_PODS = ("spec.podTemplateOverrides", "spec.runtimePatches", "spec.trainer.numNodes")


@dataclass
class Subject:
    """One object to check. ``pruned``: field paths the loader could not read (the object is what is left);
    ``old``: the stored version when this is an update."""

    obj: Manifest
    pruned: tuple[str, ...] = ()
    old: Manifest | None = None


@dataclass
class Validated:
    """What :func:`validate_batch` found, per subject in order."""

    results: list[Result]
    runtimes: list[AnyRuntime | None]
    """For a TrainJob without errors that was checked against its runtime: that runtime (valid itself, and the
    pair compiles). None for every other subject, and for a TrainJob whose runtime could not be checked (missing,
    invalid, failed to load, unreadable)."""
    usable: list[bool]
    """Whether the subject loaded whole and passed every rule (a TrainJob: against ``runtimes[i]``), so that it
    may be compiled."""


def validate_objects(
    subjects: Sequence[Subject],
    *,
    installed: Iterable[AnyRuntime] | None = (),
    rejected: Iterable[Identity] = (),
    local: Local = None,
) -> list[Result]:
    """One ``Result`` per subject, in order.

    ``installed``: runtimes already on the backend (``None`` when they could not be read: TrainJobs whose runtime
    is not in the batch are then checked on their own, with a warning); ``rejected``: documents of the batch
    that failed to load, by identity, so a TrainJob naming one is not told its runtime does not exist.
    """
    return validate_batch(subjects, installed=installed, rejected=rejected, local=local).results


def validate_batch(
    subjects: Sequence[Subject],
    *,
    installed: Iterable[AnyRuntime] | None = (),
    rejected: Iterable[Identity] = (),
    local: Local = None,
) -> Validated:
    """:func:`validate_objects`, plus the runtime each TrainJob that passed was checked against."""
    results: list[Result] = []
    runtimes: list[AnyRuntime | None] = [None] * len(subjects)
    batch: dict[Key, tuple[AnyRuntime, bool]] = {}  # key -> (runtime, usable)
    for subject in subjects:
        obj = subject.obj
        if isinstance(obj, TrainJob | OptimizationJob):
            results.append(Result())
            continue
        if isinstance(obj, ConfigMap | Secret | PersistentVolumeClaim):
            old_core = subject.old if isinstance(subject.old, ConfigMap | Secret | PersistentVolumeClaim) else None
            results.append(validate_core_object(obj, old=old_core))
            continue
        old_rt = subject.old if isinstance(subject.old, TrainingRuntime | ClusterTrainingRuntime) else None
        result = validate_runtime_object(obj, old=old_rt)
        if old_rt is not None:
            # Upstream warns about a deprecated runtime when it is created, not on every later update.
            stale = deprecation_warning(obj, referenced=False)
            result.warnings = [w for w in result.warnings if w.message != stale]
        results.append(result)
        batch[_key(obj)] = (obj, result.ok and not subject.pruned)
    ctx = _Context(batch, _pool(batch, installed), {_identity_key(i) for i in rejected}, installed is None, local)
    seen: set[Key] = set()
    for i, subject in enumerate(subjects):
        key = _key(subject.obj)
        if isinstance(subject.obj, TrainJob):
            old_tj = subject.old if isinstance(subject.old, TrainJob) else None
            results[i], runtimes[i] = _trainjob(subject.obj, old_tj, ctx)
        elif isinstance(subject.obj, OptimizationJob):
            old_oj = subject.old if isinstance(subject.old, OptimizationJob) else None
            results[i] = _optimizationjob(subject.obj, old_oj, ctx)
        if key in seen:
            results[i].warn("metadata.name", f"{_describe(key)} appears more than once in the input; the last "
                            "definition replaces the earlier ones", "keep one definition per object")
        seen.add(key)
    tidy = [_tidy(r, s.pruned) for r, s in zip(results, subjects, strict=True)]
    usable = []
    for i, subject in enumerate(subjects):
        if subject.pruned or not tidy[i].ok:
            runtimes[i] = None
        checked = runtimes[i] is not None or not isinstance(subject.obj, TrainJob)
        usable.append(tidy[i].ok and not subject.pruned and checked)
    return Validated(tidy, runtimes, usable)


@dataclass
class _Context:
    batch: dict[Key, tuple[AnyRuntime, bool]]  # the batch's runtimes: key -> (runtime, usable)
    pool: list[AnyRuntime]  # what a TrainJob may reference: the batch's runtimes, then the installed ones
    broken: set[Key]  # documents of the batch that failed to load
    unknown_installed: bool  # the installed runtimes could not be read
    local: Local
    installed_results: dict[Key, Result] = field(default_factory=dict)  # each installed runtime checked once


def _trainjob(tj: TrainJob, old: TrainJob | None, ctx: _Context) -> tuple[Result, AnyRuntime | None]:
    """The TrainJob's findings and, when it was checked against its runtime, that runtime."""
    result = validate_trainjob_object(tj, old=old)
    _managed_by(result, tj, ctx.local)
    ref = tj.spec.runtime_ref
    namespace = tj.namespace if ref.effective_kind == c.KIND_TRAINING_RUNTIME else None
    key: Key = (ref.effective_kind, namespace, ref.name)
    if key in ctx.broken and key not in ctx.batch:
        result.warn("spec.runtimeRef", f"not checked against {_describe(key)}: that runtime failed to load (see "
                    "its errors)", "fix the runtime; the TrainJob is checked against it once it loads")
        return result, None
    runtime, found = resolve_runtime(tj, ctx.pool)
    if runtime is None:
        if ctx.unknown_installed and not any(f.path == "spec.runtimeRef" for f in found.errors):
            result.warn("spec.runtimeRef", f"not checked against {_describe(key)}: it is not among the given files "
                        "and the installed runtimes could not be read", "pass the runtime with -f as well")
            return result, None
        return result.extend(found), None
    rkey = _key(runtime)
    if rkey in ctx.batch and not ctx.batch[rkey][1]:
        result.warn("spec.runtimeRef", f"not checked against {_describe(rkey)}: that runtime is invalid (see its "
                    "errors)", "fix the runtime; the TrainJob is checked against it once it is valid")
        return result, None
    shaping = next((f for f in result.errors if any(_under(f.path, p) for p in SHAPES_PODS)), None)
    if shaping is not None:
        result.warn("spec.runtimeRef", f"not checked against {_describe(rkey)}: {shaping.path} is invalid (see its "
                    "error), and the runtime's pods are built from it", "fix it; the TrainJob is then checked "
                    "against the runtime")
        return result, None
    if rkey not in ctx.batch:
        own = ctx.installed_results.get(rkey)
        if own is None:
            own = ctx.installed_results[rkey] = validate_runtime_object(runtime)
        if own.errors:
            first = own.errors[0]
            more = f" (and {len(own.errors) - 1} more)" if len(own.errors) > 1 else ""
            result.error("spec.runtimeRef", f"{_describe(rkey)} is invalid: "
                         f"{first.path + ': ' if first.path else ''}{first.message}{more}",
                         "fix the runtime (kubetrain validate -f <runtime file>) and apply it again")
            return result, None
    return result.extend(validate_against_runtime(tj, runtime, old=old)), runtime


def _optimizationjob(oj: OptimizationJob, old: OptimizationJob | None, ctx: _Context) -> Result:
    """The OptimizationJob's own rules, then its first trial checked as a TrainJob (against its runtime), with
    the trial's findings at the template's paths."""
    result, trial = check_optimizationjob(oj, old=old)
    if trial is None:
        return result
    found, _ = _trainjob(trial, None, ctx)
    for f in found.errors + found.warnings:
        (result.errors if f.severity == "error" else result.warnings).append(
            Finding(trial_path(f.path), f.message, f.fix, f.severity)
        )
    return result


def _managed_by(result: Result, tj: TrainJob, local: Local) -> None:
    managed_by = tj.spec.managed_by
    if local is None or managed_by in (None, "", c.MANAGED_BY_DEFAULT):
        return
    who = "MultiKueue, which dispatches it to a worker cluster" if managed_by == c.MANAGED_BY_MULTIKUEUE else (
        "that controller")
    message = (f"this TrainJob is managed by {managed_by!r}: on a cluster {who} runs it; this machine runs only "
               "TrainJobs kubetrain manages")
    fix = "remove spec.managedBy to run it here, or apply it to the cluster (--context / --kubeconfig)"
    if local == "run":
        result.error("spec.managedBy", message, fix)
    else:
        result.warn("spec.managedBy", f"{message}, so `kubetrain run` and `apply` here refuse it", fix)


def _pool(batch: dict[Key, tuple[AnyRuntime, bool]], installed: Iterable[AnyRuntime] | None) -> list[AnyRuntime]:
    """Runtimes a TrainJob may reference: the batch's, then the installed ones the batch does not replace."""
    pool = [r for r, _ in batch.values()]
    for runtime in installed or ():
        if _key(runtime) not in batch:
            pool.append(runtime)
    return pool


def _key(obj: Manifest) -> Key:
    scoped = obj.kind != c.KIND_CLUSTER_TRAINING_RUNTIME
    return obj.kind, (obj.metadata.namespace or "default") if scoped else None, obj.metadata.name or ""


def _identity_key(identity: Identity) -> Key:
    scoped = identity.kind != c.KIND_CLUSTER_TRAINING_RUNTIME
    return identity.kind, (identity.namespace or "default") if scoped else None, identity.name


def _describe(key: Key) -> str:
    kind, namespace, name = key
    return f'{kind} "{name}"' + (f" in namespace {namespace}" if namespace and kind != c.KIND_TRAINJOB else "")


def _tidy(result: Result, pruned: tuple[str, ...]) -> Result:
    """Drop duplicates and findings at paths the loader already reported as unreadable."""
    out = Result()
    seen: set[tuple[str, str, str]] = set()
    for f in result.errors + result.warnings:
        if any(_under(f.path, p) for p in pruned):
            continue
        key = (f.severity, f.path, f.message)
        if key in seen:
            continue
        seen.add(key)
        (out.errors if f.severity == "error" else out.warnings).append(f)
    return out


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def errors_of(results: Iterable[Result]) -> list[Finding]:
    return [f for r in results for f in r.errors]
