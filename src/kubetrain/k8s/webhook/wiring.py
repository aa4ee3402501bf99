"""Adapts the operator's API client (``kubetrain.k8s.client.Client``) to what the webhook and certificate
management need: runtime and JobSet lookups, and the ``CertClient`` calls."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.k8s.certs import MUTATING, VALIDATING
from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.errors import ApiError, Conflict, NotFound
from kubetrain.k8s.webhook.warnings import EVENT_REASON

log = logging.getLogger(__name__)
MAX_EVENT_MESSAGE = 1000  # Event messages are limited to 1 KiB

_WEBHOOK_CONFIGS = {
    VALIDATING: r.Resource(
        "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", VALIDATING, namespaced=False
    ),
    MUTATING: r.Resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", MUTATING, namespaced=False
    ),
}
_RUNTIMES = {"TrainingRuntime": r.TRAINING_RUNTIME, "ClusterTrainingRuntime": r.CLUSTER_TRAINING_RUNTIME}
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ClientAdapter:
    """``runtime``, ``jobset`` and ``namespace_labels`` are a ``RuntimeLookup``, a ``JobSetLookup`` and a
    ``NamespaceLookup``; the adapter is a ``CertClient``.

    Lookups go to the API server (not a cache) on purpose: the webhook must see a runtime created a moment
    ago, as upstream's live GET does.
    """

    def __init__(self, client: Client):
        self.client = client

    async def runtime(self, kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        try:
            return await self.client.get(_RUNTIMES[kind], name, namespace)
        except NotFound:
            return None

    async def jobset(self, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(r.JOBSET, name, namespace)
        except NotFound:
            return None

    async def warning_event(self, req: Any, details: list[str]) -> None:
        """One Warning Event on the object under review with the complete text of its shortened warnings.

        Best effort: admission has already answered, and a lost Event only loses the long form.
        """
        obj = req.obj or {}
        meta = obj.get("metadata") or {}
        name = meta.get("name") or req.name or ""
        namespace = meta.get("namespace") or req.namespace or "default"  # cluster-scoped objects: "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": name}
        if meta.get("namespace") or req.namespace:
            involved["namespace"] = namespace
        if meta.get("uid"):
            involved["uid"] = meta["uid"]  # validating webhooks see the UID the object is stored with
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": involved,
            "type": "Warning",
            "reason": EVENT_REASON,
            "action": "Admission",
            "message": "\n".join(details)[:MAX_EVENT_MESSAGE],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "kubetrain-webhook"},
            "reportingComponent": "kubetrain-webhook",
        }
        try:
            await self.client.create(event, resource=r.EVENT)
        except ApiError as exc:
            log.warning("could not record the admission warning event for %s %s: %s", obj.get("kind"), name, exc)

    async def trainjob(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The live TrainJob (a scale subresource review carries only its Scale)."""
        try:
            return await self.client.get(r.TRAINJOB, name, namespace)
        except NotFound:
            return None

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        """A namespace's labels (its ``pod-security.kubernetes.io/*`` levels); None when it does not exist."""
        try:
            ns = await self.client.get(r.NAMESPACE, name)
        except NotFound:
            return None
        labels = (ns.get("metadata") or {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(r.SECRET, name, namespace)
        except NotFound:
            return None

    async def put_secret(self, secret: dict[str, Any]) -> None:
        if (secret.get("metadata") or {}).get("resourceVersion"):
            await self.client.replace(secret, resource=r.SECRET)
            return
        try:
            await self.client.create(secret, resource=r.SECRET)
        except Conflict:
            raise  # another replica created it first; CertManager re-reads and uses theirs

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.client.get(_WEBHOOK_CONFIGS[kind], name)
        except NotFound:
            return None

    async def update_webhook_configuration(self, config: dict[str, Any]) -> None:
        await self.client.replace(config, resource=_WEBHOOK_CONFIGS[config["kind"]])


def operator_namespace(default: str) -> str:
    """The namespace the operator runs in: ``POD_NAMESPACE`` (downward API), else the service account's."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        return _SA_NAMESPACE.read_text().strip() or default
    except OSError:
        return default
