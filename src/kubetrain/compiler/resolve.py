"""Find the runtime a TrainJob references, with upstream's namespace and kind rules."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import TrainJob

SUPPORTED_KINDS = (c.KIND_CLUSTER_TRAINING_RUNTIME, c.KIND_TRAINING_RUNTIME)


def resolve_runtime(trainjob: TrainJob, runtimes: Iterable[AnyRuntime]) -> tuple[AnyRuntime | None, Result]:
    result = Result()
    ref = trainjob.spec.runtime_ref
    kind, group = ref.effective_kind, ref.effective_group
    if group != c.GROUP or kind not in SUPPORTED_KINDS:
        result.error(
            "spec.runtimeRef",
            f"unsupported runtime: {kind}.{group}",
            f"use apiGroup {c.GROUP} with kind ClusterTrainingRuntime or TrainingRuntime",
        )
        return None, result
    pool = list(runtimes)
    same_kind = [r for r in pool if r.kind == kind]
    if kind == c.KIND_TRAINING_RUNTIME:
        here = [r for r in same_kind if (r.metadata.namespace or "default") == trainjob.namespace]
        match = next((r for r in here if r.name == ref.name), None)
        if match is not None:
            return match, result
        elsewhere = [r for r in same_kind if r.name == ref.name]
        if elsewhere:
            where = ", ".join(sorted({r.metadata.namespace or "default" for r in elsewhere}))
            result.error(
                "spec.runtimeRef",
                f'TrainingRuntime "{ref.name}" exists in namespace {where}, not in "{trainjob.namespace}" where '
                "the TrainJob is: a TrainingRuntime serves only its own namespace",
                "create the TrainJob in that namespace, or reference a ClusterTrainingRuntime, which every "
                "namespace can use",
            )
            return None, result
        candidates = [r.name for r in here]
    else:
        match = next((r for r in same_kind if r.name == ref.name), None)
        if match is not None:
            return match, result
        candidates = [r.name for r in same_kind]
    other_kind = [r for r in pool if r.kind != kind and r.name == ref.name]
    fix = f"available: {', '.join(sorted(candidates))}" if candidates else f"apply the {kind} first"
    close = difflib.get_close_matches(ref.name, candidates, n=1)
    if close:
        fix = f"did you mean {close[0]!r}? ({fix})"
    if other_kind:
        fix = f'a {other_kind[0].kind} named "{ref.name}" exists: set spec.runtimeRef.kind: {other_kind[0].kind}'
    result.error(
        "spec.runtimeRef.name",
        f'{kind} "{ref.name}" not found: specified {kind[0].lower() + kind[1:]} must be created before the '
        "TrainJob is created",
        fix,
    )
    return None, result
