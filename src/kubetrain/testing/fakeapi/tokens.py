"""The fake's service-account tokens: the TokenRequest API (``serviceaccounts/<sa>/token``) and TokenReview.

Enough of the kube-apiserver's behaviour for the status endpoint's tests: a token carries its audiences and,
when bound to a Pod, the pod's name and uid (as ``authentication.kubernetes.io/pod-name``/``pod-uid`` in the
review's ``user.extra``); a review fails for an unknown or expired token, for a token whose audiences do not
include the one asked for, and once its pod is gone or was replaced (another uid).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from kubetrain.testing.fakeapi.store import Store, StoreError


@dataclass(frozen=True)
class _Token:
    namespace: str
    service_account: str
    audiences: tuple[str, ...]
    expires: float
    pod: tuple[str, str] | None  # (name, uid)


class Tokens:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._tokens: dict[str, _Token] = {}
        self.reviews = 0
        """TokenReviews answered (tests check the status endpoint caches them)."""

    def request(self, namespace: str, service_account: str, body: dict[str, Any]) -> dict[str, Any]:
        spec = body.get("spec") or {}
        ref = spec.get("boundObjectRef") or {}
        pod: tuple[str, str] | None = None
        if ref:
            if ref.get("kind") != "Pod":
                raise StoreError(422, "Invalid", "the fake binds tokens to Pods only")
            live = self.store.get("", "pods", namespace, str(ref.get("name")))
            uid = live["metadata"].get("uid", "")
            if ref.get("uid") and ref["uid"] != uid:
                raise StoreError(409, "Conflict", f"the UID in the bound object reference ({ref['uid']}) does "
                                 f"not match the pod's ({uid})")  # fmt: skip
            pod = (str(ref.get("name")), uid)
        seconds = int(spec.get("expirationSeconds") or 3600)
        token = "fake-" + secrets.token_hex(24)
        audiences = tuple(spec.get("audiences") or ["https://kubernetes.default.svc"])
        self._tokens[token] = _Token(namespace, service_account, audiences, time.time() + seconds, pod)
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": service_account, "namespace": namespace},
            "spec": {**spec, "audiences": list(audiences), "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": ""},
        }

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews += 1
        spec = body.get("spec") or {}
        wanted = list(spec.get("audiences") or [])
        t = self._tokens.get(str(spec.get("token") or ""))
        status: dict[str, Any] = {"authenticated": False, "user": {}, "error": "invalid bearer token"}
        if t is not None and t.expires > time.time() and (not wanted or set(wanted) & set(t.audiences)):
            alive = True
            if t.pod is not None:
                try:
                    live = self.store.get("", "pods", t.namespace, t.pod[0])
                    alive = live["metadata"].get("uid") == t.pod[1]
                except StoreError:
                    alive = False
            if alive:
                extra = {}
                if t.pod is not None:
                    extra = {
                        "authentication.kubernetes.io/pod-name": [t.pod[0]],
                        "authentication.kubernetes.io/pod-uid": [t.pod[1]],
                    }
                status = {
                    "authenticated": True,
                    "user": {
                        "username": f"system:serviceaccount:{t.namespace}:{t.service_account}",
                        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{t.namespace}"],
                        "extra": extra,
                    },
                    "audiences": [a for a in t.audiences if not wanted or a in wanted],
                }
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec, "status": status}
