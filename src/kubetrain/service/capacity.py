"""The machine-capacity part of ``kubetrain validate`` on this machine: a TrainJob whose pods could never run
here at once (2 nodes × 2 cpu on a 2-core laptop) is a warning before it is submitted, with the totals and the
fix the local scheduler would give it as ``Unschedulable``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kubetrain.api.errors import Finding, KubetrainError, Result
from kubetrain.api.loader import Manifest
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.service.sources import Source, tag

if TYPE_CHECKING:
    from kubetrain.local.scheduling.resources import Capacity


def capacity_warnings(
    objects: Sequence[Manifest], sources: Sequence[Source], runtimes: Sequence[AnyRuntime | None]
) -> Result:
    """One warning per TrainJob that could never be admitted on this machine. ``runtimes``: validation's verdict
    per object (``kubetrain.compiler.validate_batch``), the runtime a valid TrainJob was checked against; nothing
    else is compiled."""
    from kubetrain.compiler import compile_trainjob
    from kubetrain.compiler.keys import fixed_keygen
    from kubetrain.local.plan import build_plan, find_jobset
    from kubetrain.local.scheduling import gang
    from kubetrain.local.scheduling.resources import find_podgroup, pod_requests

    result = Result()
    capacity = None
    for obj, source, runtime in zip(objects, sources, runtimes, strict=True):
        if not isinstance(obj, TrainJob) or runtime is None:
            continue
        try:
            compiled = compile_trainjob(obj, runtime, keygen=fixed_keygen())
            plan = build_plan(find_jobset(compiled))
            requests = {p.short: pod_requests(p.spec) for p in plan.pods()}
        except KubetrainError:
            continue  # said by validation or render; this check has nothing to add
        if capacity is None:
            capacity = _capacity()
        found = Result()
        for stage in gang.stages(plan, requests, one_gang=find_podgroup(compiled) is not None):
            missing = gang.shortfalls(stage, capacity)
            if missing:
                message = gang.never_fits_message(f"{obj.namespace}/{obj.name}", stage, capacity, missing)
                head, _, fix = message.partition(". Fix: ")
                found.warnings.append(Finding("spec.trainer.resourcesPerNode", head, fix or None, "warning"))
                break
        result.extend(tag(found, obj, source))
    return result


def _capacity() -> Capacity:
    """This machine as the local scheduler sees it: ``capacity:`` of config.yaml when $KUBETRAIN_HOME can be read
    (validate only reads; a broken home is reported by the commands that need it)."""
    from kubetrain.local import config, paths
    from kubetrain.local.scheduling.resources import Capacity

    try:
        return Capacity.of_machine(config.load().capacity, str(paths.home()))
    except KubetrainError:
        return Capacity.of_machine()
