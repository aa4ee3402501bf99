"""What each webhook decides, as async functions of an admission ``Request``.

The checks themselves are the ones ``kubetrain validate`` runs (``kubetrain.api.loader.parse_manifest`` and the
one entry point ``kubetrain.compiler.validate_objects``); this module only adds what needs the cluster: the live
runtime a TrainJob references and, for runtime-patch changes, the live JobSet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding, Result
from kubetrain.api.loader import parse_document, parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import RuntimeRef, TrainJob
from kubetrain.compiler import Subject, validate_batch, validate_objects
from kubetrain.k8s.webhook.admission import LookupFailed, Request, Response, error_text, object_at
from kubetrain.k8s.webhook.defaulting import runtime_patch_times
from kubetrain.k8s.webhook.podsecurity import (
    NamespaceLookup,
    NamespaceLookupFailed,
    policy_of,
    review_runtime_pods,
    review_trainjob_pods,
)
from kubetrain.k8s.webhook.scale import default_num_nodes
from kubetrain.k8s.webhook.warnings import admission_warnings

RuntimeLookup = Callable[[str, str, str | None], Awaitable[AnyRuntime | dict[str, Any] | None]]
"""``(kind, name, namespace) -> runtime | None``; namespace is None for a ClusterTrainingRuntime. May raise
on API errors (the review then fails with 500 rather than guessing)."""

JobSetLookup = Callable[[str, str], Awaitable[dict[str, Any] | None]]
"""``(name, namespace) -> JobSet as a dict | None``."""

Clock = Callable[[], datetime]


def _response(req: Request, result: Result) -> Response:
    errors, seen = [], set()
    for f in result.errors:
        key = (f.path, f.message)
        if key not in seen:  # the same rule reached through two validators is reported once
            seen.add(key)
            errors.append(error_text(f))
    warnings = [w.text for w in admission_warnings(result.warnings, events=False)]
    return Response(uid=req.uid, errors=errors, warnings=warnings, warning_findings=list(result.warnings))


def _being_deleted(req: Request) -> bool:
    """An UPDATE of an object with a deletionTimestamp only removes finalizers on its way out: blocking it
    (say, because its runtime is gone) would leave the object stuck in deletion."""
    return req.operation == "UPDATE" and bool(object_at(req.obj, "metadata").get("deletionTimestamp"))


def _parse(doc: dict[str, Any] | None, kind: str) -> tuple[Any, tuple[str, ...], Result]:
    """The object, or what is left of it when fields failed to load (their paths second), and the findings:
    the rules then still run on the rest, so a denial lists every error at once, as `kubetrain validate` does."""
    if doc is None:
        result = Result()
        result.error("", f"the request carries no {kind} object")
        return None, (), result
    parsed = parse_document(doc)
    result = parsed.result
    # Loader findings carry "file:line" sources when parsed from files; a review has none to show.
    result.errors = [Finding(f.path, f.message, f.fix, f.severity) for f in result.errors]
    if parsed.obj is not None:
        return parsed.obj, (), result
    return parsed.partial, parsed.pruned, result


J = TypeVar("J", TrainJob, OptimizationJob)


def _job(req: Request, model: type[J]) -> tuple[J | None, tuple[str, ...], Result, J | None]:
    """The TrainJob or OptimizationJob under review (in the request's namespace when it names none), the paths that
    failed to load, the loader's findings, and on UPDATE the stored version."""
    obj, pruned, result = _parse(req.obj, model.__name__)
    if not isinstance(obj, model):
        return None, pruned, result, None
    if req.namespace and not obj.metadata.namespace:
        obj.metadata.namespace = req.namespace
    old: J | None = None
    if req.operation == "UPDATE" and req.old is not None:
        parsed_old, _ = parse_manifest(req.old)
        old = parsed_old if isinstance(parsed_old, model) else None
    return obj, pruned, result, old


async def review_trainjob(
    req: Request,
    runtime_lookup: RuntimeLookup,
    jobset_lookup: JobSetLookup | None = None,
    namespace_lookup: NamespaceLookup | None = None,
) -> Response:
    """Validate a TrainJob CREATE/UPDATE against the live runtime it references; judge its pods by the
    namespace's Pod Security labels (``namespace_lookup``; without one, only baseline warnings)."""
    if req.operation not in ("CREATE", "UPDATE") or _being_deleted(req):
        return Response(uid=req.uid)
    trainjob, pruned, result, old = _job(req, TrainJob)
    if trainjob is None:
        return _response(req, result)

    # The lookups go out together: Kueue's TrainJob integration updates a queued TrainJob twice between its
    # admission and the pods, and each update waits for this review (bench/kueue.py).
    policy_task = asyncio.ensure_future(policy_of(trainjob.namespace, namespace_lookup))
    jobset_task = (
        asyncio.ensure_future(_active_jobset_check(trainjob, old, jobset_lookup))
        if old is not None and jobset_lookup is not None
        else None
    )
    try:
        candidates, unreadable = await _live_runtime(trainjob.spec.runtime_ref, trainjob.namespace, runtime_lookup)
        if unreadable is not None:
            result.error("spec.runtimeRef", unreadable, "fix the runtime object")
            return _response(req, result)
        validated = validate_batch([Subject(trainjob, pruned, old=old)], installed=candidates)
        result.extend(validated.results[0])
        if jobset_task is not None:
            result.extend(await jobset_task)
        response = _response(req, result)
        runtime = validated.runtimes[0]  # the runtime validation checked the TrainJob against, if it passed
        if runtime is not None and response.allowed:
            try:
                policy = await policy_task
            except NamespaceLookupFailed as exc:
                raise LookupFailed(str(exc)) from exc
            errors, warnings = review_trainjob_pods(trainjob, runtime, policy, old=old)
            response.errors += errors
            response.warnings += warnings
        return response
    finally:
        for task in (policy_task, jobset_task):
            if task is not None and not task.done():
                task.cancel()
            elif task is not None and not task.cancelled():
                task.exception()  # a lookup whose answer was not needed: its failure is not this review's


async def _live_runtime(
    ref: RuntimeRef, namespace: str, runtime_lookup: RuntimeLookup
) -> tuple[list[AnyRuntime], str | None]:
    """The live runtime ``ref`` names (none when it does not exist), or why it exists but cannot be read."""
    if ref.effective_group != c.GROUP or ref.effective_kind not in (
        c.KIND_TRAINING_RUNTIME,
        c.KIND_CLUSTER_TRAINING_RUNTIME,
    ):
        return [], None
    scope = namespace if ref.effective_kind == c.KIND_TRAINING_RUNTIME else None
    try:
        found = await runtime_lookup(ref.effective_kind, ref.name, scope)
    except Exception as exc:
        raise LookupFailed(f"looking up {ref.effective_kind} {ref.name!r}: {exc}") from exc
    if found is None:
        return [], None
    live, unreadable = _as_runtime(found, ref.effective_kind, scope)
    if live is None:  # not "not found": it exists, and saying so points at the real problem
        return [], f'{ref.effective_kind} "{ref.name}" exists but cannot be read: {unreadable}'
    return [live], None


async def review_optimizationjob(req: Request, runtime_lookup: RuntimeLookup) -> Response:
    """Validate an OptimizationJob CREATE/UPDATE: its own rules (upstream's CEL rules among them, so a cluster whose
    API server skips CEL still refuses what upstream refuses), its placeholders, and its first trial against the
    live runtime the template references."""
    if req.operation not in ("CREATE", "UPDATE") or _being_deleted(req):
        return Response(uid=req.uid)
    oj, pruned, result, old = _job(req, OptimizationJob)
    if oj is None:
        return _response(req, result)
    candidates, unreadable = await _live_runtime(oj.spec.train_job_template.spec.runtime_ref, oj.namespace,
                                                 runtime_lookup)
    if unreadable is not None:
        result.error("spec.trainJobTemplate.spec.runtimeRef", unreadable, "fix the runtime object")
        return _response(req, result)
    result.extend(validate_batch([Subject(oj, pruned, old=old)], installed=candidates).results[0])
    return _response(req, result)


def _as_runtime(
    found: AnyRuntime | dict[str, Any], kind: str, namespace: str | None
) -> tuple[AnyRuntime | None, str]:
    """The runtime, or None and why it cannot be read."""
    if isinstance(found, TrainingRuntime | ClusterTrainingRuntime):
        runtime = found
    else:
        obj, parsed = parse_manifest(found)
        if not isinstance(obj, TrainingRuntime | ClusterTrainingRuntime):
            return None, "; ".join(error_text(f) for f in parsed.errors) or "not a runtime"
        runtime = obj
    if runtime.kind == c.KIND_TRAINING_RUNTIME and not runtime.metadata.namespace:
        runtime.metadata.namespace = namespace
    return runtime, ""


async def _active_jobset_check(trainjob: TrainJob, old: TrainJob, jobset_lookup: JobSetLookup) -> Result:
    """Patches may change only while no replicated job of the JobSet is still active (upstream's rule)."""
    result = Result()
    new_patches = [p.to_wire() for p in trainjob.spec.runtime_patches or []]
    old_patches = [p.to_wire() for p in old.spec.runtime_patches or []]
    for p in (*new_patches, *old_patches):
        p.pop("time", None)  # the defaulter's stamp is not a change the user made
    if new_patches == old_patches or not (trainjob.spec.suspend or old.spec.suspend):
        return result  # unchanged, or already refused by validate_trainjob_object
    try:
        jobset = await jobset_lookup(trainjob.name, trainjob.namespace)
    except Exception as exc:
        raise LookupFailed(f"looking up JobSet {trainjob.name!r}: {exc}") from exc
    for rjob in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
        if (rjob.get("active") or 0) > 0:
            result.error(
                "spec.runtimePatches",
                "RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
                f"{rjob.get('name')} is still active",
                "wait until the suspended JobSet's pods have stopped",
            )
    return result


async def review_runtime(req: Request, namespace_lookup: NamespaceLookup | None = None) -> Response:
    """Validate a TrainingRuntime or ClusterTrainingRuntime CREATE/UPDATE; warn about its pods' Pod Security
    level (against the namespace's labels for a TrainingRuntime)."""
    if req.operation not in ("CREATE", "UPDATE") or _being_deleted(req):
        return Response(uid=req.uid)
    runtime, pruned, result = _parse(req.obj, req.kind or "runtime")
    if not isinstance(runtime, TrainingRuntime | ClusterTrainingRuntime):
        return _response(req, result)
    old: AnyRuntime | None = None
    if req.operation == "UPDATE" and req.old is not None:
        parsed_old, _ = parse_manifest(req.old)
        old = parsed_old if isinstance(parsed_old, TrainingRuntime | ClusterTrainingRuntime) else None
    # On UPDATE the deprecation warning is left out, as upstream does (it warns when the runtime is created).
    result.extend(validate_objects([Subject(runtime, pruned, old=old)])[0])
    response = _response(req, result)
    if response.allowed:
        namespaced = runtime.kind == c.KIND_TRAINING_RUNTIME
        namespace = (runtime.metadata.namespace or req.namespace) if namespaced else None
        try:
            policy = await policy_of(namespace, namespace_lookup)
        except NamespaceLookupFailed as exc:
            raise LookupFailed(str(exc)) from exc
        response.warnings += review_runtime_pods(runtime, policy)
    return response


def default_trainjob(req: Request, clock: Clock) -> Response:
    """Stamp ``spec.runtimePatches[].time``."""
    if req.operation not in ("CREATE", "UPDATE") or req.obj is None:
        return Response(uid=req.uid)
    return Response(uid=req.uid, patch=runtime_patch_times(req.obj, req.old, req.operation, clock()))


async def default_trainjob_with_runtime(req: Request, clock: Clock, runtime_lookup: RuntimeLookup) -> Response:
    """``default_trainjob`` plus, on CREATE, ``spec.trainer.numNodes`` for an elastic runtime (so the scale
    subresource can be read; ``kubetrain.k8s.webhook.scale``). A runtime that cannot be read is left to the
    validator: defaulting never blocks a create."""
    response = default_trainjob(req, clock)
    if req.operation != "CREATE" or req.obj is None or _being_deleted(req):
        return response
    ref = object_at(req.obj, "spec", "runtimeRef")
    kind = ref.get("kind") or c.KIND_CLUSTER_TRAINING_RUNTIME
    if not isinstance(ref.get("name"), str) or (ref.get("apiGroup") or c.GROUP) != c.GROUP or kind not in (
        c.KIND_TRAINING_RUNTIME,
        c.KIND_CLUSTER_TRAINING_RUNTIME,
    ):
        return response
    namespace = (object_at(req.obj, "metadata").get("namespace") or req.namespace or "default") if (
        kind == c.KIND_TRAINING_RUNTIME) else None
    if not isinstance(namespace, str | None):
        return response
    try:
        found = await runtime_lookup(kind, ref["name"], namespace)
    except Exception:
        return response
    runtime = _as_runtime(found, kind, namespace)[0] if found is not None else None
    if runtime is not None:
        response.patch += default_num_nodes(req.obj, runtime)
    return response
