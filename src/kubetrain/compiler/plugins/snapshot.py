"""The runtime snapshot: the runtime as it was when the TrainJob started, so later edits don't change it."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from kubetrain.api.yamlio import dump
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info
from kubetrain.compiler.keys import KeyGen

DATA_KEY = "runtime"


def snapshot_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-runtime-snapshot"


@lru_cache(maxsize=128)
def _as_yaml(runtime_json: str) -> str:
    # Many TrainJobs share a runtime; the JSON text is a cheap, exact cache key for the YAML rendering.
    return dump(json.loads(runtime_json))


class Snapshot:
    name = "RuntimeSnapshot"

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        runtime = info.runtime.to_wire()
        meta = runtime.get("metadata") or {}
        # Server-populated fields would make the snapshot differ between otherwise equal runtimes.
        for volatile in ("resourceVersion", "generation", "managedFields", "creationTimestamp", "uid"):
            meta.pop(volatile, None)
        text = _as_yaml(json.dumps(runtime, sort_keys=False))
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(info, snapshot_name(info.name)),
                "data": {DATA_KEY: text},
            }
        ]
