"""A TrainJob's pods as gangs against this machine: the pods that must run at the same time are admitted together
or not at all, so a TrainJob is never half-started (one node running, its peer waiting behind it forever).

The pods that run at the same time are a **stage**: replicated jobs joined by ``dependsOn: Ready`` (or
``startupPolicyOrder: InOrder``), or by nothing, run side by side; one that ``dependsOn`` another's ``Complete``
(a trainer after its initializers) starts only after it, in a later stage, when the earlier stage's resources are
free again. With a PodGroup (coscheduling, Volcano) the whole TrainJob is one stage, as its ``minResources`` are.
Pure: the supervisor and ``kubetrain validate`` both use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetrain.local.plan import Plan
from kubetrain.local.scheduling.resources import GPU, SHARED, Capacity, add, fmt, shareable

OVERCOMMIT_ENV = "KUBETRAIN_OVERCOMMIT"
"""Set (to 1) by ``kubetrain run/apply --overcommit`` for the TrainJobs it submits; their supervisors inherit it."""
@dataclass
class Stage:
    index: int
    rjobs: list[str]
    pods: list[str] = field(default_factory=list)  # short names (``node-0-1``)
    total: dict[str, float] = field(default_factory=dict)
    parts: dict[str, list[str]] = field(default_factory=dict)  # resource -> ["node: 2 pods × 2 cpu", ...]

    def describe(self, resource: str) -> str:
        """``4 cpu at once (node: 2 pods × 2 cpu)``."""
        amount = fmt(resource, self.total.get(resource, 0.0))
        return f"{amount} {resource} at once ({'; '.join(self.parts.get(resource, []))})"


def stages(plan: Plan, requests: dict[str, dict[str, float]], *, one_gang: bool = False) -> list[Stage]:
    """The stages of ``plan`` in the order they run; ``one_gang`` (a PodGroup): all pods in one."""
    in_order = (plan.spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    level: dict[str, int] = {}
    for i, rj in enumerate(plan.rjobs):
        deps = list(rj.depends_on)
        if in_order and i > 0:
            deps.append((plan.rjobs[i - 1].name, "Ready"))
        at = 0
        for dep, status in deps:
            if dep in level:
                at = max(at, level[dep] + (1 if status == "Complete" else 0))
        level[rj.name] = 0 if one_gang else at
    last = max(level.values(), default=0)
    out = [Stage(i, [r.name for r in plan.rjobs if level[r.name] == i]) for i in range(last + 1)]
    for stage in out:
        for rj in plan.rjobs:
            if rj.name not in stage.rjobs:
                continue
            pods = [p for j in rj.jobs for p in j.pods]
            per_pod = [requests.get(p.short, {}) for p in pods]
            stage.pods += [p.short for p in pods]
            for req in per_pod:
                stage.total = add(stage.total, req)
            for resource in sorted({r for req in per_pod for r in req}):
                amounts = [req.get(resource, 0.0) for req in per_pod]
                if len(set(amounts)) == 1:
                    what = f"{len(pods)} pod{'s' if len(pods) != 1 else ''} × {fmt(resource, amounts[0])} {resource}"
                else:
                    what = f"{len(pods)} pods, {fmt(resource, sum(amounts))} {resource} in all"
                stage.parts.setdefault(resource, []).append(f"{rj.name}: {what}")
    return [s for s in out if s.rjobs]


def shortfalls(stage: Stage, capacity: Capacity, *, overcommit: bool = False) -> list[str]:
    """The resources ``stage`` needs beyond this machine even when idle: ``cpu``, ``memory``..."""
    over = [r for r, want in sorted(stage.total.items()) if want > capacity.get(r) + 1e-9]
    return [r for r in over if not shareable(r, capacity, overcommit)]


def never_fits_message(trainjob: str, stage: Stage, capacity: Capacity, missing: list[str]) -> str:
    """What ``Unschedulable`` says, with the totals and the ways out."""
    needs = "; ".join(f"{stage.describe(r)}, this machine has {fmt(r, capacity.get(r))} {r}" for r in missing)
    ways = ["lower spec.trainer.resourcesPerNode (or numNodes)"]
    if all(shareable(r, capacity, True) for r in missing):
        what = "GPUs, cpu and memory" if GPU in missing else "cpu and memory"
        ways.append(
            "run it over-committed with `kubetrain run --overcommit` (or `apply --overcommit`): its pods then "
            f"share this machine's {what} beyond its size, as on an overloaded node"
        )
    else:
        ways.append("run it on a cluster that has them (`--context`); devices are never over-committed")
    declared = [r for r in missing if r not in capacity.resources]
    if declared:
        ways.append(f"declare {', '.join(declared)} under `capacity:` in $KUBETRAIN_HOME/config.yaml if it has them")
    return f"trainjob {trainjob} can never run on this machine: it needs {needs}. Fix: {', or '.join(ways)}"


def overcommitted(stage: Stage, capacity: Capacity) -> list[str]:
    """What an over-committed ``stage`` asks beyond this machine (said once, as an event)."""
    over = [r for r in (*SHARED, GPU) if stage.total.get(r, 0.0) > capacity.get(r) + 1e-9]
    return [f"{stage.describe(r)} on {fmt(r, capacity.get(r))} {r}" for r in over]
