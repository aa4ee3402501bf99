"""The admission handlers of ``kubetrain.k8s.webhook.review``, fuzzed: TrainJob and runtime reviews (CREATE and
UPDATE, with a mutated old object), the defaulter, and scale-subresource reviews, against live runtimes that are
themselves mutated (the runtime lookup serves the batch's runtimes as the raw dicts an API client returns) and
namespaces with every Pod Security label.

The property, per request: the handler returns (a lookup failure would be the only exception, and none is
injected here), the response encodes as an AdmissionReview, a denial says why, and no message carries Python or
pydantic internals. The handlers are called directly, so a crash shows its traceback rather than the server's
"internal error" answer.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import constants as c
from kubetrain.k8s.webhook.admission import Request, Response
from kubetrain.k8s.webhook.review import default_trainjob_with_runtime, review_runtime, review_trainjob
from kubetrain.k8s.webhook.scale import review_scale
from kubetrain.runtimes import builtin_runtimes
from tests.fuzzing import assert_clear, count, fuzz_settings, manifests, mutated, reached

NOW = dt.datetime(2026, 11, 22, 3, 0, 0, tzinfo=dt.UTC)
ENFORCE, WARN = "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/warn"
LABELS = st.sampled_from([
    None, {}, {ENFORCE: "baseline"}, {ENFORCE: "restricted"}, {WARN: "restricted"},
    {ENFORCE: "baseline", WARN: "restricted"},
    {ENFORCE: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.24"}, {ENFORCE: "Restricted"},
    {ENFORCE: "privileged", WARN: "baseline"},
])  # fmt: skip
RUNTIME_KINDS = (c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME)


class Cluster:
    """What the lookups see: the batch's runtimes (as raw dicts, whatever their shape) over the built-in ones."""

    def __init__(self, docs: list[Any], labels: dict[str, str] | None) -> None:
        self.runtimes: dict[tuple[str, str, str | None], Any] = {
            (r.kind, r.name, None): r for r in builtin_runtimes()
        }
        for d in docs:
            meta = d.get("metadata") if isinstance(d, dict) else None
            if isinstance(meta, dict) and d.get("kind") in RUNTIME_KINDS and isinstance(meta.get("name"), str):
                ns = (meta.get("namespace") or "default") if d["kind"] == c.KIND_TRAINING_RUNTIME else None
                self.runtimes[(d["kind"], meta["name"], ns if isinstance(ns, str) else "default")] = d
        self.trainjobs = {
            (str(d["metadata"].get("name")), "default"): d
            for d in docs
            if isinstance(d, dict) and d.get("kind") == c.KIND_TRAINJOB and isinstance(d.get("metadata"), dict)
        }
        self.labels = labels

    async def runtime(self, kind: str, name: str, namespace: str | None) -> Any:
        return self.runtimes.get((kind, name, namespace))

    async def jobset(self, name: str, namespace: str) -> dict[str, Any] | None:
        return {"status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        return self.labels

    async def trainjob(self, name: str, namespace: str) -> dict[str, Any] | None:
        return self.trainjobs.get((name, namespace))


def _request(doc: Any, old: Any, operation: str, **extra: Any) -> Request:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    request = {
        "uid": "fuzz", "kind": {"group": c.GROUP, "version": "v1", "kind": kind if isinstance(kind, str) else ""},
        "operation": operation, "namespace": "default", "name": name if isinstance(name, str) else None,
        "object": doc, "oldObject": old, **extra,
    }  # fmt: skip
    # Through the parser the server uses, so the request is what a real AdmissionReview turns into.
    return Request.parse({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def _answered(resp: Response, context: object) -> None:
    review = json.loads(json.dumps(resp.to_review()))
    body = review["response"]
    if body["allowed"] and resp.warnings and any("PodSecurity" in w for w in resp.warnings):
        reached("webhook: allowed with Pod Security warnings")
    assert body["allowed"] == (not resp.errors)
    if not body["allowed"]:
        assert body["status"]["message"], context
    for text in [*resp.errors, *resp.warnings]:
        assert isinstance(text, str) and text, context
        assert_clear(text, context)


@fuzz_settings(100)
@given(manifests(), st.sampled_from(["CREATE", "UPDATE"]), LABELS, st.data())
def test_review_handlers(batch: list[Any], operation: str, labels: dict[str, str] | None, data: st.DataObject) -> None:
    count("webhook")
    cluster = Cluster(batch, labels)

    async def review_all() -> None:
        for doc in batch:
            old = None
            if operation == "UPDATE":
                # The stored version: the same object, or another mutation of it.
                old = copy.deepcopy(doc) if data.draw(st.booleans()) else data.draw(mutated([doc] if isinstance(
                    doc, dict) else [{}]))
            req = _request(doc, old, operation)
            kind = doc.get("kind") if isinstance(doc, dict) else None
            if kind in RUNTIME_KINDS or (kind != c.KIND_TRAINJOB and data.draw(st.booleans())):
                _answered(await review_runtime(req, cluster.namespace_labels), batch)
            else:
                _answered(await review_trainjob(req, cluster.runtime, cluster.jobset, cluster.namespace_labels), batch)
                _answered(await default_trainjob_with_runtime(req, lambda: NOW, cluster.runtime), batch)
            if kind == c.KIND_TRAINJOB and operation == "UPDATE":
                replicas = data.draw(st.sampled_from([0, 1, 3, -1, "2", None, True]))
                scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": req.obj and req.obj.get(
                    "metadata"), "spec": {"replicas": replicas}}
                scale_req = _request(scale, scale, "UPDATE", subResource="scale")

                async def trainjob_review(r: Request) -> Response:
                    return await review_trainjob(r, cluster.runtime, cluster.jobset, cluster.namespace_labels)

                _answered(await review_scale(scale_req, cluster.trainjob, trainjob_review), batch)

    asyncio.run(review_all())
