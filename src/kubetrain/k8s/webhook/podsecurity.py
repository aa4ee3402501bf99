"""Pod Security at admission: warnings for the pods a TrainJob or runtime would get, and the namespace's
``pod-security.kubernetes.io/enforce`` level applied to TrainJobs before any pod exists.

The checks are ``kubetrain.api.podsecurity`` (kube-apiserver 1.36's PodSecurity checks) run on the pod
templates the compiler emits; this module only adds the namespace's labels, read through a lookup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kubetrain.api import constants as c
from kubetrain.api.podsecurity import Level, LevelVersion, NamespacePolicy, level_rank, namespace_policy
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.podsecurity import PodSecurityReport, lint_runtime, lint_trainjob

NamespaceLookup = Callable[[str], Awaitable[dict[str, str] | None]]
"""``namespace -> its labels | None`` (None: no such namespace). May raise on API errors."""

DEFAULT_WARN_LEVEL: Level = "baseline"
WARNINGS_BUDGET = 4096
"""The API server keeps a response's warnings whole up to this many characters in all; past it, it cuts each to
256 characters and then drops the rest."""


class NamespaceLookupFailed(Exception):
    """The namespace's labels could not be read: with enforcement possibly on, the review must not guess."""


async def policy_of(namespace: str | None, lookup: NamespaceLookup | None) -> NamespacePolicy:
    if namespace is None or lookup is None:
        return NamespacePolicy()
    try:
        labels = await lookup(namespace)
    except Exception as exc:
        raise NamespaceLookupFailed(f"looking up namespace {namespace!r}: {exc}") from exc
    return namespace_policy(labels)


def _warn_level(policy: NamespacePolicy, floor: Level) -> LevelVersion:
    """The level warnings are given against: the namespace's warn or enforce level, at least ``floor``."""
    best = LevelVersion(floor)
    for lv in (policy.warn, policy.enforce):
        if level_rank(lv.level) > level_rank(best.level):
            best = lv
    return best


def _warnings(report: PodSecurityReport, target: LevelVersion) -> list[str]:
    """One short line per field that keeps the pods from ``target``; and when ``target`` is below restricted,
    for each replicated job that fails it, PodSecurity's own line naming everything restricted also refuses (so
    a privileged runtime's user learns the whole way, not only the baseline part), as far as the budget
    allows."""
    lines = [f.short() for f in report.violations(target.level)]
    if target.level == "restricted":
        return lines
    used = sum(len(line) for line in lines)
    for summary in report.summaries(below=target.level):
        if used + len(summary) > WARNINGS_BUDGET:
            break
        lines.append(summary)
        used += len(summary)
    return lines


def denial(report: PodSecurityReport, enforce: LevelVersion, namespace: str) -> str:
    """One message naming every check that keeps the pods from the enforced level (the admission status
    message has no length limit, unlike warnings)."""
    parts = [
        f"job {f.replicated_job}: {f.check} ({'' if f.subject == 'pod' else f.subject + ': '}{f.fix})"
        for f in report.violations(enforce.level)
    ]
    return (
        f'pods of this TrainJob would violate PodSecurity "{enforce}" enforced in namespace {namespace}: '
        + "; ".join(parts)
    )


def review_trainjob_pods(
    trainjob: TrainJob,
    runtime: AnyRuntime,
    policy: NamespacePolicy,
    *,
    old: TrainJob | None = None,
    warn_floor: Level = DEFAULT_WARN_LEVEL,
) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` for the pods ``trainjob`` would run in its namespace; validation has accepted the
    pair (``old`` is re-validated against ``runtime`` before it is rated).

    An UPDATE that leaves the pods as they were is not re-judged (as PodSecurity skips pod updates that
    change nothing it checks), so labelling a namespace never blocks e.g. suspending a job created before.
    """
    enforce = policy.enforce
    report = lint_trainjob(trainjob, runtime, minor=enforce.minor, checked=True)
    if report.level is None:
        return [], []  # does not compile: validation already reports why
    if old is not None:
        before = lint_trainjob(old, runtime, minor=enforce.minor)
        if before.findings == report.findings and before.pods == report.pods:
            return [], []
    if enforce.level != "privileged" and not report.meets(enforce.level):
        return [denial(report, enforce, trainjob.namespace)], []
    target = _warn_level(policy, warn_floor)
    if target.minor != enforce.minor:
        report = lint_trainjob(trainjob, runtime, minor=target.minor, checked=True)
    return [], _warnings(report, target)


def review_runtime_pods(
    runtime: AnyRuntime, policy: NamespacePolicy, *, warn_floor: Level = DEFAULT_WARN_LEVEL
) -> list[str]:
    """Warnings for the pods a plain TrainJob would get from ``runtime``; a TrainingRuntime whose pods its
    namespace would refuse says so first."""
    target = _warn_level(policy, warn_floor)
    report = lint_runtime(runtime, minor=target.minor)
    out = []
    enforce = policy.enforce
    if runtime.kind == c.KIND_TRAINING_RUNTIME and enforce.level != "privileged" and not report.meets(enforce.level):
        out.append(
            f'PodSecurity: namespace {runtime.metadata.namespace} enforces "{enforce}"; '
            f"TrainJobs using this {report.level} runtime will be denied"
        )
    return out + _warnings(report, target)
