"""Operator settings: every default written down once, with the reason it is what it is."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field


def _identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_SYSTEM_NAMESPACE = "kubeflow-system"


def operator_namespace() -> str:
    """Where the operator runs: ``POD_NAMESPACE`` (downward API), the service account's, else kubeflow-system.

    kubeflow-system by default because the Kubeflow SDK looks there for ``kubeflow-trainer-public``.
    """
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SA_NAMESPACE_FILE) as fh:
            return fh.read().strip() or DEFAULT_SYSTEM_NAMESPACE
    except OSError:
        return DEFAULT_SYSTEM_NAMESPACE


@dataclass
class OperatorSettings:
    qps: float = 50.0
    """Client-side request rate limit (requests/second), as client-go's default-ish controller setting."""
    burst: int = 100
    """Requests allowed at once before the QPS limit applies."""
    concurrency: int = 5
    """TrainJobs reconciled in parallel (upstream's trainjob_controller uses 5)."""
    namespace: str | None = None
    """Watch only this namespace; None watches all namespaces."""
    leader_election: bool = True
    """Run a Lease election so several replicas can run with one active."""
    lease_name: str = "kubetrain-operator"
    lease_namespace: str = field(default_factory=operator_namespace)
    """Namespace of the Lease: the operator's own (see :func:`operator_namespace`)."""
    lease_duration: float = 15.0
    """Seconds a lease stays valid without renewal (client-go default)."""
    renew_deadline: float = 10.0
    """A leader that cannot renew within this many seconds steps down (client-go default)."""
    retry_period: float = 2.0
    """Seconds between acquire/renew attempts (client-go default)."""
    identity: str = field(default_factory=_identity)
    """This replica's holderIdentity in the Lease."""
    health_port: int | None = 8081
    """Port for /healthz, /readyz and /metrics; None disables the endpoint, 0 picks a free port."""
    health_host: str = "0.0.0.0"
    watch_timeout: int = 300
    """Seconds a single watch request stays open before it is resumed from the last resourceVersion."""
    backoff_base: float = 0.05
    """First retry delay of a failing TrainJob; doubles per consecutive failure."""
    backoff_max: float = 300.0
    """Longest retry delay of a failing TrainJob."""
    shutdown_grace: float = 20.0
    """Seconds in-flight reconciles get to finish on SIGTERM."""
    resync_period: float = 0.0
    """Seconds between full relists that re-queue everything at low priority; 0 disables (as upstream)."""
    webhook_port: int | None = None
    """Serve the admission webhook on this port (HTTPS) in the same process; None: no webhook."""
    webhook_cert_dir: str | None = None
    """Directory with tls.crt/tls.key for the webhook server (empty: self-signed, managed in a Secret)."""
    lease_qps: float = 5.0
    """Rate limit of leader election's own client. It must not share the reconcilers' token bucket: during a
    burst that bucket can be minutes deep, and a renewal waiting in it past ``renew_deadline`` would cost the
    leader its lease (and the process its life) while it is working hardest."""
    lease_burst: int = 10
    webhook_qps: float = 100.0
    """Rate limit of the webhook's own client (runtime and JobSet lookups), separate from the reconcilers'."""
    webhook_burst: int = 200
    status_port: int | None = None
    """Serve the status endpoint (pods report ``status.trainerStatus``, KEP-2779) on this HTTPS port, and wire
    every new TrainJob's pods to it; None: off (the command line turns it on at 10443)."""
    status_host: str = "0.0.0.0"
    status_cert_dir: str | None = None
    """tls.crt/tls.key (and ca.crt) of the status endpoint; default: the webhook's directory when the webhook
    runs here, else a self-signed pair made at start-up (one replica only: pods must trust its CA)."""
    status_url: str | None = None
    """Base URL pods reach the endpoint at; default ``https://<service>.<operator namespace>.svc:<port>``."""
    status_service: str = field(default_factory=lambda: os.environ.get("KUBETRAIN_WEBHOOK_SERVICE") or
                                "kubetrain-operator")  # fmt: skip
    """The Service in front of the operator (the same one as the webhook's)."""
    status_qps: float = 20.0
    """Rate limit of the endpoint's own client (TokenReviews, pod lists, status patches)."""
    status_burst: int = 40
    status_rate: float = 5.0
    """Reports per second accepted per token subject (service account), upstream's key."""
    status_rate_burst: int = 20
    pod_failures: bool = True
    """Watch the TrainJobs' pods and record their failures on the TrainJob (``status.podFailures``, ``PodFailed``
    events, the ``Failed`` message); needs pods list/watch and pods/log get."""
    failure_log_qps: float = 1.0
    """Log reads of failed pods per second, all TrainJobs together (each read is at most ``LOG_LINES`` lines)."""
    failure_log_burst: int = 10
    """Log reads allowed at once: a 10-node job whose nodes fail together gets every node's lines."""
    failure_log_wait: float = 5.0
    """Longest a log read waits for the rate limit; beyond that it is skipped (the pod may be gone by then, and
    the record keeps the failure without lines)."""
    failure_event_burst: int = 5
    """``PodFailed`` events one TrainJob may get at once ..."""
    failure_event_interval: float = 30.0
    """... then one per this many seconds; the next event counts the ones left out."""
    failure_reports: int = 256
    """Failures waiting for their log read and event, all TrainJobs together; beyond that a failure is recorded
    without lines or event."""
