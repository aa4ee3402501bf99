"""The Pod Security part of ``kubetrain validate``: one report per runtime and per TrainJob, and the findings
that keep their pods from the chosen level as warnings (tagged with object and file:line)."""

from __future__ import annotations

from collections.abc import Sequence

from kubetrain.api.errors import Result
from kubetrain.api.loader import Manifest
from kubetrain.api.podsecurity import Level
from kubetrain.api.runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.podsecurity import PodSecurityReport, lint_runtime, lint_trainjob, not_rated
from kubetrain.service.sources import Source, tag

NOT_CHECKED = "not rated: it was not checked against its runtime (see the warnings)"


def _key(kind: str, name: str, namespace: str | None) -> tuple[str, str, str | None]:
    return (kind, name, (namespace or "default") if kind == "TrainingRuntime" else None)


def pod_security(
    objects: Sequence[Manifest],
    sources: Sequence[Source],
    results: Sequence[Result],
    runtimes: Sequence[AnyRuntime | None],
    level: Level,
    reports: list[PodSecurityReport],
) -> Result:
    """Append a report per runtime and TrainJob to ``reports``; return the findings below ``level``.

    ``results`` and ``runtimes`` are validation's verdict per object (``kubetrain.compiler.validate_batch``):
    only what it accepted is compiled and rated, a TrainJob with exactly the runtime it was checked against;
    the rest is reported "not rated" with the reason. A TrainJob repeats none of the findings already reported for its
    runtime in the same run: the fix belongs to the runtime, and one warning per failed check is enough.
    """
    runtime_reports = {
        id(obj): lint_runtime(obj)
        for obj, own in zip(objects, results, strict=True)
        if own.ok and isinstance(obj, TrainingRuntime | ClusterTrainingRuntime)
    }
    reported = {_key(r.kind, r.name, r.namespace): {f.path for f in r.findings} for r in runtime_reports.values()}
    result = Result()
    for obj, source, own, runtime in zip(objects, sources, results, runtimes, strict=True):
        origin = None
        if isinstance(obj, TrainingRuntime | ClusterTrainingRuntime):
            if id(obj) not in runtime_reports:
                namespace = obj.metadata.namespace if isinstance(obj, TrainingRuntime) else None
                reports.append(PodSecurityReport(obj.kind, obj.name, namespace, None, error=not_rated(own)))
                continue
            report = runtime_reports[id(obj)]
            shown = report.violations(level)
        elif isinstance(obj, TrainJob):
            if runtime is None:
                why = NOT_CHECKED if own.ok else not_rated(own)
                reports.append(PodSecurityReport("TrainJob", obj.name, obj.namespace, None, error=why))
                continue
            report = lint_trainjob(obj, runtime, checked=True)
            known = reported.get(_key(runtime.kind, runtime.name, runtime.metadata.namespace), set())
            shown = [f for f in report.violations(level) if f.path not in known]
            origin = f"{runtime.kind} {runtime.name}"
        else:
            continue
        reports.append(report)
        found = Result()
        found.add(f.to_finding(origin) for f in shown)
        result.extend(tag(found, obj, source))
    return result
