"""Changing a stored TrainJob: ``kubetrain apply`` of a new version, ``kubetrain scale`` and the local autoscaler.

One path for all three, so a resize by the autoscaler is checked exactly like one typed by a user: upstream's
mutability rules (``updates``), then, when the pods would change, validation and compilation against the runtime
the TrainJob was created with (its snapshot), then one store transaction.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from kubetrain.api import constants as C
from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.local.store import status
from kubetrain.local.store.db import Store, TrainJobRow
from kubetrain.local.submit import admission

if TYPE_CHECKING:
    from kubetrain.api import AnyRuntime, TrainJob

RUNTIME_KINDS = (C.KIND_CLUSTER_TRAINING_RUNTIME, C.KIND_TRAINING_RUNTIME)


def stored_runtimes(store: Store, namespace: str | None) -> list[AnyRuntime]:
    """Runtimes applied on this machine (no built-ins); ``namespace`` filters TrainingRuntimes."""
    from kubetrain.api import ClusterTrainingRuntime, TrainingRuntime

    out: list[AnyRuntime] = []
    for m in store.list_objects(RUNTIME_KINDS):
        model = ClusterTrainingRuntime if m["kind"] == C.KIND_CLUSTER_TRAINING_RUNTIME else TrainingRuntime
        r = model.model_validate(m)
        if namespace is None or r.kind == C.KIND_CLUSTER_TRAINING_RUNTIME or r.metadata.namespace == namespace:
            out.append(r)
    return out


def runtimes(store: Store, only: str | None = None) -> list[AnyRuntime]:
    """Applied runtimes, then the built-in ones they do not shadow. With ``only``, built-ins are parsed just for
    that name when it is one (parsing all of them is most of a launch's CPU time)."""
    from kubetrain.api import ClusterTrainingRuntime
    from kubetrain.api.loader import load_text
    from kubetrain.runtimes import builtin_runtimes, builtin_yaml

    stored = stored_runtimes(store, None)
    names = {(r.kind, r.metadata.namespace or "", r.name) for r in stored}
    builtins: list[AnyRuntime] = []
    text = builtin_yaml(only) if only else None
    if text is not None:
        loaded = load_text(text, f"kubetrain/runtimes/{only}.yaml").objects
        builtins += [o for o in loaded if isinstance(o, ClusterTrainingRuntime)]
    elif only is None or not any(r.name == only for r in stored):
        builtins += builtin_runtimes()  # all of them: resolve_runtime suggests near names from these
    return stored + [r for r in builtins if (r.kind, "", r.name) not in names]


def snapshot_runtime(row: TrainJobRow) -> AnyRuntime | None:
    """The runtime as it was when the TrainJob was created (its compiled snapshot ConfigMap)."""
    from kubetrain.api import ClusterTrainingRuntime, TrainingRuntime
    from kubetrain.api.loader import load_text
    from kubetrain.compiler.plugins.snapshot import DATA_KEY, snapshot_name

    for o in row.objects:
        if o.get("kind") == "ConfigMap" and o["metadata"]["name"] == snapshot_name(row.name):
            found = load_text((o.get("data") or {}).get(DATA_KEY, ""), "runtime snapshot").objects
            return next((r for r in found if isinstance(r, ClusterTrainingRuntime | TrainingRuntime)), None)
    return None


def update(store: Store, row: TrainJobRow, new: TrainJob) -> str:
    """Store ``new`` as the next version of ``row``'s TrainJob; ``configured`` or ``unchanged``."""
    from kubetrain.api import TrainJob
    from kubetrain.compiler import compile_trainjob, ecdsa_keygen, resolve_runtime, validate_trainjob
    from kubetrain.local.submit.updates import finished_rebuild, merged, num_nodes, plan_update

    old_wire = TrainJob.model_validate(row.trainjob).to_wire()
    new.metadata.uid, new.metadata.creation_timestamp = row.uid, row.trainjob["metadata"].get("creationTimestamp")
    new_wire = new.to_wire()
    verb = plan_update(old_wire, new_wire)
    if verb == "unchanged":
        return verb
    objects = None
    patches_changed = old_wire["spec"].get("runtimePatches") != new_wire["spec"].get("runtimePatches")
    if patches_changed or num_nodes(old_wire["spec"]) != num_nodes(new_wire["spec"]):
        st = row.trainjob.get("status") or {}
        if status.finished(st):
            raise finished_rebuild(row.name, status.state_of(st), old_wire["spec"], new_wire["spec"])
        # Patches change only around a suspension (the pods are rebuilt from the new objects when it resumes);
        # numNodes only for an elastic runtime (the supervisor adds or removes node pods at once). Both with the
        # runtime as it was when the TrainJob was created (its snapshot).
        runtime = snapshot_runtime(row) or resolve_runtime(new, runtimes(store, new.spec.runtime_ref.name))[0]
        result = validate_trainjob(new, runtime, old=TrainJob.model_validate(row.trainjob))
        if not result.ok:
            raise InvalidObjectError(result.errors)
        assert runtime is not None
        objects = compile_trainjob(new, runtime, keygen=ecdsa_keygen)
        admission.check(objects)
    with store.transaction():
        fresh = store.get_trainjob(row.namespace, row.name)
        if fresh is None or fresh.uid != row.uid:
            raise KubetrainError(f'trainjob "{row.name}" changed while it was being updated; apply it again')
        store.update_trainjob(row.namespace, row.name, merged(fresh.trainjob, new_wire), objects=objects)
    return verb


def scale(store: Store, row: TrainJobRow, replicas: int) -> str:
    """Set ``spec.trainer.numNodes`` (what ``kubectl scale`` does through the scale subresource): allowed for an
    elastic runtime within minNodes..maxNodes; the running supervisor then adds or removes node pods. Returns
    ``configured`` or ``unchanged``."""
    from kubetrain.api import TrainJob

    st = row.trainjob.get("status") or {}
    if status.finished(st):
        raise KubetrainError(
            f'trainjob "{row.name}" has finished ({status.state_of(st)}); a finished TrainJob runs no nodes to scale'
        )
    wire = {k: copy.deepcopy(v) for k, v in row.trainjob.items() if k != "status"}
    spec = wire.setdefault("spec", {})
    spec["trainer"] = dict(spec.get("trainer") or {}, numNodes=replicas)
    return update(store, row, TrainJob.model_validate(wire))
