"""A builder for pod templates in Pod Security table tests: start from a pod that meets restricted and change
one thing, so each case shows exactly what it is about."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

RESTRICTED_CONTAINER: Obj = {
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
}


class PodT:
    def __init__(self, *, restricted: bool = True) -> None:
        c: Obj = {"name": "main", "image": "img"}
        spec: Obj = {"containers": [c]}
        if restricted:
            c.update(copy.deepcopy(RESTRICTED_CONTAINER))
            spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        self.t: Obj = {"metadata": {}, "spec": spec}

    # pod level
    def spec(self, **fields: Any) -> PodT:
        self.t["spec"].update(fields)
        return self

    def sc(self, **fields: Any) -> PodT:
        self.t["spec"].setdefault("securityContext", {}).update(fields)
        return self

    def no_sc(self, *keys: str) -> PodT:
        for k in keys:
            self.t["spec"].get("securityContext", {}).pop(k, None)
        return self

    def annotate(self, key: str, value: str) -> PodT:
        self.t["metadata"].setdefault("annotations", {})[key] = value
        return self

    def volume(self, name: str, **source: Any) -> PodT:
        self.t["spec"].setdefault("volumes", []).append({"name": name, **source})
        return self

    # containers
    def add(self, kind: str = "containers", name: str = "extra", *, restricted: bool = True, **fields: Any) -> PodT:
        c: Obj = {"name": name, "image": "img", **(copy.deepcopy(RESTRICTED_CONTAINER) if restricted else {})}
        c.update(fields)
        self.t["spec"].setdefault(kind, []).append(c)
        return self

    def c(self, index: int = 0, kind: str = "containers", **fields: Any) -> PodT:
        self.t["spec"][kind][index].update(fields)
        return self

    def csc(self, index: int = 0, kind: str = "containers", **fields: Any) -> PodT:
        self.t["spec"][kind][index].setdefault("securityContext", {}).update(fields)
        return self

    def build(self) -> Obj:
        return copy.deepcopy(self.t)
