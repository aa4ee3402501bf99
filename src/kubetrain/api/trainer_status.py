"""Wire names of the status endpoint (upstream KEP-2779) that the compiler also needs: no clock, no I/O."""

from __future__ import annotations

import re
from typing import Final

from kubetrain.api.constants import GROUP, VERSION

# What the official SDK (``kubeflow.trainer.update_trainjob_status``) reads, and where upstream mounts it.
ENV_URL: Final = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT: Final = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN: Final = "KUBEFLOW_TRAINER_SERVER_TOKEN"
ENV_NAMES: Final = (ENV_URL, ENV_CA_CERT, ENV_TOKEN)
MOUNT_DIR: Final = "/var/run/secrets/kubeflow/trainer"
TOKEN_FILE: Final = "token"
CA_FILE: Final = "ca.crt"
VOLUME_NAME: Final = "kubeflow-trainer-token"
TOKEN_AUDIENCE: Final = "trainer.kubeflow.org"
TOKEN_EXPIRATION_SECONDS: Final = 3600
DEFAULT_PORT: Final = 10443

# Opt-out of progress derived from log lines (beyond upstream), per TrainJob.
ANNOTATION_LOG_PROGRESS: Final = "kubetrain.dev/log-progress"

_OFF: Final = ("false", "off", "no", "0", "disabled")


def log_progress_enabled(annotation: str | None) -> bool:
    """Whether progress may be derived from log lines, given the TrainJob's ``kubetrain.dev/log-progress``."""
    return annotation is None or str(annotation).strip().lower() not in _OFF


MAX_BODY: Final = 64 * 1024
MAX_METRICS: Final = 256
MAX_METRIC_TEXT: Final = 64
INT32_MAX: Final = 2**31 - 1

_PATH = re.compile(
    rf"^/apis/{re.escape(GROUP)}/{VERSION}/namespaces/(?P<ns>[a-z0-9]([-a-z0-9]*[a-z0-9])?)"
    r"/trainjobs/(?P<name>[a-z0-9]([-a-z0-9]*[a-z0-9])?)/status$"
)


def status_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def parse_path(path: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a status-endpoint path, or None for any other path."""
    m = _PATH.match(path)
    return (m.group("ns"), m.group("name")) if m else None
