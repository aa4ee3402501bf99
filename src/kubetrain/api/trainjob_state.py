"""A TrainJob's state from its conditions and its pods, the way upstream's Python SDK computes it, with a reason.

The SDK (``kubeflow`` 0.5.0, ``__get_trainjob_from_cr``) says ``Complete``/``Failed`` from the conditions, else
``Running`` only when every trainer node pod is Running or Succeeded, else ``Created``. We keep those answers and
split the SDK's ``Created`` in two so a user sees what holds the job back: ``Created`` while no pod exists yet
(no JobSet, PodGroup not scheduled, a build error) and ``Pending`` once pods exist but not all trainer pods run
(scheduler's message, image pull, init containers, an initializer still working). ``Suspended`` comes from the
``Suspended`` condition, as upstream sets it.

Both backends feed this one function, so ``get`` and ``run`` say the same thing here and on a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain.api import constants as c
from kubetrain.api.views import StateView, StepView

if TYPE_CHECKING:  # only ``condition()`` is asked of it: callers may pass a lighter stand-in
    from kubetrain.api import TrainJob

TRAINER_JOBS = (c.NODE, c.LAUNCHER)
RUNNING_PHASES = ("Running", "Succeeded")


def expected_trainer_pods(jobset: dict[str, Any] | None) -> int | None:
    """Trainer pods a JobSet makes: replicas x parallelism of its ``node``/``launcher`` replicated jobs."""
    if not jobset:
        return None
    total = 0
    for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        if rj.get("name") in TRAINER_JOBS:
            job_spec = (rj.get("template") or {}).get("spec") or {}
            total += int(rj.get("replicas") or 1) * int(job_spec.get("parallelism") or 1)
    return total or None


def conditions_state(tj: TrainJob) -> StateView | None:
    """The state the conditions alone decide (finished, suspended, a resource build error), else ``None``."""
    for type_ in ("Failed", "Complete", "Suspended"):
        cond = tj.condition(type_)
        if cond is not None and cond.status == "True":
            return StateView(type_, cond.reason or "", cond.message or "")
    return None


def _why(step: StepView, *, with_reason: bool = True) -> str:
    parts = [f"{step.name} {step.state}"]
    if step.reason and with_reason:
        parts.append(step.reason)
    if step.message and step.message != step.reason:
        parts.append(step.message)
    if step.exit_code is not None and step.state in ("Failed", "Terminated"):
        parts.append(f"exit code {step.exit_code}")
    return ": ".join(parts)


def trainjob_state(
    tj: TrainJob,
    steps: list[StepView] | None,
    *,
    expected_trainer_pods: int | None = None,
    no_pods_reason: str = "",
) -> StateView:
    """The state of ``tj`` given its pods (``steps``; ``None`` when they could not be looked at).

    ``expected_trainer_pods`` is how many trainer pods the JobSet makes (``Running`` needs all of them);
    ``no_pods_reason`` explains a job without pods (``no JobSet yet``, ``PodGroup ... not scheduled``).
    """
    decided = conditions_state(tj)
    if decided is not None:
        return decided
    build = tj.condition("ResourcesCreationFailed")
    if steps is None:
        return StateView("Created", "", "pods not looked at")
    if not steps:
        if build is not None and build.status == "True":
            return StateView("Created", build.reason or "ResourcesCreationFailed", build.message or "")
        return StateView("Created", "NoPods", no_pods_reason or "waiting for the JobSet to create pods")
    trainer = [s for s in steps if s.replicated_job in TRAINER_JOBS]
    running = [s for s in trainer if s.state in RUNNING_PHASES]
    want = expected_trainer_pods if expected_trainer_pods is not None else len(trainer)
    if trainer and len(running) == len(trainer) and len(running) >= want:
        return StateView("Running", "", f"{len(running)}/{want} trainer pods running")
    # What holds the job back: a trainer pod that is not running, else whatever runs before the trainer.
    blocked = [s for s in trainer if s.state not in RUNNING_PHASES]
    others = [s for s in steps if s.replicated_job not in TRAINER_JOBS and s.state != "Succeeded"]
    if blocked:
        first = next((s for s in blocked if s.reason), blocked[0])
        return StateView("Pending", first.reason or "", _why(first, with_reason=False))
    if others:
        return StateView("Pending", "WaitingForInitializers", "; ".join(_why(s) for s in others[:3]))
    return StateView("Pending", "WaitingForPods", f"{len(running)}/{want} trainer pods running")
