"""Admission for the TrainJob scale subresource (``kubectl scale``, an HPA) and the numNodes default that makes
that subresource usable.

- An UPDATE of ``trainjobs/scale`` carries an ``autoscaling/v1`` Scale, not the TrainJob: the webhook reads the
  TrainJob, sets ``spec.trainer.numNodes`` to the requested replicas and judges the result exactly like an update of
  the TrainJob itself (elastic runtime, minNodes..maxNodes), so both paths give the same message.
- The scale subresource cannot be read while ``spec.trainer.numNodes`` is unset (the API server answers an error,
  and an HPA reports ``FailedGetScale``). So on CREATE the defaulter fills it in for a TrainJob whose runtime is
  elastic, with the count the compiler would use anyway (maxNodes, else minNodes): nothing about the job changes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable
from typing import Any

from kubetrain.api import constants as c
from kubetrain.k8s.webhook.admission import LookupFailed, Request, Response, object_at, pointer

TrainJobLookup = Callable[[str, str], Awaitable[dict[str, Any] | None]]
"""``(name, namespace) -> TrainJob as a dict | None``."""

Review = Callable[[Request], Awaitable[Response]]


def is_scale(req: Request) -> bool:
    return req.sub_resource == "scale" or req.kind == "Scale"


async def review_scale(req: Request, trainjob_lookup: TrainJobLookup | None, review: Review) -> Response:
    """Judge a scale as the equivalent TrainJob update (``review`` is the TrainJob validator)."""
    if req.operation != "UPDATE" or trainjob_lookup is None or not req.name or req.obj is None:
        return Response(uid=req.uid)
    replicas = object_at(req.obj, "spec").get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        got = json.dumps(replicas, default=str)
        return Response(uid=req.uid, errors=[
            f"spec.replicas: expected an integer, got {got} (fix: give the number of nodes, e.g. --replicas=3)"])
    namespace = req.namespace or "default"
    try:
        old = await trainjob_lookup(req.name, namespace)
    except Exception as exc:
        raise LookupFailed(f"looking up TrainJob {req.name!r}: {exc}") from exc
    if old is None:
        return Response(uid=req.uid)  # the API server answers 404 on its own
    new = copy.deepcopy(old)
    new["spec"] = spec = object_at(new, "spec")
    spec["trainer"] = dict(object_at(spec, "trainer"), numNodes=replicas)
    as_update = Request(
        uid=req.uid,
        kind=c.KIND_TRAINJOB,
        operation="UPDATE",
        namespace=namespace,
        name=req.name,
        obj=new,
        old=old,
        dry_run=req.dry_run,
    )
    return await review(as_update)


def default_num_nodes(obj: dict[str, Any], runtime: Any) -> list[dict[str, Any]]:
    """JSON patch setting ``spec.trainer.numNodes`` for an elastic runtime's TrainJob that leaves it unset."""
    from kubetrain.compiler.plugins.torch import default_node_count

    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    trainer = spec.get("trainer")
    if isinstance(trainer, dict) and trainer.get("numNodes") is not None:
        return []
    count = default_node_count(runtime)
    if count is None:
        return []
    if not isinstance(trainer, dict):
        return [{"op": "add", "path": pointer("spec", "trainer"), "value": {"numNodes": count}}]
    return [{"op": "add", "path": pointer("spec", "trainer", "numNodes"), "value": count}]
