"""Admission webhooks for TrainJob, TrainingRuntime and ClusterTrainingRuntime (AdmissionReview v1, HTTPS).

Public surface (see docs/webhook.md):

- ``start(runtime_lookup, *, cert_dir, host, port, jobset_lookup, clock) -> WebhookServer``
- ``make_app(runtime_lookup, *, jobset_lookup, clock) -> aiohttp.web.Application``
- ``webhook_configurations(service, namespace, ca_bundle)`` for the API server side
- ``names``: paths, webhook and object names
"""

from kubetrain.k8s.webhook import names
from kubetrain.k8s.webhook.config import webhook_configurations
from kubetrain.k8s.webhook.review import JobSetLookup, RuntimeLookup
from kubetrain.k8s.webhook.server import Latencies, WebhookServer, make_app, start

__all__ = [
    "JobSetLookup",
    "Latencies",
    "RuntimeLookup",
    "WebhookServer",
    "make_app",
    "names",
    "start",
    "webhook_configurations",
]
