"""The local HorizontalPodAutoscaler: an elastic TrainJob whose runtime lists ``elasticPolicy.metrics`` is scaled by
its supervisor between minNodes and maxNodes, with the HPA's algorithm (``kubetrain.local.scheduling.hpa``).

Metrics, as a cluster would give them to the HPA:

- ``Resource`` (and ``ContainerResource``) ``cpu``/``memory``: the trainer pods' usage read from ``/proc``
  (``kubetrain.local.scheduling.usage``), against the pods' requests for ``Utilization``;
- ``Pods``, ``Object`` and ``External``: a metric of that name among the trainer's reports in
  ``status.trainerStatus.metrics`` (what the training code sends to the TrainJob status endpoint); a ``Pods``
  metric's value is taken as the per-pod average.

A decision changes ``spec.trainer.numNodes`` exactly as ``kubetrain scale`` does, so the same validation applies
and the supervisor then adds or removes node pods (``kubetrain.local.supervisor.scaling``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kubetrain.api import elastic
from kubetrain.api.errors import KubetrainError
from kubetrain.local.supervisor.launch import PodLauncher

if TYPE_CHECKING:  # loaded by the jobs that autoscale, not by every supervisor
    from kubetrain.local.scheduling import hpa
    from kubetrain.local.scheduling.usage import Sampler, Usage


class Autoscaling(PodLauncher):
    """Samples the trainer pods every sync period and sets numNodes to what the HPA algorithm recommends."""

    _sampler: Sampler | None = None
    _hpa: hpa.Autoscaler | None = None
    _next_autoscale: float = 0.0
    _metric_errors: dict[int, str] | None = None

    def _autoscale(self) -> None:
        policy = self.elastic_policy or {}
        metrics = [m for m in policy.get("metrics") or [] if isinstance(m, dict)]
        if not metrics:
            return
        from kubetrain.local.scheduling import hpa
        from kubetrain.local.scheduling.usage import Sampler

        now = time.monotonic()
        if now < self._next_autoscale:
            return
        settings = self.autoscaling
        self._next_autoscale = now + settings.sync_period
        current = elastic.node_count(self.plan.jobset)
        if current is None:
            return
        if self._hpa is None or self._sampler is None:
            lo = int(policy.get("minNodes") or current)
            hi = int(policy.get("maxNodes") or max(current, lo))
            behavior = hpa.Behavior(tolerance=settings.tolerance, scale_down_window=settings.scale_down_stabilization)
            self._hpa, self._sampler, self._metric_errors = hpa.Autoscaler(lo, hi, behavior), Sampler(), {}
        usage = self._sampler.sample(self._trainer_pids(), now)
        proposals: list[int | None] = []
        for i, metric in enumerate(metrics):
            measured = self._measure(metric, usage, current)
            self._report_metric(i, metric, measured)
            proposals.append(hpa.proposal(metric, measured, current, settings.tolerance))
        desired = self._hpa.desired(now, current, proposals)
        if desired == current:
            return
        try:
            from kubetrain.local.submit import changes  # the same path as `kubetrain scale`

            row = self.store.get_trainjob(self.namespace, self.name)
            if row is None:
                return  # deleted meanwhile: the supervisor is being stopped
            changes.scale(self.store, row, desired)
        except KubetrainError as exc:
            self.event("Warning", "FailedRescale", f"New size: {desired}; error: {exc}")
            return
        self._hpa.applied(now, current, desired)
        winner = max(
            (p, i) for i, p in enumerate(proposals) if p is not None
        )[1]
        direction = "above" if desired > current else "below"
        self.event(
            "Normal",
            "SuccessfulRescale",
            f"New size: {desired}; reason: {_describe(metrics[winner])} {direction} target",
        )

    def _trainer_pids(self) -> dict[str, list[int]]:
        rjob = elastic.trainer_replicated_job(self.plan.jobset)
        out: dict[str, list[int]] = {}
        for job in self.jobs:
            if rjob is None or job.plan.rjob != rjob["name"]:
                continue
            for pod in job.pods:
                pids = [c.proc.pid for c in pod.containers if c.proc is not None and c.proc.returncode is None]
                if pod.state == "Running" and not pod.in_init and pids:
                    out[pod.plan.short] = pids
        return out

    def _measure(self, metric: dict[str, Any], usage: dict[str, Usage], current: int) -> hpa.Measured:
        from kubetrain.local.scheduling import hpa

        kind = metric.get("type")
        if kind in ("Resource", "ContainerResource"):
            spec = metric.get("resource" if kind == "Resource" else "containerResource") or {}
            name = spec.get("name")
            if name not in ("cpu", "memory"):
                return hpa.Measured(error=f"resource {name!r} is not measured locally (cpu and memory are)")
            if not usage:
                return hpa.Measured()  # no pod has a full sample interval yet: nothing to say, no proposal
            values = [u.cpu if name == "cpu" else u.memory for u in usage.values()]
            requests = 0.0
            if (spec.get("target") or {}).get("type") == "Utilization":
                missing = [p for p in usage if not self.requests.get(p, {}).get(name)]
                if missing:
                    return hpa.Measured(error=f"missing request for {name} in pod {missing[0]} (Utilization is a "
                                        "percentage of the request)")
                requests = sum(self.requests[p][name] for p in usage)
            return hpa.Measured(value=sum(values) / len(values), requests=requests, pods=len(values))
        if kind in ("Pods", "Object", "External"):
            spec = metric.get(str(kind).lower()) or {}
            name = (spec.get("metric") or {}).get("name")
            reported = self._trainer_metrics()
            if name not in reported:
                return hpa.Measured(
                    error=f"metric {name!r} is not among the trainer's reports (status.trainerStatus.metrics: "
                    f"{', '.join(sorted(reported)) or 'none yet'})"
                )
            try:
                value = hpa.quantity(reported[name])
            except (KubetrainError, ValueError):
                return hpa.Measured(error=f"metric {name!r} = {reported[name]!r} is not a number")
            return hpa.Measured(value=value, pods=current)
        return hpa.Measured(error=f"metric type {kind!r} is not supported locally")

    def _trainer_metrics(self) -> dict[str, str]:
        reports = self.status.get("trainerStatus") or self.stored_trainer_status or {}
        out: dict[str, str] = {}
        for m in reports.get("metrics") or []:
            if isinstance(m, dict) and isinstance(m.get("name"), str) and m.get("value") is not None:
                out[m["name"]] = str(m["value"])
        return out

    def _report_metric(self, index: int, metric: dict[str, Any], measured: hpa.Measured) -> None:
        # Said once per metric and problem (the HPA's FailedGetResourceMetric / FailedGetPodsMetric events).
        assert self._metric_errors is not None
        if measured.error is None:
            self._metric_errors.pop(index, None)
            return
        if self._metric_errors.get(index) != measured.error:
            self._metric_errors[index] = measured.error
            self.event("Warning", "FailedGetMetric", f"{_describe(metric)}: {measured.error}")


def _describe(metric: dict[str, Any]) -> str:
    kind = metric.get("type")
    if kind in ("Resource", "ContainerResource"):
        spec = metric.get("resource" if kind == "Resource" else "containerResource") or {}
        target = (spec.get("target") or {}).get("type")
        suffix = " (percentage of request)" if target == "Utilization" else ""
        return f"{spec.get('name')} resource utilization{suffix}" if suffix else f"{spec.get('name')} resource"
    spec = metric.get(str(kind).lower()) or {}
    return f"{str(kind).lower()} metric {(spec.get('metric') or {}).get('name')}"
