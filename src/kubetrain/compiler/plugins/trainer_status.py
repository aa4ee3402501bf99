"""The status endpoint's wiring into every pod (upstream KEP-2779, feature ``TrainJobStatus``).

Only when the backend passes a ``StatusServer`` (the operator does, with its own URL and CA; ``kubetrain render``
and the local backend do not): every container of every pod gets the three ``KUBEFLOW_TRAINER_SERVER_*``
variables the official SDK reads, and a read-only mount of one projected volume holding a service-account token
for audience ``trainer.kubeflow.org`` and the CA certificate from a ConfigMap. By default that ConfigMap is
``<trainjob>-tls-config``, built here from the CA the backend passes and owned by the TrainJob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api import trainer_status as P
from kubetrain.compiler import env as e
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info
from kubetrain.compiler.keys import KeyGen


@dataclass(frozen=True)
class StatusServer:
    """Where a TrainJob's pods report progress. Pure data: the backend decides every value."""

    url: str
    """Base URL of the endpoint, e.g. ``https://kubetrain-operator.kubeflow-system.svc:10443``; the TrainJob's path
    (``/apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status``) is appended."""
    ca_cert: str | None = None
    """PEM of the CA that signed the endpoint's certificate; the compiler emits it as ``ca_configmap``."""
    ca_configmap: str | None = None
    """Name of the ConfigMap (key ``ca.crt``) in the TrainJob's namespace; default ``<trainjob>-tls-config``.
    Given without ``ca_cert`` it must already exist there (e.g. distributed by trust-manager)."""


def tls_configmap_name(trainjob: str) -> str:
    return f"{trainjob}-tls-config"


class TrainerStatus:
    name = "TrainJobStatus"

    def __init__(self, server: StatusServer) -> None:
        self.server = server

    def _configmap(self, info: Info) -> str:
        return self.server.ca_configmap or tls_configmap_name(info.name)

    def enforce_pod_spec(self, info: Info) -> None:
        url = self.server.url.rstrip("/") + P.status_path(info.namespace, info.name)
        volume: dict[str, Any] = {
            "name": P.VOLUME_NAME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": P.TOKEN_AUDIENCE,
                            "expirationSeconds": P.TOKEN_EXPIRATION_SECONDS,
                            "path": P.TOKEN_FILE,
                        }
                    },
                    {
                        "configMap": {
                            "name": self._configmap(info),
                            "items": [{"key": P.CA_FILE, "path": P.CA_FILE}],
                        }
                    },
                ]
            },
        }
        for ps in info.pod_sets:
            e.add_volume(ps.pod_spec, volume)
            for container in [*(ps.pod_spec.get("initContainers") or []), *ps.containers()]:
                e.set_env(container, P.ENV_URL, url)
                e.set_env(container, P.ENV_CA_CERT, f"{P.MOUNT_DIR}/{P.CA_FILE}")
                e.set_env(container, P.ENV_TOKEN, f"{P.MOUNT_DIR}/{P.TOKEN_FILE}")
                e.add_mount(container, P.VOLUME_NAME, P.MOUNT_DIR, read_only=True)

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        if self.server.ca_cert is None:
            return []
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(info, self._configmap(info)),
                "data": {P.CA_FILE: self.server.ca_cert},
            }
        ]
