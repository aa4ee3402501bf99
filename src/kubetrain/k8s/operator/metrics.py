"""Prometheus metrics, in a registry per operator instance (so tests and benches can run several)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

from kubetrain.k8s.operator.progress_metrics import ProgressMetrics

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class _WritesCollector:
    """``kubetrain_api_writes_total{resource}``, read from the API session at scrape time."""

    def __init__(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "kubetrain_api_writes",
            "API writes sent (POST, PUT, PATCH, DELETE) by resource, retries included.",
            labels=["resource"],
        )
        for resource, count in sorted(self.source().items()):
            family.add_metric([resource], count)
        yield family


class _PodFailuresCollector:
    """The pod watch's counters (``failures.FailureRecorder``), read at scrape time."""

    def __init__(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        counts = self.source()
        yield CounterMetricFamily(
            "kubetrain_pod_failures", "Failed pod runs recorded on their TrainJobs.", value=counts.get("recorded", 0)
        )
        reads = CounterMetricFamily(
            "kubetrain_pod_failure_log_reads",
            "Log reads of failed pods: read, or skipped by the rate limit.",
            labels=["result"],
        )
        reads.add_metric(["read"], counts.get("log_reads", 0))
        reads.add_metric(["skipped"], counts.get("log_reads_skipped", 0))
        yield reads
        yield CounterMetricFamily(
            "kubetrain_pod_failure_reports_dropped",
            "Failures recorded without log lines or event because too many waited.",
            value=counts.get("reports_dropped", 0),
        )


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "kubetrain_reconcile",
            "Reconciles by controller and result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "kubetrain_reconcile_errors", "Reconciles that ended in an error.", ["controller"], registry=r
        )
        self.reconcile_duration = Histogram(
            "kubetrain_reconcile_duration_seconds", "Time spent in one reconcile.", ["controller"], registry=r
        )
        self.queue_depth = Gauge("kubetrain_workqueue_depth", "Keys waiting in the work queue.", registry=r)
        self.queue_processing = Gauge("kubetrain_workqueue_processing", "Keys being reconciled.", registry=r)
        self.trainjobs_created = Counter(
            "kubetrain_trainjobs_created", "TrainJobs whose JobSet this operator created.", registry=r
        )
        self.trainjobs_completed = Counter(
            "kubetrain_trainjobs_completed", "TrainJobs that reached Complete.", registry=r
        )
        self.trainjobs_failed = Counter(
            "kubetrain_trainjobs_failed", "TrainJobs that reached Failed, by reason.", ["reason"], registry=r
        )
        self.jobset_latency = Histogram(
            "kubetrain_trainjob_jobset_latency_seconds",
            "From the operator first seeing a TrainJob to its JobSet being created.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.leader = Gauge("kubetrain_leader", "1 while this replica holds the leader lease.", registry=r)
        self.api_requests = Gauge("kubetrain_api_requests", "API requests sent (retries included).", registry=r)
        self.status_reports = Counter(
            "kubetrain_status_reports",
            "Progress reports answered by the status endpoint, by HTTP status code.",
            ["code"],
            registry=r,
        )
        self.progress = ProgressMetrics()
        r.register(self.progress)

    def count_writes(self, source: Callable[[], Mapping[str, int]]) -> None:
        """Export the session's write counts (a restart over finished TrainJobs must show none)."""
        self.registry.register(_WritesCollector(source))

    def count_pod_failures(self, source: Callable[[], Mapping[str, int]]) -> None:
        self.registry.register(_PodFailuresCollector(source))
