"""AdmissionReview v1 requests and responses, and RFC 6902 JSON patches. No I/O."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from kubetrain.api.errors import Finding

API_VERSION = "admission.k8s.io/v1"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 request (answered with HTTP 400)."""


class LookupFailed(Exception):
    """A lookup raised: the answer is an internal error (500), which makes the API server retry or fail."""


@dataclass(frozen=True)
class Request:
    """The parts of ``AdmissionReview.request`` the handlers read."""

    uid: str
    kind: str
    operation: str
    namespace: str | None
    name: str | None
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool = False
    sub_resource: str | None = None  # "scale" for kubectl scale / an HPA

    @classmethod
    def parse(cls, body: Any) -> Request:
        if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
            raise BadReview("expected an AdmissionReview")
        if body.get("apiVersion") != API_VERSION:
            raise BadReview(
                f"unsupported AdmissionReview version {body.get('apiVersion')!r}; want {API_VERSION}"
            )
        req = body.get("request")
        if not isinstance(req, dict) or not isinstance(req.get("uid"), str):
            raise BadReview("AdmissionReview has no request.uid")
        obj, old = req.get("object"), req.get("oldObject")
        return cls(
            uid=req["uid"],
            kind=(req.get("kind") or {}).get("kind", ""),
            operation=req.get("operation", ""),
            namespace=req.get("namespace") or None,
            name=req.get("name") or None,
            obj=obj if isinstance(obj, dict) else None,
            old=old if isinstance(old, dict) else None,
            dry_run=bool(req.get("dryRun")),
            sub_resource=req.get("subResource") or None,
        )


@dataclass
class Response:
    """What the webhook answers. ``errors`` deny; ``warnings`` reach the client (kubectl prints them)."""

    uid: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    warning_findings: list[Finding] = field(default_factory=list)
    """What ``warnings`` were made from (complete texts; the server may record them as Events)."""
    patch: list[dict[str, Any]] = field(default_factory=list)
    code: int | None = None  # overrides the 403 of a denial (e.g. 500 when a lookup failed)

    @property
    def allowed(self) -> bool:
        return not self.errors

    def to_review(self) -> dict[str, Any]:
        resp: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if self.errors:
            code = self.code or 403
            resp["status"] = {
                "code": code,
                "reason": "Forbidden" if code == 403 else "InternalError",
                "message": aggregate(self.errors),
            }
        if self.warnings:
            resp["warnings"] = list(self.warnings)
        if self.patch and self.allowed:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(self.patch, separators=(",", ":")).encode()).decode()
        return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": resp}


def aggregate(messages: list[str]) -> str:
    """Kubernetes' ``utilerrors.Aggregate`` text: one message alone, several as ``[a, b]``."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def error_text(f: Finding) -> str:
    """``spec.trainer.numNodes: must be >= 1 (fix: ...)``: path and message, as ``kubetrain validate``."""
    text = f"{f.path}: {f.message}" if f.path else f.message
    return f"{text} (fix: {f.fix})" if f.fix else text


def warning_text(f: Finding) -> str:
    """Warnings keep upstream's shape: a path-less warning is the bare message (what clients match on)."""
    return f"{f.path}: {f.message}" if f.path else f.message


def object_at(obj: Any, *keys: str) -> dict[str, Any]:
    """``obj[k1][k2]...`` when every step is an object, else ``{}``. Mutating webhooks see a request before the
    API server checks it against the schema, so ``spec`` may be a list or a string."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON pointer (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
