"""Pod Security lint of what the compiler emits: the level of every pod template of the JobSet a TrainJob
compiles to, and one finding per failed check (``kubetrain.api.podsecurity`` does the checking).

A runtime is linted through a representative TrainJob (``probe_trainjob``: no overrides, the runtime's own
node count), so its report shows exactly the pods a plain TrainJob would get. Paths point into the runtime's
JobSet template (``spec.template.spec.replicatedJobs[i].template.spec.template...``), where the pod templates
come from; for a TrainJob they describe the pods after its overrides.

Only what validation accepts is compiled: a runtime or a TrainJob/runtime pair that validation rejects is "not
rated" (``level`` None, ``error`` naming its first error), since the compiler's input contract is a validated
pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding, KubetrainError, Result
from kubetrain.api.podsecurity import Level, LevelVersion, Violation, assess, level_rank, would_violate
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.validation import validate_runtime_object
from kubetrain.api.views import camel_fields
from kubetrain.compiler.compile import compile_trainjob
from kubetrain.compiler.keys import fixed_keygen
from kubetrain.compiler.validate import Subject, validate_objects

PROBE_NAME = "pod-security-probe"
WARNING_LIMIT = 120  # the API server truncates longer admission warnings


@dataclass(frozen=True)
class PodSecurityFinding:
    """A failed PodSecurity check at one field of one replicated job's pod template."""

    check: str
    level: Level  # the level this check belongs to (a baseline check also binds restricted)
    path: str
    message: str
    fix: str
    replicated_job: str
    subject: str  # 'container "node"', 'volume "data"' or "pod"

    @classmethod
    def of(cls, v: Violation, index: int, replicated_job: str) -> PodSecurityFinding:
        prefix = f"spec.template.spec.replicatedJobs[{index}].template.spec.template."
        return cls(v.check, v.level, prefix + v.path, v.message, v.fix, replicated_job, v.subject)

    def to_finding(self, origin: str | None = None) -> Finding:
        """A warning for ``kubetrain validate``; ``origin`` names the runtime the path points into."""
        where = f" (pod template from {origin})" if origin else ""
        return Finding(
            self.path, f"PodSecurity {self.level} ({self.check}): {self.message}{where}", self.fix, "warning"
        )

    def short(self, limit: int = WARNING_LIMIT) -> str:
        """One line for an admission warning, key words first: level, where, the fix (which names the field);
        cut with an ellipsis past ``limit`` (the API server truncates warnings at 120 characters)."""
        where = self.replicated_job if self.subject == "pod" else f"{self.replicated_job}, {self.subject}"
        line = f"PodSecurity {self.level}: job {where}: {self.fix}"
        return line if len(line) <= limit else line[: limit - 1] + "…"

    def to_json(self) -> dict[str, str]:
        return camel_fields(self)


@dataclass
class PodSecurityReport:
    """One runtime's or TrainJob's pods: the strictest level all of them meet and what stands in the way of
    restricted. ``level`` is None when the pair is not rated (``error`` says why)."""

    kind: str
    name: str
    namespace: str | None
    level: Level | None
    findings: list[PodSecurityFinding] = field(default_factory=list)
    pods: dict[str, Level] = field(default_factory=dict)  # replicated job -> level of its pods
    error: str | None = None
    restricted: dict[str, str] = field(default_factory=dict)
    """Replicated job -> PodSecurity's warning for its pods at restricted (``would violate PodSecurity
    "restricted:latest": ...``): everything restricted refuses, for the pods that do not meet it."""

    def summaries(self, below: Level = "restricted") -> list[str]:
        """``job <name>: would violate PodSecurity "restricted:...": ...`` for each replicated job whose pods
        fall below ``below``."""
        rank = level_rank(below)
        return [f"job {rjob}: {text}" for rjob, text in self.restricted.items() if level_rank(self.pods[rjob]) < rank]

    def violations(self, level: Level) -> list[PodSecurityFinding]:
        """The findings that keep these pods from ``level`` (baseline findings bind restricted too)."""
        rank = level_rank(level)
        return [f for f in self.findings if level_rank(f.level) <= rank]

    def meets(self, level: Level) -> bool:
        return self.level is not None and level_rank(self.level) >= level_rank(level)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "level": self.level,
            "pods": [{"replicatedJob": k, "level": v} for k, v in self.pods.items()],
            "findings": [f.to_json() for f in self.findings],
            "restricted": [{"replicatedJob": k, "message": v} for k, v in self.restricted.items()],
        }
        if self.error is not None:
            out["error"] = self.error
        return out


def probe_trainjob(runtime: AnyRuntime) -> TrainJob:
    """The representative TrainJob a runtime is linted with: it references the runtime and overrides nothing."""
    namespace = runtime.metadata.namespace if runtime.kind == c.KIND_TRAINING_RUNTIME else None
    return TrainJob.model_validate(
        {
            "metadata": {"name": PROBE_NAME, "namespace": namespace or "default"},
            "spec": {"runtimeRef": {"name": runtime.name, "kind": runtime.kind}},
        }
    )


def _pod_templates(objects: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    jobset = next((o for o in objects if o.get("kind") == "JobSet"), None)
    rjobs = ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []
    return [
        (i, str(rj.get("name", "")), ((rj.get("template") or {}).get("spec") or {}).get("template") or {})
        for i, rj in enumerate(rjobs)
    ]


def _report(
    kind: str, name: str, namespace: str | None, templates: list[tuple[int, str, Any]], minor: int | None
) -> PodSecurityReport:
    report = PodSecurityReport(kind, name, namespace, level="restricted")
    label = str(LevelVersion("restricted", minor))
    for index, rjob, template in templates:
        assessment = assess(template, minor)
        report.pods[rjob] = assessment.level
        if assessment.restricted:
            report.restricted[rjob] = would_violate(assessment.restricted, label)
        if level_rank(assessment.level) < level_rank(report.level or "restricted"):
            report.level = assessment.level
        report.findings += [PodSecurityFinding.of(v, index, rjob) for v in assessment.violations]
    return report


def not_rated(result: Result) -> str:
    """Why an object is not rated: its first error (validation rejected it, so it is not compiled)."""
    first = result.errors[0]
    more = f" (and {len(result.errors) - 1} more)" if len(result.errors) > 1 else ""
    return f"not rated: {first.path + ': ' if first.path else ''}{first.message}{more}"


def lint_trainjob(
    trainjob: TrainJob, runtime: AnyRuntime, *, minor: int | None = None, checked: bool = False
) -> PodSecurityReport:
    """The pods ``trainjob`` gets from ``runtime``, at PodSecurity policy version ``1.<minor>`` (None: latest).

    ``checked``: validation already accepted this pair (``validate_batch`` returned ``runtime`` for it);
    otherwise the pair is validated here first and, when rejected, not rated."""
    if not checked:
        result = validate_objects([Subject(trainjob)], installed=[runtime])[0]
        if not result.ok:
            return PodSecurityReport(
                c.KIND_TRAINJOB, trainjob.name, trainjob.namespace, None, error=not_rated(result)
            )
    try:
        objects = compile_trainjob(trainjob, runtime, keygen=fixed_keygen())
    except KubetrainError as exc:
        return PodSecurityReport(c.KIND_TRAINJOB, trainjob.name, trainjob.namespace, None, error=str(exc))
    return _report(c.KIND_TRAINJOB, trainjob.name, trainjob.namespace, _pod_templates(objects), minor)


def lint_runtime(runtime: AnyRuntime, *, minor: int | None = None) -> PodSecurityReport:
    """The pods a plain TrainJob gets from ``runtime``. A runtime validation rejects is not rated; a valid one
    that a plain TrainJob cannot use as it is (e.g. it needs a command) is linted as written."""
    namespace = runtime.metadata.namespace if runtime.kind == c.KIND_TRAINING_RUNTIME else None
    own = validate_runtime_object(runtime)
    if not own.ok:
        return PodSecurityReport(runtime.kind, runtime.name, namespace, None, error=not_rated(own))
    try:
        objects = compile_trainjob(probe_trainjob(runtime), runtime, keygen=fixed_keygen())
        templates = _pod_templates(objects)
    except KubetrainError:
        wire = runtime.to_wire()
        jobset = {"kind": "JobSet", "spec": ((wire.get("spec") or {}).get("template") or {}).get("spec") or {}}
        templates = _pod_templates([jobset])
    return _report(runtime.kind, runtime.name, namespace, templates, minor)
