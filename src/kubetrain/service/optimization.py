"""An OptimizationJob as the front ends show it: the object, its trials best first (parameters, state, objective)
and the search's state. ``kubetrain get/describe optimizationjob``, the UI's page and ``Client.optimize`` read it
here, from either backend, the same way."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.optimization import MAXIMIZE, OptimizationJob
from kubetrain.api.views import Backend, StateView
from kubetrain.compiler.optimization import LABEL_OPTIMIZATIONJOB, Trial, owned_by, plan, ranked, state_of


@dataclass
class OptimizationView:
    job: OptimizationJob
    trials: list[Trial]
    """Best first: scored trials by objective, then running ones, then failed or unscored ones, then those not
    started yet."""
    states: dict[str, StateView] = field(default_factory=dict)
    """Trial name -> its TrainJob's state with the reason (Pending: ImagePullBackOff, Queued, ...)."""
    state: str = ""
    reason: str = ""
    message: str = ""

    @property
    def best(self) -> Trial | None:
        return self.trials[0] if self.trials and self.trials[0].scored else None

    @property
    def metric(self) -> str:
        return self.job.spec.objective.metric

    @property
    def maximize(self) -> bool:
        return self.job.spec.objective.direction == MAXIMIZE

    def trial_state(self, trial: Trial) -> str:
        """The trial's state for a table: the backend's view of a created trial (Pending, Queued, ...)."""
        seen = self.states.get(trial.name)
        return seen.state if seen is not None and not trial.finished and trial.state != "Pending" else trial.state

    def to_json(self) -> dict[str, Any]:
        """What ``describe -o json`` and the UI's JSON API give."""
        return {
            "optimizationJob": self.job.to_wire(),
            "state": {"state": self.state, "reason": self.reason, "message": self.message},
            "metric": self.metric,
            "direction": "Maximize" if self.maximize else "Minimize",
            "best": self.best.name if self.best else None,
            "trials": [
                {
                    "index": t.index,
                    "name": t.name,
                    "parameters": t.parameters,
                    "state": self.trial_state(t),
                    "objective": t.objective,
                    "note": t.note or (self.states[t.name].explain() if t.name in self.states else ""),
                }
                for t in self.trials
            ],
        }


def trial_jobs(backend: Backend, job: OptimizationJob) -> list[dict[str, Any]]:
    """The OptimizationJob's trial TrainJobs as stored (its label, and its uid in their ownerReferences)."""
    listed = backend.list_trainjobs(job.namespace, f"{LABEL_OPTIMIZATIONJOB}={job.name}")
    wires = [t.to_wire() for t in listed]
    return [w for w in wires if owned_by(w, job)]


def view(backend: Backend, name: str, namespace: str) -> OptimizationView:
    job = backend.get_optimizationjob(name, namespace)
    return view_of(backend, job)


def view_of(backend: Backend, job: OptimizationJob) -> OptimizationView:
    from kubetrain.api.trainjob import TrainJob

    wires = trial_jobs(backend, job)
    decided = plan(job, wires, now=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    models = [TrainJob.model_validate(w) for w in wires]
    states = dict(zip((m.name for m in models), backend.states(models), strict=True)) if models else {}
    state, reason, message = state_of(job.to_wire().get("status"))
    maximize = job.spec.objective.direction == MAXIMIZE
    return OptimizationView(job, ranked(decided.trials, maximize), states, state or "Created", reason, message)
