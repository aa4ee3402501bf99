"""The runtime a TrainJob compiles against: its snapshot ConfigMap if present, else the live one (§3.1.1)."""

from __future__ import annotations

from typing import Any

import yaml

from kubetrain.api import AnyRuntime, ClusterTrainingRuntime, KubetrainError, TrainingRuntime, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.loader import parse_manifest
from kubetrain.k8s.operator.informer import Informer

SNAPSHOT_KEY = "runtime"


def snapshot_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-runtime-snapshot"


class UnsupportedRuntime(KubetrainError):
    """The runtimeRef names a kind/group no runtime exists for: the TrainJob fails (§5 failure paths)."""


class RuntimeLoadError(KubetrainError):
    """The runtime cannot be found or the snapshot is unusable; reconcile is retried with backoff."""


def parse_runtime(doc: Any, what: str) -> AnyRuntime:
    obj, result = parse_manifest(doc, source=what)
    if obj is None or not result.ok or not isinstance(obj, TrainingRuntime | ClusterTrainingRuntime):
        detail = "; ".join(f.render() for f in result.errors) or "not a runtime"
        raise RuntimeLoadError(f"cannot parse {what}: {detail}")
    return obj


class RuntimeSource:
    """Reads runtimes and snapshots from the informer caches; parsed runtimes memoised per resourceVersion."""

    def __init__(self, configmaps: Informer, runtimes: Informer, cluster_runtimes: Informer) -> None:
        self.configmaps = configmaps
        self.runtimes = runtimes
        self.cluster_runtimes = cluster_runtimes
        self._parsed: dict[tuple[str, str, str, str], AnyRuntime] = {}

    def load(self, trainjob: TrainJob) -> tuple[AnyRuntime, bool]:
        """``(runtime, from_snapshot)``. Raises :class:`UnsupportedRuntime` or :class:`RuntimeLoadError`."""
        ref = trainjob.spec.runtime_ref
        kind, group = ref.effective_kind, ref.effective_group
        if group != c.GROUP or kind not in (c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME):
            raise UnsupportedRuntime(f"unsupported runtime: {kind}.{group}")
        cm = self.configmaps.get(trainjob.namespace, snapshot_name(trainjob.name))
        if cm is not None:
            return self._from_snapshot(trainjob, cm), True
        return self._live(trainjob, kind, ref.name), False

    def _from_snapshot(self, trainjob: TrainJob, cm: dict[str, Any]) -> AnyRuntime:
        meta = cm.get("metadata") or {}
        controller = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if controller is None or controller.get("uid") != trainjob.metadata.uid:
            raise RuntimeLoadError(
                "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
            )
        text = (cm.get("data") or {}).get(SNAPSHOT_KEY)
        if text is None:
            raise RuntimeLoadError(f'invalid runtime snapshot: missing "{SNAPSHOT_KEY}" data key')
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise RuntimeLoadError(f"invalid runtime snapshot: {exc}") from exc
        runtime = parse_runtime(doc, f"runtime snapshot {meta.get('name')}")
        ref = trainjob.spec.runtime_ref
        expected = f"{ref.effective_kind}.{ref.effective_group}/{ref.name}"
        found = f"{runtime.kind}.{runtime.api_version.split('/')[0]}/{runtime.name}"
        if expected != found:
            raise RuntimeLoadError(f"invalid runtime snapshot: expected {expected}, found {found}")
        return runtime

    def _live(self, trainjob: TrainJob, kind: str, name: str) -> AnyRuntime:
        if kind == c.KIND_TRAINING_RUNTIME:
            obj = self.runtimes.get(trainjob.namespace, name)
            if obj is None:
                raise RuntimeLoadError(
                    f'TrainingRuntime specified in TrainJob is not found: trainingruntimes.{c.GROUP} "{name}" not found'
                )
        else:
            obj = self.cluster_runtimes.get(None, name)
            if obj is None:
                raise RuntimeLoadError(
                    "not found ClusterTrainingRuntime specified in TrainJob: "
                    f'clustertrainingruntimes.{c.GROUP} "{name}" not found'
                )
        meta = obj.get("metadata") or {}
        memo_key = (kind, meta.get("namespace") or "", name, str(meta.get("resourceVersion") or ""))
        runtime = self._parsed.get(memo_key)
        if runtime is None:
            runtime = parse_runtime(obj, f"{kind} {name}")
            self._parsed = {k: v for k, v in self._parsed.items() if k[:3] != memo_key[:3]}
            self._parsed[memo_key] = runtime
        return runtime
