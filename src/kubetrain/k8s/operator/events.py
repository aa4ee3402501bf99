"""Kubernetes Events about TrainJobs (best effort: a failed Event never fails a reconcile)."""

from __future__ import annotations

import logging
from typing import Any

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client.resources import EVENT
from kubetrain.k8s.operator.status import format_time

log = logging.getLogger("kubetrain.operator.events")
COMPONENT = "kubetrain-operator"
MAX_NOTE = 950  # upstream truncates the note to this many characters and appends " ..."


def truncate(note: str) -> str:
    return note if len(note) <= MAX_NOTE else note[:MAX_NOTE] + " ..."


class EventRecorder:
    def __init__(self, client: Client, clock: Any) -> None:
        self.client = client
        self.clock = clock

    async def warn(self, obj: dict[str, Any], reason: str, message: str, action: str = "Reconciling") -> None:
        await self.emit(obj, "Warning", reason, message, action)

    async def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str, action: str) -> None:
        meta = obj.get("metadata") or {}
        now = format_time(self.clock())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "action": action,
            "message": truncate(message),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
        }
        try:
            await self.client.create(event, resource=EVENT)
        except ApiError as exc:
            log.warning("could not record event %s: %s", reason, exc)
